"""Accelerators from ``nvidia-smi``/``rocm-smi`` (no CUDA context) and ``*_VISIBLE_DEVICES`` resolution."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from common.read import Started, find_executable, finish_command, start_command
from common.values import InvalidValue, integer, number, short

from diagnostic.base import COMMAND_OUTPUT_LIMIT, GPU_MEMORY_MAX_MIB, first_line, run_command, version_tuple

DEFAULT_SMI_TIMEOUT = 5.0

# AMD architectures with bf16 and with flash-attn's ROCm (CK) backend.
AMD_BF16_ARCHS = ("gfx908", "gfx90a", "gfx94", "gfx95", "gfx11", "gfx12")
AMD_FA2_ARCHS = ("gfx90a", "gfx942", "gfx950")

MAX_GPUS = 4096

NVIDIA_FIELDS = ("index", "uuid", "name", "memory.total", "memory.used", "memory.free", "driver_version", "compute_cap")


def _na(value: str) -> Optional[str]:
    value = value.strip()
    return None if not value or value.startswith("[") or value.upper() in ("N/A", "NA") else value


def parse_nvidia_csv(text: str, fields: Sequence[str]) -> Tuple[Optional[List[Dict[str, Any]]], str]:
    """Parse ``--format=csv,noheader,nounits`` output; ``(None, reason)`` when it does not fit."""
    import csv

    if "\0" in text:
        return None, "the output contains a NUL byte"
    rows = [line for line in text.splitlines() if line.strip()]
    if len(rows) > MAX_GPUS:
        return None, f"{len(rows):,} lines, more than {MAX_GPUS} GPUs"
    gpus = []
    try:
        parsed = list(csv.reader(rows, skipinitialspace=True))
    except csv.Error as error:
        return None, f"not CSV ({first_line(str(error), 80)})"
    for row in parsed:
        if len(row) != len(fields):
            return None, f"expected {len(fields)} fields, got {len(row)}: {first_line(','.join(row), 120)!r}"
        values = dict(zip(fields, (cell.strip() for cell in row)))
        try:
            index = integer(values["index"], "index", 0, MAX_GPUS)
            total, used, free = (
                integer(number(_na(values[name]), name, 0, GPU_MEMORY_MAX_MIB), name) if _na(values[name]) else None
                for name in ("memory.total", "memory.used", "memory.free")
            )
        except InvalidValue as error:
            return None, f"{first_line(str(error), 80)} in: {first_line(','.join(row), 120)!r}"
        capability = _na(values.get("compute_cap", "")) if "compute_cap" in values else None
        if capability is not None and not re.fullmatch(r"\d+\.\d+", capability):
            return None, f"unexpected compute capability {capability!r}"
        if free is None and total is not None and used is not None:
            free = total - used
        gpus.append(
            {
                "index": index,
                "uuid": _na(values["uuid"]),
                "vendor": "nvidia",
                "name": first_line(values["name"], 120),
                "memory_total_mib": total,
                "memory_used_mib": used,
                "memory_free_mib": free,
                "compute_capability": capability,
                "driver": _na(values["driver_version"]),
            }
        )
    return gpus, ""


def _nvidia_argv(exe: str, fields: Sequence[str]) -> List[str]:
    return [exe, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def start_nvidia_query() -> Optional[Started]:
    """Start ``nvidia-smi --query-gpu`` now and return at once (None when it is not on PATH or cannot start), so
    that the rest of the facts are gathered while the driver answers (hundreds of ms on a busy node);
    :func:`gather_accelerators` reads its answer."""
    exe = find_executable("nvidia-smi")
    started = start_command(_nvidia_argv(exe, NVIDIA_FIELDS)) if exe else None
    return started if isinstance(started, Started) else None


def query_nvidia(timeout: float, started: Optional[Started] = None) -> Tuple[Dict[str, str], List[Dict[str, Any]]]:
    """GPU list from ``nvidia-smi --query-gpu`` (read from ``started`` when the query was started earlier); the
    tool's own error text is kept."""
    exe = find_executable("nvidia-smi")
    if not exe:
        if started is not None:
            started.cancel()
        return {"status": "not_found", "detail": "nvidia-smi is not on PATH"}, []
    fields = list(NVIDIA_FIELDS)
    result: Dict[str, Any] = {}
    for _attempt in range(2):
        if started is not None:
            result = finish_command(started, timeout, COMMAND_OUTPUT_LIMIT).as_dict()
            started = None
        else:
            result = run_command(_nvidia_argv(exe, fields), timeout)
        combined = (result["stdout"] + "\n" + result["stderr"]).strip()
        if result["status"] == "failed" and "compute_cap" in fields and "not a valid field" in combined:
            fields.remove("compute_cap")  # drivers older than the compute_cap field
            continue
        break
    if result["status"] == "timeout":
        return {"status": "timeout", "detail": f"nvidia-smi did not answer within {timeout:g} s (wedged driver?)"}, []
    if result["status"] == "not_found":
        return {"status": "not_found", "detail": first_line(result["stderr"])}, []
    if result["status"] == "failed":
        message = first_line(result["stdout"]) or first_line(result["stderr"]) or "no message"
        return {"status": "failed", "detail": f"exit {result['returncode']}: {message}"}, []
    gpus, reason = parse_nvidia_csv(result["stdout"], fields)
    if gpus is None:
        return {"status": "unparsable", "detail": reason}, []
    detail = f"{len(gpus)} GPU(s)"
    if "compute_cap" not in fields:
        detail += "; driver does not report compute_cap"
    return {"status": "ok", "detail": detail}, gpus


