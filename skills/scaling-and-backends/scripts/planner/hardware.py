"""Hardware for the planner: GPUs per node, nodes, memory, from flags or ``check_optional_backends.py --json``.

A sibling module of ``plan_training.py`` (not a command); standard library only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the siblings must not leave __pycache__ in scripts/

import math  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional  # noqa: E402

_HERE = Path(__file__).resolve().parent.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from planner.inputs import PlanInputError, PlanRequest  # noqa: E402

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


def cc_value(cc: Optional[str]) -> Optional[float]:
    """``"8.6"`` -> 8.6; None when it is not MAJOR.MINOR."""
    if cc is None:
        return None
    try:
        major, _, minor = str(cc).partition(".")
        return int(major) + int(minor or 0) / 10.0
    except ValueError:
        return None


def resolve_hardware(request: PlanRequest, need_memory: bool = True) -> Optional[Hardware]:
    """The GPUs to plan for: the flags, else the visible GPUs of the hardware JSON; None when neither says."""
    info: Dict[str, Any] = request.hardware_info or {}
    source = []
    if request.hardware_json_path:
        source.append(f"{request.hardware_json_path} (visible GPUs)")
    gpus = request.gpus if request.gpus is not None else info.get("count")
    memory = request.gpu_memory_gib if request.gpu_memory_gib is not None else info.get("memory_gib")
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
    if request.nodes < 1:
        raise PlanInputError(f"impossible hardware: --nodes {request.nodes}")
    if request.gpus is not None or request.gpu_memory_gib is not None:
        source.append("command-line flags")
    ccs = info.get("compute_capabilities") or []
    if request.compute_capability:
        ccs = [request.compute_capability] * gpus
    return Hardware(
        gpus_per_node=gpus,
        nodes=request.nodes,
        memory_gib=float(memory),
        compute_capabilities=list(ccs),
        names=info.get("names") or [],
        source=" + ".join(source),
        notes=list(info.get("notes") or []),
    )
