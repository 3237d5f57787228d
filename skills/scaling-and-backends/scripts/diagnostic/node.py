"""Per-node facts for a multi-node comparison (``compare_nodes.py``): hostname, the NCCL version, network
interfaces from ``/sys/class/net``, InfiniBand/RoCE ports from ``/sys/class/infiniband``, the launch variables
and the accelerate config's multi-node fields.

Everything is read as text: no socket, no import of torch, no write. ``/sys`` and the hostname file are read under
the root named by ``CHECK_OPTIONAL_BACKENDS_TEST_ROOT`` when that variable is set; it exists only so tests can fake
a node's network devices, and is not part of the user interface.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional

from common.multinode import socket_ifname_problems

from diagnostic.base import new_finding, read_text
from diagnostic.launch import shown_env_value
from diagnostic.packages import DistRecord

TEST_ROOT_ENV = "CHECK_OPTIONAL_BACKENDS_TEST_ROOT"
MAX_INTERFACES = 64
MAX_IB_DEVICES = 32

# Launch variables compared across nodes (secrets redacted like every other variable in the report).
NODE_ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCHELASTIC_")
NODE_ENV_NAMES = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "NODE_RANK",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "VLLM_HOST_IP",
    "SLURM_JOB_ID",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NNODES",
    "SLURM_NODEID",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_STEP_ID",
    "SLURMD_NODENAME",
)
# The accelerate config fields that must agree across the machines of one job (machine_rank must differ).
ACCELERATE_NODE_FIELDS = (
    "compute_environment",
    "distributed_type",
    "mixed_precision",
    "num_machines",
    "num_processes",
    "machine_rank",
    "main_process_ip",
    "main_process_port",
    "rdzv_backend",
    "same_network",
    "fsdp_version",
    "deepspeed.zero_stage",
)
# ARPHRD_* link types (linux/if_arp.h) that matter here.
MAX_IB_PORTS = 16  # ports per RDMA device read; a real HCA has one or two
LINK_TYPES = {"1": "ether", "32": "infiniband", "772": "loopback", "65534": "none"}


def fs_root(env: Dict[str, str]) -> str:
    """The filesystem root for /sys and /proc reads: ``/`` unless the test-only variable names another."""
    return env.get(TEST_ROOT_ENV) or "/"


def _read_small(path: str) -> Optional[str]:
    text = read_text(path, limit=4096)
    return text.strip() if text is not None else None


def _listdir(path: str) -> List[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def node_hostname(root: str) -> Optional[str]:
    """This node's hostname (``os.uname``; under a test root, its ``proc/sys/kernel/hostname``)."""
    if root != "/":
        return _read_small(os.path.join(root, "proc", "sys", "kernel", "hostname"))
    try:
        return os.uname().nodename or None
    except (AttributeError, OSError):
        return None


def network_interfaces(root: str) -> Dict[str, Any]:
    """Interfaces under ``/sys/class/net`` with their state, MTU and link type."""
    base = os.path.join(root, "sys", "class", "net")
    if not os.path.isdir(base):
        return {"status": "unavailable", "interfaces": []}
    interfaces = []
    for name in _listdir(base)[:MAX_INTERFACES]:
        folder = os.path.join(base, name)
        mtu = _read_small(os.path.join(folder, "mtu"))
        link = _read_small(os.path.join(folder, "type"))
        interfaces.append(
            {
                "name": name,
                "operstate": (_read_small(os.path.join(folder, "operstate")) or "unknown").lower(),
                "mtu": int(mtu) if mtu and mtu.isascii() and mtu.isdigit() and len(mtu) <= 9 else None,
                "link": LINK_TYPES.get(link or "", link),
            }
        )
    return {"status": "ok", "interfaces": interfaces}


def infiniband_devices(root: str) -> Dict[str, Any]:
    """RDMA devices under ``/sys/class/infiniband`` (InfiniBand or RoCE), each port's state, link layer and rate."""
    base = os.path.join(root, "sys", "class", "infiniband")
    if not os.path.isdir(base):
        return {"status": "none", "devices": []}
    devices = []
    for name in _listdir(base)[:MAX_IB_DEVICES]:
        ports = []
        ports_dir = os.path.join(base, name, "ports")
        for port in _listdir(ports_dir)[:MAX_IB_PORTS]:
            folder = os.path.join(ports_dir, port)
            state = _read_small(os.path.join(folder, "state")) or ""
            ports.append(
                {
                    "port": port,
                    "state": state.split(":", 1)[-1].strip().upper() or "UNKNOWN",  # "4: ACTIVE" -> "ACTIVE"
                    "link_layer": _read_small(os.path.join(folder, "link_layer")),
                    "rate": _read_small(os.path.join(folder, "rate")),
                }
            )
        devices.append({"name": name, "fw_ver": _read_small(os.path.join(base, name, "fw_ver")), "ports": ports})
    return {"status": "ok" if devices else "none", "devices": devices}


def _nccl_header_version(record: DistRecord) -> Optional[str]:
    """NCCL_MAJOR/MINOR/PATCH from the wheel's ``nvidia/nccl/include/nccl.h``, when the wheel ships it."""
    text = read_text(os.path.join(record.site, "nvidia", "nccl", "include", "nccl.h"), limit=65536)
    if not text:
        return None
    parts = [re.search(rf"#define\s+NCCL_{key}\s+(\d+)", text) for key in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts) if all(parts) else None  # type: ignore[union-attr]