def list_mig_devices(timeout: float) -> Dict[str, int]:
    """MIG UUID -> parent GPU index, from ``nvidia-smi -L`` (run only when a MIG UUID is selected)."""
    exe = find_executable("nvidia-smi")
    if not exe:
        return {}
    result = run_command([exe, "-L"], timeout)
    mapping: Dict[str, int] = {}
    parent = None
    for line in result["stdout"].splitlines():
        gpu = re.match(r"\s*GPU (\d+):", line)
        if gpu:
            parent = int(gpu.group(1))
            continue
        mig = re.search(r"\(UUID:\s*(MIG-[^)\s]+)\)", line)
        if mig and parent is not None:
            mapping[mig.group(1)] = parent
    return mapping


def query_rocm(timeout: float) -> Tuple[Dict[str, str], List[Dict[str, Any]]]:
    """GPU list from ``rocm-smi --json`` (product name, VRAM, unique id, driver)."""
    exe = find_executable("rocm-smi")
    if not exe:
        return {"status": "not_found", "detail": "rocm-smi is not on PATH"}, []
    argv = [exe, "--showproductname", "--showmeminfo", "vram", "--showuniqueid", "--showdriverversion", "--json"]
    result = run_command(argv, timeout)
    if result["status"] == "timeout":
        return {"status": "timeout", "detail": f"rocm-smi did not answer within {timeout:g} s"}, []
    if result["status"] != "ok":
        message = first_line(result["stderr"]) or first_line(result["stdout"]) or "no message"
        return {"status": "failed", "detail": f"exit {result['returncode']}: {message}"}, []
    from diagnostic.rocm import parse_rocm_json  # only where rocm-smi answered: most machines never compile it

    gpus, reason = parse_rocm_json(result["stdout"])
    if gpus is None:
        return {"status": "unparsable", "detail": reason}, []
    return {"status": "ok", "detail": f"{len(gpus)} GPU(s)"}, gpus


def _strtoul(text: str) -> int:
    """torch's reading of one CUDA_VISIBLE_DEVICES entry: leading digits, or -1."""
    match = re.match(r"[+-]?\d+", text)
    if not match:
        return -1
    digits = match.group(0)
    return int(digits) if len(digits.lstrip("+-")) <= 18 else (-1 if digits.startswith("-") else 10**18)


MAX_VISIBLE_ENTRIES = 4096  # entries of a *_VISIBLE_DEVICES value read; no machine has that many GPUs


