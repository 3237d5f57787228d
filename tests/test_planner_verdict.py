"""scripts/planner/verdict.py: one verdict renders the text, --json, --require-fit and the exit code, so they agree
on every case; "fits as asked", "fits only with a change" and "does not fit" have distinct exit codes."""

from __future__ import annotations

import json
import re

import plan_training as pt
import pytest
from planner import verdict as pv

from conftest import REPO_ROOT

MODELS = REPO_ROOT / "tests" / "fixtures" / "model_configs"


def _config(name: str) -> str:
    return str(MODELS / name / "config.json")


# (id, argv, expected state)
CASES = [
    # The PEFT docs' FSDP + QLoRA recipe (70B on 2 x 24 GB, micro-batch 2): only CPU offload fits, as published.
    (
        "qlora-70b-2x24-micro2",
        ["--model-config", _config("llama-3.1-70b"), "--method", "qlora", "--trainer", "sft", "--micro-batch", "2",
         "--gpus", "2", "--gpu-memory-gib", "24"],
        pv.FITS_WITH_CHANGE,
    ),
    # Issue #19: only CPU-offload candidates fit at the upper edge; this printed "Verdict: fits: None (None)" and
    # passed the gate. At the point estimate (the calibrated fit rule) ZeRO-3 / FSDP2 fit as asked.
    (
        "qlora-70b-4x24-micro1",
        ["--model-config", _config("llama-3.1-70b"), "--method", "qlora", "--trainer", "sft", "--micro-batch", "1",
         "--gpus", "4", "--gpu-memory-gib", "24"],
        pv.FITS,
    ),
    (
        "lora-dpo-8b-24gb-micro2",
        ["--model-config", _config("llama-3.1-8b"), "--method", "lora", "--trainer", "dpo", "--micro-batch", "2",
         "--gpus", "1", "--gpu-memory-gib", "24"],
        pv.FITS_WITH_CHANGE,
    ),
    (
        "lora-8b-80gb",
        ["--model-config", _config("llama-3.1-8b"), "--method", "lora", "--model-dtype", "bfloat16",
         "--micro-batch", "1", "--seq-len", "1024", "--gpus", "1", "--gpu-memory-gib", "80"],
        pv.FITS,
    ),
    (
        "grpo-full-7b-4x80-server",
        ["--params", "7B", "--trainer", "grpo", "--gpus", "4", "--gpu-memory-gib", "80", "--vllm-mode", "server"],
        pv.FITS,
    ),
    (
        "full-70b-1x24-host-64",
        ["--params", "70B", "--trainer", "sft", "--gpus", "1", "--gpu-memory-gib", "24", "--host-memory-gib", "64"],
        pv.DOES_NOT_FIT,
    ),
    (
        "grpo-vllm-cannot-hold-a-sequence",
        ["--params", "70B", "--method", "qlora", "--trainer", "grpo", "--gpus", "2", "--gpu-memory-gib", "24",
         "--vllm-mode", "server", "--micro-batch", "1"],
        pv.DOES_NOT_FIT,
    ),
]  # fmt: skip


def _run(capsys, argv: list) -> tuple:
    code = pt.main(argv)
    return code, capsys.readouterr().out


