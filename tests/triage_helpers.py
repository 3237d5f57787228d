"""Synthetic multi-rank logs and a runner for scripts/triage_log.py, shared by the triage tests."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence

from conftest import SCRIPTS_DIR, with_bytecode_cache

SCRIPT = SCRIPTS_DIR / "triage_log.py"

NOISE = (
    "{{'loss': 0.{a}, 'grad_norm': 1.{b}, 'learning_rate': 1e-06, 'epoch': 0.{c}}}",
    "INFO 05-01 12:{m:02d}:{s:02d} [loggers.py:116] Engine 000: Avg prompt throughput: 1234.5 tokens/s",
    "node-{n}:1234:5678 [{r}] NCCL INFO Channel 03/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    " 45%|####5     | {a}/1000 [12:{m:02d}<15:{s:02d},  1.23s/it]",
    "2025-05-01 12:{m:02d}:{s:02d},123 - INFO - trl.trainer - step {a} done, reward mean 0.{b}",
    "Loading checkpoint shards: 100%|##########| 4/4 [00:0{c}<00:00,  1.55it/s]",
)

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 79.15 "
    "GiB of which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use. Of the "
    "allocated memory 75.00 GiB is allocated by PyTorch, and 1.50 GiB is reserved by PyTorch but unallocated."
)


def watchdog(rank: int, stamp: str = "E0501 13:30:00.000000") -> str:
    return (
        f"[{stamp} 1 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 1800000 milliseconds before timing out."
    )


def noise(rng: random.Random, rank: int) -> str:
    return rng.choice(NOISE).format(
        r=rank,
        a=rng.randrange(1000),
        b=rng.randrange(1000),
        c=rng.randrange(10),
        m=rng.randrange(60),
        s=rng.randrange(60),
        n=rank // 4,
    )


def interleave(per_rank: Dict[int, List[str]], noise_lines: int = 40, seed: int = 7) -> str:
    """One stream with '[rankN]:' prefixes: each rank's lines in order, noise from every rank between them."""
    rng = random.Random(seed)
    queues = {rank: list(lines) for rank, lines in per_rank.items()}
    ranks = sorted(set(per_rank) | set(range(8)))
    out: List[str] = []
    for rank in ranks:
        for _ in range(noise_lines // len(ranks) + 1):
            out.append(f"[rank{rank}]:{noise(rng, rank)}")
    for rank in sorted(queues):  # the failure lines, each rank's block after the others' noise
        for line in queues[rank]:
            out.append(f"[rank{rank}]:{line}")
            for _ in range(rng.randrange(3)):
                other = rng.choice(ranks)
                out.append(f"[rank{other}]:{noise(rng, other)}")
    return "\n".join(out) + "\n"


class Run(NamedTuple):
    code: int
    stdout: str
    stderr: str


def run_triage(
    args: Sequence[str], stdin: Optional[str] = None, env: Optional[Dict[str, str]] = None, timeout: float = 60
) -> Run:
    run_env = with_bytecode_cache({**os.environ, **(env or {})}, sys.executable)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=run_env,
        timeout=timeout,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
