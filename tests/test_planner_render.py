"""scripts/planner/render.py: text that still pastes when wrapped, and the verdict lines last."""

from __future__ import annotations

from planner.render import fit_plan_text, verdict_block
from planner.verdict import DOES_NOT_FIT, FitVerdict, Verdict


def test_a_long_command_wraps_with_backslashes_between_words() -> None:
    line = "  accelerate launch " + " ".join(f"--option_{i} 'value with spaces {i}'" for i in range(12))
    lines = fit_plan_text(line, width=60).split("\n")
    assert all(len(ln) <= 60 for ln in lines[:-1]) and all(ln.endswith(" \\") for ln in lines[:-1])
    assert " ".join(ln.rstrip("\\").strip() for ln in lines) == line.strip()
    assert all(ln.count("'") % 2 == 0 for ln in lines)  # never inside quotes


def test_a_long_comment_continues_as_a_comment() -> None:
    lines = fit_plan_text("  # " + "word " * 40, width=50).split("\n")
    assert len(lines) > 1 and all(ln.lstrip().startswith("#") for ln in lines)


def test_the_verdict_block_is_the_verdicts_own_lines() -> None:
    verdict = Verdict(FitVerdict(DOES_NOT_FIT, "does not fit: x"), True, ("num-processes",), (), True, True)
    text = verdict_block(verdict)
    assert text.splitlines() == [
        "Verdict: does not fit: x",
        "Lint: errors: num-processes",
        "  warnings: none",
        "Require fit: FAILED (exit 1: does not fit)",
        "Require lint clean: FAILED (lint errors above)",
    ]
    assert verdict.exit_code == 1


def test_floor_lines_name_each_floor_its_meaning_and_the_check_command(capsys) -> None:
    import plan_training as pt

    pt.main(
        ["--params", "70B", "--method", "qlora", "--gpus", "4", "--gpu-memory-gib", "24", "--micro-batch", "1",
         "--trl-version", "1.0.0"]
    )  # fmt: skip
    text = capsys.readouterr().out
    block = " ".join(text.split("feature floors of this path", 1)[1].split("\ncommands", 1)[0].split())
    assert block.startswith("(TRL 1.0.0; qlora, fsdp2, context-parallel):")
    assert "qlora: peft>=0.8.0 (declared by TRL's extra; trl-1.0.0 Requires-Dist, extra peft)" in block
    assert "context-parallel: accelerate>=1.10.0 (read in source;" in block
    assert "fsdp2+qlora: accelerate>=1.7.0 (read in source; accelerate-1.7.0" in block
    assert block.endswith("plan_install.py --want qlora,fsdp2,context-parallel --keep trl==1.0.0")
