"""tools/fix_index.py: the range walk on a tiny git repository, the shipped index against recorded
``git tag --contains`` answers, and ``--check``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
import fix_index


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def _commit(repo: Path, path: str, subject: str) -> None:
    file = repo / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(file.read_text() + subject if file.exists() else subject)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", subject)


@pytest.fixture(scope="module")
def tiny_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """main: 0.18 -> #1 -> 0.19.0 -> #2, #3 (branch: cherry-pick of #3 as 0.19.1) -> #4 revert -> 0.20.0 -> #5."""
    repo = tmp_path_factory.mktemp("trl")
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, "trl/core.py", "Start (#0)")
    _git(repo, "tag", "v0.18.0")
    _commit(repo, "trl/trainer/grpo_trainer.py", "Add GRPO speedup (#1)")
    _git(repo, "tag", "v0.19.0")
    _commit(repo, "docs/index.md", "Docs only (#2)")
    _commit(repo, "trl/trainer/sft_trainer.py", "Fix SFT packing crash (#3)")
    _git(repo, "checkout", "-q", "-b", "release", "v0.19.0")
    _commit(repo, "trl/trainer/sft_trainer_fix.py", "Fix SFT packing crash (#3)")
    _git(repo, "tag", "v0.19.1")
    _git(repo, "tag", "v0.20.0rc1")
    _git(repo, "checkout", "-q", "main")
    _commit(repo, "trl/trainer/grpo_trainer.py", 'Revert "Add GRPO speedup (#1)" (#4)')
    _git(repo, "tag", "v0.20.0")
    _commit(repo, "trl/extras/vllm_client.py", "Fix client timeout (#5)")
    return repo / ".git"


def test_the_walk_gives_each_pr_its_first_release_and_keeps_untagged_changes(tiny_repo: Path) -> None:
    meta, rows, changes = fix_index.build_package("trl", str(tiny_repo))
    assert meta["releases"] == ["0.19.0", "0.19.1", "0.20.0"]  # 0.18 before the window, rc not a release
    got = {row[1]: (meta["releases"][row[0]] if row[0] >= 0 else None, row[3], row[4]) for row in rows}
    assert got == {
        1: ("0.19.0", "trainer/grpo_trainer", 0),
        3: ("0.19.1", "trainer/sft_trainer_fix,trainer/sft_trainer", 0),  # the cherry-pick shipped first
        4: ("0.20.0", "trainer/grpo_trainer", [1, "0.19.0"]),
        5: (None, "extras/vllm_client", 0),
    }  # 2 touched docs only; 0 is before the window
    assert len(changes[3]["shas"]) == 2


def test_the_walk_agrees_with_git_tag_contains(tiny_repo: Path) -> None:
    meta, rows, changes = fix_index.build_package("trl", str(tiny_repo))
    samples = fix_index.samples_for("trl", str(tiny_repo), meta, rows, changes, 10)
    assert {(s["pr"], s["tag_contains"]) for s in samples} == {(1, "0.19.0"), (3, "0.19.1"), (4, "0.20.0")}


@pytest.mark.parametrize(
    "subject,ref",
    [
        ('Revert "Add GRPO speedup (#1)" (#4)', 1),
        ("Fix regression introduced by #4521 in DPO (#4600)", 4521),
        ("Reverts #77 and restores the old path (#80)", 77),
        ("Fix regression in SFT (#90)", None),
        ("Fix GRPO crash (#91)", None),
    ],
)
def test_regression_references_are_read_from_the_subject(subject: str, ref: object) -> None:
    assert fix_index.regression_ref(subject) == ref


def test_the_shipped_index_agrees_with_the_recorded_tag_contains_answers() -> None:
    index = fix_index.load(fix_index.DEFAULT_OUTPUT)
    samples: List[dict] = json.loads(fix_index.DEFAULT_SAMPLES.read_text(encoding="utf-8"))
    assert len(samples) >= 20 and len({s["package"] for s in samples}) >= 7
    assert fix_index.check(index, samples) == []
    wrong = [dict(samples[0], tag_contains="0.0.1")]
    assert "disagrees with git tag --contains" in fix_index.check(index, wrong)[0]


def test_check_passes_on_the_committed_index_and_fails_on_a_bad_one(tmp_path: Path) -> None:
    assert fix_index.main(["--check"]) == 0
    bad = tmp_path / "index.json.gz"
    bad.write_bytes(b"nope")
    assert fix_index.main(["--check", "--out", str(bad)]) == 1
    assert fix_index.main(["--repo", "nosuch=/x"]) == 2
