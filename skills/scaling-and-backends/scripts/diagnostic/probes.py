"""Opt-in probes: each import (or the torch probe) in its own subprocess with offline variables and a timeout."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, Sequence, Tuple

from common.read import run_capped
from common.values import InvalidValue, load_json

from diagnostic.base import PROBE_WORKERS, first_line, new_finding

PROBE_ENV = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1", "TRANSFORMERS_OFFLINE": "1"}

PROBE_MARKER = "@@CHECK_OPTIONAL_BACKENDS@@"

IMPORT_PROBE_CODE = (
    r"""
import json, sys, time
sys.path[:] = json.loads(sys.argv[2])
name = sys.argv[1]
start = time.perf_counter()
result = {"importable": False, "error_type": None, "error": None, "version": None, "file": None}
try:
    module = __import__(name)
    result["importable"] = True
    result["version"] = str(getattr(module, "__version__", "") or "") or None
    result["file"] = getattr(module, "__file__", None)
except BaseException as error:
    result["error_type"] = type(error).__name__
    text = str(error).strip().splitlines()
    result["error"] = text[0][:300] if text else ""
result["seconds"] = round(time.perf_counter() - start, 3)
sys.stdout.write("\n"""
    + PROBE_MARKER
    + r"""" + json.dumps(result) + "\n")
sys.stdout.flush()
"""
)

TORCH_PROBE_CODE = (
    r"""
import json, sys, time
sys.path[:] = json.loads(sys.argv[1])
start = time.perf_counter()
result = {"importable": False}
try:
    import torch
    result["importable"] = True
    result["version"] = torch.__version__
    result["cuda_build"] = torch.version.cuda
    result["hip_build"] = getattr(torch.version, "hip", None)
    result["import_seconds"] = round(time.perf_counter() - start, 3)
    available = bool(torch.cuda.is_available())
    result["cuda_available"] = available
    result["device_count"] = torch.cuda.device_count() if available else 0
    devices = []
    for index in range(result["device_count"]):
        props = torch.cuda.get_device_properties(index)
        devices.append({
            "index": index,
            "name": props.name,
            "total_memory_mib": int(props.total_memory // 1048576),
            "compute_capability": "%d.%d" % (props.major, props.minor),
            "multi_processor_count": getattr(props, "multi_processor_count", None),
        })
    result["devices"] = devices
    dist = getattr(torch, "distributed", None)
    result["distributed_available"] = bool(dist is not None and dist.is_available())
    result["nccl_available"] = bool(result["distributed_available"] and dist.is_nccl_available())
    try:
        version = torch.cuda.nccl.version() if available else None
        result["nccl_version"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else version
    except Exception as error:
        result["nccl_version"] = None
        result["nccl_error"] = type(error).__name__ + ": " + str(error).splitlines()[0][:200]
    try:
        result["mps_available"] = bool(torch.backends.mps.is_available())
    except Exception:
        result["mps_available"] = False
    try:
        result["xpu_available"] = bool(hasattr(torch, "xpu") and torch.xpu.is_available())
    except Exception:
        result["xpu_available"] = False
except BaseException as error:
    result["error_type"] = type(error).__name__
    text = str(error).strip().splitlines()
    result["error"] = text[0][:300] if text else ""
result["seconds"] = round(time.perf_counter() - start, 3)
sys.stdout.write("\n"""
    + PROBE_MARKER
    + r"""" + json.dumps(result, default=str) + "\n")
sys.stdout.flush()
"""
)


def _interpreter_flags() -> List[str]:
    flags = []
    if sys.flags.isolated:
        flags.append("-I")
    else:
        if sys.flags.ignore_environment:
            flags.append("-E")
        if sys.flags.no_user_site:
            flags.append("-s")
    if sys.flags.no_site:
        flags.append("-S")
    return flags


def _probe_env() -> Dict[str, str]:
    env = dict(os.environ)
    env.update(PROBE_ENV)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _signal_name(code: int) -> str:
    import signal

    try:
        return signal.Signals(-code).name
    except (ValueError, AttributeError):
        return f"signal {-code}"


PROBE_OUTPUT_LIMIT = 2_000_000


