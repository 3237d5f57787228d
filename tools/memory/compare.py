"""Planned against measured, per run of a cuda record. The planner is passed in (a callable from plan_training.py
flags to its --json report), so this module stays pure and the test can use the real planner in-process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from memory.record import peak_reserved

GIB = 2**30
Planner = Callable[[List[str]], Dict[str, Any]]


@dataclass(frozen=True)
class Row:
    label: str
    planned_gib: float  # the planner's point estimate for the 1-GPU candidate
    low_gib: float
    high_gib: float
    measured_gib: Optional[float]  # peak reserved + the CUDA context; None when the run failed
    error: Optional[str]
    planned_fits: bool

    @property
    def ratio(self) -> Optional[float]:
        return self.planned_gib / self.measured_gib if self.measured_gib else None

    @property
    def inside_band(self) -> Optional[bool]:
        return None if self.measured_gib is None else self.low_gib <= self.measured_gib <= self.high_gib

    @property
    def verdict_right(self) -> Optional[bool]:
        """True when the planner called fitting a run that trained, or not fitting one that ran out of memory; None
        for a run that failed otherwise."""
        if self.error is None:
            return self.planned_fits
        return (not self.planned_fits) if "OutOfMemory" in self.error else None


def rows(record: Dict[str, Any], plan: Planner) -> List[Row]:
    context = record["cuda_context_bytes"]
    out = []
    for run in record["runs"]:
        data = plan(run["planner_args"])
        candidate = next(c for c in data["candidates"] if c["strategy"] == "ddp")
        measured = None if run.get("error") else (peak_reserved(run) + context) / GIB
        band = candidate["per_gpu_band_gib"]
        out.append(
            Row(
                label=run.get("label", ""),
                planned_gib=candidate["per_gpu_gib"],
                low_gib=band["low"],
                high_gib=band["high"],
                measured_gib=measured,
                error=run.get("error"),
                planned_fits=bool(candidate["fits"]),
            )
        )
    return out


def render(table: List[Row]) -> str:
    lines = [f"{'run':<52} {'planned':>8} {'band':>13} {'measured':>9} {'ratio':>6}"]
    for row in table:
        band = f"{row.low_gib:.1f}-{row.high_gib:.1f}"
        measured = f"{row.measured_gib:.1f}" if row.measured_gib is not None else "error"
        ratio = f"{row.ratio:.2f}" if row.ratio is not None else "-"
        lines.append(f"{row.label[:52]:<52} {row.planned_gib:>8.1f} {band:>13} {measured:>9} {ratio:>6}")
    inside = [r for r in table if r.inside_band]
    measured = [r for r in table if r.measured_gib is not None]
    judged = [r for r in table if r.verdict_right is not None]
    right = [r for r in judged if r.verdict_right]
    lines.append(f"inside the band: {len(inside)}/{len(measured)} measured runs (GiB; peak reserved + CUDA context)")
    lines.append(f"fit verdict right: {len(right)}/{len(judged)} (trained called fitting, out-of-memory not)")
    return "\n".join(lines)
