"""planner/assemble.py: the one escalation ranking (shared with the skill text) and the smallest changes that fit."""

from __future__ import annotations

import json
import re

import plan_training as pt
import pytest
from planner import assemble as plan_assemble

from conftest import REPO_ROOT, SKILL_DIR

SKILL = SKILL_DIR / "backend-selection" / "README.md"
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
    # QLoRA fits alone but changes what is trained, so the pairs are tried too: bf16 weights with a smaller
    # micro-batch keeps LoRA and is what the templates are for; offload comes after it.
    first_fit = next(c for c in changes if c["fits"] and not c["changes_what_is_trained"])
    assert "--model-dtype bfloat16" in first_fit["change"] and "--micro-batch" in first_fit["change"]
    assert first_fit["candidate"]["per_gpu_gib"] <= 24 * 0.9
    assert data["verdict"]["change"] == first_fit["change"]
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


# Qwen/Qwen3-8B's published architecture values (model card and config: 36 layers, hidden 4096, MLP 12288, 32
# heads, 8 KV heads, head_dim 128, vocabulary 151936, untied embeddings); written here, not copied from the Hub.
QWEN3_8B_CONFIG = {
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "max_position_embeddings": 40960,
}


@pytest.fixture(name="qwen3_8b")
def _qwen3_8b(tmp_path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN3_8B_CONFIG))
    return str(path)


def _long_sft(config: str) -> list:
    return ["--model-config", config, "--trainer", "sft", "--seq-len", "131072", "--micro-batch", "1",
            "--model-dtype", "bfloat16", "--gpus", "8", "--gpu-memory-gib", "80"]  # fmt: skip


def test_128k_sft_on_8_h100_gets_a_context_parallel_change_that_fits(capsys, qwen3_8b):
    """Issue #19: 128k-token SFT of Qwen3-8B on 8 x H100 said 'no single change fits'; CP divides the sequence."""
    data = _plan(capsys, *_long_sft(qwen3_8b))
    assert data["verdict"]["state"] == "fits-with-change"
    assert data["verdict"]["change"].startswith("--cp-size ") and not data["verdict"]["changes_what_is_trained"]
    cp = next(c for c in data["smallest_changes"] if c["change"] == data["verdict"]["change"])
    assert cp["step"] == "kernels" and cp["candidate"]["strategy"] == "fsdp2"
    assert cp["candidate"]["per_gpu_gib"] <= 80 * 0.9
    assert any("parallelism_config_cp_size" in c["note"] for c in data["commands"])
    size = int(data["verdict"]["change"].split()[1])
    asked = _plan(capsys, *_long_sft(qwen3_8b), "--cp-size", str(size))
    assert asked["verdict"]["state"] == "fits" and {c["strategy"] for c in asked["candidates"]} <= {
        "fsdp2",
        "fsdp2-offload",
    }
    # CP divides the activations, not the sharded model states.
    plain = {c["strategy"]: c for c in data["candidates"]}["fsdp2"]
    split = {c["strategy"]: c for c in asked["candidates"]}["fsdp2"]
    assert split["model_states_gib_exact"] == plain["model_states_gib_exact"]
    act = "activations: checkpointed layer inputs"
    ratio = plain["terms_gib"]["approx"][act] / split["terms_gib"]["approx"][act]
    assert ratio == pytest.approx(size, rel=0.01)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--trainer", "grpo", "--cp-size", "2"], "does not support sequence-dim parallelism"),
        (["--trainer", "sft", "--cp-size", "2", "--sp-size", "2"], "mutually exclusive"),
        (["--trainer", "sft", "--sp-size", "3", "--gpus", "3"], "attention heads must divide"),
        (["--trainer", "sft", "--cp-size", "3"], "multiple of it"),
    ],
)
def test_sequence_parallel_sizes_that_cannot_run_are_refused(capsys, qwen3_8b, extra, needle):
    argv = ["--model-config", qwen3_8b, "--gpus", "8", "--gpu-memory-gib", "80", *extra]
    assert pt.main(argv) == 2
    assert needle in capsys.readouterr().err


