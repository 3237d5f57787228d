"""fixes/render.py: one line per fix, the move with its install planner line, coverage notes; 100 columns."""

from __future__ import annotations

from fixes.render import text_lines
from fixes.search import search

from fixes_helpers import tiny_index


def test_lines_name_each_fix_the_move_and_the_command() -> None:
    lines = text_lines(
        search(tiny_index(), "ZeRO-Offload CPULion partition hooks", {"deepspeed": "0.17.1"}, limit=1, min_score=0)
    )
    assert lines == [
        "  deepspeed 0.17.2: Fix ZeRO-Offload CPULion optimizer check (#101)",
        "  move deepspeed to 0.17.3 or later (you have 0.17.1):",
        "    not 0.17.1..0.17.3 (#100, fixed by #102): the regression lives there",
        "    python3 scripts/plan_install.py --keep 'deepspeed>=0.17.3'",
    ]


def test_nothing_matched_gives_no_lines_and_a_note_is_kept_within_width() -> None:
    assert text_lines(search(tiny_index(), "nothing here", {})) == []
    lines = text_lines(search(tiny_index(), "GRPOTrainer", {"trl": "9.0.0"}), width=40)
    assert len(lines) == 1 and len(lines[0]) == 40 and lines[0].endswith("…")


def test_summary_is_plain_data_with_runnable_commands_or_the_note_alone() -> None:
    from fixes.render import summary

    found = summary(
        search(tiny_index(), "ZeRO-Offload CPULion partition hooks", {"deepspeed": "0.17.1"}, limit=1, min_score=0)
    )
    assert found is not None and found["fixes"][0]["pr"] == 101 and found["moves"][0]["release"] == "0.17.3"
    command = found["moves"][0]["command"]
    assert command.startswith("python3 /") and command.endswith("plan_install.py --keep 'deepspeed>=0.17.3'")
    assert summary(search(tiny_index(), "nothing here", {})) is None
    newer = summary(search(tiny_index(), "GRPOTrainer", {"trl": "9.0.0"}))
    assert newer is not None and newer["fixes"] == [] and "newer than the index" in newer["lines"][0]


def test_without_the_users_release_the_lines_say_so_and_the_move_is_conditional() -> None:
    lines = text_lines(search(tiny_index(), "ZeRO-Offload CPULion partition hooks", {}, limit=1, min_score=0))
    moves = [line for line in lines if line.strip().startswith("move deepspeed to")]
    assert moves and moves[0].endswith("or later if yours is older:")
    assert any("no deepspeed release given" in line for line in lines) and max(len(line) for line in lines) <= 100
