#!/usr/bin/env python3
"""Benchmark of the log triage: a synthetic 8-rank log of 50 MB (training noise, NCCL INFO lines, progress bars,
one OOM on one rank and the watchdog echoes on the others) triaged by ``scripts/triage_log.py`` in a subprocess.

    python3 tools/benchmark_triage.py                # 50 MB, budget 3 s and 256 MiB
    python3 tools/benchmark_triage.py --mb 200 --runs 3

Prints wall time and the child's peak RSS (``getrusage``), and exits 1 when a run is over the budget or the triage
does not name the planted failure. Not a timed test: timings on a shared machine vary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
SCRIPT = SKILL_DIR / "scripts" / "triage_log.py"

NOISE = (
    "[rank{r}]:{{'loss': 0.{a}, 'grad_norm': 1.{b}, 'learning_rate': 1e-06, 'rewards/mean': 0.{c}, 'epoch': 0.{c}}}",
    "[rank{r}]:INFO 05-01 12:{m:02d}:{s:02d} [loggers.py:116] Engine 000: Avg prompt throughput: 1234.5 tokens/s, "
    "Avg generation throughput: 4321.0 tokens/s, Running: 8 reqs",
    "[rank{r}]:node-{n}:1234:5678 [{r}] NCCL INFO Channel 03/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "[rank{r}]: 45%|####5     | {a}/1000 [12:{m:02d}<15:{s:02d},  1.23s/it]",
    "[rank{r}]:2025-05-01 12:{m:02d}:{s:02d},123 - INFO - trl.trainer - step {a} done, reward mean 0.{b}",
)
FAILURE = (
    "[rank5]:2025-05-01 13:00:00,000 - INFO - step 999\n"
    "[rank5]:Traceback (most recent call last):\n"
    '[rank5]:  File "train.py", line 10, in <module>\n'
    "[rank5]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of "
    "79.15 GiB of which 1.23 GiB is free.\n"
)


def write_log(path: Path, megabytes: int, seed: int = 1) -> None:
    """``megabytes`` of interleaved 8-rank noise with the OOM at 80 % and watchdog echoes after it."""
    rng = random.Random(seed)
    target = megabytes * 1_000_000
    planted = False
    size = 0
    with path.open("w", encoding="utf-8") as out:
        while size < target:
            if not planted and size > target * 0.8:
                out.write(FAILURE)
                for rank in (0, 1, 2, 3, 4, 6, 7):
                    out.write(
                        f"[rank{rank}]:[E501 13:30:00.000000 1 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog "
                        "caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 1800000 "
                        "milliseconds before timing out.\n"
                    )
                planted = True
            line = rng.choice(NOISE).format(
                r=rng.randrange(8),
                a=rng.randrange(1000),
                b=rng.randrange(1000),
                c=rng.randrange(100),
                m=rng.randrange(60),
                s=rng.randrange(60),
                n=rng.randrange(2),
            )
            out.write(line + "\n")
            size += len(line) + 1


def run_once(log: Path) -> dict:
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(log), "--json"], capture_output=True, text=True, timeout=120
    )
    wall = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child so far
    report = json.loads(result.stdout) if result.returncode == 0 else {}
    root = report.get("root") or {}
    return {
        "wall_s": round(wall, 2),
        "peak_rss_mib": round(max(peak_kib, before) / 1024, 1),
        "found": root.get("ranks") == [5] and "out of memory" in root.get("text", ""),
        "entry": (report.get("entry") or {}).get("heading"),
        "echoes": sum(e["count"] for e in report.get("echoes", [])),
        "rc": result.returncode,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmark_triage.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=50, help="log size in MB (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=3, help="runs; the best is judged (default: %(default)s)")
    parser.add_argument("--budget-s", type=float, default=3.0)
    parser.add_argument("--budget-mib", type=float, default=256.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="triage-bench-") as folder:
        log = Path(folder) / "job-8-ranks.log"
        write_log(log, args.mb)
        print(f"log: {log.stat().st_size / 1e6:.1f} MB, 8 ranks")
        results: List[dict] = [run_once(log) for _ in range(max(1, args.runs))]
    for result in results:
        print(json.dumps(result))
    best = min(results, key=lambda r: r["wall_s"])
    ok = best["found"] and best["wall_s"] < args.budget_s and best["peak_rss_mib"] < args.budget_mib
    print(
        f"best: {best['wall_s']} s (budget {args.budget_s} s), peak RSS {best['peak_rss_mib']} MiB "
        f"(budget {args.budget_mib:.0f} MiB), planted failure {'found' if best['found'] else 'MISSED'}"
        f" on {os.cpu_count()} CPUs"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
