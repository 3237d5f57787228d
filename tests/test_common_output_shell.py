"""common/output.py shell_word: a printed interpreter path runs when pasted, ``~/`` included (issue 27)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from common.output import shell_word

PATHS = [
    "~/venv/bin/python",
    "~/my env/bin/python",
    "~/it's here/bin/python",
    "~/$(touch pwned)/bin/python",
    "~",
    "/opt/conda/bin/python3",
    "/opt/my env/bin/python",
    "./.venv/bin/python",
    "python3",
    "~user/bin/python",  # not the home-folder form the scripts print: quoted whole, never expanded
]


def test_each_path_is_one_word_that_the_shell_expands_to_the_path(tmp_path: Path) -> None:
    """Every word goes through a real bash with HOME set to a temporary folder: it reads back as the path, with a
    leading ``~/`` expanded (a quoted '~/...' would reach the shell as a literal tilde and not run)."""
    home = tmp_path / "home"
    home.mkdir()
    script = "; ".join(f"printf '%s\\n' {shell_word(path)}" for path in PATHS)
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        timeout=10,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    expected = [str(home) + path[1:] if path == "~" or path.startswith("~/") else path for path in PATHS]
    assert done.stdout.splitlines() == expected
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    ("path", "word"),
    [
        ("~/venv/bin/python", "~/venv/bin/python"),
        ("~/my env/bin/python", "~/'my env/bin/python'"),
        ("/opt/my env/bin/python", "'/opt/my env/bin/python'"),
        ("~/", "~/"),
    ],
)
def test_safe_paths_stay_as_they_are_and_the_tilde_stays_outside_the_quotes(path: str, word: str) -> None:
    assert shell_word(path) == word
