"""Builds read from installed files as text: torch's CUDA/HIP build, NCCL wheels, the CUDA toolkit on PATH,
DeepSpeed's compiled ops and bitsandbytes' native libraries. Nothing is imported.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
from typing import Any, Dict, List, Optional, Sequence

from diag_common import read_text
from diag_packages import DistRecord


def literal_assignments(source: str, names: Sequence[str]) -> Dict[str, Any]:
    """Top-level ``NAME = <literal>`` assignments of a Python source, read with ``ast`` (no import)."""
    result: Dict[str, Any] = {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return result
    for node in tree.body:
        targets: List[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in names:
                try:
                    result[target.id] = ast.literal_eval(value)
                except (ValueError, SyntaxError, TypeError):
                    continue
    return result


def torch_build(packages: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """CUDA / ROCm / XPU / CPU build of the installed torch, from ``torch/version.py`` parsed with ``ast``."""
    entry = packages["torch"]
    build: Dict[str, Any] = {
        "version": entry["version"],
        "cuda": None,
        "hip": None,
        "xpu": None,
        "kind": "unknown",
        "git_version": None,
        "source": "not installed",
    }
    location = entry["location"]
    if not entry["installed"]:
        return build
    if not location or not os.path.isdir(location):
        build["source"] = "torch module not found"
        return build
    path = os.path.join(location, "version.py")
    text = read_text(path)
    if text is None:
        build["source"] = "torch/version.py unreadable"
        return build
    values = literal_assignments(text, ("__version__", "cuda", "hip", "xpu", "git_version"))
    if "__version__" not in values:
        build["source"] = "torch/version.py unparsable"
        return build
    build["source"] = "torch/version.py (ast)"
    build["version"] = values.get("__version__") or entry["version"]
    for key in ("cuda", "hip", "xpu", "git_version"):
        value = values.get(key)
        build[key] = str(value) if value else None
    if build["hip"]:
        build["kind"] = "rocm"
    elif build["cuda"]:
        build["kind"] = "cuda"
    elif build["xpu"]:
        build["kind"] = "xpu"
    else:
        build["kind"] = "cpu"
    return build


def nccl_wheels(dists: Dict[str, List[DistRecord]]) -> Dict[str, Optional[str]]:
    """Versions of the nvidia-nccl-cu* / rccl wheels that torch loads NCCL from."""
    return {key: records[0].version() for key, records in sorted(dists.items()) if key.startswith("nvidia-nccl-cu")}


def cuda_toolkit() -> Dict[str, Any]:
    """Where ``nvcc`` is and which toolkit version it belongs to (``version.json``; nvcc is not run)."""
    nvcc = shutil.which("nvcc")
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else home
    version = None
    if root:
        text = read_text(os.path.join(root, "version.json"), limit=200_000)
        if text:
            try:
                version = json.loads(text).get("cuda", {}).get("version")
            except (ValueError, AttributeError):
                version = None
    return {"nvcc": nvcc, "cuda_home": home, "version": version}


def deepspeed_build(packages: Dict[str, Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Prebuilt ops and build-time torch of DeepSpeed, from ``git_version_info_installed.py`` (ast)."""
    location = packages["deepspeed"]["location"]
    if not location:
        return None
    text = read_text(os.path.join(location, "git_version_info_installed.py"), limit=200_000)
    if text is None:
        return {"source": "git_version_info_installed.py missing", "installed_ops": None}
    values = literal_assignments(text, ("installed_ops", "accelerator_name", "torch_info", "git_hash"))
    ops = values.get("installed_ops") if isinstance(values.get("installed_ops"), dict) else None
    return {
        "source": "deepspeed/git_version_info_installed.py (ast)",
        "installed_ops": sorted(k for k, v in ops.items() if v) if ops is not None else None,
        "accelerator_name": values.get("accelerator_name"),
        "torch_info": values.get("torch_info"),
    }


def bnb_native_libraries(packages: Dict[str, Dict[str, Any]]) -> List[str]:
    """Native library names shipped in the bitsandbytes folder (``libbitsandbytes_cuda128.so`` ...)."""
    location = packages["bitsandbytes"]["location"]
    try:
        return sorted(n for n in os.listdir(location) if n.startswith("libbitsandbytes_")) if location else []
    except OSError:
        return []
