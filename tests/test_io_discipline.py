"""The reading and output discipline of scripts/: one place each (safe_read, safe_values, safe_output).

- A scan of every script module fails on a direct ``open(``, ``Path.read_text(``/``read_bytes(``/``.open(``,
  ``subprocess``, ``os.system``/``os.popen`` or ``urlopen`` outside the shared helpers.
- The entry scripts write no bytecode, even with ``PYTHONDONTWRITEBYTECODE`` unset.
- Piped into a reader that closes early, each script ends quietly.

The default diagnostic's cost (within 2x a bare metadata scan) is held by
tests/test_check_optional_backends_benchmark.py.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import SCRIPTS_DIR

SHARED = {"common/read.py", "common/values.py", "common/output.py"}
# Modules not yet moved onto the shared helpers: each must fail the scan (strict xfail) until it is.
NOT_YET: Dict[str, str] = {}
FORBIDDEN_ATTRIBUTE_CALLS = {"read_text", "read_bytes", "open", "urlopen", "system", "popen", "fdopen"}
FORBIDDEN_MODULES = {"subprocess"}


def direct_io(path: Path) -> List[str]:
    """Lines of ``path`` that read a file, run a process or open a URL without the shared helpers."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: List[str] = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name and (name.split(".")[0] in FORBIDDEN_MODULES or name == "urlopen"):
                    found.append(f"{where}: imports {name}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in {"open", "urlopen"}:
                found.append(f"{where}: {func.id}(...)")
            elif isinstance(func, ast.Attribute) and func.attr in FORBIDDEN_ATTRIBUTE_CALLS:
                receiver = func.value.id if isinstance(func.value, ast.Name) else ""
                if receiver not in {"safe_read", "platform"} and not (func.attr == "open" and receiver == "opener"):
                    found.append(f"{where}: .{func.attr}(...)")
    return found


def _modules() -> List:
    params = []
    for path in sorted(SCRIPTS_DIR.rglob("*.py")):
        name = path.relative_to(SCRIPTS_DIR).as_posix()
        if name in SHARED:
            continue
        marks = [pytest.mark.xfail(reason=NOT_YET[name], strict=True)] if name in NOT_YET else []
        params.append(pytest.param(path, id=name, marks=marks))
    return params


@pytest.mark.parametrize("path", _modules())
def test_no_direct_io_outside_the_shared_helpers(path: Path) -> None:
    found = direct_io(path)
    assert not found, "\n".join(found)


def test_the_scan_sees_each_forbidden_form(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import subprocess\nfrom urllib.request import urlopen\nopen('x')\nPath('x').read_text()\n"
        "os.system('x')\nurlopen('u')\nsafe_read.read_text('ok')\n",
        encoding="utf-8",
    )
    found = direct_io(sample)
    assert len(found) == 6, found


ENTRY = {
    "check_optional_backends.py": ["--json"],
    "check_vllm_server.py": ["--vllm-url", "http://127.0.0.1:1", "--deadline", "2"],
    "plan_training.py": ["--params", "7B", "--gpus", "1", "--gpu-memory-gib", "80"],
    "triage_log.py": [str(Path(__file__).parent / "fixtures" / "triage" / "oom-8-ranks.log")],
    "find_fix.py": ["weight sync hangs at the first step", "--trl", "1.12.0"],
}


def test_scripts_write_no_bytecode(tmp_path: Path) -> None:
    """Each entry script, run from a copy of scripts/ with PYTHONDONTWRITEBYTECODE unset, leaves no __pycache__."""
    copy = tmp_path / "scripts"
    shutil.copytree(SCRIPTS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["NO_PROXY"] = "*"
    for script, args in sorted(ENTRY.items()):
        subprocess.run([sys.executable, str(copy / script), *args], capture_output=True, env=env, timeout=60)
        left = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("__pycache__"))
        assert not left, (script, left)


@pytest.mark.parametrize("script", sorted(ENTRY))
def test_a_closed_pipe_ends_quietly(script: str) -> None:
    """The reader is gone before the script writes (the read end is closed at once), so every write fails."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [sys.executable, str(SCRIPTS_DIR / script), *ENTRY[script]],
        stdout=write_end,
        stderr=subprocess.PIPE,
        env={**os.environ, "NO_PROXY": "*"},
    )
    os.close(write_end)
    os.close(read_end)
    _, stderr = process.communicate(timeout=60)
    text = stderr.decode("utf-8", errors="replace")
    assert "Traceback" not in text and "BrokenPipeError" not in text, text[-500:]
    assert text == "", text[-500:]
    assert process.returncode in (0, 1), (process.returncode, text[-300:])


@pytest.mark.parametrize("script", sorted(ENTRY))
def test_entry_scripts_run_main_through_the_shared_runner(script: str) -> None:
    """A crash in any script exits 2 with one line (safe_output.run_cli), never 1, the code of a verdict."""
    tree = ast.parse((SCRIPTS_DIR / script).read_text(encoding="utf-8"))
    guard = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.dump(node.test)]
    assert guard and "run_cli" in ast.dump(guard[0]), f"{script}: __main__ does not call run_cli(main, ...)"
