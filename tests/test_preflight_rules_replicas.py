"""scripts/preflight/rules_replicas.py: the rules that compare replicas (no network)."""

from __future__ import annotations

from preflight import rules_server as vrules

from fake_vllm_server import model_list, server_info
from vllm_helpers import by_id, ids, lora, replicas, snapshot


def test_replica_missing_the_current_adapter_is_an_error_on_that_replica():
    a = snapshot("http://a:8000", adapters=("trl-policy-v6", "trl-policy-v7"))
    b = snapshot("http://b:8000", adapters=("trl-policy-v6",))
    findings = replicas(a, b)
    finding = by_id(findings, "adapter-missing-on-replica")
    assert finding.server == "http://b:8000" and "current policy adapter `trl-policy-v7`" in finding.message


def test_policy_versions_trl_already_unloaded_may_differ():
    # max_staleness 4: after v9, TRL has unloaded v4 and older (async_grpo_trainer.py:1847-1849).
    a = snapshot("http://a:8000", adapters=("trl-policy-v3", "trl-policy-v9"))
    b = snapshot("http://b:8000", adapters=("trl-policy-v9",))
    assert "adapter-missing-on-replica" not in ids(replicas(a, b))


def test_replica_serving_its_base_model_under_the_adapter_name():
    a = snapshot("http://a:8000", adapters=("trl-policy-v7",))
    b = snapshot("http://b:8000", models=model_list(served_names=("Qwen/Qwen3-0.6B", "trl-policy-v7")))
    findings = replicas(a, b)
    assert by_id(findings, "base-served-as-adapter").server == "http://b:8000"


def test_replicas_must_agree_on_model_and_lora_limits():
    info = server_info()
    info["vllm_config"]["model_config"]["model"] = "other"
    lora(info)["max_loras"] = 8
    a = snapshot("http://a:8000")
    b = snapshot("http://b:8000", info=info, models=model_list(("trl-policy-v3",), base="Qwen/Qwen3-8B"))
    findings = replicas(a, b)
    assert {"replica-model-mismatch", "replica-lora-mismatch"} <= set(ids(findings, "error"))


def test_agreeing_replicas_give_only_the_fanout_note():
    findings = replicas(snapshot("http://a:8000"), snapshot("http://b:8000"))
    assert ids(findings) == ["proxy-fanout"]


def test_a_policy_adapter_numbered_with_5000_digits_is_no_policy_version():
    """Issue 27: int() refuses 5,000 digits; such a name is not one of TRL's policy adapters, never a crash. (A model
    card id is capped at 256 characters before this rule reads it; the rule does not rely on that.)"""
    assert vrules.policy_version("trl-policy-v" + "9" * 5000) is None
    assert vrules.policy_version("trl-policy-v" + "9" * 41) is None and vrules.policy_version("trl-policy-v12") == 12
    a = snapshot("http://a:8000", adapters=("trl-policy-v" + "9" * 60, "trl-policy-v7"))
    b = snapshot("http://b:8000", adapters=("trl-policy-v7",))
    finding = by_id(replicas(a, b), "adapter-missing-on-replica")
    assert finding.server == "http://b:8000" and "trl-policy-v999" in finding.message
