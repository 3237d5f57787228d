"""Judge stage: the comparison rules. Each takes every node and the training nodes and returns findings;
blocking = the job will hang or fail, warning = likely trouble, info = worth knowing."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from common.multinode import USABLE_OPERSTATES, socket_ifname_problems

from nodes.facts import (
    as_int,
    config_fields,
    gpu_listing_known,
    gpu_models,
    node_env,
    package_version,
    torch_build_text,
    visible_gpus,
)
from nodes.groups import differs, display, group_values, new_finding

# Packages whose versions must match on every node (training and vLLM server), and those that should.
MUST_MATCH = ("torch", "trl", "vllm", "deepspeed")
SHOULD_MATCH = (
    "transformers",
    "accelerate",
    "peft",
    "datasets",
    "bitsandbytes",
    "liger-kernel",
    "kernels",
    "flash-attn",
    "flash-attn-3",
    "triton",
    "unsloth",
)
# Packages a vLLM server node shares with the trainers: the weight-sync group joins both sides.
SERVER_MUST_MATCH = ("torch", "trl", "vllm")
SERVER_OPTIONAL = ("trl",)  # TRL >= 1.11 servers run vLLM's own `vllm serve`; TRL there is optional
# Accelerate config fields that must agree (blocking) or should (warning); machine_rank must differ.
CONFIG_MUST_MATCH = (
    "distributed_type",
    "num_machines",
    "num_processes",
    "main_process_ip",
    "main_process_port",
    "rdzv_backend",
    "same_network",
    "mixed_precision",
    "fsdp_version",
    "deepspeed.zero_stage",
)
CONFIG_SHOULD_MATCH = ("compute_environment",)
SHARDED_TYPES = ("FSDP", "DEEPSPEED")
# Launch variables whose differences are the rendezvous itself (blocking); other NCCL_/GLOO_/TORCH_NCCL_ are warnings.
ENV_MUST_MATCH = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "SLURM_JOB_ID")
ENV_PER_NODE = ("NODE_RANK", "RANK", "LOCAL_RANK", "SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURMD_NODENAME")
ENV_COMPARED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_")


SAFE_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+!_-]{0,63}$")  # what may be pasted into a suggested pip line
MAX_FINDINGS_PER_RULE = 20  # a rule with more (300k error codes, thousands of variables) adds one summary line
MAX_FINDINGS_PER_REPORT = 1000  # a node's own findings read

# Node errors that a comparison rule already reports with the other nodes' values.
COVERED_NODE_ERRORS = ("socket_ifname_no_interface",)


def rule_hostnames(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    known = [n for n in nodes if n.get("hostname_known", n["hostname"] != "?")]  # no hostname: nothing to repeat
    groups = group_values(known, lambda n: n["hostname"])
    repeated = [g for g in groups if len(g["nodes"]) > 1]
    if not repeated:
        return []
    return [
        new_finding(
            "blocking",
            "duplicate_hostname",
            "node.hostname",
            repeated,
            "two or more reports come from the same host: either a node was collected twice or hosts share a name",
            "collect exactly one report per node (srun --ntasks-per-node=1, one ssh per host); hosts that share a "
            "name also confuse MASTER_ADDR resolution",
        )
    ]


def rule_versions(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    findings = []
    servers = [n for n in nodes if n["role"] == "vllm-server"]
    for pid in (*MUST_MATCH, *SHOULD_MATCH):
        members = nodes if (pid in SERVER_MUST_MATCH or not servers) else train
        if pid in SERVER_OPTIONAL:  # a native `vllm serve` node needs no TRL; one that has it must match
            members = [*train, *(n for n in servers if package_version(n, pid))]
        groups = group_values(members, lambda n, pid=pid: package_version(n, pid))
        if not differs(groups):
            continue
        installed = [g for g in groups if g["value"] != "not set"]
        for g in groups:
            if g["value"] == "not set":
                g["value"] = "not installed"
        must = pid in MUST_MATCH
        severity = "blocking" if must and (len(installed) > 1 or pid in ("torch", "trl")) else "warning"
        common = max(installed, key=lambda g: len(g["nodes"]))["value"] if installed else "?"
        if SAFE_VERSION.match(common):
            fix = (
                f'install one version everywhere, e.g. pip install "{pid}=={common}" (what most nodes have) in the '
                "job's environment on every node, or point every node at one shared environment"
            )
        else:  # a report's version pasted into a command would run whatever it holds
            fix = (
                f"install one {pid} version everywhere (the most common reported version is not a version string, "
                "so no command is suggested), or point every node at one shared environment"
            )
        findings.append(
            new_finding(
                severity,
                "version_mismatch" if len(installed) > 1 else "installed_on_some_nodes",
                f"packages.{pid}.version",
                groups,
                f"{pid} differs across nodes"
                + (": collectives and pickled objects assume one build everywhere" if must else ""),
                fix,
            )
        )
    groups = group_values(nodes, torch_build_text)
    if differs(groups):
        findings.append(
            new_finding(
                "blocking",
                "torch_build_mismatch",
                "torch_build",
                groups,
                "torch is built for different CUDA/ROCm versions on different nodes",
                "install the same torch wheel (same +cuXYZ / +rocm tag) on every node",
            )
        )
    groups = group_values(nodes, lambda n: (n["report"]["node"].get("nccl") or {}).get("version"))
    if differs(groups):
        findings.append(
            new_finding(
                "blocking",
                "nccl_mismatch",
                "node.nccl.version",
                groups,
                "the NCCL library differs across nodes (read from the nvidia-nccl-cu* wheel torch loads)",
                "install the same nvidia-nccl-cu* wheel everywhere (the one torch pins: see node.nccl.torch_requires)",
            )
        )
    return findings


def rule_python(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    groups = group_values(nodes, lambda n: (n["report"].get("python") or {}).get("version"))
    if not differs(groups):
        return []
    minors = {".".join(g["value"].split(".")[:2]) for g in groups}
    what = "minor version" if len(minors) > 1 else "patch release"
    return [
        new_finding(
            "warning",
            "python_mismatch",
            "python.version",
            groups,
            f"the Python {what} differs across nodes: separate environments that may hold other wheels too",
            "run every node from one environment (a shared venv or the same container image)",
        )
    ]


def rule_drivers(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    def driver(node: Dict[str, Any]) -> Optional[str]:
        values = sorted({g.get("driver") for g in visible_gpus(node) if g.get("driver")})
        return ", ".join(values) if values else None

    known = [n for n in nodes if driver(n)]
    groups = group_values(known, driver)
    if not differs(groups):
        return []
    majors = {g["value"].split(".")[0] for g in groups}
    same_major = len(majors) == 1
    return [
        new_finding(
            "warning",
            "driver_mismatch",
            "accelerators.gpus.driver",
            groups,
            "GPU driver versions differ"
            + (" within the same major" if same_major else " across majors")
            + "; each node's own report says whether its driver is new enough for torch's CUDA",
            "align the driver on every node (the cluster image); a mixed fleet is a frequent source of "
            "node-specific NCCL failures",
        )
    ]


def rule_gpus(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    findings = []
    known = [n for n in train if gpu_listing_known(n)]
    sharded = any(str(config_fields(n).get("distributed_type", "")).upper() in SHARDED_TYPES for n in train)
    groups = group_values(known, gpu_models)
    if differs(groups):
        findings.append(
            new_finding(
                "blocking" if sharded else "warning",
                "gpu_model_mismatch",
                "accelerators.gpus.name",
                groups,
                "training nodes have different GPU models"
                + (
                    " under FSDP/DeepSpeed: shards assume the same memory and dtype support on every rank"
                    if sharded
                    else ": the slowest GPU sets the step time"
                ),
                "schedule the job on one GPU type (a Slurm constraint or partition)",
            )
        )
    groups = group_values(known, lambda n: len(visible_gpus(n)))
    if differs(groups):
        findings.append(
            new_finding(
                "blocking",
                "visible_gpu_count_mismatch",
                "accelerators.summary.visible_count",
                groups,
                "training nodes see different numbers of GPUs; accelerate starts num_processes // num_machines "
                "processes on every node (accelerate-1.15.0 accelerate/utils/launch.py)",
                "make CUDA_VISIBLE_DEVICES (or the Slurm GPU request) the same on every node",
            )
        )
    groups = group_values(
        train,
        lambda n: (
            "MIG"
            if str((n["report"]["accelerators"].get("visible_devices") or {}).get("raw") or "").startswith("MIG-")
            else "full GPUs"
        ),
    )
    if differs(groups):
        findings.append(
            new_finding(
                "blocking",
                "mig_mismatch",
                "accelerators.visible_devices.raw",
                groups,
                "some nodes select MIG instances, others whole GPUs",
                "use whole GPUs on every node for a multi-node job",
            )
        )
    groups = group_values(
        known, lambda n: ", ".join(sorted({str(g.get("memory_total_mib")) + " MiB" for g in visible_gpus(n)})) or None
    )
    if differs(groups) and not any(f["code"] == "gpu_model_mismatch" for f in findings):
        findings.append(
            new_finding(
                "warning",
                "gpu_memory_mismatch",
                "accelerators.gpus.memory_total_mib",
                groups,
                "GPU memory differs across nodes: the smallest GPU decides what fits",
                "plan the batch and sharding for the smallest GPU, or schedule on one GPU variant",
            )
        )
    return findings


def rule_accelerate(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    findings: List[Dict[str, Any]] = []
    if len(train) < 2:
        return findings
    with_config = [n for n in train if config_fields(n)]
    if not with_config:
        return findings
    groups = group_values(train, lambda n: "present" if config_fields(n) else "none")
    if differs(groups):
        findings.append(
            new_finding(
                "warning",
                "accelerate_config_missing",
                "launch.accelerate_config",
                groups,
                "some training nodes have no accelerate config where the report looked",
                "copy the same config to every node (or pass --config_file on every node); only machine_rank differs",
            )
        )
    for key in (*CONFIG_MUST_MATCH, *CONFIG_SHOULD_MATCH):
        groups = group_values(with_config, lambda n, key=key: config_fields(n).get(key))
        if differs(groups):
            findings.append(
                new_finding(
                    "blocking" if key in CONFIG_MUST_MATCH else "warning",
                    "config_mismatch",
                    f"accelerate.{key}",
                    groups,
                    f"the accelerate config's {key} differs across training nodes",
                    "use one config file on every node; only machine_rank differs between them",
                )
            )
    ranks = group_values(with_config, lambda n: config_fields(n).get("machine_rank"))
    repeated = [g for g in ranks if len(g["nodes"]) > 1]
    if repeated and len(ranks) == 1:
        findings.append(
            new_finding(
                "warning",
                "shared_config_machine_rank",
                "accelerate.machine_rank",
                repeated,
                "every node's config says the same machine_rank: one shared config file, so the rank must come from "
                "the launch line",
                "pass --machine_rank per node on the launch line (e.g. $SLURM_NODEID); without it the rendezvous "
                "waits for ranks that never come",
            )
        )
    elif repeated:
        findings.append(
            new_finding(
                "blocking",
                "duplicate_machine_rank",
                "accelerate.machine_rank",
                repeated,
                "two or more nodes claim the same machine_rank: the rendezvous waits for a rank that never comes",
                "give each node its own machine_rank 0..num_machines-1 (e.g. --machine_rank $SLURM_NODEID)",
            )
        )
    machines = {as_int(config_fields(n).get("num_machines")) for n in with_config} - {None}
    if len(machines) == 1:
        count = machines.pop()
        outside = [n for n in with_config if not 0 <= (as_int(config_fields(n).get("machine_rank")) or 0) < count]
        if outside:
            findings.append(
                new_finding(
                    "blocking",
                    "machine_rank_out_of_range",
                    "accelerate.machine_rank",
                    group_values(outside, lambda n: config_fields(n).get("machine_rank")),
                    f"machine_rank outside 0..{count - 1} (num_machines={count})",
                    "number the nodes 0..num_machines-1",
                )
            )
        if count != len(train):
            findings.append(
                new_finding(
                    "warning",
                    "node_count_mismatch",
                    "accelerate.num_machines",
                    group_values(with_config, lambda n: config_fields(n).get("num_machines")),
                    f"num_machines={count} but {len(train)} training-node reports were compared",
                    "compare a report from every node of the job (and pass vLLM server nodes with --vllm-server)",
                )
            )
        processes = {as_int(config_fields(n).get("num_processes")) for n in with_config} - {None}
        if len(processes) == 1 and count:
            total = processes.pop()
            per_node = total // count
            short = [n for n in with_config if gpu_listing_known(n) and len(visible_gpus(n)) < per_node]
            if total % count:
                findings.append(
                    new_finding(
                        "blocking",
                        "num_processes_not_divisible",
                        "accelerate.num_processes",
                        group_values(with_config, lambda n: config_fields(n).get("num_processes")),
                        f"num_processes={total} is not a multiple of num_machines={count}; accelerate starts "
                        f"{per_node} per node (num_processes // num_machines)",
                        "set num_processes to the total over all nodes: GPUs per node x num_machines",
                    )
                )
            if short:
                findings.append(
                    new_finding(
                        "blocking",
                        "too_few_gpus_for_processes",
                        "accelerators.summary.visible_count",
                        group_values(short, lambda n: f"{len(visible_gpus(n))} visible GPU(s)"),
                        f"num_processes={total} over num_machines={count} starts {per_node} processes per node, "
                        "more than these nodes have GPUs",
                        "num_processes is the total over all nodes in accelerate configs: set it to GPUs per node x "
                        "num_machines, or fix CUDA_VISIBLE_DEVICES on the short nodes",
                    )
                )
    return findings


def _compared(name: str) -> bool:
    if name in ENV_PER_NODE or (name.startswith("SLURM_") and name not in ENV_MUST_MATCH):
        return False
    return name in ENV_MUST_MATCH or name.startswith(ENV_COMPARED_PREFIXES)


def differing_env_names(train: List[Dict[str, Any]]) -> List[str]:
    """The compared variables whose values differ (or are unset somewhere), from one pass over every node's
    variables: linear in nodes plus names, never nodes x names."""
    values: Dict[str, set] = {}
    present: Dict[str, int] = {}
    for node in train:
        for name, value in node_env(node).items():
            if _compared(name):
                values.setdefault(name, set()).add(display(value))
                present[name] = present.get(name, 0) + 1
    return sorted(name for name in values if len(values[name]) > 1 or present[name] < len(train))


def summary_finding(code: str, field: str, count: int, what: str) -> Dict[str, Any]:
    return new_finding(
        "warning",
        code,
        field,
        [],
        f"{count:,} more {what} differ; only the first {MAX_FINDINGS_PER_RULE} are listed",
        "fix the listed ones first, then compare again",
    )


def rule_env(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    findings = []
    names = differing_env_names(train)
    for name in names[:MAX_FINDINGS_PER_RULE]:
        groups = group_values(train, lambda n, name=name: node_env(n).get(name))
        if not differs(groups):
            continue
        set_somewhere = [g for g in groups if g["value"] != "not set"]
        must = name in ENV_MUST_MATCH and len(set_somewhere) > 1
        findings.append(
            new_finding(
                "blocking" if must else "warning",
                "env_mismatch",
                f"env.{name}",
                groups,
                f"{name} differs across training nodes"
                + (": the nodes would not meet at one rendezvous" if must else ""),
                f"export the same {name} on every node in the job script (before the launcher starts)",
            )
        )
    if len(names) > MAX_FINDINGS_PER_RULE:
        findings.append(summary_finding("env_mismatch_more", "env", len(names) - MAX_FINDINGS_PER_RULE, "variables"))
    ranks = group_values([n for n in train if node_env(n).get("NODE_RANK")], lambda n: node_env(n).get("NODE_RANK"))
    repeated = [g for g in ranks if len(g["nodes"]) > 1]
    if repeated:
        findings.append(
            new_finding(
                "blocking",
                "duplicate_node_rank",
                "env.NODE_RANK",
                repeated,
                "two or more nodes have the same NODE_RANK",
                "derive NODE_RANK per node (e.g. from SLURM_NODEID)",
            )
        )
    return findings


def rule_interfaces(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    findings = []
    bad: Dict[str, List[Tuple[Dict[str, Any], str]]] = {}
    for node in nodes:
        for problem in socket_ifname_problems(node["report"]["node"]):
            bad.setdefault(problem["variable"], []).append((node, f"{problem['value']}: {problem['detail']}"))
    for variable, entries in sorted(bad.items()):
        details = {n["index"]: text for n, text in entries}
        members = [n for n, _ in entries]
        findings.append(
            new_finding(
                "blocking",
                "socket_ifname_unusable",
                f"env.{variable}",
                group_values(members, lambda n, details=details: details[n["index"]]),
                f"{variable} selects no interface that is up on these nodes: NCCL/Gloo bootstrap fails or hangs there",
                "set it to an interface present and up on every node (compare /sys/class/net), or to a prefix that "
                "matches the right interface on each",
            )
        )

    def up_interfaces(node: Dict[str, Any]) -> Optional[str]:
        network = node["report"]["node"].get("network") or {}
        if network.get("status") != "ok":
            return None
        names = [i["name"] for i in network.get("interfaces") or [] if i.get("operstate") in USABLE_OPERSTATES]
        return ", ".join(names) or "none up"

    groups = group_values(train, up_interfaces)
    if differs(groups):
        findings.append(
            new_finding(
                "info",
                "interfaces_differ",
                "node.network.interfaces",
                groups,
                "the interfaces that are up differ across nodes; NCCL picks one per node unless NCCL_SOCKET_IFNAME "
                "names it",
                "if the job hangs at the first collective, set NCCL_SOCKET_IFNAME to the shared network's interface",
            )
        )
    return findings


def rule_rdma(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    def rdma(node: Dict[str, Any]) -> str:
        devices = (node["report"]["node"].get("infiniband") or {}).get("devices") or []
        active = [p for d in devices for p in d.get("ports") or [] if p.get("state") == "ACTIVE"]
        if not devices:
            return "none"
        if not active:
            return f"{len(devices)} device(s), no active port"
        layers = sorted({str(p.get("link_layer") or "?") for p in active})
        return f"{len(active)} active port(s) ({', '.join(layers)})"

    groups = group_values(train, rdma)
    if not differs(groups):
        return []
    return [
        new_finding(
            "warning",
            "rdma_mismatch",
            "node.infiniband",
            groups,
            "InfiniBand/RoCE differs across training nodes: NCCL uses RDMA where it finds an active port and "
            "sockets elsewhere, so the slowest link (or a failed connection) decides",
            "bring the ports up on every node (ibstat), or disable RDMA on every node alike (NCCL_IB_DISABLE=1)",
        )
    ]


def rule_node_errors(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    by_code: Dict[str, List[Dict[str, Any]]] = {}
    for node in nodes:
        for item in (node["report"].get("findings") or [])[:MAX_FINDINGS_PER_REPORT]:
            if (
                isinstance(item, dict)
                and item.get("severity") == "error"
                and item.get("code") not in COVERED_NODE_ERRORS
            ):
                by_code.setdefault(str(item.get("code"))[:80], []).append(node)
    findings = []
    codes = sorted(by_code.items())
    if len(codes) > MAX_FINDINGS_PER_RULE:
        findings.append(
            summary_finding("node_error_more", "findings", len(codes) - MAX_FINDINGS_PER_RULE, "node error codes")
        )
    for code, members in codes[:MAX_FINDINGS_PER_RULE]:
        unique = list({n["index"]: n for n in members}.values())
        findings.append(
            new_finding(
                "warning",
                "node_error",
                f"findings.{code}",
                group_values(unique, lambda n, code=code: code),
                f"the node's own report has the error {code}",
                "read that node's report (python3 scripts/check_optional_backends.py on it) and fix it first",
            )
        )
    return findings


def rule_network(nodes: List[Dict[str, Any]], train: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    outcomes: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for node in nodes:
        for result in (node["report"].get("probes") or {}).get("network") or []:
            outcomes.setdefault((str(result.get("target")), str(result.get("status"))), []).append(node)
    findings = []
    for (target, status), members in sorted(outcomes.items()):
        if status == "ok":
            continue
        severity = "warning" if status == "refused" else "blocking"
        findings.append(
            new_finding(
                severity,
                f"network_{status}",
                f"probes.network[{target}]",
                group_values(members, lambda n, status=status: status),
                f"{target} is {status} from these nodes"
                + (
                    " (nothing listens yet; expected before the server or main process starts)"
                    if status == "refused"
                    else ""
                ),
                "check the address, the port and the firewall between these nodes; rerun the diagnostic with "
                "--probe-network once the listener runs",
            )
        )
    return findings


RULES = (
    rule_hostnames,
    rule_versions,
    rule_python,
    rule_drivers,
    rule_gpus,
    rule_accelerate,
    rule_env,
    rule_interfaces,
    rule_rdma,
    rule_node_errors,
    rule_network,
)
