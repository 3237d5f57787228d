"""nodes/rules.py: each comparison rule on reports from real diagnostic runs on fake nodes, with one planted
difference on node 2 of the consistent baseline (node_helpers.spec); the class, the grouping and the fix."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Dict, List

import pytest
from nodes.groups import groups_text

from diagnostic_helpers import H100_CSV
from node_helpers import (
    BASE_DISTS,
    BASE_ENV,
    NodeSpec,
    a100_csv,
    codes,
    collect_baseline,
    collect_node,
    compared,
    finding,
    planted,
    run_compare,
    spec,
)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> List[Path]:
    return collect_baseline(tmp_path_factory.mktemp("baseline"))


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
    result = compared(nodes)
    item = finding(result, code, field)
    assert item["severity"] == "blocking"
    assert groups_text(item["groups"]) == groups
    assert item["fix"]
    done = run_compare(["--require-consistent", *map(str, nodes)])
    assert done.returncode == 1
    assert f"BLOCKING {field}: " in done.stdout and f"    {groups}" in done.stdout and "    fix: " in done.stdout


def test_mixed_gpus_are_a_warning_without_sharding(tmp_path: Path) -> None:
    nodes = [
        collect_node(tmp_path, spec(0, distributed_type="MULTI_GPU", num_machines=2, num_processes=8)),
        collect_node(tmp_path, spec(1, distributed_type="MULTI_GPU", num_machines=2, num_processes=8, csv=a100_csv())),
    ]
    item = finding(compared(nodes), "gpu_model_mismatch")
    assert item["severity"] == "warning"
    assert "slowest GPU" in item["message"]


def test_one_shared_config_file_warns_about_machine_rank(tmp_path: Path) -> None:
    nodes = [collect_node(tmp_path, spec(rank, machine_rank=0, num_machines=2, num_processes=8)) for rank in (0, 1)]
    result = compared(nodes)
    assert codes(result) == ["shared_config_machine_rank"]
    item = finding(result, "shared_config_machine_rank")
    assert item["severity"] == "warning" and "--machine_rank" in item["fix"]


def test_too_few_gpus_for_num_processes(baseline: List[Path], tmp_path: Path) -> None:
    nodes = planted(baseline, tmp_path, env={**BASE_ENV, "NODE_RANK": "2", "CUDA_VISIBLE_DEVICES": "0,1"})
    item = finding(compared(nodes), "too_few_gpus_for_processes")
    assert item["severity"] == "blocking"
    assert groups_text(item["groups"]) == "node 2: 2 visible GPU(s)"
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
    result = compared(nodes)
    item = finding(result, code, field)
    assert item["severity"] == "warning"
    assert groups_text(item["groups"]) == groups
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
    item = finding(compared([*baseline[:2], other]), "python_mismatch")
    assert item["severity"] == "warning"
    assert "patch release" in item["message"]


def test_network_probe_results_from_the_nodes_are_compared(baseline: List[Path], tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens: the node's probe is refused
    nodes = planted(baseline, tmp_path, args=("--probe-network", f"127.0.0.1:{port}", "--timeout", "1"))
    item = finding(compared(nodes), "network_refused")
    assert item["severity"] == "warning"
    assert item["field"] == f"probes.network[127.0.0.1:{port}]"
    assert groups_text(item["groups"]) == "node 2: refused"


# --- vLLM server nodes --------------------------------------------------------------------------------------------


def test_vllm_server_node_is_compared_on_software_only(baseline: List[Path], tmp_path: Path) -> None:
    server = collect_node(
        tmp_path,
        NodeSpec(hostname="vllm0", csv=a100_csv(), with_config=False, ib_ports=None, extra_dists=BASE_DISTS),
    )
    result = compared(baseline, [server])
    assert result["findings"] == [], result["findings"]
    assert result["nodes"][3]["role"] == "vllm-server"
    native = collect_node(
        tmp_path, NodeSpec(hostname="vllm2", with_config=False, extra_dists=BASE_DISTS, drop=("trl", "peft"))
    )
    assert compared(baseline, [native])["findings"] == []  # `vllm serve` needs no TRL
    old_torch = collect_node(
        tmp_path,
        NodeSpec(hostname="vllm1", torch_version="2.12.0", with_config=False, extra_dists=BASE_DISTS),
    )
    result = compared(baseline, [old_torch])
    item = finding(result, "version_mismatch", "packages.torch.version")
    assert groups_text(item["groups"]) == "nodes 0-2: 2.13.0; node 3: 2.12.0"
