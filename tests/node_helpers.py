"""Builders for multi-node tests: a fake node (site-packages, nvidia-smi, /sys and hostname under a test root,
environment, accelerate config) and a real run of the diagnostic on it that writes its ``--json`` report.

The test root is read through ``CHECK_OPTIONAL_BACKENDS_TEST_ROOT`` (``scripts/diagnostic/node.py``), so each fake node
has its own hostname, ``/sys/class/net`` and ``/sys/class/infiniband``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from conftest import with_bytecode_cache
from diagnostic_helpers import (
    H100_CSV,
    SKILL_DIR,
    add_dist,
    add_stack,
    add_torch,
    add_trl,
    base_env,
    fake_nvidia_smi,
    run_script,
)

COMPARE = SKILL_DIR / "scripts" / "compare_nodes.py"
TEST_ROOT_ENV = "CHECK_OPTIONAL_BACKENDS_TEST_ROOT"

ACCELERATE_YAML = """\
compute_environment: LOCAL_MACHINE
distributed_type: {distributed_type}
mixed_precision: bf16
num_machines: {num_machines}
num_processes: {num_processes}
machine_rank: {machine_rank}
main_process_ip: {main_process_ip}
main_process_port: 29500
rdzv_backend: static
same_network: true
fsdp_config:
  fsdp_version: 2
"""

ARPHRD = {"ether": "1", "infiniband": "32", "loopback": "772"}


def a100_csv(driver: str = "550.54.15") -> str:
    """Four A100s in nvidia-smi's CSV shape (the H100 fixture's columns)."""
    rows = [
        f"{i}, GPU-a100{i:04d}-0000-0000-0000-000000000000, NVIDIA A100-SXM4-80GB, 81920, 0, 81920, {driver}, 8.0"
        for i in range(4)
    ]
    return "\n".join(rows) + "\n"


def write_sys_root(
    root: Path,
    hostname: str,
    interfaces: Dict[str, Tuple[str, str]],
    ib_ports: Optional[Dict[str, List[Tuple[str, str]]]] = None,
) -> Path:
    """``proc/sys/kernel/hostname``, ``sys/class/net/<if>/{operstate,mtu,type}`` and, when given,
    ``sys/class/infiniband/<dev>/ports/<n>/{state,link_layer,rate}`` in the kernel's text formats."""
    (root / "proc" / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "sys" / "kernel" / "hostname").write_text(hostname + "\n", encoding="utf-8")
    net = root / "sys" / "class" / "net"
    net.mkdir(parents=True, exist_ok=True)
    for name, (state, link) in interfaces.items():
        folder = net / name
        folder.mkdir(exist_ok=True)
        (folder / "operstate").write_text(state + "\n", encoding="utf-8")
        (folder / "mtu").write_text(("65536" if link == "loopback" else "9000") + "\n", encoding="utf-8")
        (folder / "type").write_text(ARPHRD[link] + "\n", encoding="utf-8")
    for device, ports in (ib_ports or {}).items():
        base = root / "sys" / "class" / "infiniband" / device
        (base / "ports").mkdir(parents=True, exist_ok=True)
        (base / "fw_ver").write_text("28.39.1002\n", encoding="utf-8")
        for number, (state, layer) in enumerate(ports, 1):
            port = base / "ports" / str(number)
            port.mkdir()
            code = {"ACTIVE": "4", "DOWN": "1", "INIT": "2"}.get(state, "1")
            (port / "state").write_text(f"{code}: {state}\n", encoding="utf-8")
            (port / "link_layer").write_text(layer + "\n", encoding="utf-8")
            (port / "rate").write_text("400 Gb/sec (4X NDR)\n", encoding="utf-8")
    return root


@dataclass
class NodeSpec:
    """What one fake node has; every field defaults to the consistent baseline."""

    hostname: str
    machine_rank: int = 0
    num_machines: int = 3
    num_processes: int = 12
    main_process_ip: str = "10.0.0.1"
    distributed_type: str = "FSDP"
    torch_cuda: Optional[str] = "12.8"
    torch_version: str = "2.13.0"
    nccl: Optional[str] = "2.27.3"
    trl_fixture: Optional[str] = None
    extra_dists: Sequence[Tuple[str, str]] = ()
    drop: Sequence[str] = ()  # packages of the baseline stack to remove (dist-info and module)
    csv: str = H100_CSV
    interfaces: Dict[str, Tuple[str, str]] = field(
        default_factory=lambda: {"eth0": ("up", "ether"), "ib0": ("up", "infiniband"), "lo": ("unknown", "loopback")}
    )
    ib_ports: Optional[Dict[str, List[Tuple[str, str]]]] = field(
        default_factory=lambda: {"mlx5_0": [("ACTIVE", "InfiniBand")]}
    )
    env: Dict[str, str] = field(default_factory=dict)
    with_config: bool = True
    args: Sequence[str] = ()


