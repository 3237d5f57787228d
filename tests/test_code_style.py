"""The repository's Python is ruff clean (lint and format) with the configuration in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT


def _ruff() -> list:
    exe = shutil.which("ruff", path=str(Path(sys.prefix) / "bin")) or shutil.which("ruff")
    if exe is None:
        pytest.fail("ruff is not installed: it is part of the test extra (pip install '.[test]')")
    return [exe]


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_ruff(args):
    result = subprocess.run([*_ruff(), *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
