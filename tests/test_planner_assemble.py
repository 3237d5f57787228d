"""planner/assemble.py: the one escalation ranking (shared with the skill text) and the smallest changes that fit."""

from __future__ import annotations

import json
import re

import plan_training as pt
from conftest import REPO_ROOT
from planner import assemble as plan_assemble

SKILL = REPO_ROOT / "backend-selection" / "SKILL.md"
MODEL_DIR = REPO_ROOT / "tests" / "fixtures" / "model_configs"


def _skill_steps() -> list:
    text = SKILL.read_text(encoding="utf-8")
    section = text.split("## Escalation order", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. (.+?)(?::|,|$)", section, flags=re.M)


def test_the_skill_and_the_planner_share_one_ranking_with_offload_last():
    steps = _skill_steps()
    positions = [
        next(i for i, step in enumerate(steps) if step.startswith(label)) for _, label, _ in plan_assemble.ESCALATION
    ]
    assert positions == sorted(positions), (steps, plan_assemble.ESCALATION)
    memory_steps = [key for key, _, _ in plan_assemble.ESCALATION]
    assert memory_steps[-1] == "offload"
    assert "planner's ranking" in SKILL.read_text(encoding="utf-8")


def _plan(capsys, *argv: str) -> dict:
    pt.main([*argv, "--json"])
    return json.loads(capsys.readouterr().out)


def test_nothing_fits_ends_with_ranked_smallest_changes_with_numbers(capsys):
    """LoRA DPO of Llama-3.1-8B on one 24 GB card: float32 LoRA at micro-batch 8 does not fit; bf16 weights with a
    smaller micro-batch does, and offload comes after it."""
    data = _plan(
        capsys, "--model-config", str(MODEL_DIR / "llama-3.1-8b" / "config.json"), "--method", "lora",
        "--trainer", "dpo", "--gpus", "1", "--gpu-memory-gib", "24", "--seq-len", "1024",
    )  # fmt: skip
    assert data["recommendation"] is None
    changes = data["smallest_changes"]
    assert changes and all(c["per_gpu_text"].endswith("%)") for c in changes)
    ranks = [plan_assemble.STEP_RANK[c["step"]] for c in changes]
    assert ranks == sorted(ranks)
    first_fit = next(c for c in changes if c["fits"])
    assert "--model-dtype bfloat16" in first_fit["change"] and "--micro-batch" in first_fit["change"]
    assert first_fit["candidate"]["per_gpu_band_gib"]["high"] <= 24 * 0.9
    offload = [i for i, c in enumerate(changes) if c["step"] == "offload"]
    assert offload and min(offload) > changes.index(first_fit)
    trl = next(c["command"] for c in data["commands"] if " trl " in f" {c['command']}")
    assert "--dtype bfloat16" in trl and "--per_device_train_batch_size 1 --gradient_accumulation_steps 8" in trl


def test_micro_batch_one_or_qlora_rank_above_single_gpu_offload(capsys):
    data = _plan(
        capsys, "--model-config", str(MODEL_DIR / "llama-3.1-8b" / "config.json"), "--method", "lora",
        "--model-dtype", "bfloat16", "--trainer", "sft", "--gpus", "1", "--gpu-memory-gib", "24",
        "--micro-batch", "16", "--seq-len", "4096",
    )  # fmt: skip
    assert data["recommendation"] is None
    first_fit = next(c for c in data["smallest_changes"] if c["fits"])
    assert first_fit["step"] != "offload" and first_fit["changes_what_is_trained"]  # the list keeps the skill's order
    # The templates are for the first change that keeps what is trained (here CPU offload), not for QLoRA.
    keeps = next(c for c in data["smallest_changes"] if c["fits"] and not c["changes_what_is_trained"])
    assert data["alternative_if_method_may_change"] == keeps["candidate"]
    assert data["verdict"]["change"] == keeps["change"] and not data["verdict"]["changes_what_is_trained"]
