"""scripts/preflight/rules_server.py: the rules that judge one server, on parsed snapshots (no network).

The snapshots are built from the same vLLM-shaped bodies the loopback server serves (tests/fake_vllm_server.py,
tests/fixtures/vllm_server/); each expected outcome reproduces TRL 1.16's ``select_adapter_sync``
(trl/experimental/async_grpo/async_grpo_trainer.py:839-907) or the check cited in the test.
"""

from __future__ import annotations

import pytest
from preflight import data as vdata
from preflight import rules_server as vrules

from fake_vllm_server import server_info
from vllm_helpers import TRL_RANGE, by_id, ids, intent, judge, lora, snapshot


@pytest.mark.parametrize(
    ("rank", "expected"), [(1, 1), (2, 8), (8, 8), (9, 16), (16, 16), (17, 32), (300, 320), (512, 512), (513, None)]
)
def test_round_lora_rank_matches_vllm_choices(rank, expected):
    assert vrules.round_lora_rank(rank) == expected


@pytest.mark.parametrize("version", ["0.27.1", "0.31.0"])
def test_good_server_predicts_adapter_only_with_no_warning(version):
    outcome, findings = judge(snapshot(version=version), intent())
    assert outcome.mode == "adapter-only"
    assert ids(findings, "error") == [] and ids(findings, "warning") == []


def test_full_finetuning_needs_weight_transfer_but_not_lora():
    info = server_info()
    info["vllm_config"]["lora_config"] = None
    outcome, findings = judge(snapshot(info=info), intent(lora_rank=None))
    assert outcome.mode == "full-weights"
    assert ids(findings, "error") == [] and ids(findings, "warning") == []


def test_lora_config_null_is_merged_fallback_with_trl_warning_and_enable_lora_fix():
    info = server_info()
    info["vllm_config"]["lora_config"] = None
    outcome, findings = judge(snapshot(info=info), intent(lora_rank=4, max_staleness=2))
    assert outcome.mode == "merged-fallback"
    assert "started without `--enable-lora`" in outcome.trl_says
    finding = by_id(findings, "lora-disabled")
    assert finding.severity == "warning"
    # r=4 is served under 8 (round_lora_rank); max_staleness 2 needs 4 slots.
    assert finding.fix == "--enable-lora --max-lora-rank 8 --max-loras 4 and VLLM_ALLOW_RUNTIME_LORA_UPDATING=1"


def test_lora_config_null_wins_over_data_parallel_and_rank():
    info = server_info()
    info["vllm_config"]["lora_config"] = None
    info["vllm_config"]["parallel_config"]["data_parallel_size"] = 2
    outcome, findings = judge(snapshot(info=info), intent(lora_rank=64))
    assert outcome.mode == "merged-fallback"
    assert "lora-disabled" in ids(findings) and "lora-data-parallel" not in ids(findings)


def test_data_parallel_is_merged_fallback_before_rank_and_slots_are_checked():
    info = server_info()
    info["vllm_config"]["parallel_config"]["data_parallel_size"] = 2
    lora(info).update(max_lora_rank=8, max_loras=1)  # both would raise, but TRL returns before reaching them
    outcome, findings = judge(snapshot(info=info), intent(lora_rank=16))
    assert outcome.mode == "merged-fallback"
    assert "--data-parallel-size > 1" in outcome.trl_says
    assert by_id(findings, "lora-data-parallel").fix.startswith("--data-parallel-size 1")
    assert "lora-rank-too-low" not in ids(findings) and "lora-slots-too-few" not in ids(findings)


@pytest.mark.parametrize(
    ("external", "hybrid", "expected"),
    [
        (False, False, "broadcasts add_lora to every DP engine"),
        (True, False, "reaches only this rank"),
        (False, True, "not the other nodes' engines"),
    ],
)
def test_data_parallel_note_says_what_vllm_really_does(external, hybrid, expected):
    info = server_info()
    info["vllm_config"]["parallel_config"].update(
        data_parallel_size=2, data_parallel_external_lb=external, data_parallel_hybrid_lb=hybrid
    )
    _, findings = judge(snapshot(info=info), intent())
    note = by_id(findings, "dp-adapter-reach")
    assert note.severity == "info" and expected in note.message
    assert "core_client.py" in note.source and "data_parallel_size alone" in note.message


