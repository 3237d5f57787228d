"""planner/model.py: parameter counts from config.json fixtures and reference shapes, LoRA sizes, the KV cache."""

from __future__ import annotations

import json

import pytest
from planner import model as pm

from conftest import REPO_ROOT

MODEL_DIR = REPO_ROOT / "tests" / "fixtures" / "model_configs"


def fixture_facts(name: str) -> pm.ModelFacts:
    path = MODEL_DIR / name / "config.json"
    return pm.facts_from_config(json.loads(path.read_text()), str(path))


# ---------------------------------------------------------------------------------------------------------------
# Parameter counts from config.json fixtures vs published totals
# ---------------------------------------------------------------------------------------------------------------

FIXTURES = sorted(p.name for p in MODEL_DIR.iterdir() if (p / "config.json").is_file())


def test_at_least_six_model_families_have_fixtures():
    types = {json.loads((MODEL_DIR / n / "config.json").read_text())["model_type"] for n in FIXTURES}
    assert len(FIXTURES) >= 6
    assert {"llama", "qwen2", "qwen3", "mistral", "mixtral", "gemma", "phi3"} <= types
    assert {"deepseek_v2", "deepseek_v3", "gpt_oss", "gemma2", "gemma3_text", "qwen2_moe", "qwen3_moe"} <= types


@pytest.mark.parametrize("name", FIXTURES)
def test_parameter_count_matches_published_total_within_1_percent(name):
    source = json.loads((MODEL_DIR / name / "source.json").read_text())
    facts = fixture_facts(name)
    published = source["published_params"]
    assert abs(facts.total - published) / published <= 0.01, (facts.total, published)
    if "published_active_params" in source:
        # Published active counts have one decimal (12.9B; 3.3B for Qwen3-30B-A3B, whose count is 3.35B); DeepSeek and
        # gpt-oss count them without the input embedding, and DeepSeek-V3 gives whole billions.
        assert facts.is_moe
        active = facts.active - (facts.embedding if source.get("published_active_excludes_embedding") else 0)
        assert abs(active - source["published_active_params"]) < source.get("published_active_precision", 0.1e9)
        assert facts.active < facts.total
    if "published_non_embedding_params" in source:
        non_embedding = facts.total - facts.embedding - facts.lm_head
        assert abs(non_embedding - source["published_non_embedding_params"]) / non_embedding <= 0.01


def test_exact_counts_for_well_known_dense_models():
    # Hugging Face reports these exact totals for the published checkpoints.
    assert fixture_facts("llama-3.1-8b").total == 8_030_261_248
    assert fixture_facts("mistral-7b-v0.1").total == 7_241_732_096
    assert fixture_facts("qwen2.5-7b").total == 7_615_616_512
    assert fixture_facts("gemma-2b").total == 2_506_172_416
    assert fixture_facts("phi-3-mini-4k").total == 3_821_079_552
    assert fixture_facts("llama-3.1-70b").total == 70_553_706_496


def test_tied_embeddings_are_counted_once_and_largest_module_follows_deepspeed():
    qwen3 = fixture_facts("qwen3-0.6b")
    assert qwen3.lm_head == 0 and qwen3.embedding == 151936 * 1024
    # Mixtral's fused expert module (8 x 3 x 4096 x 14336) is larger than its embedding.
    mixtral = fixture_facts("mixtral-8x7b-v0.1")
    assert mixtral.largest_module == 8 * 3 * 4096 * 14336


def test_largest_module_is_searched_over_every_module_not_embedding_and_experts_only():
    # Phi-3-medium: the fused dense gate_up_proj (5120 x 2*17920 = 183.5M) is larger than the embedding (164.2M).
    phi3 = fixture_facts("phi-3-medium-4k")
    assert phi3.embedding == 32064 * 5120
    assert phi3.largest_module == 5120 * 2 * 17920 > phi3.embedding
    # gpt-oss: the experts module holds both fused tensors and their biases.
    gpt_oss = fixture_facts("gpt-oss-20b")
    assert gpt_oss.largest_module == 32 * (2880 * 5760 + 5760 + 2880 * 2880 + 2880)


