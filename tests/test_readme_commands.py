"""Every install and example command of README.md runs as printed in a fresh clone (those that need no GPU).

The commands are every fenced ``bash`` block and every inline ``python3 ...`` command of the install section. Each
one runs in a temporary ``git clone`` of this repository with a fresh home; ``<agent>`` stands for each agent in
turn. A command that cannot run here is listed in SKIPPED with the reason, and a new README command that is in
neither list fails the test, so each one gets a decision.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

AGENTS = ("claude", "codex", "cursor", "gemini")
SKIPPED = {
    "python3 -m venv .venv && .venv/bin/python -m pip install": "installs the test extra from PyPI (network)",
    "srun --nodes=$SLURM_JOB_NUM_NODES": "needs a Slurm allocation",
}

# Commands that read files a user has: the test lays down stand-ins first (the triage reads the 8-rank OOM fixture).
TRIAGE_LOG = REPO_ROOT / "tests" / "fixtures" / "triage" / "oom-8-ranks.log"


def lay_down_inputs(command: str, cwd: Path) -> None:
    if command.startswith("python3 skills/scaling-and-backends/scripts/triage_log.py"):
        (cwd / "logs").mkdir(exist_ok=True)
        for rank in range(2):
            (cwd / "logs" / f"rank{rank}.log").write_text(TRIAGE_LOG.read_text(encoding="utf-8"), encoding="utf-8")
        (cwd / "vllm-server.log").write_text("INFO:     Started server process [1]\n", encoding="utf-8")


def readme_commands(text: str) -> list[str]:
    """Fenced bash blocks, then the install section's inline ``python3`` commands, in README order."""
    blocks = [match.group(1).strip() for match in re.finditer(r"```bash\n(.*?)```", text, re.S)]
    section = text.split("\n## Install\n", 1)[1].split("\n### Use it", 1)[0]
    inline = [match.group(1) for match in re.finditer(r"`(python3 [^`]+)`", section)]
    commands: list[str] = []
    for command in [*blocks, *inline]:
        expanded = [command.replace("<agent>", agent) for agent in AGENTS] if "<agent>" in command else [command]
        commands += [line for line in expanded if line not in commands]
    return commands


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("clone") / "scaling-and-backends"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(target)], check=True, capture_output=True)
    return target


def run(command: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    bin_dir = home.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "python3").exists():
        (bin_dir / "python3").symlink_to(sys.executable)  # python3 is this interpreter, as in the README's set-up
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "VLLM_"))}
    env.update(HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_every_readme_command_is_run_or_skipped_for_a_reason(clone: Path) -> None:
    text = (clone / "README.md").read_text(encoding="utf-8")
    commands = readme_commands(text)
    assert len(commands) >= 12, commands
    home = clone.parent / "home"
    home.mkdir()
    copy_home = clone.parent / "copy-home"
    copy_home.mkdir()
    failures = []
    for command in commands:
        if any(command.startswith(prefix) for prefix in SKIPPED):
            continue
        assert "<" not in command, f"README command with a placeholder the test cannot fill: {command}"
        # The plain copy goes into its own home: the tool refuses a folder it did not install, as it should.
        where = copy_home if command.startswith("mkdir -p ~/.claude/skills") else home
        lay_down_inputs(command, clone)
        result = run(command, clone, where)
        if result.returncode != 0:
            failures.append(f"{command!r}: exit {result.returncode}\n{(result.stdout + result.stderr)[-800:]}")
    assert not failures, "\n\n".join(failures)
    # Every skip still matches a README command (no stale entries).
    for prefix in SKIPPED:
        assert any(command.startswith(prefix) for command in commands), f"stale SKIPPED entry: {prefix}"
