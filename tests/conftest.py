"""Shared paths for the test-suite. Area-specific helpers live next to the tests that use them."""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the shipped scripts must not leave __pycache__ in scripts/

from pathlib import Path  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS_DIR = REPO_ROOT / "scripts"

# The shipped scripts are plain files under scripts/ (not a package); make them importable for unit tests.
if str(SCRIPTS_DIR) not in sys.path:
    sys.path.insert(0, str(SCRIPTS_DIR))


# --------------------------------------------------------------------------------------------------------------
# Parallel runs (pytest-xdist): tests marked `serial` measure wall time or a ratio of timings, so they run with the
# suite's other workers paused. Every test holds a shared lock on one file for its whole protocol (setup, which
# includes module fixtures, call and teardown); a serial test holds it exclusively. A gate lock in front keeps the
# exclusive waiter from being starved by workers that release and re-take the shared lock between tests.
# --------------------------------------------------------------------------------------------------------------

import contextlib  # noqa: E402
import fcntl  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
from typing import Iterator  # noqa: E402

import pytest  # noqa: E402

LOCK_DIR_ENV = "SCALING_SKILL_TEST_LOCK_DIR"


def pytest_configure(config: pytest.Config) -> None:
    # The controller (or a plain run) makes the folder; xdist workers start later and inherit it via the environment.
    if not hasattr(config, "workerinput") and LOCK_DIR_ENV not in os.environ:
        os.environ[LOCK_DIR_ENV] = tempfile.mkdtemp(prefix="pytest-serial-")
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop(LOCK_DIR_ENV), ignore_errors=True))


@contextlib.contextmanager
def _suite_lock(exclusive: bool) -> Iterator[None]:
    folder = os.environ.get(LOCK_DIR_ENV)
    if not folder or not os.environ.get("PYTEST_XDIST_WORKER"):  # one process: nothing runs beside the test
        yield
        return
    with open(os.path.join(folder, "gate"), "a+") as gate, open(os.path.join(folder, "lock"), "a+") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: object) -> Iterator[None]:
    with _suite_lock(exclusive=item.get_closest_marker("serial") is not None):
        yield