def test_ulysses_plans_deepspeed_only(capsys, qwen3_8b):
    data = _plan(capsys, *_long_sft(qwen3_8b), "--sp-size", "8")
    assert data["candidates"] and all(c["strategy"].startswith("zero") for c in data["candidates"])


# The path's backend ids (plan_install.py --want), which the command turns into the path's feature floors.


def _goals(capsys, *argv: str) -> list:
    return _plan(capsys, *argv)["feature_floors"]["goals"]


def test_path_goals_name_method_sharding_and_vllm_mode(capsys):
    assert _goals(capsys, "--params", "7B", "--method", "qlora", "--gpus", "1", "--gpu-memory-gib", "24") == ["qlora"]
    grpo = _goals(
        capsys, "--params", "1B", "--method", "lora", "--trainer", "grpo", "--gpus", "4", "--gpu-memory-gib", "80",
        "--vllm-mode", "colocate",
    )  # fmt: skip
    assert grpo[0] == "peft" and grpo[-1] == "vllm-colocate"
    async_lora = _goals(
        capsys, "--params", "7B", "--method", "lora", "--trainer", "async-grpo", "--gpus", "4",
        "--gpu-memory-gib", "80",
    )  # fmt: skip
    assert async_lora[-2:] == ["async-grpo", "async-grpo-lora"] and "vllm-server" not in async_lora


def test_path_goals_follow_the_change_the_templates_are_for(capsys):
    """Nothing fits as asked (TRL 1.0's chunk-free LM head): the goals are those of the chosen change, here
    context parallelism on FSDP2."""
    goals = _goals(
        capsys, "--params", "70B", "--method", "qlora", "--gpus", "4", "--gpu-memory-gib", "24", "--micro-batch", "1",
        "--trl-version", "1.0.0",
    )  # fmt: skip
    assert goals == ["qlora", "fsdp2", "context-parallel"]


def test_path_goals_are_empty_when_nothing_fits(capsys):
    data = _plan(capsys, "--params", "400B", "--gpus", "1", "--gpu-memory-gib", "16", "--host-memory-gib", "8")
    assert data["recommendation"] is None and data["alternative_if_method_may_change"] is None
    assert data["feature_floors"]["goals"] == [] and data["feature_floors"]["check_command"] is None


def _colocate(config: str, tp: int) -> list:
    return ["--model-config", config, "--trainer", "grpo", "--vllm-mode", "colocate", "--vllm-tp", str(tp),
            "--gpus", "8", "--gpu-memory-gib", "80", "--model-dtype", "bfloat16"]  # fmt: skip


def test_colocate_tp_checks_every_rule_vllm_checks_not_only_the_attention_heads(capsys, tmp_path):
    """Issue #19: colocate checked heads % TP only. Phi-3-medium's 40 heads divide by 4, its 10 KV heads neither
    divide by 4 nor divide 4; a model whose heads and KV heads divide but whose MLP width does not is refused too."""
    assert pt.main(_colocate(str(MODEL_DIR / "phi-3-medium-4k" / "config.json"), 4)) == 2
    err = capsys.readouterr().err
    assert "vLLM cannot load this model" in err and "10 KV heads" in err and "TP sizes" in err
    assert "1, 2" in err  # the sizes that load and divide the world size 8
    odd_mlp = {**QWEN3_8B_CONFIG, "intermediate_size": 12290}  # 32 heads and 8 KV heads divide by 4; 12290 does not
    path = tmp_path / "odd_mlp.json"
    path.write_text(json.dumps(odd_mlp))
    assert pt.main(_colocate(str(path), 4)) == 2
    assert "MLP width 12290 is not divisible by 4" in capsys.readouterr().err
    data = _plan(capsys, *_colocate(str(path), 2))
    assert data["vllm"]["tensor_parallel_size"] == 2  # 12290 divides by 2: it plans