def run_probe(code: str, code_argv: Sequence[str], timeout: float) -> Dict[str, Any]:
    """Run probe code in a fresh interpreter (same flags and sys.path); crashes and hangs become results."""
    argv = [sys.executable, *_interpreter_flags(), "-c", code, *code_argv]
    run = run_capped(argv, timeout, PROBE_OUTPUT_LIMIT, env=_probe_env())
    if run.status == "not_found":
        return {"status": "failed", "error": run.stderr, "wall_seconds": 0.0}
    wall = run.seconds
    timed_out = run.status == "timeout"
    stdout, stderr = run.stdout, run.stderr
    process = run
    tail = [line for line in stderr.strip().splitlines() if line.strip()][-3:]
    result: Dict[str, Any] = {"wall_seconds": wall, "stderr_tail": [first_line(t, 300) for t in tail]}
    payload = None
    for line in stdout.splitlines():
        if line.startswith(PROBE_MARKER):
            try:
                payload = load_json(line[len(PROBE_MARKER) :], "the probe's answer", max_bytes=PROBE_OUTPUT_LIMIT)
            except InvalidValue:
                payload = None
            if not isinstance(payload, dict):
                payload = None
    if timed_out:
        result.update({"status": "timeout", "error": f"no answer within {timeout:g} s (hang?)"})
    elif process.returncode is not None and process.returncode < 0:
        result.update(
            {"status": "crashed", "error": f"interpreter killed by {_signal_name(process.returncode)} during import"}
        )
    elif payload is None:
        result.update({"status": "failed", "error": f"exit {process.returncode} without a result"})
    else:
        result.update(payload)
        result["status"] = "ok" if payload.get("importable") else "import_error"
    return result


def probe_imports(targets: List[Tuple[str, str]], timeout: float, path_entries: Sequence[str]) -> List[Dict[str, Any]]:
    """Import each (package id, module) in its own subprocess, a few at a time."""
    from concurrent.futures import ThreadPoolExecutor

    path_json = json.dumps(list(path_entries))

    def one(target: Tuple[str, str]) -> Dict[str, Any]:
        pid, module = target
        result = run_probe(IMPORT_PROBE_CODE, [module, path_json], timeout)
        result.update({"package": pid, "module": module})
        result.setdefault("importable", False)
        return result

    workers = max(1, min(PROBE_WORKERS, len(targets), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, targets))


def probe_torch(timeout: float, path_entries: Sequence[str]) -> Dict[str, Any]:
    """Import torch in a subprocess and read torch.cuda device properties and NCCL (allocates nothing)."""
    return run_probe(TORCH_PROBE_CODE, [json.dumps(list(path_entries))], timeout)


def torch_probe_text(result: Dict[str, Any]) -> str:
    """One line for the torch probe's result (also the message of its finding)."""
    if result.get("status") != "ok":
        return f"{result.get('status')}: {result.get('error_type') or ''} {result.get('error') or ''}".strip()
    parts = [f"torch {result.get('version')} imported in {result.get('import_seconds')} s"]
    parts.append(f"cuda available: {result.get('cuda_available')}, devices: {result.get('device_count')}")
    if result.get("devices"):
        parts.append(", ".join(f"{d['name']} cc {d['compute_capability']}" for d in result["devices"]))
    parts.append(f"NCCL: {result.get('nccl_version') or ('available' if result.get('nccl_available') else 'no')}")
    return "; ".join(parts)


def probe_findings(probes: Dict[str, Any]) -> List[Dict[str, str]]:
    """Findings for failed probes (crash, hang, import error)."""
    findings = []
    for result in probes.get("imports") or []:
        if result.get("status") != "ok":
            detail = f"{result.get('error_type') + ': ' if result.get('error_type') else ''}{result.get('error') or ''}"
            findings.append(new_finding("error", f"import_{result['status']}", f"import {result['module']}: {detail}"))
    torch_probe = probes.get("torch")
    if torch_probe and torch_probe.get("status") != "ok":
        findings.append(
            new_finding(
                "error", f"torch_probe_{torch_probe.get('status')}", "torch probe: " + torch_probe_text(torch_probe)
            )
        )
    return findings
