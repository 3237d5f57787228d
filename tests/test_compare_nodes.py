"""compare_nodes.py: reports from real diagnostic runs on fake nodes, with planted differences.

The baseline is three consistent training nodes (FSDP, 4x H100 each, num_machines=3, num_processes=12, ranks 0-2).
Each test replaces node 2 with a node that differs in one way and checks the class, the grouping and the fix.
"""

from __future__ import annotations

import itertools
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

import compare_nodes
from diagnostic_helpers import H100_CSV
from node_helpers import COMPARE, NodeSpec, a100_csv, codes, collect_node, compare_json, finding, run_compare

BASE_ENV = {
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
    "NCCL_SOCKET_IFNAME": "eth",
    "NCCL_DEBUG": "WARN",
    "SLURM_JOB_ID": "4242",
}
BASE_DISTS = (("deepspeed", "0.19.8"), ("vllm", "0.31.0"), ("bitsandbytes", "0.50.2"))


def spec(rank: int, **changes) -> NodeSpec:
    values = {
        "hostname": f"node{rank}",
        "machine_rank": rank,
        "env": {**BASE_ENV, "NODE_RANK": str(rank)},
        "extra_dists": BASE_DISTS,
    }
    values.update(changes)
    return NodeSpec(**values)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> List[Path]:
    tmp = tmp_path_factory.mktemp("baseline")
    return [collect_node(tmp, spec(rank)) for rank in range(3)]


def planted(baseline: List[Path], tmp_path: Path, **changes) -> List[Path]:
    """Nodes 0-1 from the baseline, node 2 built with ``changes``."""
    return [*baseline[:2], collect_node(tmp_path, spec(2, **changes), name="planted")]


def test_identical_nodes_give_no_findings(baseline: List[Path]) -> None:
    result = compare_json(baseline)
    assert result["findings"] == []
    assert result["counts"] == {"blocking": 0, "warning": 0, "info": 0}
    assert result["verdict"] == "consistent: the 3 nodes agree on every compared fact"
    assert [(n["index"], n["hostname"], n["machine_rank"]) for n in result["nodes"]] == [
        (0, "node0", 0),
        (1, "node1", 1),
        (2, "node2", 2),
    ]
    done = run_compare(["--require-consistent", *map(str, baseline)])
    assert done.returncode == 0, done.stderr
    assert run_compare([*map(str, baseline[:2]), str(baseline[1])]).returncode == 0  # blocking, but not required
    assert done.stdout.splitlines()[-1] == "verdict: consistent: the 3 nodes agree on every compared fact"


