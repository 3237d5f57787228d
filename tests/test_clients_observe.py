"""tools/clients/observe.py: the installed skill folders a route leaves in a home."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))

from clients.observe import find_copies

NAMES = frozenset({"scaling-and-backends", "backend-selection"})


def skill(folder: Path, name: str, extra: tuple = ()) -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: x\n---\n# {name}\n")
    for relative in extra:
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text("x")
    return folder


def test_finds_top_level_copies_with_files_outside_the_skill_and_links(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = skill(home / ".agents/skills/scaling-and-backends", "scaling-and-backends", ("tests/a.py", "LICENSE"))
    skill(root / "backend-selection", "backend-selection")  # nested: part of the root copy
    skill(home / ".codex/skills/.system/other", "other")  # not ours
    (home / ".claude/skills").mkdir(parents=True)
    (home / ".claude/skills/scaling-and-backends").symlink_to(root)
    (root / "scripts/__pycache__").mkdir(parents=True)
    (root / "scripts/__pycache__/x.pyc").write_text("x")
    copies = {copy.where: copy for copy in find_copies(home, NAMES)}
    assert set(copies) == {"~/.agents/skills/scaling-and-backends", "~/.claude/skills/scaling-and-backends"}
    real = copies["~/.agents/skills/scaling-and-backends"]
    assert (real.files, real.outside, real.linked) == (4, ["tests/"], "")
    assert copies["~/.claude/skills/scaling-and-backends"].linked == "~/.agents/skills/scaling-and-backends"


def test_an_extension_that_holds_the_skill_is_measured_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    extension = home / ".gemini/extensions/scaling-and-backends"
    skill(extension / "skills/scaling-and-backends", "scaling-and-backends")
    (extension / "gemini-extension.json").write_text("{}")
    (extension / "tools").mkdir()
    (extension / "tools/x.py").write_text("x")
    [copy] = find_copies(home, NAMES)
    assert (copy.where, copy.files, copy.outside) == ("~/.gemini/extensions/scaling-and-backends", 3, ["tools/"])
