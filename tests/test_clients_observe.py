"""tools/clients/observe.py, routes.py and report.py: installed copies, warning lines and the verdict per route."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))

from clients import pins, report
from clients.observe import Copy, Listing, find_copies
from clients.report import ClientView, RouteResult
from clients.routes import warnings
from clients.sandbox import Ran

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


def test_warnings_keep_client_findings_and_drop_sandbox_noise_and_quoted_descriptions(tmp_path: Path) -> None:
    output = "\n".join(
        [
            "WARNING: proceeding, even though we could not create PATH aliases",
            "\u26a0 Found 1 warning:",
            "",
            "  \u276f author: No author information provided",
            "* troubleshooting: Use when a scaled TRL training run fails, hangs",
            f"Configuration file not found at {tmp_path}/gemini-extension.json",
        ]
    )
    found = warnings([Ran(["gemini", "extensions", "install"], 1, output, "")], tmp_path)
    assert found == [
        "\u26a0 author: No author information provided",
        "Configuration file not found at <repo>/gemini-extension.json",
        "exit 1: gemini extensions install",
    ]


def result(copies: list, registered: list, visible: list, client: str = "codex") -> RouteResult:
    view = ClientView(client, Listing(registered, visible, []))
    return RouteResult("tool-codex", client, "python3 tools/install_skill.py", copies, [view], [], False)


def test_a_route_is_right_only_with_one_named_hidden_skill_and_only_skill_files() -> None:
    clean = Copy("~/.agents/skills/scaling-and-backends", 66, 1, [], "")
    assert report.problems(result([clean], ["scaling-and-backends"], [])) == []
    assert report.problems(result([clean], ["scaling-and-backends:scaling-and-backends"], [], "claude")) == []
    four = ["backend-selection", "scaling-and-backends", "troubleshooting", "vllm-reference"]
    assert report.problems(result([clean], four, [])) == ["Codex registers 4: " + ", ".join(four)]
    assert report.problems(result([clean], ["scaling-and-backends"], ["scaling-and-backends"])) == [
        "Codex shows the model scaling-and-backends"
    ]
    # Gemini CLI has no invocation setting: a model-visible skill is reported, not counted against the route.
    assert report.problems(result([clean], ["scaling-and-backends"], ["scaling-and-backends"], "gemini")) == []
    dirty = clean._replace(outside=["tests/", "tools/"])
    assert report.problems(result([dirty], ["scaling-and-backends"], [])) == [
        "~/.agents/skills/scaling-and-backends: 2 entries outside the skill"
    ]


def test_the_markdown_table_names_the_pinned_versions_and_date() -> None:
    clean = Copy("~/.agents/skills/scaling-and-backends", 66, 2048, [], "")
    table = report.markdown([result([clean], ["scaling-and-backends"], [])], frozenset({"tool-codex"}))
    assert pins.CHECKED in table and pins.versions_line() in table
    assert (
        "| Codex | `python3 tools/install_skill.py` | yes | `~/.agents/skills/scaling-and-backends` (66 files, 2 kB)"
        in table
    )


def test_an_extension_that_holds_the_skill_is_measured_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    extension = home / ".gemini/extensions/scaling-and-backends"
    skill(extension / "skills/scaling-and-backends", "scaling-and-backends")
    (extension / "gemini-extension.json").write_text("{}")
    (extension / "tools").mkdir()
    (extension / "tools/x.py").write_text("x")
    [copy] = find_copies(home, NAMES)
    assert (copy.where, copy.files, copy.outside) == ("~/.gemini/extensions/scaling-and-backends", 3, ["tools/"])
