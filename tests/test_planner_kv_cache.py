"""planner/kv_cache.py: vLLM's KV groups, blocks and sequences that fit, TP sizes it can load, served weights.

tests/fixtures/vllm_kv_parity.json was written by tools/vllm_kv_parity.py: vLLM 0.31.0's own get_kv_cache_groups,
get_kv_cache_config_from_groups and get_max_concurrency_for_kv_cache_config on CPU (the command is in the tool)."""

from __future__ import annotations

import json

import pytest
from planner import kv_cache as kc
from planner import model as pm
from planner import split

from conftest import REPO_ROOT

MODEL_DIR = REPO_ROOT / "tests" / "fixtures" / "model_configs"
PARITY = json.loads((REPO_ROOT / "tests" / "fixtures" / "vllm_kv_parity.json").read_text(encoding="utf-8"))
GIB = 1024**3


def _facts(name: str) -> pm.ModelFacts:
    path = MODEL_DIR / name / "config.json"
    return pm.facts_from_config(json.loads(path.read_text(encoding="utf-8")), str(path))


def test_the_parity_fixture_is_vllm_0_31_0_and_covers_gqa_mla_and_sliding_window():
    assert PARITY["versions"]["vllm"] == "0.31.0"
    facts = {case["model"]: _facts(case["model"]) for case in PARITY["cases"]}
    assert any(f.mla_kv_dim for f in facts.values())  # MLA
    assert any(not f.mla_kv_dim and f.kv_heads < f.heads for f in facts.values())  # GQA
    assert any(any(f.layer_windows) for f in facts.values())  # sliding window
    assert {c["tensor_parallel_size"] for c in PARITY["cases"]} >= {1, 2, 4, 8}


@pytest.mark.parametrize(
    "case", PARITY["cases"], ids=lambda c: f"{c['model']}-tp{c['tensor_parallel_size']}-{c['max_model_len']}"
)
def test_blocks_and_sequences_that_fit_equal_vllms_own_computation(case):
    cap = kc.kv_capacity(
        _facts(case["model"]),
        case["tensor_parallel_size"],
        case["max_model_len"],
        case["available_kv_bytes"],
        case["max_num_batched_tokens"],
    )
    assert cap.num_blocks == case["num_blocks"]
    assert cap.concurrency == pytest.approx(case["max_concurrency"], rel=1e-12)
    assert cap.sequences == int(case["max_concurrency"])
    assert sum(g for _, _, g in cap.groups.kinds) == case["groups"]
    assert cap.groups.group_size == max(case["layers_per_group"])


def test_gemma3_1b_pads_22_sliding_layers_to_24_and_gpt_oss_groups_12_and_12():
    gemma = kc.kv_groups(_facts("gemma-3-1b").layer_windows)
    assert gemma.kinds == [(512, 22, 6), (None, 4, 1)] and gemma.group_size == 4 and gemma.padding_layers == 2
    gpt_oss = kc.kv_groups(_facts("gpt-oss-20b").layer_windows)
    assert gpt_oss.kinds == [(128, 12, 1), (None, 12, 1)] and gpt_oss.padding_layers == 0


def test_sliding_window_models_hold_more_sequences_than_if_every_layer_were_full():
    facts = _facts("gpt-oss-20b")
    hybrid = kc.kv_capacity(facts, 1, 131072, 50 * GIB, 16384)
    facts.layer_windows = [None] * facts.layers
    full = kc.kv_capacity(facts, 1, 131072, 50 * GIB, 16384)
    assert hybrid.sequences > full.sequences * 1.5


def test_in_flight_tokens_are_scoped_by_release():
    # 0.22.0-0.25.1: the window keeps max_num_batched_tokens more; 0.26.0 on: two batches under async scheduling.
    assert kc.in_flight_tokens((0, 25, 1), 4096) == 4096
    assert kc.in_flight_tokens((0, 26, 0), 4096) == 8192
    assert kc.in_flight_tokens((0, 31, 0), 4096, async_scheduling=False) == 4096


def test_phi3_medium_never_gets_tp_4_and_every_tp_choice_is_loadable():
    phi3 = _facts("phi-3-medium-4k")
    assert split.tp_choices(phi3, 8) == [1, 2]
    assert "10 KV heads" in kc.tp_refusal(phi3, 4)
    for name in sorted(p.name for p in MODEL_DIR.iterdir() if (p / "config.json").is_file()):
        facts = _facts(name)
        for tp in split.tp_choices(facts, 16):
            assert facts.heads % tp == 0
            assert facts.mla_kv_dim or (facts.kv_heads % tp == 0 if tp < facts.kv_heads else tp % facts.kv_heads == 0)
            assert not facts.mlp_width or facts.mlp_width % tp == 0
            assert not facts.expert_width or facts.expert_width % tp == 0


def test_gpt_oss_is_served_with_its_mxfp4_experts():
    facts = _facts("gpt-oss-20b")
    assert facts.quantization == "mxfp4"
    served = kc.served_weight_bytes(facts)
    experts = 24 * 32 * (2880 * 5760 + 2880 * 2880)
    assert served == int(experts * 4.25 / 8 + (facts.total - experts) * 2)
    assert 12 * GIB < served < 13.5 * GIB  # the Hub checkpoint is about 13 GiB


def test_overhead_grows_with_batched_tokens_and_the_fit_uses_the_band_upper_edge():
    facts = _facts("llama-3.1-8b")
    small = kc.non_kv_overhead(facts, 1, 4096, 256).total
    large = kc.non_kv_overhead(facts, 1, 16384, 256).total
    assert large > small
    plan = split.size_vllm(facts, "lora", "server", 1, 0.9, 80 * GIB, 8192, 8, False, "test")
    assert plan.overhead == int(kc.non_kv_overhead(facts, 1, 8192, 1024).total * kc.OVERHEAD_BAND[1])
    assert plan.capacity == plan.kv.sequences and plan.kv_per_seq == plan.kv.bytes_per_sequence


def test_served_defaults_follow_trl_and_vllm_batch_tables():
    assert kc.served_defaults("colocate", 80 * GIB) == (4096, 1024)  # TRL passes 4096
    assert kc.served_defaults("server", 80 * GIB) == (8192, 1024)  # vllm serve, API-server table
    assert kc.served_defaults("server", 24 * GIB) == (2048, 256)
    assert kc.served_defaults("server", 180 * GIB) == (16384, 1024)
