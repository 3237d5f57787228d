"""scripts/check_vllm_server.py: the rule functions, judged on parsed snapshots (no network).

The snapshots are built from the same vLLM-shaped bodies the loopback server serves (tests/fake_vllm_server.py,
tests/fixtures/vllm_server/); each expected outcome reproduces TRL 1.16's ``select_adapter_sync``
(trl/experimental/async_grpo/async_grpo_trainer.py:839-907) or the check cited in the test.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import urllib.error
from typing import Any, Dict, List, Optional

import pytest

import vllm_cli as vcli
import vllm_data as vdata
import vllm_fetch as vfetch
import vllm_rules_replicas as vreplicas
import vllm_rules_server as vrules
import vllm_trl_facts as vfacts
from fake_vllm_server import model_list, server_info
from safe_output import Scrubber


def snapshot(
    url: str = "http://replica-a:8000",
    *,
    version: str = "0.31.0",
    adapters: tuple = ("trl-policy-v3",),
    models: Optional[Dict[str, Any]] = None,
    info: Optional[Dict[str, Any]] = None,
    info_status: int = 200,
    info_body: Optional[bytes] = None,
    health: int = 200,
) -> vdata.Snapshot:
    """A parsed snapshot as probe_server would leave it after four answered GETs."""
    if info is None:  # the fixture closest to the reported version
        info = server_info("0.27.1" if version.startswith("0.27") else "0.31.0")
    snap = vdata.Snapshot(url=url)
    snap.responses[vdata.ROUTE_HEALTH] = vdata.Response(vdata.ROUTE_HEALTH, status=health, body=b"")
    snap.responses[vdata.ROUTE_VERSION] = vdata.Response(
        vdata.ROUTE_VERSION, status=200, body=json.dumps({"version": version}).encode()
    )
    snap.responses[vdata.ROUTE_MODELS] = vdata.Response(
        vdata.ROUTE_MODELS, status=200, body=json.dumps(models or model_list(adapters)).encode()
    )
    if info_status == 200:
        body = json.dumps(info).encode()
    else:
        body = info_body if info_body is not None else b'{"detail":"Not Found"}'
    snap.responses[vdata.ROUTE_SERVER_INFO] = vdata.Response(vdata.ROUTE_SERVER_INFO, status=info_status, body=body)
    return snap


def intent(**overrides: Any) -> vdata.Intent:
    values: Dict[str, Any] = {
        "trainer": "async-grpo",
        "lora_rank": 16,
        "max_staleness": 4,
        "max_length": 4096,
        "model": None,
        "adapters": (),
        "importance_sampling_correction": True,
        "auth_env": None,
    }
    values.update(overrides)
    return vdata.Intent(**values)


TRL_RANGE = {"trl_installed": False, "trl_version": "1.16.0", "vllm_spec": ">=0.22.0,<=0.31.0", "source": "test"}


def judge(snap: vdata.Snapshot, the_intent: vdata.Intent, local_vllm: Optional[str] = None):
    return vrules.judge_server(snap, the_intent, TRL_RANGE, local_vllm)


def ids(findings: List[vdata.Finding], severity: Optional[str] = None) -> List[str]:
    return [f.id for f in findings if severity is None or f.severity == severity]


def by_id(findings: List[vdata.Finding], finding_id: str) -> vdata.Finding:
    matches = [f for f in findings if f.id == finding_id]
    assert len(matches) == 1, (finding_id, ids(findings))
    return matches[0]


def lora(info: Dict[str, Any]) -> Dict[str, Any]:
    return info["vllm_config"]["lora_config"]


# --- round_lora_rank: vLLM's MaxLoRARanks (vllm/config/lora.py:27) and TRL's round_lora_rank -----------------------


@pytest.mark.parametrize(
    ("rank", "expected"), [(1, 1), (2, 8), (8, 8), (9, 16), (16, 16), (17, 32), (300, 320), (512, 512), (513, None)]
)
def test_round_lora_rank_matches_vllm_choices(rank, expected):
    assert vrules.round_lora_rank(rank) == expected


# --- the good server ------------------------------------------------------------------------------------------------


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


# --- select_adapter_sync, in TRL's order ----------------------------------------------------------------------------


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


def test_rank_is_checked_before_slots():
    info = server_info()
    lora(info).update(max_lora_rank=8, max_loras=2)
    _, findings = judge(snapshot(info=info), intent(lora_rank=16))
    assert "lora-rank-too-low" in ids(findings) and "lora-slots-too-few" not in ids(findings)


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


# --- GRPO server mode -----------------------------------------------------------------------------------------------


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


# --- dev mode, models, lengths, versions ----------------------------------------------------------------------------


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


def test_installed_trl_range_is_read_from_its_metadata(tmp_path, monkeypatch):
    dist = tmp_path / "trl-9.9.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: trl\nVersion: 9.9.0\nProvides-Extra: vllm\n"
        'Requires-Dist: accelerate>=1.10.1\nRequires-Dist: vllm<=0.27.1,>=0.22.0; extra == "vllm"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = vfacts.trl_vllm_range()
    assert found["trl_installed"] and found["trl_version"] == "9.9.0"
    assert sorted(found["vllm_spec"].split(",")) == ["<=0.27.1", ">=0.22.0"]


# --- across replicas ------------------------------------------------------------------------------------------------


def replicas(*snaps: vdata.Snapshot, the_intent: Optional[vdata.Intent] = None) -> List[vdata.Finding]:
    the_intent = the_intent or intent()
    outcomes = [judge(s, the_intent)[0] for s in snaps]
    return vreplicas.check_replicas(snaps, outcomes, the_intent)


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


# --- transport ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (urllib.error.URLError(socket.gaierror(-2, "Name or service not known")), "dns"),
        (urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")), "refused"),
        (urllib.error.URLError(socket.timeout("timed out")), "timeout"),
        (socket.timeout("timed out"), "timeout"),
        (urllib.error.URLError(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")), "tls"),
        (urllib.error.URLError(ssl.SSLCertVerificationError(1, "certificate verify failed")), "tls"),
        (vfetch.RedirectRefused(302, "http://evil:80"), "redirect"),
        (ConnectionResetError(104, "Connection reset by peer"), "connection"),
    ],
)
def test_classify_error(error, kind):
    assert vfetch.classify_error(error)[0] == kind


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


# --- CLI surface ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("http://replica-a:8000/", "http://replica-a:8000"),
        ("HTTPS://Host.example/vllm-a/", "https://host.example/vllm-a"),
        ("http://[::1]:8000", "http://[::1]:8000"),
    ],
)
def test_normalize_url(raw, expected):
    assert vcli.normalize_url(raw) == expected


@pytest.mark.parametrize("raw", ["ftp://host", "host:8000", "http://user:s3cr3t-pass@host:8000", "http://h:8000/?a=1"])
def test_normalize_url_rejects_and_never_echoes_credentials(raw):
    with pytest.raises(vcli.UsageError) as caught:
        vcli.normalize_url(raw)
    assert "s3cr3t" not in str(caught.value)


def test_scrubber_replaces_a_registered_token():
    scrubber = Scrubber()
    scrubber.add("tok-123456")
    assert scrubber("header Bearer tok-123456 seen") == "header Bearer <redacted> seen"


def test_parser_exposes_the_documented_flags_and_help():
    parser = vcli.build_parser()
    flags = {opt for action in parser._actions for opt in action.option_strings}
    assert {
        "--vllm-url",
        "--trainer",
        "--lora-rank",
        "--max-staleness",
        "--max-length",
        "--model",
        "--adapter",
        "--auth-env",
        "--timeout",
        "--deadline",
        "--json",
        "--require",
        "--no-importance-sampling-correction",
    } <= flags
    text = parser.format_help()
    for route in vdata.ROUTES:
        assert route in text
    assert "exit codes" in text and "--require given and the verdict is not ok" in text
    assert parser.get_default("max_staleness") == 4 and parser.get_default("trainer") == "async-grpo"


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
    assert ids(findings) == ["non-json"]


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


def test_probe_all_returns_at_the_deadline_even_if_a_request_never_returns(monkeypatch):
    """A hung DNS lookup ignores socket timeouts; the total deadline must still hold (real threads, no network)."""
    release = threading.Event()

    def hanging_fetch(opener, base_url, route, headers, timeout_s, deadline):
        if "hung" in base_url:
            release.wait(30)
        return vdata.Response(route, status=200, body=b'{"version": "0.31.0"}')

    monkeypatch.setattr(vfetch, "fetch", hanging_fetch)
    started = time.monotonic()
    try:
        snaps = vfetch.probe_all(["http://hung:8000", "http://fine:8000"], {}, 0.2, 0.5)
    finally:
        release.set()
    assert time.monotonic() - started < 1.5
    hung, fine = snaps
    assert hung.responses[vdata.ROUTE_HEALTH].error_kind == "deadline"
    assert all(r.status == 200 for r in fine.responses.values()) and len(fine.responses) == 4


def test_proxy_for_follows_the_environment_and_hides_proxy_credentials(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert vfetch.proxy_for("http://replica-a:8000") is None
    monkeypatch.setenv("HTTP_PROXY", "http://user:pw@proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "replica-b")
    assert vfetch.proxy_for("http://replica-a:8000") == "http://proxy.example:3128"
    assert vfetch.proxy_for("http://replica-b:8000") is None
    assert vfetch.proxy_for("https://replica-a:8000") is None  # no HTTPS_PROXY


def test_help_documents_the_connect_through_an_https_proxy():
    text = " ".join(vcli.build_parser().format_help().split())
    assert "CONNECT request to the proxy" in text and "HTTPS_PROXY" in text