def test_zero3_figures_follow_the_largest_module():
    from planner import memory as plan_memory

    phi3 = fixture_facts("phi-3-medium-4k")
    low = plan_memory.ds_zero3_model_states(phi3.total, phi3.embedding, 8, 1, True, True)
    right = plan_memory.ds_zero3_model_states(phi3.total, phi3.largest_module, 8, 1, True, True)
    # With parameter offload the GPU holds the largest layer: 4 bytes x 183.5M, not x 164.2M.
    assert right[1] == 4 * 183_500_800 and right[1] > low[1]


def test_mixtral_all_linear_also_trains_fused_experts_and_router_by_hand():
    """PEFT 0.21.2 + transformers 5.24.0: all-linear on Mixtral becomes target_parameters for the fused experts
    (gate_up_proj at rank 2r, down_proj at r; ParamWrapper r*E*(in+out)) and the router weight (r*(E+h))."""
    mixtral = fixture_facts("mixtral-8x7b-v0.1")
    result = pm.resolve_lora(mixtral, 16, "all-linear")
    assert result.modules == ["k_proj", "o_proj", "q_proj", "v_proj"]
    assert result.parameters == ["down_proj", "gate.weight", "gate_up_proj"]
    assert result.rank_pattern == {"gate_up_proj": 32}
    h, i, e, r, layers = 4096, 14336, 8, 16, 32
    attention = r * ((h + h) * 2 + (h + 1024) * 2)
    experts = 2 * r * e * (2 * i + h) + r * e * (h + i)
    router = r * (e + h)
    assert result.trainable == layers * (attention + experts + router) == 359_665_664
    assert result.merged_sync_reason and "merged" in result.merged_sync_reason
    assert any("lora_dropout 0" in note for note in result.notes)
    # The common seven-name list does not name Mixtral's w1/w2/w3: attention only, and the rest is reported.
    seven = pm.resolve_lora(mixtral, 16, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
    assert seven.trainable == layers * attention and seven.parameters == []
    assert seven.unmatched == ["gate_proj", "up_proj", "down_proj"] and seven.merged_sync_reason is None


def test_partial_target_lists_are_accepted_and_none_matching_is_refused_with_peft_message():
    phi3 = fixture_facts("phi-3-mini-4k")
    result = pm.resolve_lora(phi3, 8, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
    assert result.modules == ["down_proj", "o_proj"]
    assert set(result.unmatched) == {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"}
    with pytest.raises(pm.PlanInputError, match=r"Target modules \{'nothing_here'\} not found in the base model"):
        pm.resolve_lora(phi3, 8, "nothing_here")


def test_half_of_a_fused_pair_is_refused_with_peft_message():
    qwen3_moe = fixture_facts("qwen3-30b-a3b")
    with pytest.raises(
        pm.PlanInputError, match="without also targeting up_proj because they are fused into gate_up_proj"
    ):
        pm.resolve_lora(qwen3_moe, 16, "q_proj,gate_proj,down_proj")


def test_unconverted_moe_types_train_only_linear_layers():
    # qwen2_moe is not a key of transformers' conversion table and gpt_oss has no conversion: no target_parameters.
    for name in ("qwen1.5-moe-a2.7b", "gpt-oss-20b"):
        result = pm.resolve_lora(fixture_facts(name), 16, "all-linear")
        assert result.parameters == [] and result.merged_sync_reason is None


def test_other_supported_families_count_like_their_published_totals():
    # Phi-2 (LayerNorm with bias, fc1/fc2, biased lm_head): published 2.78B.
    phi2 = {
        "model_type": "phi",
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 51200,
        "tie_word_embeddings": False,
    }
    assert abs(pm.facts_from_config(phi2, "phi-2").total - 2.78e9) / 2.78e9 <= 0.01
    # Qwen1.5-MoE-A2.7B (qwen2_moe, shared expert): published 14.3B total, 2.7B activated.
    moe = {
        "model_type": "qwen2_moe",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    }
    facts = pm.facts_from_config(moe, "qwen1.5-moe")
    assert abs(facts.total - 14.3e9) / 14.3e9 <= 0.01
    assert abs(facts.active - 2.7e9) < 0.1e9


def test_lora_trainable_formula_for_llama_8b():
    facts = fixture_facts("llama-3.1-8b")
    per_layer = (4096 + 4096) + (4096 + 1024) * 2 + (4096 + 4096) + (4096 + 14336) * 2 + (14336 + 4096)
    assert pm.lora_trainable(facts, 16, "all-linear")[0] == 16 * per_layer * 32
    assert pm.lora_trainable(facts, 8, "q_proj,v_proj")[0] == 8 * ((4096 + 4096) + (4096 + 1024)) * 32


def test_reference_shapes_reproduce_published_totals():
    published = {
        "Qwen2.5-0.5B": 0.49e9,
        "Qwen2.5-1.5B": 1.54e9,
        "Qwen2.5-3B": 3.09e9,
        "Qwen2.5-14B": 14.7e9,
        "Qwen2.5-72B": 72.7e9,
        "Llama-3.1-70B": 70.6e9,
    }
    for cfg in pm.REFERENCE_SHAPES:
        facts = pm.facts_from_config(cfg, "reference")
        if facts.name in published:
            assert abs(facts.total - published[facts.name]) / published[facts.name] <= 0.01, facts.name


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("7B", 7_000_000_000),
        ("0.5b", 500_000_000),
        ("7e9", 7_000_000_000),
        ("500M", 500_000_000),
        ("70.6B", 70_600_000_000),
    ],
)
def test_param_count_parsing(text, value):
    assert pm.parse_param_count(text) == value


def test_kv_cache_formula():
    facts = fixture_facts("llama-3.1-8b")
    assert pm.kv_bytes_per_token(facts, 1) == 2 * 32 * 8 * 128 * 2
    assert pm.kv_bytes_per_token(facts, 2) == 2 * 32 * 4 * 128 * 2
    assert pm.kv_bytes_per_token(fixture_facts("gemma-2b"), 2) == 2 * 18 * 1 * 256 * 2  # 1 KV head: replicated


def test_params_says_it_cannot_count_experts():
    facts = pm.facts_from_params(30_000_000_000)
    assert not facts.is_moe
    assert any("cannot count experts" in note for note in facts.notes)


def test_a_wrapper_whose_text_model_is_supported_points_to_it_and_one_that_is_not_does_not():
    text = json.loads((MODEL_DIR / "gemma-3-1b" / "config.json").read_text())
    with pytest.raises(pm.PlanInputError, match=r"save its text_config block .*'gemma3_text'"):
        pm.facts_from_config({"model_type": "paligemma", "text_config": text}, "x/config.json")
    with pytest.raises(pm.PlanInputError, match=r"needs its vision_config block.*'gemma3_text'"):
        pm.facts_from_config({"model_type": "gemma3", "text_config": text}, "x/config.json")
    # The way out it names works: the text block alone plans.
    assert pm.facts_from_config(text, "text/config.json").total == fixture_facts("gemma-3-1b").total
    # llama4 without its vision_config: the language model alone (llama4_text) is the way out, and it plans.
    maverick = json.loads((MODEL_DIR / "llama-4-maverick-17b-128e-text" / "config.json").read_text())
    with pytest.raises(pm.PlanInputError, match=r"needs its vision_config block.*'llama4_text'"):
        pm.facts_from_config({"model_type": "llama4", "text_config": maverick}, "x/config.json")
    assert pm.facts_from_config(maverick, "text/config.json").total == 400_711_848_960
    other = {"model_type": "qwen3_vl_moe", "text_config": {"model_type": "qwen3_vl_moe_text", "num_experts": 128}}
    with pytest.raises(pm.PlanInputError, match="not supported either; pass --params") as info:
        pm.facts_from_config(other, "x/config.json")
    assert "save its text_config" not in str(info.value)


def test_an_unknown_moe_is_told_params_cannot_count_its_experts():
    with pytest.raises(pm.PlanInputError, match="cannot count its experts"):
        pm.facts_from_config({"model_type": "minimax_m2", "num_local_experts": 256}, "x/config.json")


def test_granitemoe_lora_trains_attention_only_and_says_the_experts_stay_frozen():
    result = pm.resolve_lora(fixture_facts("granite-3.0-1b-a400m"), 16, "all-linear")
    assert result.modules == ["k_proj", "o_proj", "q_proj", "v_proj"] and result.parameters == []
    assert any("stay frozen" in note for note in result.notes)


def test_family_names_come_from_the_tables_and_mark_moe_and_mla():
    names = pm.family_names()
    assert [n.split(" ", 1)[0] for n in names] == sorted({*pm.FAMILIES, *pm.MULTIMODAL})
    assert "gemma3 (vision + language)" in names and "qwen2_5_vl (vision + language)" in names
    assert "deepseek_v3 (MLA + MoE)" in names and "mixtral (MoE)" in names and "llama" in names


def test_wrap_words_packs_greedily_and_indents_continuations():
    assert pm.wrap_words(["aaa", "bb", "cc", "d"], 6) == ["aaa bb", "  cc d"]
    assert pm.wrap_words(["a-very-long-word", "x"], 5) == ["a-very-long-word", "  x"]
    assert pm.wrap_words([], 10) == []


# ---------------------------------------------------------------------------------------------------------------
# Vision-language models: the vision tower and projector counted (transformers 5.24.0 meta-device totals)
# ---------------------------------------------------------------------------------------------------------------


def test_vision_language_models_count_their_vision_tower_exactly():
    gemma3 = fixture_facts("gemma-3-4b-it")  # Gemma3ForConditionalGeneration: SigLIP tower + projector
    assert gemma3.total == 4_300_079_472 and gemma3.largest_module == 262208 * 2560
    # The published config names few text fields: Gemma3TextConfig's defaults give 8 heads, 4 KV heads, head_dim 256.
    assert (gemma3.heads, gemma3.kv_heads, gemma3.head_dim, gemma3.vocab, gemma3.lm_head) == (8, 4, 256, 262208, 0)
    assert gemma3.layer_windows.count(None) == 34 // 6 and gemma3.layer_windows[0] == 1024
    qwen = fixture_facts("qwen2.5-vl-7b-instruct")  # flat Qwen2 text fields + a vision_config
    assert qwen.total == 8_292_166_656 and qwen.lm_head == 152064 * 3584
    tower = qwen.total - fixture_facts("qwen2.5-7b").total
    assert tower == 1_505_280 + 630_470_400 + 44_574_464  # patch embedding, 32 blocks, merger
    assert any("vision tower and projector" in note for note in qwen.notes)


def test_llama4_counts_its_vision_tower_adapter_and_projector():
    scout = fixture_facts("llama-4-scout-17b-16e-instruct")  # Llama4ForConditionalGeneration, meta device
    assert scout.total == 108_641_793_536 and scout.model_type == "llama4"
    assert scout.largest_module == 16 * 3 * 5120 * 8192  # one layer's fused experts, above any vision module
    lora = pm.resolve_lora(scout, 16, "all-linear")
    assert {"linear", "linear_1", "fc1", "fc2", "router"} <= set(lora.modules) and lora.trainable == 74_034_368


def test_lora_all_linear_on_a_vision_language_model_trains_the_towers_linears_as_peft_does():
    result = pm.resolve_lora(fixture_facts("qwen2.5-vl-7b-instruct"), 16, "all-linear")
    assert {"qkv", "proj", "0", "2"} <= set(result.modules)  # vision blocks and the merger, as PEFT resolves them
    assert result.trainable == 51_824_640  # PEFT 0.21.2 on the meta model (tests/fixtures/peft_parity.json)
    text_only = pm.resolve_lora(fixture_facts("qwen2.5-7b"), 16, "all-linear").trainable
    assert result.trainable - text_only == 11_454_464  # the tower's share
    gemma3 = pm.resolve_lora(fixture_facts("gemma-3-4b-it"), 16, "all-linear")
    assert {"fc1", "fc2", "out_proj"} <= set(gemma3.modules)
    assert any("vision tower's Linears too" in note for note in fixture_facts("gemma-3-4b-it").notes)


def test_a_vision_config_with_siglips_pooling_head_is_refused_with_the_setting_to_use():
    config = json.loads((MODEL_DIR / "gemma-3-4b-it" / "config.json").read_text())
    config["vision_config"].pop("vision_use_head")  # SigLIP's default is true; Gemma 3 checkpoints set false
    with pytest.raises(pm.PlanInputError, match="vision_use_head"):
        pm.facts_from_config(config, "x/config.json")


def test_llama4_text_counts_interleaved_moe_layers_a_linear_router_and_a_shared_expert():
    """Totals from transformers 5.24.0 on the meta device (Llama4ForCausalLM, recorded at dev time): Scout's text
    model (16 experts on every layer) and Maverick's (128 experts on every second layer, dense layers of 16384)."""
    scout = {**json.loads((MODEL_DIR / "llama-4-maverick-17b-128e-text" / "config.json").read_text())}
    scout.update(num_local_experts=16, interleave_moe_layer_step=1, use_qk_norm=True)
    facts = pm.facts_from_config(scout, "scout/config.json")
    assert facts.total == 107_769_861_120 and facts.mlp_width == 0 and facts.expert_width == 8192
    assert facts.largest_module == 16 * 3 * 5120 * 8192  # the fused experts of one layer
    assert abs(facts.active - 17e9) < 0.5e9  # "17B active"
    maverick = fixture_facts("llama-4-maverick-17b-128e-text")
    assert maverick.total == 400_711_848_960 and maverick.mlp_width == 16384
    assert maverick.largest_module == 128 * 3 * 5120 * 8192
    # The router is an nn.Linear subclass: LoRA's all-linear takes it, 4-bit quantization does not.
    lora = pm.resolve_lora(maverick, 16, "all-linear")
    assert "router" in lora.modules and lora.parameters == []
    assert any("stay frozen" in note for note in lora.notes)


def test_qwen3_next_counts_its_gated_deltanet_layers_and_refuses_vllm_sizing_with_a_way_out(capsys):
    """Qwen3-Next-80B-A3B: 36 Gated DeltaNet layers and 12 gated-attention layers, 512 experts; the total equals
    transformers 5.24.0 on the meta device. vLLM's paging of its recurrent state is not modelled, so a vLLM mode is
    refused, and the way out it names (--vllm-mode none) plans."""
    import plan_training as pt

    facts = fixture_facts("qwen3-next-80b-a3b")
    assert facts.total == 79_674_391_296 and facts.largest_module == 512 * 3 * 2048 * 512
    by_path = {lin.path: lin for lin in facts.linears}
    assert by_path["linear_attn.in_proj_qkvz"].layers == 36 and by_path["self_attn.q_proj"].layers == 12
    assert by_path["self_attn.q_proj"].fan_out == 2 * 16 * 256  # the output gate rides on q_proj
    config = str(MODEL_DIR / "qwen3-next-80b-a3b" / "config.json")
    argv = ["--model-config", config, "--method", "qlora", "--trainer", "grpo", "--gpus", "2", "--gpu-memory-gib", "80"]
    assert pt.main([*argv, "--vllm-mode", "server"]) == 2
    err = capsys.readouterr().err
    assert "Gated DeltaNet" in err and "--vllm-mode none" in err
    assert pt.main([*argv, "--vllm-mode", "none", "--micro-batch", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any("Gated DeltaNet" in note for note in data["notes"])
