"""Which Python should run the diagnostic: the one that will run training.

A report made by an interpreter without torch while a virtual or conda environment is active (``VIRTUAL_ENV``,
``CONDA_PREFIX``) or sits in the working folder (``.venv``, ``venv``) describes the wrong environment: its
"torch is not installed" and its ``pip install`` advice point at an interpreter training never uses. This module
finds that case and names the interpreter to use instead.

Gather (``gather_interpreter_facts``) reads the environment variables, the working folder and each candidate
environment's ``site-packages`` listing; it imports nothing, runs nothing, opens no socket and writes nothing.
Judge (``judge_interpreter``) is pure. Render (``interpreter_hint_line``, ``interpreter_hint_json``) formats the
verdict for the text report and the ``--json`` report (``interpreter`` field).
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Callable, List, Mapping, NamedTuple, Optional, Tuple

# Environment folders looked for in the working folder, in this order.
CWD_ENV_NAMES = (".venv", "venv")


class EnvCandidate(NamedTuple):
    source: str  # "VIRTUAL_ENV", "CONDA_PREFIX", "./.venv" or "./venv"
    prefix: str  # the environment's root folder, absolute
    python: Optional[str]  # its interpreter, absolute; None when the folder holds none
    has_torch: bool
    is_current: bool  # the environment of the interpreter running this report


class InterpreterFacts(NamedTuple):
    executable: str
    prefix: str
    has_torch: bool
    candidates: Tuple[EnvCandidate, ...] = ()
    cwd: str = ""
    home: str = ""


class InterpreterVerdict(NamedTuple):
    suggested: Optional[EnvCandidate]  # None: this interpreter is the right one (or there is nothing better)
    message: Optional[str]


# ======================================================================================================================
# Gather
# ======================================================================================================================


def env_python(prefix: str) -> Optional[str]:
    """The interpreter of the environment rooted at ``prefix`` (POSIX ``bin/``, Windows ``Scripts/`` or root)."""
    for relative in ("bin/python", "bin/python3", "Scripts/python.exe", "python.exe"):
        candidate = os.path.join(os.fspath(prefix), *relative.split("/"))
        if _runnable(candidate, windows=relative.endswith(".exe")):
            return candidate
    return None


def _runnable(path: str, windows: bool) -> bool:
    """A file that could be an interpreter: a regular file (a link to one counts), not empty, and executable
    (on Windows the execute bit does not exist). A 0-byte or non-executable ``bin/python`` is never suggested."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return False
    return windows or os.access(path, os.X_OK)


def _site_dirs(prefix: str) -> List[str]:
    """``lib*/python*/site-packages`` and ``Lib/site-packages`` under ``prefix``, from directory listings."""
    found = []
    for lib in ("lib", "lib64"):
        try:
            names = sorted(os.listdir(os.path.join(prefix, lib)))
        except OSError:
            continue
        found += [os.path.join(prefix, lib, name, "site-packages") for name in names if name.startswith("python")]
    found.append(os.path.join(prefix, "Lib", "site-packages"))
    return found


def env_has_torch(prefix: str) -> bool:
    """True when the environment's ``site-packages`` holds a ``torch`` package (read as a listing, not imported)."""
    prefix = os.fspath(prefix)
    return any(os.path.isfile(os.path.join(site, "torch", "__init__.py")) for site in _site_dirs(prefix))


def _same_folder(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, TypeError):
        return False


def _runs_from(root: str, executable: str) -> bool:
    """True when ``executable`` sits in the environment's own ``bin``/``Scripts`` folder (not resolved: a venv's
    interpreter is a link to the base one). This catches the running venv even when ``sys.prefix`` does not
    (``python -S`` leaves it at the base installation)."""
    if not executable:
        return False
    folder = os.path.dirname(executable)
    return any(_same_folder(folder, os.path.join(root, name)) for name in ("bin", "Scripts")) or _same_folder(
        folder, root
    )


