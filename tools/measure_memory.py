#!/usr/bin/env python3
"""Measure training memory with TRL on random weights, and compare it with the planner.

Measuring runs by hand, in an environment with torch, transformers, peft, trl, datasets and (QLoRA) bitsandbytes;
no download: each model is built from a config.json with random weights, the tokenizer and data are made up with
exact lengths. The prepared GPU run is tools/device_measure.sh (the suite tools/measure_suite.json):

    python tools/measure_memory.py --suite tools/measure_suite.json --write tests/fixtures/memory/h200.json

On a GPU each run records torch.cuda.max_memory_allocated and max_memory_reserved per optimizer step (peaks reset
before each), the CUDA context once, the GPU and the torch, transformers, PEFT, TRL and bitsandbytes releases,
and the plan_training.py flags that describe the run. Without a GPU (or with --tiny) every run of the suite goes
through the same code path on a tiny config on the CPU, with null memory fields: a check of the code and the record.

    python tools/measure_memory.py --compare tests/fixtures/memory/h200.json

prints, per run, the planner's point estimate and band against the measured peak (reserved + CUDA context).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.dont_write_bytecode = True
REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import compare, record, suite  # noqa: E402

PLANNER = REPO_ROOT / "skills" / "scaling-and-backends" / "scripts" / "plan_training.py"


@dataclass(frozen=True)
class Request:
    suite_path: Optional[Path]
    compare_path: Optional[Path]
    steps: int
    tiny: bool
    budget_s: float
    write: Optional[Path]


def parse(argv: Optional[List[str]]) -> Request:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--suite", type=Path, help="a suite file (tools/measure_suite.json): measure its runs")
    what.add_argument("--compare", type=Path, metavar="RECORD", help="a cuda record: planned against measured")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps per run (default 3)")
    parser.add_argument("--tiny", action="store_true", help="the tiny config on the CPU (a code and schema check)")
    parser.add_argument("--budget-s", type=float, default=1e9, help="start no run after this many seconds")
    parser.add_argument("--write", type=Path, metavar="PATH", help="write the record here, after every run")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    return Request(args.suite, args.compare, args.steps, args.tiny, args.budget_s, args.write)


def plan_with_subprocess(flags: List[str]) -> Dict[str, Any]:
    """The planner's --json report, from the command itself (flags' paths are relative to the repository root)."""
    done = subprocess.run(
        [sys.executable, str(PLANNER), *flags, "--json"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise SystemExit(f"plan_training.py refused {' '.join(flags)}: {done.stderr.strip()[:300]}")
    return json.loads(done.stdout)


def main(argv: Optional[List[str]] = None) -> int:
    request = parse(argv)
    if request.compare_path:
        try:
            data = json.loads(request.compare_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            print(f"{request.compare_path}: cannot read a record: {exc}", file=sys.stderr)
            return 2
        problems = record.check(data) if isinstance(data, dict) else ["not a JSON object"]
        if problems or data.get("device") != "cuda":
            why = "; ".join(problems) or "device is cpu"
            print(f"{request.compare_path}: not a cuda record: {why}", file=sys.stderr)
            return 2
        print(compare.render(compare.rows(data, plan_with_subprocess)))
        return 0
    try:
        specs = suite.load(request.suite_path)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        print(f"{request.suite_path}: cannot read a suite (see tools/measure_suite.json): {exc!r}", file=sys.stderr)
        return 2
    bad = [f"{s.label()}: {p}" for s in specs for p in suite.problems(s)]
    if bad:
        print("\n".join(bad), file=sys.stderr)
        return 2
    from memory.measure import measure  # torch and the rest load here only

    def write(current: Dict[str, Any]) -> None:
        if request.write:
            request.write.parent.mkdir(parents=True, exist_ok=True)
            request.write.write_text(json.dumps(current, indent=1) + "\n", encoding="utf-8")

    result = measure(specs, REPO_ROOT, request.steps, request.tiny, request.budget_s, write)
    if not request.write:
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    problems = record.check(result)
    for problem in problems:
        print(f"record: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
