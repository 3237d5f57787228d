"""tools/clients/sandbox.py: the checkout snapshot holds what a fresh clone holds; homes are fresh and quiet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))

from clients import pins
from clients.sandbox import Home, install_clients, snapshot_checkout


def test_snapshot_keeps_tracked_and_new_files_and_leaves_ignored_ones(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run([*git, "init", "-q"], check=True)
    (checkout / ".gitignore").write_text(".venv/\n")
    (checkout / "SKILL.md").write_text("tracked")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    (checkout / "new.md").write_text("untracked, not ignored")
    (checkout / ".venv").mkdir()
    (checkout / ".venv/big").write_text("ignored")
    snapshot = snapshot_checkout(checkout, tmp_path / "out")
    files = sorted(
        p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file() and ".git/" not in p.as_posix()
    )
    assert files == [".gitignore", "SKILL.md", "new.md"]


def test_a_home_is_empty_and_drops_account_variables(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-real")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real")
    home = Home(tmp_path, tmp_path / "bin")
    env = home.env()
    assert env["HOME"] == str(home.path) and [p.name for p in home.path.iterdir()] == ["work"]
    assert "ANTHROPIC_API_KEY" not in env and "OPENAI_API_KEY" not in env
    assert env["DO_NOT_TRACK"] == "1" and env["PATH"].startswith(str(tmp_path / "bin"))


def test_only_the_clients_asked_for_are_installed_and_a_prefix_that_holds_them_is_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "npm-calls.txt"
    fake = tmp_path / "bin" / "npm"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    prefix = tmp_path / "prefix"
    codex, claude = (f"{name}@{version}" for name, version in (pins.CLIENTS["codex"], pins.CLIENTS["claude"]))
    node = "{}@{}".format(*pins.NODE)

    install_clients(prefix, {"codex"})
    install_clients(prefix, {"codex"})  # already there: npm is not called again
    install_clients(prefix, {"claude"})  # what the prefix held is installed again with the new client

    calls = log.read_text().splitlines()
    assert len(calls) == 2
    assert codex in calls[0].split() and claude not in calls[0].split() and node not in calls[0].split()
    assert {codex, claude, node} <= set(calls[1].split())
    assert set((prefix / "installed.txt").read_text().split()) == {codex, claude, node}