@pytest.mark.parametrize(("rank", "served", "fix"), [(32, 16, "--max-lora-rank 32"), (20, 16, "--max-lora-rank 32")])
def test_rank_above_max_lora_rank_is_a_startup_error_with_the_rounded_flag(rank, served, fix):
    info = server_info()
    lora(info)["max_lora_rank"] = served
    outcome, findings = judge(snapshot(info=info), intent(lora_rank=rank))
    assert outcome.mode == "startup-error"
    assert outcome.trl_says.startswith(f"ValueError: The adapter has rank {rank}")
    assert by_id(findings, "lora-rank-too-low").fix == fix


def test_rank_equal_to_max_lora_rank_passes_and_smaller_ranks_fit_under_it():
    for rank in (16, 4, 1):
        outcome, _ = judge(snapshot(), intent(lora_rank=rank))
        assert outcome.mode == "adapter-only"


def test_rank_above_512_cannot_be_served_at_all():
    outcome, findings = judge(snapshot(), intent(lora_rank=600))
    assert outcome.mode == "startup-error"
    assert "largest rank vLLM can serve (512)" in outcome.trl_says
    assert "lora-rank-unservable" in ids(findings, "error")


def test_every_lora_limit_problem_is_listed_at_once_and_the_rank_error_is_what_trl_raises():
    """Issue 21: the --max-loras problem used to appear only after the rank was fixed."""
    info = server_info()
    lora(info).update(max_lora_rank=8, max_loras=2)
    outcome, findings = judge(snapshot(info=info), intent(lora_rank=16))
    assert "lora-rank-too-low" in ids(findings) and "lora-slots-too-few" in ids(findings)
    assert outcome.mode == "startup-error" and "--max-lora-rank" in (outcome.trl_says or "")


@pytest.mark.parametrize(("slots", "staleness", "error"), [(5, 4, True), (6, 4, False), (1, 0, True), (2, 0, False)])
def test_max_loras_against_max_staleness_plus_two(slots, staleness, error):
    info = server_info()
    lora(info)["max_loras"] = slots
    outcome, findings = judge(snapshot(info=info), intent(max_staleness=staleness))
    if error:
        assert outcome.mode == "startup-error"
        assert by_id(findings, "lora-slots-too-few").fix == f"--max-loras {staleness + 2}"
        assert f"`--max-loras {slots}`" in outcome.trl_says
    else:
        assert outcome.mode == "adapter-only"


