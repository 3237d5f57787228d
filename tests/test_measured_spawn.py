"""tests/measured_spawn.py reports the command's own peak memory, not the (large) parent's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SPAWNER = Path(__file__).resolve().parent / "measured_spawn.py"
BALLAST_MIB = 300


def _ballast() -> bytearray:
    block = bytearray(BALLAST_MIB * 2**20)
    block[::4096] = b"\x01" * len(block[::4096])  # touch every page so it counts as resident
    return block


def test_a_direct_child_inherits_the_parents_peak_but_a_spawned_one_does_not(tmp_path: Path) -> None:
    ballast = _ballast()
    direct = subprocess.Popen([sys.executable, "-S", "-c", "pass"])
    _, _, usage = os.wait4(direct.pid, 0)
    rss_file = tmp_path / "rss"
    code = subprocess.call(
        [sys.executable, "-S", "-I", str(SPAWNER), str(rss_file), str(2**31), sys.executable, "-S", "-c", "pass"]
    )
    del ballast
    assert code == 0
    assert usage.ru_maxrss * 1024 > BALLAST_MIB * 2**20  # the kernel behaviour the spawner exists for
    assert int(rss_file.read_text()) < 100 * 2**20


def test_the_exit_code_the_signal_and_the_address_limit_pass_through(tmp_path: Path) -> None:
    rss_file = tmp_path / "rss"
    spawn = [sys.executable, "-S", "-I", str(SPAWNER), str(rss_file), str(2**31), sys.executable, "-S", "-c"]
    assert subprocess.call([*spawn, "raise SystemExit(7)"]) == 7
    assert subprocess.call([*spawn, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]) == -9
    limit = subprocess.run(
        [*spawn, "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(limit.stdout) == 2**31