def gather_interpreter_facts(
    has_torch: bool,
    environ: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    prefix: Optional[str] = None,
    executable: Optional[str] = None,
) -> InterpreterFacts:
    """Facts about this interpreter and the environments that may be the training one.

    ``has_torch`` is whether this interpreter can import torch, as the caller determined it (the diagnostic reads
    it from the installed distributions; nothing is imported here).
    """
    environ = os.environ if environ is None else environ
    cwd = os.getcwd() if cwd is None else os.fspath(cwd)
    current_prefix = os.fspath(sys.prefix if prefix is None else prefix)
    current_executable = sys.executable if executable is None else executable
    sources: List[Tuple[str, str]] = []
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        value = environ.get(variable, "").strip()
        if value:
            sources.append((variable, value))
    sources += [(f"./{name}", os.path.join(cwd, name)) for name in CWD_ENV_NAMES]
    candidates: List[EnvCandidate] = []
    seen: List[str] = []
    for source, root in sources:
        if not os.path.isdir(root) or any(_same_folder(root, other) for other in seen):
            continue
        seen.append(root)
        python = env_python(root)
        candidates.append(
            EnvCandidate(
                source=source,
                prefix=os.path.abspath(root),
                python=os.path.abspath(python) if python is not None else None,
                has_torch=env_has_torch(root),
                is_current=_same_folder(root, current_prefix) or _runs_from(root, current_executable),
            )
        )
    return InterpreterFacts(
        executable=current_executable,
        prefix=current_prefix,
        has_torch=has_torch,
        candidates=tuple(candidates),
        cwd=os.path.abspath(cwd),
        home=environ.get("HOME", ""),
    )


# ======================================================================================================================
# Judge
# ======================================================================================================================


def judge_interpreter(facts: InterpreterFacts) -> InterpreterVerdict:
    """Name another interpreter only when this one has no torch and an environment other than this one is there.

    A candidate that has torch wins over one that does not; among equals the order is ``VIRTUAL_ENV``,
    ``CONDA_PREFIX``, ``./.venv``, ``./venv``. A folder without an interpreter is never suggested.
    """
    if facts.has_torch:
        return InterpreterVerdict(None, None)
    others = [c for c in facts.candidates if not c.is_current and c.python is not None]
    if not others:
        return InterpreterVerdict(None, None)
    best = next((c for c in others if c.has_torch), others[0])
    where = "is active" if best.source in ("VIRTUAL_ENV", "CONDA_PREFIX") else "is in the working folder"
    python = display_path(best.python or "", facts)
    torch_note = "it has torch" if best.has_torch else "it has no torch either"
    message = (
        f"this interpreter ({display_path(facts.executable, facts)}) has no torch, but an environment {where} "
        f"({best.source}; {torch_note}): run the diagnostic with {python} instead"
    )
    return InterpreterVerdict(best, message)


# ======================================================================================================================
# Render
# ======================================================================================================================


def display_path(path: str, facts: InterpreterFacts) -> str:
    """A copyable short form: relative to the working folder when under it, ``~/`` when under the home folder."""
    if not path:
        return path
    for base, shown in ((facts.cwd, "."), (facts.home, "~")):
        if base and (path == base or path.startswith(base.rstrip(os.sep) + os.sep)):
            rest = path[len(base.rstrip(os.sep)) + 1 :]
            return f"{shown}/{rest}" if rest else shown
    return path


def interpreter_hint_line(verdict: InterpreterVerdict) -> Optional[str]:
    """One line for the top of the text report, or None when there is nothing to say."""
    return f"Interpreter: {verdict.message}" if verdict.message else None


def interpreter_hint_json(
    facts: InterpreterFacts, verdict: InterpreterVerdict, mask: Callable[[str], str] = str
) -> dict:
    """The ``interpreter`` object of the ``--json`` report; ``mask`` shortens paths (the report's home masking)."""

    def shown(path: Optional[str]) -> Optional[str]:
        return mask(path) if path else path

    return {
        "executable": shown(facts.executable),
        "prefix": shown(facts.prefix),
        "has_torch": facts.has_torch,
        "environments": [
            {
                "source": c.source,
                "prefix": shown(c.prefix),
                "python": shown(c.python),
                "has_torch": c.has_torch,
                "is_current": c.is_current,
            }
            for c in facts.candidates
        ],
        "suggested_python": shown(verdict.suggested.python) if verdict.suggested else None,
        "message": verdict.message,
    }