def resolve_visible(
    raw: Optional[str],
    count: Optional[int],
    uuids: Sequence[Optional[str]],
    mig_parents: Optional[Dict[str, int]] = None,
) -> Tuple[Optional[List[int]], List[str]]:
    """Which physical GPU indices a ``CUDA_VISIBLE_DEVICES``-style value selects, with notes.

    Mirrors torch 2.13.0 ``torch/cuda/__init__.py`` (``_parse_visible_devices``, ``_transform_uuid_to_ordinals``,
    ``_device_count_nvml``): entries are read up to the first invalid one; a repeated entry selects nothing; an
    ordinal beyond the device count ends the list; UUIDs match by unique prefix.
    """
    notes: List[str] = []
    if raw is None:
        return (list(range(count)) if count is not None else None), ["unset: every GPU is visible"]
    if raw.strip() == "":
        return [], ["set but empty: no GPU is visible"]
    entries = raw.split(",", MAX_VISIBLE_ENTRIES)
    if len(entries) > MAX_VISIBLE_ENTRIES:
        entries = entries[:MAX_VISIBLE_ENTRIES]
        notes.append(
            f"only the first {MAX_VISIBLE_ENTRIES:,} entries were read (torch reads them all: a repeat further on "
            "would hide every GPU)"
        )
    if raw.startswith(("GPU-", "MIG-")):
        prefix = raw[:4]
        selected: List[str] = []
        seen = set()  # membership in a set: 20,000 entries stay linear
        for entry in entries:
            if entry in seen:
                return [], [f"{short(entry)} is listed twice: CUDA then sees no GPU"]
            if not entry.startswith(prefix):
                notes.append(f"stops at {short(entry)}: every entry must start with {prefix}")
                break
            selected.append(entry)
            seen.add(entry)
        indices: List[int] = []
        for entry in selected:
            if prefix == "MIG-":
                parents = mig_parents or {}
                hits = sorted({p for uuid, p in parents.items() if uuid.startswith(entry)})
                if len(hits) != 1:
                    notes.append(f"stops at {entry[:16]}...: no unique MIG device with that UUID")
                    break
                if hits[0] not in indices:
                    indices.append(hits[0])
                notes.append(f"{entry[:16]}... is a MIG slice of GPU {hits[0]} (its memory is a fraction of the GPU)")
                continue
            matches = [i for i, uuid in enumerate(uuids) if uuid and uuid.startswith(entry)]
            if len(matches) != 1:
                reason = "matches several GPUs" if matches else "matches no GPU"
                notes.append(f"stops at {entry[:20]}: UUID prefix {reason}")
                break
            if matches[0] in indices:
                return [], [f"{entry[:20]} names GPU {matches[0]} twice: CUDA then sees no GPU"]
            indices.append(matches[0])
        return indices, notes
    ordinals: List[int] = []
    taken = set()
    for entry in entries:
        value = _strtoul(entry.strip())
        if value in taken:
            return [], [f"ordinal {value} is listed twice: CUDA then sees no GPU"]
        taken.add(value)
        if value < 0:
            notes.append(
                "-1 hides every GPU"
                if entry.strip() == "-1" and not ordinals
                else f"stops at invalid entry {short(entry)}"
            )
            break
        ordinals.append(value)
    if count is not None:
        for position, value in enumerate(ordinals):
            if value >= count:
                notes.append(f"stops at {value}: only {count} GPU(s) exist, so later entries are ignored")
                ordinals = ordinals[:position]
                break
    return ordinals, notes


def resolve_amd_visible(env: Dict[str, str], gpus: List[Dict[str, Any]]) -> Tuple[Dict[str, Any], List[int]]:
    """ROCR_VISIBLE_DEVICES first, then HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES) on what ROCR left."""
    notes: List[str] = []
    pool = [g["index"] for g in gpus]
    uuids = [("GPU-" + g["uuid"].replace("0x", "")) if g.get("uuid") else None for g in gpus]
    names = []
    for variable in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        raw = env.get(variable)
        if raw is None:
            continue
        if variable == "CUDA_VISIBLE_DEVICES" and "HIP_VISIBLE_DEVICES" in env:
            notes.append("CUDA_VISIBLE_DEVICES ignored: HIP_VISIBLE_DEVICES takes precedence")
            continue
        names.append(f"{variable}={raw}")
        picked, step_notes = resolve_visible(raw, len(pool), [uuids[i] if i < len(uuids) else None for i in pool])
        notes.extend(f"{variable}: {n}" for n in step_notes)
        pool = [pool[i] for i in (picked or [])]
    if not names:
        notes.append("no ROCR/HIP/CUDA_VISIBLE_DEVICES: every GPU is visible")
    return {
        "variable": "ROCR_VISIBLE_DEVICES,HIP_VISIBLE_DEVICES,CUDA_VISIBLE_DEVICES",
        "raw": "; ".join(names) if names else None,
        "resolved": pool,
        "notes": notes,
    }, pool


