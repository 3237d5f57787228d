"""The triage's report and text (``scripts/triage/render.py``): commands kept whole, echoes merged by kind, the
excerpt of an unknown failure."""

from __future__ import annotations

from triage import find
from triage.render import _by_kind, command_lines, excerpt


def test_command_lines_continue_with_a_backslash() -> None:
    assert command_lines("nvidia-smi") == ["    nvidia-smi"]
    long = "python3 scripts/check_vllm_server.py " + " ".join(f"--vllm-url http://replica-{i}:8000" for i in range(4))
    lines = command_lines(long)
    assert len(lines) > 1 and all(len(line) <= 100 for line in lines)
    assert all(line.endswith(" \\") for line in lines[:-1])


def test_echoes_merge_by_kind() -> None:
    merged = _by_kind(
        [
            {"kind": "watchdog timeout", "count": 2, "ranks": [0, 1], "text": "a", "first": {}},
            {"kind": "watchdog timeout", "count": 3, "ranks": [2], "text": "b", "first": {}},
            {"kind": "launcher teardown", "count": 1, "ranks": [], "text": "c", "first": {}},
        ]
    )
    assert [(m["kind"], m["count"], m["ranks"], m["messages"]) for m in merged] == [
        ("watchdog timeout", 5, [0, 1, 2], 2),
        ("launcher teardown", 1, [], 1),
    ]


def test_excerpt_starts_at_the_traceback() -> None:
    group = find.Group("s", "ValueError: x", find.FATAL, None)
    group.occurrences.append(find.Occurrence(0, 9, None, None, None, False))
    group.before = ((5, "noise"), (6, "Traceback (most recent call last):"), (7, "  File a"), (8, "    f()"))
    assert [item["line"] for item in excerpt(group)] == [6, 7, 8, 9]
