"""Item 5 of issue 13: a step over 2 s shows a progress line on stderr when stderr is a terminal (and only then)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

from conftest import SCRIPTS_DIR
from diagnostic_helpers import add_dist, base_env


def _slow_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    add_dist(site, "accelerate", "1.15.0", module_code="import time\ntime.sleep(2.3)\n")
    return site


def test_a_slow_probe_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    site = _slow_site(tmp_path)
    env = base_env(tmp_path / "home", tmp_path / "bin")
    env["PYTHONPATH"] = str(site)
    argv = [sys.executable, "-S", str(SCRIPTS_DIR / "check_optional_backends.py"), "--probe-imports=accelerate"]
    main_fd, child_fd = os.openpty()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=child_fd)
    os.close(child_fd)
    seen = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main_fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(main_fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    process.communicate(timeout=30)
    os.close(main_fd)
    assert b"gathering facts and running probes... " in seen, seen
    assert seen.endswith(b"\r\x1b[K"), seen[-40:]  # the line is cleared before the report
    # Not on a pipe: tests/test_common_output.py::test_progress_only_on_a_tty_and_only_past_the_threshold.
