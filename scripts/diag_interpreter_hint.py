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
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional

# Environment folders looked for in the working folder, in this order.
CWD_ENV_NAMES = (".venv", "venv")


@dataclass(frozen=True)
class EnvCandidate:
    source: str  # "VIRTUAL_ENV", "CONDA_PREFIX", "./.venv" or "./venv"
    prefix: str  # the environment's root folder, absolute
    python: Optional[str]  # its interpreter, absolute; None when the folder holds none
    has_torch: bool
    is_current: bool  # the environment of the interpreter running this report


@dataclass(frozen=True)
class InterpreterFacts:
    executable: str
    prefix: str
    has_torch: bool
    candidates: tuple[EnvCandidate, ...] = field(default_factory=tuple)
    cwd: str = ""
    home: str = ""


@dataclass(frozen=True)
class InterpreterVerdict:
    suggested: Optional[EnvCandidate]  # None: this interpreter is the right one (or there is nothing better)
    message: Optional[str]


# ======================================================================================================================
# Gather
# ======================================================================================================================


def env_python(prefix: Path) -> Optional[Path]:
    """The interpreter of the environment rooted at ``prefix`` (POSIX ``bin/``, Windows ``Scripts/`` or root)."""
    for relative in ("bin/python", "bin/python3", "Scripts/python.exe", "python.exe"):
        candidate = prefix / relative
        if candidate.is_file():
            return candidate
    return None


def env_has_torch(prefix: Path) -> bool:
    """True when the environment's ``site-packages`` holds a ``torch`` package (read as a listing, not imported)."""
    site_dirs = list(prefix.glob("lib/python*/site-packages")) + list(prefix.glob("lib64/python*/site-packages"))
    site_dirs.append(prefix / "Lib" / "site-packages")
    return any((site / "torch" / "__init__.py").is_file() for site in site_dirs)


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _runs_from(root: Path, executable: str) -> bool:
    """True when ``executable`` sits in the environment's own ``bin``/``Scripts`` folder (not resolved: a venv's
    interpreter is a link to the base one). This catches the running venv even when ``sys.prefix`` does not
    (``python -S`` leaves it at the base installation)."""
    if not executable:
        return False
    folder = Path(executable).parent
    return any(_same_folder(folder, root / name) for name in ("bin", "Scripts")) or _same_folder(folder, root)


def gather_interpreter_facts(
    has_torch: bool,
    environ: Optional[Mapping[str, str]] = None,
    cwd: Optional[Path] = None,
    prefix: Optional[str] = None,
    executable: Optional[str] = None,
) -> InterpreterFacts:
    """Facts about this interpreter and the environments that may be the training one.

    ``has_torch`` is whether this interpreter can import torch, as the caller determined it (the diagnostic reads
    it from the installed distributions; nothing is imported here).
    """
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    current_prefix = Path(sys.prefix if prefix is None else prefix)
    current_executable = sys.executable if executable is None else executable
    sources: list[tuple[str, Path]] = []
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        value = environ.get(variable, "").strip()
        if value:
            sources.append((variable, Path(value)))
    sources += [(f"./{name}", cwd / name) for name in CWD_ENV_NAMES]
    candidates: list[EnvCandidate] = []
    seen: list[Path] = []
    for source, root in sources:
        if not root.is_dir() or any(_same_folder(root, other) for other in seen):
            continue
        seen.append(root)
        python = env_python(root)
        candidates.append(
            EnvCandidate(
                source=source,
                prefix=str(root.absolute()),
                python=str(python.absolute()) if python is not None else None,
                has_torch=env_has_torch(root),
                is_current=_same_folder(root, current_prefix) or _runs_from(root, current_executable),
            )
        )
    return InterpreterFacts(
        executable=current_executable,
        prefix=str(current_prefix),
        has_torch=has_torch,
        candidates=tuple(candidates),
        cwd=str(cwd.absolute()),
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
