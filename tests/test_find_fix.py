"""scripts/find_fix.py end to end, in subprocesses (a few cases; the ranking of every entry runs in process in
tests/test_lookup_rank.py): verdict first within 100 columns and the size bound, exit 0/1/2, --json, --report, the
printed command runs as printed, the upstream-fixes seam without scripts/fixes/, and the time of one lookup."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

from conftest import REPORT_HEAD, SCRIPTS_DIR, with_bytecode_cache

SCRIPT = SCRIPTS_DIR / "find_fix.py"
SOCKET = (
    "[rank0]: node-2:4410:4502 [0] NCCL WARN socketStartConnect: Connect to 10.8.0.3<44123> failed : Connection refused"
)


def _run(args: List[str], cwd: Path = SCRIPTS_DIR) -> subprocess.CompletedProcess:
    env = with_bytecode_cache(dict(os.environ), sys.executable)
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60, cwd=cwd
    )


def test_a_message_prints_the_entry_first_within_the_bounds(tmp_path: Path) -> None:
    done = _run([SOCKET, "--trl", "1.16.0", "--vllm", "0.31.0"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("find_fix: best match: troubleshooting/multi-node.md:")
    assert "Your releases (TRL 1.11–1.16)" in done.stdout and "How it knows: the quoted message" in done.stdout
    assert len(done.stdout) <= 3000 and all(len(line) <= 100 for line in lines)


def test_json_with_releases_from_a_report(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps({**REPORT_HEAD, "packages": {"trl": {"version": "1.9.0"}, "vllm": {"version": "0.26.0"}}})
    )
    done = _run(["grpo loss is 0.0 every step and the reward never goes up", "--report", str(report), "--json"])
    data = json.loads(done.stdout)
    assert done.returncode == 0 and data["verdict"] == "found"
    assert data["results"][0]["file"] == "troubleshooting/symptoms.md" and data["results"][0]["kind"] == "symptom"
    assert data["releases"]["trl"] == {"version": "1.9.0", "from": "--report"}
    assert data["upstream_fixes"] is None or isinstance(data["upstream_fixes"]["fixes"], list)


def test_upstream_fixes_after_the_users_release_come_with_the_planner_line() -> None:
    """DeepSpeed refused its own CPU Lion optimizer under ZeRO-Offload until 0.17.6 (deepspeedai/DeepSpeed#7531)."""
    message = (
        "deepspeed.runtime.zero.utils.ZeRORuntimeException: You are using ZeRO-Offload with a client provided "
        "optimizer (<class 'deepspeed.ops.lion.cpu_lion.DeepSpeedCPULion'>) which in most cases will yield poor "
        "performance."
    )
    done = _run([message, "--release", "deepspeed==0.17.2", "--json"])
    fixes = json.loads(done.stdout)["upstream_fixes"]
    assert (fixes["fixes"][0]["package"], fixes["fixes"][0]["release"], fixes["fixes"][0]["pr"]) == (
        "deepspeed",
        "0.17.6",
        7531,
    )
    assert fixes["moves"][0]["command"].endswith("plan_install.py --keep 'deepspeed>=0.17.6'")
    text = _run([message, "--release", "deepspeed==0.17.2"]).stdout
    assert "deepspeed 0.17.6: " in text and len(text) <= 3000
    assert _run([message, "--release", "deepspeed==0.18.0", "--json"]).returncode == 0


def test_no_match_exits_1_with_suggestions() -> None:
    done = _run(["banana smoothie recipe"])
    assert done.returncode == 1 and "no entry matches" in done.stdout and "troubleshooting/README.md" in done.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [([], "give the error text"), (["oom", "--trl", "one.two"], "--trl must be a release number")],
)
def test_bad_input_exits_2_in_one_line(args: List[str], says: str) -> None:
    done = _run(args)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


def test_the_printed_command_runs_as_printed(tmp_path: Path) -> None:
    done = _run(["generation_batch_size (24) must be divisible by num_generations (16)."], cwd=tmp_path)
    command = next(line for line in done.stdout.splitlines() if line.startswith("  Run: ")).split("Run: ", 1)[1]
    assert command.startswith("python3 " + str(SCRIPTS_DIR / "plan_training.py"))
    parts = shlex.split(command.split(" --lint-trl-config")[0])
    ran = subprocess.run([sys.executable, *parts[1:], "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr


@pytest.mark.serial
def test_one_lookup_takes_under_a_third_of_a_second() -> None:
    """Process start to exit, best of five, less a bare interpreter's start (best of five) on the same machine."""

    def best(argv: List[str]) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=False)
            times.append(time.perf_counter() - start)
        return min(times)

    bare = best([sys.executable, "-c", "pass"])
    lookup = best([sys.executable, str(SCRIPT), SOCKET, "--trl", "1.12.0"])
    assert lookup - bare < 0.3, (lookup, bare)
