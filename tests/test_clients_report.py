"""tools/clients/report.py: the verdict per route and the README table."""

from __future__ import annotations

import sys

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))

from clients import pins, report
from clients.observe import Copy, Listing
from clients.report import ClientView, RouteResult


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


def test_a_saved_report_renders_the_same_table() -> None:
    clean = Copy("~/.agents/skills/scaling-and-backends", 66, 2048, [], "")
    results = [result([clean], ["scaling-and-backends"], [])]
    again = report.from_json(report.as_json(results))
    assert report.markdown(again, frozenset()) == report.markdown(results, frozenset())
