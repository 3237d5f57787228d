"""Facts read from one loaded report (a node entry of ``load.load_nodes``), as the rules compare them."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


def package_version(node: Dict[str, Any], pid: str) -> Optional[str]:
    entry = (node["report"].get("packages") or {}).get(pid) or {}
    if not entry.get("installed"):
        return None
    return entry.get("version") or "installed, version unknown"


def torch_build_text(node: Dict[str, Any]) -> str:
    build = node["report"].get("torch_build") or {}
    kind = build.get("kind")
    return {
        "cuda": f"CUDA {build.get('cuda')}",
        "rocm": f"ROCm {build.get('hip')}",
        "xpu": f"XPU {build.get('xpu')}",
        "cpu": "CPU-only",
    }.get(kind or "", "unknown")


def visible_gpus(node: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [g for g in (node["report"].get("accelerators") or {}).get("gpus") or [] if g.get("visible")]


def gpu_listing_known(node: Dict[str, Any]) -> bool:
    accelerators = node["report"].get("accelerators") or {}
    return any((accelerators.get(tool) or {}).get("status") == "ok" for tool in ("nvidia_smi", "rocm_smi"))


def gpu_models(node: Dict[str, Any]) -> Optional[str]:
    if not gpu_listing_known(node):
        return None
    names = sorted({g.get("name") or "?" for g in visible_gpus(node)})
    return " + ".join(names) if names else "no visible GPU"


def config_fields(node: Dict[str, Any]) -> Dict[str, Any]:
    return node["report"]["node"].get("accelerate") or {}


def node_env(node: Dict[str, Any]) -> Dict[str, str]:
    return node["report"]["node"].get("env") or {}


def as_int(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
