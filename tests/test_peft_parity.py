"""The planner's LoRA/QLoRA counts against PEFT itself: tests/fixtures/peft_parity.json was written by
tools/peft_parity.py (meta-device models, transformers 5.x, PEFT 0.21, CPU torch; the command is in the tool).
No torch here: the planner reads the same config.json fixtures and must agree within 0.1%."""

from __future__ import annotations

import json

import pytest
from planner import model as pm

from conftest import REPO_ROOT

PARITY = json.loads((REPO_ROOT / "tests" / "fixtures" / "peft_parity.json").read_text(encoding="utf-8"))
MODEL_DIR = REPO_ROOT / "tests" / "fixtures" / "model_configs"
CASES = [(model, case) for model, entry in sorted(PARITY["models"].items()) for case in sorted(entry["cases"])]
TARGETS = {
    label: (targets if isinstance(targets, str) else ",".join(targets)) for label, targets in PARITY["targets"].items()
}


def _facts(model: str) -> pm.ModelFacts:
    path = MODEL_DIR / model / "config.json"
    return pm.facts_from_config(json.loads(path.read_text(encoding="utf-8")), str(path))


def _close(planned: int, truth: int) -> bool:
    return abs(planned - truth) <= 0.001 * truth


def test_the_fixture_names_its_versions_and_covers_every_model_config():
    versions = PARITY["versions"]
    assert versions["peft"].startswith("0.21.") and versions["transformers"].startswith("5.")
    assert versions["torch"].startswith("2.13.0") and "+cpu" in versions["torch"]
    configs = sorted(p.parent.name for p in MODEL_DIR.glob("*/config.json"))
    assert sorted(PARITY["models"]) == configs
    kinds = {entry["model_type"] for entry in PARITY["models"].values()}
    assert {"mixtral", "qwen3_moe", "deepseek_v3", "gpt_oss", "llama"} <= kinds  # dense and MoE
    assert {case.split("/")[0] for _, case in CASES} == {"lora", "qlora"}
    assert {case.split("/")[1] for _, case in CASES} == {"all-linear", "names7"}


@pytest.mark.parametrize("model", sorted(PARITY["models"]))
def test_total_parameters_match_transformers(model):
    assert _close(_facts(model).total, PARITY["models"][model]["total_params"])


@pytest.mark.parametrize("model", sorted(PARITY["models"]))
def test_largest_module_matches_deepspeeds_search_over_the_meta_model(model):
    """DeepSpeed's ZeRO-3 estimator takes the most parameters any one module holds itself; the tool ran that search
    over the transformers model."""
    assert _facts(model).largest_module == PARITY["models"][model]["largest_module_params"]


@pytest.mark.parametrize(("model", "case"), CASES)
def test_trainable_parameters_match_peft_within_0_1_percent(model, case):
    truth = PARITY["models"][model]["cases"][case]
    method, label = case.split("/")
    facts = _facts(model)
    if "error" in truth:
        with pytest.raises(pm.PlanInputError):
            pm.resolve_lora(facts, PARITY["rank"], TARGETS[label])
        return
    result = pm.resolve_lora(facts, PARITY["rank"], TARGETS[label])
    assert _close(result.trainable, truth["trainable"]), (result.trainable, truth["trainable"])
    assert result.parameters == truth["target_parameters"]
    peft_leaves = {name.rsplit(".", 1)[-1] for name in truth["target_modules"]}
    if label == "all-linear":  # PEFT resolved it to module names: the same leaves
        assert set(result.modules) == peft_leaves
    else:  # PEFT keeps the list as given, unmatched names included
        assert set(result.modules) <= peft_leaves
        assert set(result.unmatched) <= peft_leaves - set(result.modules)
    # What PEFT refuses with TRL's default lora_dropout=0.05, the planner tells the user to set to 0.
    if truth["trl_default_dropout_error"]:
        assert "ParamWrapper" in truth["trl_default_dropout_error"]
        assert any("lora_dropout 0" in note for note in result.notes)
    else:
        assert not any("lora_dropout 0" in note for note in result.notes)
    assert (result.merged_sync_reason is not None) == bool(truth["target_parameters"])
    if method == "qlora":
        # bitsandbytes 4-bit replaces every nn.Linear except lm_head: the planner's quantizable count.
        assert _close(facts.quantizable, truth["quantized_linear_params"])


@pytest.mark.parametrize("model", sorted(PARITY["models"]))
def test_a_list_matching_nothing_is_refused_with_peft_message(model):
    message = PARITY["models"][model]["no_match_error"]
    assert message.startswith("NoMatchingPeftModuleError: Target modules {'not_a_layer'} not found in the base model.")
    with pytest.raises(pm.PlanInputError) as error:
        pm.resolve_lora(_facts(model), PARITY["rank"], "not_a_layer")
    assert message.split(": ", 1)[1] in str(error.value)