# --- blocking classes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "code", "field", "groups"),
    [
        (
            {"torch_version": "2.12.0"},
            "version_mismatch",
            "packages.torch.version",
            "nodes 0-1: 2.13.0; node 2: 2.12.0",
        ),
        (
            {"torch_cuda": "12.6"},
            "torch_build_mismatch",
            "torch_build",
            "nodes 0-1: CUDA 12.8; node 2: CUDA 12.6",
        ),
        ({"nccl": "2.26.2"}, "nccl_mismatch", "node.nccl.version", "nodes 0-1: 2.27.3; node 2: 2.26.2"),
        (
            {"extra_dists": (("deepspeed", "0.18.0"), ("vllm", "0.31.0"), ("bitsandbytes", "0.50.2"))},
            "version_mismatch",
            "packages.deepspeed.version",
            "nodes 0-1: 0.19.8; node 2: 0.18.0",
        ),
        (
            {"extra_dists": (("deepspeed", "0.19.8"), ("vllm", "0.30.0"), ("bitsandbytes", "0.50.2"))},
            "version_mismatch",
            "packages.vllm.version",
            "nodes 0-1: 0.31.0; node 2: 0.30.0",
        ),
        (
            {"trl_fixture": "trl-1.14.0"},
            "version_mismatch",
            "packages.trl.version",
            "nodes 0-1: 1.16.0; node 2: 1.14.0",
        ),
        ({"hostname": "node1"}, "duplicate_hostname", "node.hostname", "nodes 1-2: node1"),
        ({"machine_rank": 1}, "duplicate_machine_rank", "accelerate.machine_rank", "nodes 1-2: 1"),
        (
            {"main_process_ip": "10.0.0.9"},
            "config_mismatch",
            "accelerate.main_process_ip",
            "nodes 0-1: 10.0.0.1; node 2: 10.0.0.9",
        ),
        ({"num_machines": 4}, "config_mismatch", "accelerate.num_machines", "nodes 0-1: 3; node 2: 4"),
        ({"num_processes": 8}, "config_mismatch", "accelerate.num_processes", "nodes 0-1: 12; node 2: 8"),
        (
            {"env": {**BASE_ENV, "NODE_RANK": "2", "MASTER_ADDR": "10.0.0.7"}},
            "env_mismatch",
            "env.MASTER_ADDR",
            "nodes 0-1: 10.0.0.1; node 2: 10.0.0.7",
        ),
        (
            {"env": {**BASE_ENV, "NODE_RANK": "1"}},
            "duplicate_node_rank",
            "env.NODE_RANK",
            "nodes 1-2: 1",
        ),
        (
            {"interfaces": {"ens5": ("up", "ether"), "lo": ("unknown", "loopback")}},
            "socket_ifname_unusable",
            "env.NCCL_SOCKET_IFNAME",
            "node 2: eth: selects no interface here (prefixes eth; present: ens5, lo)",
        ),
        (
            {"interfaces": {"eth0": ("down", "ether"), "lo": ("unknown", "loopback")}},
            "socket_ifname_unusable",
            "env.NCCL_SOCKET_IFNAME",
            "node 2: eth: selects only interfaces that are not up (eth0 down)",
        ),
        (
            {"csv": a100_csv()},
            "gpu_model_mismatch",
            "accelerators.gpus.name",
            "nodes 0-1: NVIDIA H100 80GB HBM3; node 2: NVIDIA A100-SXM4-80GB",
        ),
        (
            {"env": {**BASE_ENV, "NODE_RANK": "2", "CUDA_VISIBLE_DEVICES": "0,1"}},
            "visible_gpu_count_mismatch",
            "accelerators.summary.visible_count",
            "nodes 0-1: 4; node 2: 2",
        ),
    ],
)
def test_blocking_differences(
    baseline: List[Path], tmp_path: Path, changes: Dict, code: str, field: str, groups: str
) -> None:
    nodes = planted(baseline, tmp_path, **changes)
    result = compare_json(nodes)
    item = finding(result, code, field)
    assert item["severity"] == "blocking"
    assert compare_nodes.groups_text(item["groups"]) == groups
    assert item["fix"]
    done = run_compare(["--require-consistent", *map(str, nodes)])
    assert done.returncode == 1
    assert f"BLOCKING {field}: " in done.stdout and f"    {groups}" in done.stdout and "    fix: " in done.stdout


def test_mixed_gpus_are_a_warning_without_sharding(tmp_path: Path) -> None:
    nodes = [
        collect_node(tmp_path, spec(0, distributed_type="MULTI_GPU", num_machines=2, num_processes=8)),
        collect_node(tmp_path, spec(1, distributed_type="MULTI_GPU", num_machines=2, num_processes=8, csv=a100_csv())),
    ]
    item = finding(compare_json(nodes), "gpu_model_mismatch")
    assert item["severity"] == "warning"
    assert "slowest GPU" in item["message"]


def test_one_shared_config_file_warns_about_machine_rank(tmp_path: Path) -> None:
    nodes = [collect_node(tmp_path, spec(rank, machine_rank=0, num_machines=2, num_processes=8)) for rank in (0, 1)]
    result = compare_json(nodes)
    assert codes(result) == ["shared_config_machine_rank"]
    item = finding(result, "shared_config_machine_rank")
    assert item["severity"] == "warning" and "--machine_rank" in item["fix"]


def test_too_few_gpus_for_num_processes(baseline: List[Path], tmp_path: Path) -> None:
    nodes = planted(baseline, tmp_path, env={**BASE_ENV, "NODE_RANK": "2", "CUDA_VISIBLE_DEVICES": "0,1"})
    item = finding(compare_json(nodes), "too_few_gpus_for_processes")
    assert item["severity"] == "blocking"
    assert compare_nodes.groups_text(item["groups"]) == "node 2: 2 visible GPU(s)"
    assert "starts 4 processes per node" in item["message"]


