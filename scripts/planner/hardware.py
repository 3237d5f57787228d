"""Hardware for the planner: GPUs per node, nodes, memory, from flags or ``check_optional_backends.py --json``.

A sibling module of ``plan_training.py`` (not a command); standard library only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the siblings must not leave __pycache__ in scripts/

import argparse  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional  # noqa: E402

_HERE = Path(__file__).resolve().parent.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from common.read import InputError, read_bytes  # noqa: E402
from common.values import InvalidValue, load_json, short  # noqa: E402
from planner.rules import PlanInputError  # noqa: E402

GIB = 2**30


# ==============================================================================================================
# Hardware
# ==============================================================================================================


@dataclass
class Hardware:
    gpus_per_node: int
    nodes: int
    memory_gib: float
    compute_capabilities: List[Optional[str]]
    names: List[str]
    source: str
    notes: List[str] = field(default_factory=list)

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GIB)


HARDWARE_JSON_LIMIT = 16_000_000
MAX_JSON_GPUS = 4096 * 16
MAX_GPU_MIB = 2**31


def load_hardware_json(path: str) -> Dict[str, Any]:
    """The visible GPUs from ``check_optional_backends.py --json`` (schema_version 1)."""
    try:
        read = read_bytes(path, HARDWARE_JSON_LIMIT)
    except InputError as error:
        raise PlanInputError(f"{path}: {error.reason}") from None
    if read.truncated:
        raise PlanInputError(f"{path}: larger than {HARDWARE_JSON_LIMIT:,} bytes; not a diagnostic report")
    try:
        data = load_json(read.data, path, max_bytes=HARDWARE_JSON_LIMIT)
    except InvalidValue as error:
        raise PlanInputError(str(error)) from None
    if not isinstance(data, dict):
        raise PlanInputError(f"{path}: expected the JSON object of check_optional_backends.py --json")
    if data.get("schema_version") != 1:
        raise PlanInputError(
            f"{path}: schema_version {data.get('schema_version')!r} is not supported (expected 1, from "
            "check_optional_backends.py --json)"
        )
    gpus = (data.get("accelerators") or {}).get("gpus") if isinstance(data.get("accelerators"), dict) else None
    if not isinstance(gpus, list):
        raise PlanInputError(f"{path}: no accelerators.gpus list")
    if len(gpus) > MAX_JSON_GPUS:
        raise PlanInputError(f"{path}: accelerators.gpus lists {len(gpus):,} GPUs (more than {MAX_JSON_GPUS})")
    visible = [g for g in gpus if isinstance(g, dict) and g.get("visible", True)]
    if not visible:
        raise PlanInputError(f"{path}: no visible GPU (accelerators.gpus has {len(gpus)} entries, none visible)")
    memories = []
    for gpu in visible:
        mib = gpu.get("memory_total_mib")
        if not isinstance(mib, (int, float)) or isinstance(mib, bool) or not 0 < mib <= MAX_GPU_MIB:
            raise PlanInputError(f"{path}: GPU {short(gpu.get('index'))} has no memory_total_mib in (0, 2**31]")
        memories.append(float(mib))
    notes = []
    if len(set(memories)) > 1:
        notes.append(f"GPUs differ in memory ({sorted(set(memories))} MiB); planning with the smallest")
    for gpu in visible:
        free, total = gpu.get("memory_free_mib"), gpu.get("memory_total_mib")
        if (
            isinstance(free, (int, float))
            and not isinstance(free, bool)
            and 0 <= free <= MAX_GPU_MIB
            and isinstance(total, (int, float))
            and total - free > 1024
        ):
            notes.append(
                f"GPU {gpu.get('index')} already has {(total - free) / 1024:.1f} GiB in use by other processes"
            )
    return {
        "count": len(visible),
        "memory_gib": min(memories) / 1024.0,
        "compute_capabilities": [
            cc if isinstance(cc, str) and re.fullmatch(r"\d{1,2}\.\d{1,2}", cc) else None
            for cc in (g.get("compute_capability") for g in visible)
        ],
        "names": [str(g.get("name", "?"))[:120] for g in visible],
        "notes": notes,
    }


def resolve_hardware(args: argparse.Namespace, need_memory: bool = True) -> Optional[Hardware]:
    info: Dict[str, Any] = {}
    source = []
    if args.hardware_json:
        info = load_hardware_json(args.hardware_json)
        source.append(f"{args.hardware_json} (visible GPUs)")
    gpus = args.gpus if args.gpus is not None else info.get("count")
    memory = args.gpu_memory_gib if args.gpu_memory_gib is not None else info.get("memory_gib")
    if gpus is None and memory is None:
        return None
    if gpus is None or (memory is None and need_memory):
        raise PlanInputError("hardware: give both --gpus and --gpu-memory-gib, or --hardware-json")
    if memory is None:
        memory = math.inf  # lint only: the rules need the GPU count, not the memory
    if gpus < 1:
        raise PlanInputError(f"impossible hardware: --gpus {gpus} (need at least 1 GPU)")
    if memory <= 0 or (need_memory and not math.isfinite(memory)):
        raise PlanInputError(f"impossible hardware: GPU memory {memory} GiB")
    if args.nodes < 1:
        raise PlanInputError(f"impossible hardware: --nodes {args.nodes}")
    if args.gpus is not None or args.gpu_memory_gib is not None:
        source.append("command-line flags")
    ccs = info.get("compute_capabilities") or []
    if args.compute_capability:
        ccs = [args.compute_capability] * gpus
    return Hardware(
        gpus_per_node=gpus,
        nodes=args.nodes,
        memory_gib=float(memory),
        compute_capabilities=list(ccs),
        names=info.get("names") or [],
        source=" + ".join(source),
        notes=list(info.get("notes") or []),
    )
