"""Builds read from installed files as text: torch's CUDA/HIP build, NCCL wheels, the CUDA toolkit on PATH,
DeepSpeed's compiled ops and bitsandbytes' native libraries. Nothing is imported.
"""

from __future__ import annotations

import ast
import os
from typing import Any, Dict, List, Optional, Sequence

from common.read import find_executable
from common.values import InvalidValue, load_json

from diagnostic.base import read_text
from diagnostic.packages import DistRecord


def literal_assignments(source: str, names: Sequence[str]) -> Dict[str, Any]:
    """Top-level ``NAME = <literal>`` assignments of a Python source, read with ``ast`` (no import)."""
    result: Dict[str, Any] = {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
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
                except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
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
    if not isinstance(build["version"], str) or len(build["version"]) > 64:
        build["version"] = entry["version"]
    for key in ("cuda", "hip", "xpu", "git_version"):
        value = values.get(key)
        build[key] = value if isinstance(value, str) and value and len(value) <= 64 else None
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
    nvcc = find_executable("nvcc")
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else home
    version = None
    if root:
        text = read_text(os.path.join(root, "version.json"), limit=200_000)
        if text:
            try:
                data = load_json(text, "version.json", max_bytes=200_000, max_depth=16)
            except InvalidValue:
                data = None
            cuda = data.get("cuda") if isinstance(data, dict) else None
            found = cuda.get("version") if isinstance(cuda, dict) else None
            version = found if isinstance(found, str) and len(found) <= 64 else None
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
    name = values.get("accelerator_name")
    info = values.get("torch_info")
    if isinstance(info, dict):  # {"version": "2.13", "cuda_version": "12.8", ...}: plain strings only
        info = {k: v for k, v in info.items() if isinstance(k, str) and isinstance(v, (str, int, float)) and k}
    return {
        "source": "deepspeed/git_version_info_installed.py (ast)",
        # keys of another type than str (1: True) are not op names; sorting them with strings would fail
        "installed_ops": sorted(k for k, v in ops.items() if v and isinstance(k, str)) if ops is not None else None,
        "accelerator_name": name if isinstance(name, str) and len(name) <= 64 else None,
        "torch_info": info if isinstance(info, dict) else None,
    }


def bnb_native_libraries(packages: Dict[str, Dict[str, Any]]) -> List[str]:
    """Native library names shipped in the bitsandbytes folder (``libbitsandbytes_cuda128.so`` ...)."""
    location = packages["bitsandbytes"]["location"]
    try:
        return sorted(n for n in os.listdir(location) if n.startswith("libbitsandbytes_")) if location else []
    except OSError:
        return []