@pytest.mark.parametrize(("argv", "state"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_text_json_exit_code_and_require_fit_agree(capsys, argv, state) -> None:
    code, out = _run(capsys, [*argv, "--json"])
    data = json.loads(out)
    verdict = data["verdict"]
    assert code == 0 and data["exit_code"] == 0  # without a gate every report exits 0
    assert verdict["state"] == state
    assert data["fits"] is (state == pv.FITS)
    assert (data["recommendation"] is not None) is (state == pv.FITS)
    assert verdict["exit_code_with_require_fit"] == pv.FIT_EXIT_CODES[state]
    if state == pv.FITS_WITH_CHANGE:
        named = next(c for c in data["smallest_changes"] if c["change"] == verdict["change"])
        assert named["fits"] and named["candidate"] == data["alternative_if_method_may_change"]
        assert data["commands"], "the change that fits comes with its templates"
    if (state == pv.DOES_NOT_FIT and data["vllm"] is None) or (data["vllm"] or {}).get("fits", True):
        assert state != pv.DOES_NOT_FIT or not any(c["fits"] for c in data["smallest_changes"])

    gated, out = _run(capsys, [*argv, "--json", "--require-fit"])
    assert gated == pv.FIT_EXIT_CODES[state] == json.loads(out)["exit_code"]
    assert json.loads(out)["verdict"] == verdict

    gated_text, text = _run(capsys, [*argv, "--require-fit"])
    assert gated_text == gated
    tail = text[text.index("\nVerdict: ") + 1 :]
    assert "None" not in tail
    first = tail.split("\n", 1)[0]
    assert first.startswith(
        {pv.FITS: "Verdict: fits as asked", pv.FITS_WITH_CHANGE: "Verdict: fits only with a change",
         pv.DOES_NOT_FIT: "Verdict: does not fit"}[state]
    )  # fmt: skip
    require = next(line for line in tail.splitlines() if line.startswith("Require fit:"))
    assert require.startswith("Require fit: met") is (state == pv.FITS)
    if state != pv.FITS:
        assert f"exit {gated}" in require
    if state == pv.FITS_WITH_CHANGE:
        assert verdict["change"].split(" ")[0] in " ".join(tail.split())


@pytest.mark.parametrize(("argv", "state"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_suggestion_list_shows_only_changes_that_fit(capsys, argv, state) -> None:
    _, text = _run(capsys, argv)
    data = json.loads(_run(capsys, [*argv, "--json"])[1])
    listed = re.findall(r"^  \d+\. (.+?): ", text, flags=re.MULTILINE)
    fitting = [c["change"] for c in data["smallest_changes"] if c["fits"]]
    assert listed == fitting
    tried = [c["change"] for c in data["smallest_changes"] if not c["fits"]]
    if tried:
        line = " ".join(text.split("\n  also tried", 1)[1].split("\n  the templates", 1)[0].split())
        assert all(" ".join(label.split()) in line for label in tried)
    else:
        assert "also tried" not in text


def test_the_templates_keep_what_is_trained_when_a_change_that_does_fits(capsys) -> None:
    """LoRA DPO 8B on 24 GB at micro-batch 2: QLoRA and CPU offload both fit; the templates stay LoRA."""
    data = json.loads(_run(capsys, [*CASES[2][1], "--json"])[1])
    fitting = [c for c in data["smallest_changes"] if c["fits"]]
    assert any(c["changes_what_is_trained"] for c in fitting) and any(not c["changes_what_is_trained"] for c in fitting)
    assert data["alternative_if_method_may_change"]["method"] == "lora"
    assert not data["verdict"]["changes_what_is_trained"]


def test_lint_gate_and_fit_gate_together(capsys) -> None:
    """Both gates failing exit 1; the fit gate alone exits 3 for a change."""
    accelerate = REPO_ROOT / "tests" / "fixtures" / "lint" / "num-processes" / "fail" / "accelerate.yaml"
    argv = [*CASES[0][1], "--lint-accelerate-config", str(accelerate)]
    assert _run(capsys, [*argv, "--require-fit"])[0] == pv.EXIT_NEEDS_CHANGE
    code, text = _run(capsys, [*argv, "--require-fit", "--require-lint-clean"])
    assert code == pv.EXIT_FAILED and "Require lint clean: FAILED" in text


def test_help_states_the_exit_codes_the_verdict_uses() -> None:
    text = " ".join(pt.build_parser().format_help().split())
    for code, meaning in (
        (pv.EXIT_OK, "report produced"),
        (pv.EXIT_FAILED, "--require-fit and it does not fit"),
        (pv.EXIT_USAGE, "usage error"),
        (pv.EXIT_NEEDS_CHANGE, "--require-fit and it fits only with the change"),
    ):
        assert f"{code} {meaning}" in text