# --- warning and info classes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "code", "field", "groups", "words"),
    [
        (
            {"csv": H100_CSV.replace("550.54.15", "550.90.07")},
            "driver_mismatch",
            "accelerators.gpus.driver",
            "nodes 0-1: 550.54.15; node 2: 550.90.07",
            "within the same major",
        ),
        (
            {"csv": H100_CSV.replace("81559", "95830")},
            "gpu_memory_mismatch",
            "accelerators.gpus.memory_total_mib",
            "nodes 0-1: 81559 MiB; node 2: 95830 MiB",
            "smallest GPU",
        ),
        (
            {"extra_dists": (("deepspeed", "0.19.8"), ("vllm", "0.31.0"), ("bitsandbytes", "0.49.2"))},
            "version_mismatch",
            "packages.bitsandbytes.version",
            "nodes 0-1: 0.50.2; node 2: 0.49.2",
            "bitsandbytes differs",
        ),
        (
            {"ib_ports": None},
            "rdma_mismatch",
            "node.infiniband",
            "nodes 0-1: 1 active port(s) (InfiniBand); node 2: none",
            "InfiniBand/RoCE differs",
        ),
        (
            {"env": {**BASE_ENV, "NODE_RANK": "2", "NCCL_DEBUG": "INFO"}},
            "env_mismatch",
            "env.NCCL_DEBUG",
            "nodes 0-1: WARN; node 2: INFO",
            "NCCL_DEBUG differs",
        ),
        (
            {"torch_cuda": None},
            "node_error",
            "findings.torch_cpu_build_with_gpu",
            "node 2: torch_cpu_build_with_gpu",
            "own report",
        ),
    ],
)
def test_warning_differences(
    baseline: List[Path], tmp_path: Path, changes: Dict, code: str, field: str, groups: str, words: str
) -> None:
    nodes = planted(baseline, tmp_path, **changes)
    result = compare_json(nodes)
    item = finding(result, code, field)
    assert item["severity"] == "warning"
    assert compare_nodes.groups_text(item["groups"]) == groups
    assert words in item["message"]
    blocking = codes(result, "blocking")
    assert run_compare(["--require-consistent", *map(str, nodes)]).returncode == (1 if blocking else 0)


def test_python_patch_difference_is_a_warning(baseline: List[Path], tmp_path: Path) -> None:
    """The interpreter is the one fact a fake node cannot change; the report of node 2 is edited in that one field."""
    other = tmp_path / "other.json"
    report = json.loads(baseline[2].read_text(encoding="utf-8"))
    major, minor, patch = report["python"]["version"].split(".")[:3]
    report["python"]["version"] = f"{major}.{minor}.{int(patch) + 1}"
    other.write_text(json.dumps(report), encoding="utf-8")
    item = finding(compare_json([*baseline[:2], other]), "python_mismatch")
    assert item["severity"] == "warning"
    assert "patch release" in item["message"]


def test_other_interfaces_up_is_info_only(baseline: List[Path], tmp_path: Path) -> None:
    interfaces = {
        "eth0": ("up", "ether"),
        "eth1": ("up", "ether"),
        "ib0": ("up", "infiniband"),
        "lo": ("unknown", "loopback"),
    }
    result = compare_json(planted(baseline, tmp_path, interfaces=interfaces))
    assert codes(result) == ["interfaces_differ"]
    assert result["counts"] == {"blocking": 0, "warning": 0, "info": 1}
    assert result["verdict"].startswith("consistent")


def test_network_probe_results_from_the_nodes_are_compared(baseline: List[Path], tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens: the node's probe is refused
    nodes = planted(baseline, tmp_path, args=("--probe-network", f"127.0.0.1:{port}", "--timeout", "1"))
    item = finding(compare_json(nodes), "network_refused")
    assert item["severity"] == "warning"
    assert item["field"] == f"probes.network[127.0.0.1:{port}]"
    assert compare_nodes.groups_text(item["groups"]) == "node 2: refused"


# --- vLLM server nodes --------------------------------------------------------------------------------------------


def test_vllm_server_node_is_compared_on_software_only(baseline: List[Path], tmp_path: Path) -> None:
    server = collect_node(
        tmp_path,
        NodeSpec(hostname="vllm0", csv=a100_csv(), with_config=False, ib_ports=None, extra_dists=BASE_DISTS),
    )
    result = compare_json(baseline, "--vllm-server", str(server))
    assert result["findings"] == [], result["findings"]
    assert result["nodes"][3]["role"] == "vllm-server"
    native = collect_node(
        tmp_path, NodeSpec(hostname="vllm2", with_config=False, extra_dists=BASE_DISTS, drop=("trl", "peft"))
    )
    assert compare_json(baseline, "--vllm-server", str(native))["findings"] == []  # `vllm serve` needs no TRL
    old_torch = collect_node(
        tmp_path,
        NodeSpec(hostname="vllm1", torch_version="2.12.0", with_config=False, extra_dists=BASE_DISTS),
    )
    result = compare_json(baseline, "--vllm-server", str(old_torch))
    item = finding(result, "version_mismatch", "packages.torch.version")
    assert compare_nodes.groups_text(item["groups"]) == "nodes 0-2: 2.13.0; node 3: 2.12.0"


# --- inputs -------------------------------------------------------------------------------------------------------


def test_labelled_streams_and_concatenated_reports_are_split(baseline: List[Path], tmp_path: Path) -> None:
    texts = [p.read_text(encoding="utf-8") for p in baseline]
    srun = "".join(f"{i}: {line}\n" for i, text in enumerate(texts) for line in text.splitlines())
    done = run_compare(["--json", "-"], stdin=srun)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [n["source"] for n in result["nodes"]] == ["<stdin> [0]", "<stdin> [1]", "<stdin> [2]"]
    assert result["findings"] == []
    per_node = [[f"node{i}: {line}\n" for line in text.splitlines()] for i, text in enumerate(texts)]
    pdsh = "".join(line for row in itertools.zip_longest(*per_node, fillvalue="") for line in row)  # interleaved
    (tmp_path / "pdsh.txt").write_text(pdsh, encoding="utf-8")
    result = compare_json([tmp_path / "pdsh.txt"])
    assert [n["hostname"] for n in result["nodes"]] == ["node0", "node1", "node2"]
    (tmp_path / "all.json").write_text("".join(texts), encoding="utf-8")
    assert len(compare_json([tmp_path / "all.json"])["nodes"]) == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"tool": "check_vllm_server", "schema_version": 1}', "not a check_optional_backends.py --json report"),
        ('{"schema_version": 1}', "no 'tool' field"),
        ("[1, 2]", "expected the JSON object"),
        ("{not json", "not JSON"),
        ("", "empty (no report)"),
    ],
)
def test_unusable_inputs_are_clear_errors(baseline: List[Path], tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    done = run_compare([str(baseline[0]), str(bad)])
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_schema_version_and_missing_node_facts_are_named(baseline: List[Path], tmp_path: Path) -> None:
    report = json.loads(baseline[1].read_text(encoding="utf-8"))
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**report, "schema_version": 2}), encoding="utf-8")
    done = run_compare([str(baseline[0]), str(future)])
    assert done.returncode == 2
    assert "schema_version 2; this compare_nodes.py reads schema_version 1" in done.stderr
    older = tmp_path / "older.json"
    older.write_text(json.dumps({k: v for k, v in report.items() if k != "node"}), encoding="utf-8")
    done = run_compare([str(baseline[0]), str(older)])
    assert done.returncode == 2
    assert "has no node facts (written by an older check_optional_backends.py)" in done.stderr


