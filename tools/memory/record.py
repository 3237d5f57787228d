"""The record tools/measure_memory.py writes, and its check (pure Python: the tests read it without torch)."""

from __future__ import annotations

from typing import Any, Dict, List

from memory.suite import METHODS, TRAINERS

SCHEMA = 2


def check(record: Dict[str, Any]) -> List[str]:
    """Problems with a record's shape, or an empty list."""
    problems: List[str] = []
    if record.get("schema") != SCHEMA:
        problems.append(f"schema must be {SCHEMA}")
    versions = record.get("versions")
    if not isinstance(versions, dict) or not all(isinstance(versions.get(k), str) for k in ("torch", "trl")):
        problems.append("versions must name torch and trl releases")
    device = record.get("device")
    if device not in ("cuda", "cpu"):
        problems.append("device must be cuda or cpu")
    if device == "cuda":
        if not isinstance(record.get("gpu"), str):
            problems.append("a cuda record names its GPU")
        for key in ("gpu_total_bytes", "cuda_context_bytes"):
            if not isinstance(record.get(key), int) or record[key] < 0:
                problems.append(f"a cuda record has {key} (a byte count)")
    runs = record.get("runs")
    if not isinstance(runs, list) or not runs:
        return [*problems, "runs must be a non-empty list"]
    for i, run in enumerate(runs):
        found = _run_problems(run, device) if isinstance(run, dict) else ["a run is a JSON object"]
        problems += [f"runs[{i}]: {p}" for p in found]
    return problems


def _run_problems(run: Dict[str, Any], device: Any) -> List[str]:
    out = []
    if run.get("trainer") not in TRAINERS:
        out.append(f"trainer must be one of {', '.join(TRAINERS)}")
    if run.get("method") not in METHODS:
        out.append(f"method must be one of {', '.join(METHODS)}")
    for key in ("seq_len", "micro_batch"):
        if not isinstance(run.get(key), int) or run[key] < 1:
            out.append(f"{key} must be a positive integer")
    if not isinstance(run.get("planner_args"), list):
        out.append("planner_args must be the plan_training.py flags of the run")
    steps = run.get("steps")
    if run.get("error") is None and (not isinstance(steps, list) or not steps):
        out.append("a run without an error has steps")
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            out.append("a step is a JSON object")
            continue
        for key in ("max_memory_allocated", "max_memory_reserved"):
            value = step.get(key)
            if device == "cuda" and not (isinstance(value, int) and value > 0):
                out.append(f"{key} must be a positive byte count on cuda")
            if device == "cpu" and value is not None:
                out.append(f"{key} is null on cpu")
    return out


def peak_reserved(run: Dict[str, Any]) -> int:
    """The run's peak: the largest max_memory_reserved over its steps (the first step's optimizer states included)."""
    return max(step["max_memory_reserved"] for step in run["steps"])
