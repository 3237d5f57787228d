"""Shared paths for the test-suite. Area-specific helpers live next to the tests that use them."""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the shipped scripts must not leave __pycache__ in scripts/

from pathlib import Path  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
SCRIPTS_DIR = SKILL_DIR / "scripts"
# The head of every check_optional_backends.py --json report; a --report file without it is refused.
REPORT_HEAD = {"tool": "check_optional_backends", "schema_version": 1}

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
from typing import Dict, Iterator, List  # noqa: E402

import pytest  # noqa: E402

LOCK_DIR_ENV = "SCALING_SKILL_TEST_LOCK_DIR"


def pytest_configure(config: pytest.Config) -> None:
    # The controller (or a plain run) makes the folder; xdist workers start later and inherit it via the environment.
    if not hasattr(config, "workerinput") and LOCK_DIR_ENV not in os.environ:
        folder = tempfile.mkdtemp(prefix="pytest-serial-")
        os.environ[LOCK_DIR_ENV] = folder
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop(LOCK_DIR_ENV), ignore_errors=True))
        _build_bytecode_cache(Path(folder) / "pycache")


# --------------------------------------------------------------------------------------------------------------
# Bytecode for the script subprocesses. The entry scripts never write bytecode (sys.dont_write_bytecode), so each
# of the suite's hundreds of runs would compile every module of scripts/ again. One cache, built once per session
# outside the source tree and handed to a child as PYTHONPYCACHEPREFIX (with bytecode writing off), lets the child
# read compiled modules instead; its behaviour is the same. Tests of bytecode writing, the timing benchmark and
# other interpreters do not use it (see with_bytecode_cache).
# --------------------------------------------------------------------------------------------------------------

PYCACHE_ENV = "SCALING_SKILL_TEST_PYCACHE"
_TAG = f".{sys.implementation.cache_tag}.pyc"


def _mirror(prefix: Path, source_dir: str) -> Path:
    return prefix / os.path.abspath(source_dir).lstrip(os.sep)


def _build_bytecode_cache(prefix: Path) -> None:
    """Under a prefix, the interpreter looks for every module's bytecode there only, the standard library's too:
    link the standard library's compiled files into the mirror tree, then compile scripts/ into it."""
    import py_compile
    import sysconfig

    roots = {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in ("site-packages", "test", "idlelib", "tkinter", "turtledemo")]
            if os.path.basename(folder) != "__pycache__":
                continue
            target = _mirror(prefix, os.path.dirname(folder))
            target.mkdir(parents=True, exist_ok=True)
            for name in files:
                if name.endswith(_TAG):
                    with contextlib.suppress(OSError):
                        os.symlink(os.path.join(folder, name), target / name)
    for source in SCRIPTS_DIR.rglob("*.py"):
        target = _mirror(prefix, str(source.parent))
        py_compile.compile(str(source), cfile=str(target / (source.stem + _TAG)), doraise=False, quiet=2)
    os.environ[PYCACHE_ENV] = str(prefix)


def with_bytecode_cache(env: Dict[str, str], python: str) -> Dict[str, str]:
    """``env`` plus the session's bytecode cache, for a child run by this interpreter (others have their own tag and
    would find none of their standard library there). Never for tests about bytecode writing or start-up cost."""
    prefix = os.environ.get(PYCACHE_ENV)
    if prefix and os.path.realpath(python) == os.path.realpath(sys.executable):
        env = {**env, "PYTHONPYCACHEPREFIX": prefix, "PYTHONDONTWRITEBYTECODE": "1"}
    return env


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


# --------------------------------------------------------------------------------------------------------------
# The suite itself must not leave bytecode in scripts/: an installed copy of the bundle is made from that folder.
# A run that creates scripts/__pycache__ fails, naming the files (use `-B` for any child that imports scripts/).
# --------------------------------------------------------------------------------------------------------------


def _scripts_bytecode() -> List[str]:
    """Every bytecode file under scripts/ (its packages included), relative to scripts/."""
    return sorted(
        str(p.relative_to(SCRIPTS_DIR)) for folder in SCRIPTS_DIR.rglob("__pycache__") for p in folder.iterdir()
    )


_PYCACHE_BEFORE = bool(_scripts_bytecode())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left = [] if hasattr(session.config, "workerinput") or _PYCACHE_BEFORE else _scripts_bytecode()
    if not left:
        return
    message = f"tests left bytecode under scripts/: {', '.join(left)}"
    session.config.get_terminal_writer().line(message, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