def nccl_version(dists: Dict[str, List[DistRecord]], torch_record: Optional[DistRecord]) -> Dict[str, Any]:
    """The NCCL that torch loads, without importing torch.

    CUDA wheels of torch load NCCL from an ``nvidia-nccl-cu*`` wheel; its version is read from the dist-info (and
    the header it ships). Torch's own metadata pins the wheel it was built with (``Requires-Dist``); a difference
    between the two is reported. ROCm builds bundle RCCL, whose version is not stated in a text file.
    """
    wheels = [(key, records[0]) for key, records in sorted(dists.items()) if key.startswith("nvidia-nccl-cu")]
    pinned = None
    if torch_record is not None:
        for line in torch_record.requires():
            match = re.match(r"\s*(nvidia-nccl-cu\d+)\s*==\s*([\w.]+)", line)
            if match:
                pinned = f"{match.group(1)}=={match.group(2)}"
                break
    if wheels:
        key, record = wheels[0]
        version = record.version()
        header = _nccl_header_version(record)
        source = f"{key} {version} (dist-info)"
        if header and header != version:
            source += f"; nccl.h says {header}"
        return {"version": header or version, "source": source, "torch_requires": pinned}
    if pinned:
        return {
            "version": None,
            "source": f"torch requires {pinned}, but no nvidia-nccl-cu* wheel is installed",
            "torch_requires": pinned,
        }
    return {
        "version": None,
        "source": "no nvidia-nccl-cu* wheel (CPU/ROCm torch, or NCCL from the system)",
        "torch_requires": None,
    }


def weight_sync_direction(packages: Dict[str, Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Which side listens on ``vllm_group_port`` for GRPO server-mode weight sync, read from the installed TRL's
    ``vllm_client.py`` as text: in trl-1.16.0 (and 1.11-1.15) ``init_communicator`` passes the trainer's own
    ``get_ip()`` as the master address (the server's workers connect to the trainer); in 1.0-1.10 the trainer
    joins a ``StatelessProcessGroup`` hosted by the server (the trainer connects to the server host)."""
    trl = packages.get("trl") or {}
    location = trl.get("location")
    if not trl.get("installed") or not location:
        return None
    for relative in ("generation/vllm_client.py", "extras/vllm_client.py"):
        text = read_text(os.path.join(location, *relative.split("/")), limit=1_000_000)
        if text is None:
            continue
        source = f"trl/{relative} (installed source)"
        if re.search(r"[\"']master_address[\"']\s*:\s*get_ip\(\)", text):
            return {"listener": "trainer", "connects_from": "vllm-server", "source": source}
        if re.search(r"StatelessProcessGroup\.create\(\s*host=self\.host", text):
            return {"listener": "vllm-server", "connects_from": "trainer", "source": source}
        return {"listener": None, "connects_from": None, "source": source + ": neither known shape found"}
    return {"listener": None, "connects_from": None, "source": "the installed trl has no vllm_client.py"}


def node_env(env: Dict[str, str]) -> Dict[str, str]:
    """The launch variables compared across nodes, shown the way the report's launch section shows them
    (diagnostic.launch.shown_env_value)."""
    return {
        name: shown_env_value(name, env[name])
        for name in sorted(env)
        if name.startswith(NODE_ENV_PREFIXES) or name in NODE_ENV_NAMES
    }


def accelerate_node_fields(accelerate_config: Dict[str, Any]) -> Dict[str, Any]:
    """The multi-node fields of the accelerate config the report read (empty when there is none)."""
    settings = accelerate_config.get("settings") or {}
    return {key: settings[key] for key in ACCELERATE_NODE_FIELDS if key in settings}


def gather_node(
    env: Dict[str, str],
    dists: Dict[str, List[DistRecord]],
    chosen: Dict[str, DistRecord],
    accelerate_config: Dict[str, Any],
    packages: Dict[str, Dict[str, Any]],
) -> Dict[str, Any]:
    """Every per-node fact; read-only (``/sys`` files, metadata already scanned, the environment)."""
    root = fs_root(env)
    return {
        "hostname": node_hostname(root),
        "nccl": nccl_version(dists, chosen.get("torch")),
        "network": network_interfaces(root),
        "infiniband": infiniband_devices(root),
        "env": node_env(env),
        "accelerate": accelerate_node_fields(accelerate_config),
        "weight_sync": weight_sync_direction(packages),
    }


def node_findings(node: Dict[str, Any]) -> List[Dict[str, str]]:
    """Findings this node shows on its own (the comparison adds the cross-node ones)."""
    findings = []
    for problem in socket_ifname_problems(node):
        findings.append(
            new_finding(
                "error",
                "socket_ifname_no_interface",
                f"{problem['variable']}={problem['value']} {problem['detail']}: NCCL/Gloo cannot open their sockets "
                "on this node; name an interface that is up (see /sys/class/net)",
            )
        )
    return findings


def node_text(node: Dict[str, Any]) -> str:
    """One line for the text report."""
    nccl = node.get("nccl") or {}
    interfaces = (node.get("network") or {}).get("interfaces") or []
    up = [i["name"] for i in interfaces if i["operstate"] == "up"]
    ib = (node.get("infiniband") or {}).get("devices") or []
    active = sum(1 for d in ib for p in d["ports"] if p["state"] == "ACTIVE")
    parts = [
        f"node: {node.get('hostname') or '?'}",
        f"NCCL {nccl.get('version') or 'unknown'}",
        f"interfaces up: {', '.join(up) if up else 'none'}",
        f"RDMA: {len(ib)} device(s), {active} active port(s)" if ib else "RDMA: none",
    ]
    sync = node.get("weight_sync") or {}
    if sync.get("listener"):
        parts.append(f"vllm_group_port: {sync['connects_from']} connects to {sync['listener']}")
    return " | ".join(parts)