def collect_node(tmp: Path, spec: NodeSpec, name: Optional[str] = None) -> Path:
    """Build the node under ``tmp/<name>``, run the diagnostic there, write and return ``<name>.json``."""
    name = name or spec.hostname
    base = tmp / name
    site = base / "site"
    add_stack(site, torch_cuda=spec.torch_cuda)
    if spec.torch_version != "2.13.0":
        for old in site.glob("torch-*.dist-info"):
            shutil.rmtree(old)
        add_torch(site, version=spec.torch_version, cuda=spec.torch_cuda)
    if spec.trl_fixture:
        for old in site.glob("trl-*.dist-info"):
            shutil.rmtree(old)
        add_trl(site, fixture=spec.trl_fixture)
    if spec.nccl:
        add_dist(site, "nvidia-nccl-cu12", spec.nccl, modules=["nvidia"])
    for name in spec.drop:
        for folder in [*site.glob(f"{name}-*.dist-info"), site / name]:
            shutil.rmtree(folder)
    for dist, version in spec.extra_dists:
        add_dist(site, dist, version)
    fake_nvidia_smi(base / "bin", csv=spec.csv)
    root = write_sys_root(base / "root", spec.hostname, spec.interfaces, spec.ib_ports)
    env = base_env(base / "home", base / "bin")
    env[TEST_ROOT_ENV] = str(root)
    env.update(spec.env)
    args = ["--json", *spec.args]
    if spec.with_config:
        config = base / "accelerate.yaml"
        config.write_text(
            ACCELERATE_YAML.format(
                distributed_type=spec.distributed_type,
                num_machines=spec.num_machines,
                num_processes=spec.num_processes,
                machine_rank=spec.machine_rank,
                main_process_ip=spec.main_process_ip,
            ),
            encoding="utf-8",
        )
        args += ["--accelerate-config", str(config)]
    run = run_script(args, [site], env=env, tmp=base)
    assert run.returncode == 0, run.stderr
    out = tmp / f"{name}.json"
    out.write_text(run.stdout, encoding="utf-8")
    return out


def run_compare(args: Sequence[str], stdin: Optional[str] = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """compare_nodes.py in a real subprocess."""
    return subprocess.run(
        [sys.executable, str(COMPARE), *args],
        env=with_bytecode_cache(dict(os.environ), sys.executable),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def compare_json(paths: Sequence[Path], *extra: str) -> dict:
    """compare_nodes.main in this process (the CLI itself is exercised by run_compare)."""
    import compare_nodes

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = compare_nodes.main(["--json", *extra, *map(str, paths)])
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def codes(result: dict, severity: Optional[str] = None) -> List[str]:
    return [f["code"] for f in result["findings"] if severity is None or f["severity"] == severity]


def finding(result: dict, code: str, field_name: Optional[str] = None) -> dict:
    matches = [f for f in result["findings"] if f["code"] == code and (field_name is None or f["field"] == field_name)]
    assert matches, [(f["code"], f["field"]) for f in result["findings"]]
    return matches[0]


# --- the consistent baseline of the comparison tests ----------------------------------------------------------------
# Three training nodes (FSDP, 4x H100 each, num_machines=3, num_processes=12, ranks 0-2); a test replaces node 2 with
# a node that differs in one way.

BASE_ENV = {
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
    "NCCL_SOCKET_IFNAME": "eth",
    "NCCL_DEBUG": "WARN",
    "SLURM_JOB_ID": "4242",
}
BASE_DISTS = (("deepspeed", "0.19.8"), ("vllm", "0.31.0"), ("bitsandbytes", "0.50.2"))


def spec(rank: int, **changes) -> NodeSpec:
    """Baseline node ``rank`` with ``changes`` applied."""
    values = {
        "hostname": f"node{rank}",
        "machine_rank": rank,
        "env": {**BASE_ENV, "NODE_RANK": str(rank)},
        "extra_dists": BASE_DISTS,
    }
    values.update(changes)
    return NodeSpec(**values)


def collect_baseline(tmp: Path) -> List[Path]:
    """The three baseline reports."""
    return [collect_node(tmp, spec(rank)) for rank in range(3)]


def planted(baseline: List[Path], tmp_path: Path, **changes) -> List[Path]:
    """Nodes 0-1 from the baseline, node 2 built with ``changes``."""
    return [*baseline[:2], collect_node(tmp_path, spec(2, **changes), name="planted")]


def compared(train: Sequence[Path], servers: Sequence[Path] = ()) -> dict:
    """The comparison of these reports, from the package (load, then compare), without the command line."""
    from nodes.compare import compare
    from nodes.load import load_nodes

    return compare(load_nodes([str(p) for p in train], [str(p) for p in servers]))