def gpu_capabilities(gpu: Dict[str, Any]) -> None:
    """Add bf16 and FlashAttention-2 eligibility (NVIDIA: compute capability >= 8.0)."""
    if gpu["vendor"] == "nvidia":
        cc = version_tuple(gpu.get("compute_capability"))
        gpu["bf16"] = (cc >= (8, 0)) if cc else None
        gpu["flash_attn2_eligible"] = (cc >= (8, 0)) if cc else None
    else:
        arch = gpu.get("arch") or ""
        gpu["bf16"] = arch.startswith(AMD_BF16_ARCHS) if arch else None
        gpu["flash_attn2_eligible"] = arch.startswith(AMD_FA2_ARCHS) if arch else None


def gather_accelerators(env: Dict[str, str], timeout: float, started: Optional[Started] = None) -> Dict[str, Any]:
    """nvidia-smi and rocm-smi facts, the visible subset and totals (``started``: the query
    :func:`start_nvidia_query` began)."""
    nvidia_status, nvidia = query_nvidia(timeout, started)
    rocm_status, amd = query_rocm(timeout)
    gpus = nvidia + amd
    for gpu in gpus:
        gpu_capabilities(gpu)
    if nvidia or not amd:
        raw = env.get("CUDA_VISIBLE_DEVICES")
        mig = list_mig_devices(timeout) if raw and raw.startswith("MIG-") else None
        resolved, notes = resolve_visible(
            raw, len(nvidia) if nvidia_status["status"] == "ok" else None, [g["uuid"] for g in nvidia], mig
        )
        if nvidia_status["status"] != "ok" and raw is not None:
            notes.append("GPU list unavailable: entries are read, not checked against real devices")
        names = {g["name"] for g in nvidia}
        if len(names) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and raw:
            notes.append(
                "mixed GPU models: CUDA orders devices fastest first, nvidia-smi by PCI bus; set "
                "CUDA_DEVICE_ORDER=PCI_BUS_ID so ordinals match nvidia-smi indices"
            )
        visible_info = {"variable": "CUDA_VISIBLE_DEVICES", "raw": raw, "resolved": resolved, "notes": notes}
        visible_set = set(resolved or []) if resolved is not None else {g["index"] for g in nvidia}
        for gpu in nvidia:
            gpu["visible"] = gpu["index"] in visible_set
        for gpu in amd:
            gpu["visible"] = False
    else:
        visible_info, pool = resolve_amd_visible(env, amd)
        for gpu in amd:
            gpu["visible"] = gpu["index"] in pool
    visible = [g for g in gpus if g.get("visible")]
    return {
        "nvidia_smi": nvidia_status,
        "rocm_smi": rocm_status,
        "gpus": gpus,
        "visible_devices": visible_info,
        "summary": summarize_gpus(visible, len(gpus)),
    }


def summarize_gpus(visible: List[Dict[str, Any]], total_count: int) -> Dict[str, Any]:
    """Totals over the visible GPUs (memory in MiB, lowest compute capability)."""
    caps = [g["compute_capability"] for g in visible if g.get("compute_capability")]
    return {
        "gpu_count": total_count,
        "visible_count": len(visible),
        "vendor": visible[0]["vendor"] if visible else None,
        "memory_total_mib": sum(g["memory_total_mib"] or 0 for g in visible) if visible else 0,
        "memory_free_mib": sum(g["memory_free_mib"] or 0 for g in visible) if visible else 0,
        "min_compute_capability": min(caps, key=version_tuple) if caps else None,
        "all_bf16": all(g.get("bf16") for g in visible) if visible else False,
        "all_flash_attn2_eligible": all(g.get("flash_attn2_eligible") for g in visible) if visible else False,
    }
