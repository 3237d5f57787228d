"""diag_node (check_optional_backends.py): per-node facts read from a fake /sys root, NCCL without torch, the launch
variables (redacted) and the NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME check on one node."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from diagnostic import node as diag_node

from diagnostic_helpers import (
    SCHEMA,
    add_dist,
    add_stack,
    audit_run,
    base_env,
    fake_nvidia_smi,
    metadata_text,
    run_script,
    schema_errors,
)
from node_helpers import TEST_ROOT_ENV, write_sys_root

INTERFACES = {
    "eth0": ("up", "ether"),
    "eth1": ("down", "ether"),
    "ib0": ("up", "infiniband"),
    "lo": ("unknown", "loopback"),
}
RDMA = {"mlx5_0": [("ACTIVE", "InfiniBand")], "mlx5_1": [("DOWN", "Ethernet")]}


def node_env(tmp_path: Path, root: Path, **extra: str) -> dict:
    env = base_env(tmp_path / "home", tmp_path / "bin")
    env[TEST_ROOT_ENV] = str(root)
    env.update(extra)
    return env


def test_node_facts_come_from_the_sys_root(tmp_path: Path) -> None:
    root = write_sys_root(tmp_path / "root", "gpu-a17", INTERFACES, RDMA)
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    report = run_script(["--json"], [site], env=node_env(tmp_path, root), tmp=tmp_path).json()
    node = report["node"]
    assert node["hostname"] == "gpu-a17"
    assert node["network"]["status"] == "ok"
    assert node["network"]["interfaces"] == [
        {"name": "eth0", "operstate": "up", "mtu": 9000, "link": "ether"},
        {"name": "eth1", "operstate": "down", "mtu": 9000, "link": "ether"},
        {"name": "ib0", "operstate": "up", "mtu": 9000, "link": "infiniband"},
        {"name": "lo", "operstate": "unknown", "mtu": 65536, "link": "loopback"},
    ]
    ib = node["infiniband"]
    assert ib["status"] == "ok"
    assert [(d["name"], d["ports"][0]["state"], d["ports"][0]["link_layer"]) for d in ib["devices"]] == [
        ("mlx5_0", "ACTIVE", "InfiniBand"),
        ("mlx5_1", "DOWN", "Ethernet"),
    ]
    assert ib["devices"][0]["ports"][0]["rate"] == "400 Gb/sec (4X NDR)"
    assert schema_errors(report, json.loads(SCHEMA.read_text(encoding="utf-8"))) == []
    text = run_script([], [site], env=node_env(tmp_path, root), tmp=tmp_path).stdout
    assert "node: gpu-a17 | NCCL unknown | interfaces up: eth0, ib0 | RDMA: 2 device(s), 1 active port(s)" in text


def test_missing_sys_folders_read_as_none_and_unavailable(tmp_path: Path) -> None:
    root = tmp_path / "empty-root"
    root.mkdir()
    report = run_script(["--json"], [], env=node_env(tmp_path, root), tmp=tmp_path).json()
    assert report["node"]["network"] == {"status": "unavailable", "interfaces": []}
    assert report["node"]["infiniband"] == {"status": "none", "devices": []}
    assert report["node"]["hostname"] is None


def test_nccl_version_is_read_from_the_wheel_and_torch_pin_without_import(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    torch_info = next(site.glob("torch-*.dist-info"))
    (torch_info / "METADATA").write_text(
        metadata_text(
            "torch",
            "2.13.0+cu128",
            requires=['nvidia-nccl-cu12==2.27.3; platform_system == "Linux"', "filelock"],
        ),
        encoding="utf-8",
    )
    add_dist(
        site,
        "nvidia-nccl-cu12",
        "2.27.3",
        modules=["nvidia"],
        files={"nvidia/nccl/include/nccl.h": "#define NCCL_MAJOR 2\n#define NCCL_MINOR 27\n#define NCCL_PATCH 3\n"},
    )
    nccl = run_script(["--json"], [site], tmp=tmp_path).json()["node"]["nccl"]
    assert nccl == {
        "version": "2.27.3",
        "source": "nvidia-nccl-cu12 2.27.3 (dist-info)",
        "torch_requires": "nvidia-nccl-cu12==2.27.3",
    }
    (site / "nvidia" / "nccl" / "include" / "nccl.h").write_text(
        "#define NCCL_MAJOR 2\n#define NCCL_MINOR 26\n#define NCCL_PATCH 2\n", encoding="utf-8"
    )
    nccl = run_script(["--json"], [site], tmp=tmp_path).json()["node"]["nccl"]
    assert (nccl["version"], nccl["source"]) == ("2.26.2", "nvidia-nccl-cu12 2.27.3 (dist-info); nccl.h says 2.26.2")
    for folder in site.glob("nvidia_nccl_cu12-*.dist-info"):
        shutil.rmtree(folder)
    nccl = run_script(["--json"], [site], tmp=tmp_path).json()["node"]["nccl"]
    assert nccl["version"] is None
    assert "torch requires nvidia-nccl-cu12==2.27.3, but no nvidia-nccl-cu* wheel is installed" in nccl["source"]


def test_launch_variables_are_selected_and_secrets_redacted(tmp_path: Path) -> None:
    root = write_sys_root(tmp_path / "root", "n1", INTERFACES)
    token = "hf_" + "q" * 30
    github = "ghp_" + "A1b2C3d4" * 5  # a token shape only the shared by-value scrubber knows
    env = node_env(
        tmp_path,
        root,
        MASTER_ADDR="10.0.0.1",
        MASTER_PORT="29500",
        NODE_RANK="1",
        GLOO_SOCKET_IFNAME="eth0",
        TORCH_NCCL_ASYNC_ERROR_HANDLING="1",
        SLURM_JOB_ID="4242",
        NCCL_NET_PLUGIN_TOKEN="s3cr3t-plugin-value",
        NCCL_PROXY_URL="https://alice:hunter22@proxy:3128",
        NCCL_COMMENT=f"uses {token}",
        NCCL_NOTE="pushed with " + github,
        UNRELATED="x",
    )
    run = run_script(["--json"], [], env=env, tmp=tmp_path)
    node_vars = run.json()["node"]["env"]
    assert node_vars["MASTER_ADDR"] == "10.0.0.1" and node_vars["NODE_RANK"] == "1"
    assert node_vars["GLOO_SOCKET_IFNAME"] == "eth0" and node_vars["SLURM_JOB_ID"] == "4242"
    assert node_vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert node_vars["NCCL_NET_PLUGIN_TOKEN"] == "<redacted>"
    assert node_vars["NCCL_PROXY_URL"] == "https://<redacted>@proxy:3128"
    assert node_vars["NCCL_COMMENT"] == "uses <redacted>"
    assert node_vars["NCCL_NOTE"] == "pushed with <redacted>"
    assert "UNRELATED" not in node_vars
    for secret in ("s3cr3t-plugin-value", "hunter22", token):
        assert secret not in run.stdout
        assert secret not in run_script([], [], env=env, tmp=tmp_path).stdout


def test_node_env_shows_variables_the_way_the_launch_section_does() -> None:
    """One rule for both sections: a KEY/AUTH name keeps a short common value, a secret-named or token-shaped value
    is hidden, and the selection is limited to the launch variables."""
    token = "hf_" + "a1B2c3D4e5" * 3
    env = {
        "NCCL_IB_KEY": "3",  # a KEY-named setting with a plain value stays readable
        "NCCL_AUTH_TOKEN": "abc123secretvalue",
        "NCCL_DEBUG": "INFO",
        "NCCL_SOCKET_IFNAME": token,
        "HOME": "/root",
    }
    shown = diag_node.node_env(env)
    assert shown == {
        "NCCL_AUTH_TOKEN": "<redacted>",
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_KEY": "3",
        "NCCL_SOCKET_IFNAME": "<redacted>",
    }


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("NCCL_SOCKET_IFNAME", "eth", None),  # prefix: eth0 is up
        ("NCCL_SOCKET_IFNAME", "bond", "selects no interface here"),
        ("NCCL_SOCKET_IFNAME", "=eth", "selects no interface here"),  # exact: there is no "eth"
        ("NCCL_SOCKET_IFNAME", "=eth1", "selects only interfaces that are not up (eth1 down)"),
        ("NCCL_SOCKET_IFNAME", "^eth,ib,lo", "selects no interface here"),  # everything excluded
        ("NCCL_SOCKET_IFNAME", "^eth1", None),
        ("GLOO_SOCKET_IFNAME", "eth", "selects no interface here"),  # Gloo reads exact names
        ("GLOO_SOCKET_IFNAME", "ib0", None),
    ],
)
def test_socket_ifname_is_checked_against_this_nodes_interfaces(
    tmp_path: Path, variable: str, value: str, problem: str
) -> None:
    root = write_sys_root(tmp_path / "root", "n1", INTERFACES)
    report = run_script(["--json"], [], env=node_env(tmp_path, root, **{variable: value}), tmp=tmp_path).json()
    found = [f for f in report["findings"] if f["code"] == "socket_ifname_no_interface"]
    if problem is None:
        assert found == []
    else:
        [item] = found
        assert item["severity"] == "error"
        assert item["message"].startswith(f"{variable}={value} {problem}")


def test_default_run_with_node_facts_still_opens_no_socket_and_writes_nothing(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    add_dist(site, "nvidia-nccl-cu12", "2.27.3", modules=["nvidia"])
    fake_nvidia_smi(tmp_path / "bin")
    root = write_sys_root(tmp_path / "root", "n1", INTERFACES, {"mlx5_0": [("ACTIVE", "InfiniBand")]})
    env = node_env(tmp_path, root, NCCL_SOCKET_IFNAME="ib", MASTER_ADDR="10.0.0.1")
    result = audit_run(tmp_path, [site], ["--json"], env=env)
    assert [e for e in result["events"] if e[0] != "allowed"] == []
    assert result["heavy"] == []
    assert '"hostname": "n1"' in result["stdout"]


# Excerpts of trl/generation/vllm_client.py, init_communicator (the lines the diagnostic reads).
TRL_1_16_CLIENT = """\
        init_info = {
            "master_address": get_ip(),
            "master_port": self.group_port,
            "rank_offset": 1,
"""
TRL_1_10_CLIENT = """\
            pg = StatelessProcessGroup.create(
                host=self.host, port=self.group_port, rank=self.rank, world_size=world_size
            )
"""


@pytest.mark.parametrize(
    ("client", "listener", "connects_from", "text"),
    [
        (TRL_1_16_CLIENT, "trainer", "vllm-server", "vllm_group_port: vllm-server connects to trainer"),
        (TRL_1_10_CLIENT, "vllm-server", "trainer", "vllm_group_port: trainer connects to vllm-server"),
        ("# another shape\n", None, None, None),
    ],
)
def test_weight_sync_direction_is_read_from_the_installed_trl(
    tmp_path: Path, client: str, listener: str, connects_from: str, text: str
) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    (site / "trl" / "generation").mkdir(parents=True)
    (site / "trl" / "generation" / "vllm_client.py").write_text(client, encoding="utf-8")
    sync = run_script(["--json"], [site], tmp=tmp_path).json()["node"]["weight_sync"]
    assert (sync["listener"], sync["connects_from"]) == (listener, connects_from)
    assert sync["source"].startswith("trl/generation/vllm_client.py (installed source)")
    if text:
        assert text in " ".join(run_script([], [site], tmp=tmp_path).stdout.split())  # wrapped at 100 columns
    assert run_script(["--json"], [], tmp=tmp_path).json()["node"]["weight_sync"] is None  # no trl: nothing to say