def test_adapter_only_without_runtime_lora_updating_fails_at_the_first_sync():
    info = server_info()
    info["vllm_env"]["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = False
    outcome, findings = judge(snapshot(info=info), intent())
    assert outcome.mode == "adapter-only"
    assert by_id(findings, "runtime-lora-off").fix == "VLLM_ALLOW_RUNTIME_LORA_UPDATING=1"


def test_merged_fallback_without_weight_transfer_is_an_error():
    info = server_info()
    info["vllm_config"]["lora_config"] = None
    info["vllm_config"]["weight_transfer_config"] = None
    _, findings = judge(snapshot(info=info), intent())
    assert by_id(findings, "weight-transfer-missing").fix == '--weight-transfer-config \'{"backend": "nccl"}\''


def test_adapter_only_does_not_need_weight_transfer():
    info = server_info()
    info["vllm_config"]["weight_transfer_config"] = None
    outcome, findings = judge(snapshot(info=info), intent())
    assert outcome.mode == "adapter-only" and "weight-transfer-missing" not in ids(findings)


def test_grpo_without_weight_transfer_config_fails_at_startup():
    info = server_info()
    info["vllm_config"]["weight_transfer_config"] = None
    outcome, findings = judge(snapshot(info=info), intent(trainer="grpo", lora_rank=None))
    assert outcome.mode == "full-weights"
    finding = by_id(findings, "weight-transfer-missing")
    assert finding.severity == "error" and "init_communicator" in finding.source


def test_grpo_with_lora_merges_and_ignores_server_lora_limits():
    info = server_info()
    lora(info).update(max_lora_rank=8, max_loras=1)
    outcome, findings = judge(snapshot(info=info), intent(trainer="grpo", lora_rank=64))
    assert outcome.mode == "full-weights"
    assert "grpo-lora-merged" in ids(findings, "info") and ids(findings, "error") == []


@pytest.mark.parametrize("trainer", ["grpo", "async-grpo"])
def test_raw_logprobs_mode_warns_with_the_processed_flag(trainer):
    info = server_info()
    info["vllm_config"]["model_config"]["logprobs_mode"] = "raw_logprobs"
    _, findings = judge(snapshot(info=info), intent(trainer=trainer))
    finding = by_id(findings, "logprobs-mode")
    assert finding.severity == "warning" and finding.fix == "--logprobs-mode processed_logprobs"


def test_logprobs_mode_is_only_info_when_grpo_correction_is_off():
    info = server_info()
    info["vllm_config"]["model_config"]["logprobs_mode"] = "raw_logprobs"
    _, findings = judge(snapshot(info=info), intent(trainer="grpo", importance_sampling_correction=False))
    assert by_id(findings, "logprobs-mode").severity == "info"


@pytest.mark.parametrize("trainer", ["grpo", "async-grpo"])
def test_dev_mode_off_is_a_startup_error_for_both_trainers(trainer):
    outcome, findings = judge(snapshot(info_status=404), intent(trainer=trainer))
    assert outcome.mode == "startup-error"
    finding = by_id(findings, "dev-mode-off")
    assert finding.fix == "VLLM_SERVER_DEV_MODE=1" and "FastAPI" in finding.message
    if trainer == "grpo":
        assert "does not expose its development endpoints" in outcome.trl_says


def test_a_404_without_fastapis_body_mentions_a_proxy():
    _, findings = judge(snapshot(info_status=404, info_body=b"not here"), intent())
    assert "proxy" in by_id(findings, "dev-mode-off").message


def test_max_model_len_below_prompt_plus_completion():
    _, findings = judge(snapshot(), intent(max_length=16384))
    assert by_id(findings, "max-model-len-too-low").fix == "--max-model-len 16384"
    _, findings = judge(snapshot(), intent(max_length=8192))
    assert "max-model-len-too-low" not in ids(findings)


def test_model_mismatch_names_the_served_model_flag():
    _, findings = judge(snapshot(), intent(model="meta-llama/Llama-3.1-8B"))
    finding = by_id(findings, "model-mismatch")
    assert "--served-model-name meta-llama/Llama-3.1-8B" in finding.fix
    _, findings = judge(snapshot(), intent(model="Qwen/Qwen3-0.6B"))
    assert "model-mismatch" not in ids(findings)


def test_required_adapter_must_be_listed():
    _, findings = judge(snapshot(adapters=("trl-policy-v3",)), intent(adapters=("trl-policy-v4",)))
    assert "adapter-not-loaded" in ids(findings, "error")
    _, findings = judge(snapshot(adapters=("trl-policy-v3",)), intent(adapters=("trl-policy-v3",)))
    assert "adapter-not-loaded" not in ids(findings)


@pytest.mark.parametrize(
    ("version", "outside"),
    [("0.22.0", False), ("0.31.0", False), ("0.31.0+cu129", False), ("0.21.0", True), ("0.33.0", True)],
)
def test_vllm_version_against_trl_range_uses_the_release_part(version, outside):
    _, findings = judge(snapshot(version=version), intent())
    assert ("vllm-outside-trl-range" in ids(findings, "warning")) is outside


def test_trainer_side_vllm_across_the_nccl_protocol_gate():
    info = server_info()
    info["vllm_config"]["lora_config"] = None  # merged sync, so NCCL is used
    _, findings = judge(snapshot(version="0.31.0", info=info), intent(), local_vllm="0.27.1")
    assert "trainer-vllm-differs" in ids(findings, "warning")
    _, findings = judge(snapshot(version="0.31.0", info=info), intent(), local_vllm="0.29.0")
    assert "trainer-vllm-differs" not in ids(findings)


def test_unreachable_server_gets_one_error_and_no_outcome():
    snap = vdata.Snapshot(url="http://a:8000")
    snap.responses[vdata.ROUTE_HEALTH] = vdata.Response(
        vdata.ROUTE_HEALTH, error_kind="refused", error_detail="refused"
    )
    outcome, findings = judge(snap, intent())
    assert outcome.mode == "unknown" and ids(findings) == ["unreachable"]


def test_auth_failure_names_the_flag_or_the_variable():
    snap = snapshot()
    snap.responses[vdata.ROUTE_MODELS] = vdata.Response(
        vdata.ROUTE_MODELS, status=401, body=b'{"error":"Unauthorized"}'
    )
    _, findings = judge(snap, intent())
    assert "--auth-env" in by_id(findings, "auth-required").fix
    _, findings = judge(snap, intent(auth_env="VLLM_TOKEN"))
    assert "$VLLM_TOKEN" in by_id(findings, "auth-required").fix


def test_html_body_is_reported_as_non_json():
    snap = snapshot()
    snap.responses[vdata.ROUTE_VERSION] = vdata.Response(
        vdata.ROUTE_VERSION, status=200, body=b"<html><body>Sign in</body></html>", content_type="text/html"
    )
    _, findings = judge(snap, intent())
    assert "an HTML page" in by_id(findings, "non-json").message


def test_a_proxy_refusing_every_route_gives_one_auth_finding():
    snap = vdata.Snapshot(url="http://a:8000")
    for route in vdata.ROUTES:
        snap.responses[route] = vdata.Response(route, status=401, body=b"")
    _, findings = judge(snap, intent())
    assert ids(findings) == ["auth-required"]
    assert "Same on GET /version, GET /v1/models" in findings[0].message


def test_html_answers_leave_dev_mode_and_version_unknown_without_extra_noise():
    snap = vdata.Snapshot(url="http://a:8000")
    snap.responses[vdata.ROUTE_HEALTH] = vdata.Response(vdata.ROUTE_HEALTH, status=200, body=b"")
    for route in vdata.ROUTES[1:]:
        snap.responses[route] = vdata.Response(route, status=200, body=b"<html></html>", content_type="text/html")
    outcome, findings = judge(snap, intent())
    assert snap.dev_mode is None and outcome.mode == "unknown"
    assert ids(findings) == ["non-json", "not-vllm"]
    assert "not vLLM, so these checks do not apply" in by_id(findings, "not-vllm").message


@pytest.mark.parametrize("status, body", [(200, b"{}"), (404, b'{"detail":"Not Found"}')])
def test_a_service_that_is_not_vllm_gets_no_vllm_advice(status: int, body: bytes):
    """Issue 21: a service answering 200 {} everywhere was called vLLM with dev mode on; one answering 404
    everywhere (rightly not vLLM) was still told to set VLLM_SERVER_DEV_MODE=1."""
    snap = vdata.Snapshot(url="http://a:8000")
    for route in vdata.ROUTES:
        snap.responses[route] = vdata.Response(route, status=status, body=body)
    outcome, findings = judge(snap, intent())
    assert outcome.mode == "unknown"
    assert "not vLLM, so these checks do not apply" in " ".join(f.message for f in findings)
    assert not any("VLLM_SERVER_DEV_MODE" in (f.fix or "") + f.message for f in findings)


def test_a_v1_suffix_on_the_base_url_is_named_in_the_fix():
    snap = vdata.Snapshot(url="http://a:8000/v1")
    snap.responses[vdata.ROUTE_HEALTH] = vdata.Response(vdata.ROUTE_HEALTH, status=404, body=b'{"detail":"Not Found"}')
    _, findings = judge(snap, intent())
    assert "drop the trailing /v1" in by_id(findings, "not-vllm").fix


def test_peft_config_note_only_when_trl_would_validate_the_adapter():
    the_intent = intent()
    good = snapshot()
    off = snapshot(info_status=404)
    assert "adapter-config-unseen" in ids(vrules.global_notes([good], the_intent, [judge(good, the_intent)[0]]))
    assert vrules.global_notes([off], the_intent, [judge(off, the_intent)[0]]) == []


def test_a_server_newer_than_the_recorded_matrix_says_so_in_the_shared_wording():
    trl_range = dict(TRL_RANGE, recorded_vllm={"fetched": "2026-12-06", "newest": "0.34.0"})
    _, findings = vrules.judge_server(snapshot(version="0.35.0rc1"), intent(), trl_range, None)
    finding = by_id(findings, "vllm-newer-than-recorded")
    assert finding.severity == "warning"
    assert finding.message.startswith("vLLM 0.35.0rc1 is newer than the recorded matrix (2026-12-06); newest recorded")
    assert "0.34.0" in finding.fix and "pip" not in finding.fix
    for version in ("0.34.0", "0.34.0+cu129", "0.31.0"):
        _, findings = vrules.judge_server(snapshot(version=version), intent(), trl_range, None)
        assert "vllm-newer-than-recorded" not in ids(findings)
    _, findings = judge(snapshot(version="0.99.0"), intent())  # no recorded matrix given: nothing said
    assert "vllm-newer-than-recorded" not in ids(findings)


def test_the_trl_range_carries_the_recorded_newest_vllm():
    from common import recorded
    from preflight.trl_facts import trl_vllm_range

    known = recorded.load()
    assert trl_vllm_range()["recorded_vllm"] == {"fetched": known.fetched, "newest": known.newest["vllm"]}