def test_reports_with_the_wrong_shape_are_errors_not_tracebacks(baseline: List[Path], tmp_path: Path) -> None:
    report = json.loads(baseline[1].read_text(encoding="utf-8"))
    for damage in ({"packages": []}, {"node": {**report["node"], "env": "x"}}, {"accelerators": None}):
        broken = tmp_path / "broken.json"
        broken.write_text(json.dumps({**report, **damage}), encoding="utf-8")
        done = run_compare([str(baseline[0]), str(broken)])
        assert done.returncode == 2, (damage, done.stdout)
        assert "Traceback" not in done.stderr and "error:" in done.stderr


def test_values_from_reports_are_scrubbed_and_escaped(baseline: List[Path], tmp_path: Path) -> None:
    """A hand-edited report cannot make the comparison print a token or forge a line."""
    report = json.loads(baseline[1].read_text(encoding="utf-8"))
    token = "hf_" + "Z" * 34
    report["node"]["env"]["NCCL_DEBUG"] = f"INFO {token}"
    report["node"]["hostname"] = "evil\nBLOCKING forged: line"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(report), encoding="utf-8")
    for args in ([], ["--json"]):
        done = run_compare([*args, str(baseline[0]), str(edited)])
        assert done.returncode == 0, done.stderr
        assert token not in done.stdout and "<redacted>" in done.stdout
        assert "\nBLOCKING forged" not in done.stdout


def test_usage_errors(baseline: List[Path], tmp_path: Path) -> None:
    assert run_compare([str(baseline[0])]).returncode == 2  # one node is not a comparison
    assert run_compare([]).returncode == 2
    missing = run_compare([str(baseline[0]), str(tmp_path / "absent.json")])
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    assert run_compare(["--bogus", str(baseline[0]), str(baseline[1])]).returncode == 2
    assert run_compare(["-", "--vllm-server", "-"], stdin="").returncode == 2
    assert compare_nodes.main(["--help"]) == 0


def test_help_has_the_collection_templates() -> None:
    text = subprocess.run([sys.executable, str(COMPARE), "--help"], capture_output=True, text=True, check=True).stdout
    assert "srun --nodes=$SLURM_JOB_NUM_NODES --ntasks-per-node=1 --output=reports/%N.json" in text
    assert "--label" in text and "pdsh -w" in text and "ssh" in text
    assert "--require-consistent" in text and "--vllm-server" in text


def test_node_ranges_compress_runs() -> None:
    assert compare_nodes.node_ranges([0, 1, 2, 3, 5]) == "nodes 0-3, 5"
    assert compare_nodes.node_ranges([4]) == "node 4"
    assert compare_nodes.node_ranges([2, 0, 1]) == "nodes 0-2"
