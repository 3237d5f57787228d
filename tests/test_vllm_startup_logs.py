"""The planner's non-KV vLLM overhead (planner/kv_cache.non_kv_overhead) against published vLLM start-up logs
(tests/fixtures/calibration/vllm_startup_logs.json): per term and in total, how many fall inside OVERHEAD_BAND.

Each log is planned with its own model config, TP size, max_num_batched_tokens, max_num_seqs, logprobs_mode and vLLM
release.
The terms compared, planner against log:
- non_torch: the non-torch memory term against vLLM's "non-torch forward increase memory";
- activation_peak: the profile run's torch peak (the forward, or the sampler on top of the kept fused-MoE workspace)
  against "torch peak memory increase";
- cuda_graph_estimate: the CUDA-graph term against "Estimated CUDA graph memory" (logged even when not applied);
- total: Overhead.total against what vLLM took from the requested memory besides weights
  (requested - weights - available KV cache), so the release rule for CUDA graphs is part of it.
Every out-of-band (log, term) pair must be a documented miss with its reason in the fixture, and every documented
miss must still be out of band, so the rates below are what the model reaches, not a bound it cannot fail.
`pytest -s` prints the table."""

from __future__ import annotations

import json
from typing import Dict, Tuple

import pytest
from planner import kv_cache as kc
from planner import model as pm

from conftest import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures"
DATA = json.loads((FIXTURES / "calibration" / "vllm_startup_logs.json").read_text(encoding="utf-8"))
LOGS = {log["id"]: log for log in DATA["logs"]}
TERMS = ("non_torch", "activation_peak", "cuda_graph_estimate", "total")
GIB = 1024**3


def _release(text: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _facts(log: dict) -> pm.ModelFacts:
    path = FIXTURES / log["model_config"] / "config.json"
    return pm.facts_from_config(json.loads(path.read_text(encoding="utf-8")), str(path))


def _ratios(log: dict) -> Dict[str, float]:
    """Planned / logged for each term the log prints."""
    terms = kc.non_kv_overhead(
        _facts(log),
        log["tensor_parallel_size"],
        log["max_num_batched_tokens"],
        log["max_num_seqs"],
        _release(log["vllm_release"]),
        log["logprobs_mode"],
    )
    logged = log["logged_gib"]
    planned = {
        "non_torch": terms.non_torch / GIB,
        "activation_peak": terms.torch_peak / GIB,
        "cuda_graph_estimate": terms.cuda_graphs / GIB,
        "total": terms.total / GIB,
    }
    measured = {
        "non_torch": logged["non_torch"],
        "activation_peak": logged["activation_peak"],
        "cuda_graph_estimate": logged.get("cuda_graph_estimate"),
        "total": logged["requested"] - logged["weights"] - logged["available_kv"],
    }
    return {term: planned[term] / measured[term] for term in TERMS if measured[term]}


RATIOS = {log_id: _ratios(log) for log_id, log in LOGS.items()}


def _inside(ratio: float) -> bool:
    low, high = kc.OVERHEAD_BAND
    return low <= ratio <= high


def test_the_fixture_holds_at_least_eight_sourced_logs_with_their_settings():
    assert len(LOGS) >= 8
    reasons = DATA["miss_reasons"]
    for log in LOGS.values():
        source = log["source"]
        assert source["url"].startswith("https://github.com/") and len(source["commit"]) == 40
        assert source["commit"] in source["url"] and source["path"] in source["url"]
        assert (FIXTURES / log["model_config"] / "config.json").is_file()
        assert log["max_num_batched_tokens"] > 0 and log["max_num_seqs"] > 0 and log["settings_source"]
        assert 0 < log["gpu_memory_utilization"] <= 1 and log["tensor_parallel_size"] >= 1
        assert log.get("log_lines") or log.get("log_note")
        for term, reason in log.get("misses", {}).items():
            assert term in TERMS and reason in reasons


def test_the_logged_budget_adds_up_as_the_release_computes_it():
    """available KV = requested - (weights + non-torch + activation peak) - the CUDA-graph estimate where the release
    applies it; in 0.15-0.19 it is not applied (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 0)."""
    for log in LOGS.values():
        logged = log["logged_gib"]
        assert _release(log["vllm_release"]) < kc.CUDA_GRAPHS_IN_KV_BUDGET_FROM
        parts = logged["weights"] + logged["non_torch"] + logged["activation_peak"]
        assert parts == pytest.approx(logged["non_kv_total"], abs=0.02)
        assert logged["requested"] - logged["non_kv_total"] == pytest.approx(logged["available_kv"], abs=0.02)
        assert logged["requested"] == pytest.approx(log["gpu_memory_utilization"] * log["gpu_total_gib"], abs=0.02)


def test_cuda_graphs_count_in_the_kv_budget_from_vllm_0_20_0():
    facts = _facts(LOGS["llama-3.1-8b-tp1"])
    before = kc.non_kv_overhead(facts, 1, 8192, 1024, (0, 19, 0))
    after = kc.non_kv_overhead(facts, 1, 8192, 1024, (0, 20, 0))
    assert before.cuda_graphs == after.cuda_graphs > 0
    assert after.total - before.total == after.cuda_graphs
    assert kc.non_kv_overhead(facts, 1, 8192, 1024).total == after.total  # the default release is 0.31.0


def test_every_out_of_band_term_is_a_documented_miss_and_every_documented_miss_is_out_of_band():
    outside = {(log_id, t) for log_id, ratios in RATIOS.items() for t, r in ratios.items() if not _inside(r)}
    documented = {(log_id, t) for log_id, log in LOGS.items() for t in log.get("misses", {})}
    assert outside == documented


def test_the_rates_inside_the_band_are_the_ones_stated():
    counts = {t: [0, 0] for t in TERMS}
    for ratios in RATIOS.values():
        for term, ratio in ratios.items():
            counts[term][0] += _inside(ratio)
            counts[term][1] += 1
    stated = {t: [int(n) for n in DATA["inside_band"][t].split("/")] for t in TERMS}
    assert counts == stated


def test_print_table():
    """Shown with `pytest -s`: the ratio of each term, planned / logged."""
    print()
    print(f"{'log':28} " + " ".join(f"{t:>20}" for t in TERMS))
    for log_id, ratios in RATIOS.items():
        cells = [f"{ratios[t]:.2f}{'' if _inside(ratios[t]) else ' out'}" if t in ratios else "-" for t in TERMS]
        print(f"{log_id:28} " + " ".join(f"{c:>20}" for c in cells))


def test_the_tp_step_of_the_non_torch_term_matches_the_independent_v0_check():
    """vllm-project/vllm#10511: a maintainer's V0 start-up logs on H100 grow 1.79 GiB of non-torch memory from TP 1
    to TP 2; the planner's step (NON_TORCH_TP_GIB, read off the llm-d logs) must lie inside the band of it."""
    check = DATA["independent_check"]["non_torch_gib"]
    facts = _facts(LOGS["llama-3.1-8b-tp1"])
    step = kc.non_kv_overhead(facts, 2, 8192, 256).non_torch - kc.non_kv_overhead(facts, 1, 8192, 256).non_torch
    assert _inside(step / GIB / (check["tp2"] - check["tp1"]))


def test_the_sampler_peaks_on_top_of_the_kept_moe_workspace_from_vllm_0_11():
    """vLLM 0.11+ keeps the fused-MoE workspace allocated after the forward (one buffer shared by the MoE layers), so
    the sampler run adds to it; 0.10.2 freed it. Dense models keep nothing."""
    moe = _facts(LOGS["deepseek-v2-lite-tp1"])
    old = kc.non_kv_overhead(moe, 1, 8192, 1024, (0, 10, 2), "raw_logprobs")
    new = kc.non_kv_overhead(moe, 1, 8192, 1024, (0, 11, 0), "raw_logprobs")
    assert old.kept_workspace == 0 < new.kept_workspace < new.activation_peak
    assert new.torch_peak == new.kept_workspace + new.sampler_peak > old.torch_peak == old.sampler_peak
    assert new.total - old.total == new.torch_peak - old.torch_peak
    dense = kc.non_kv_overhead(_facts(LOGS["llama-3.1-8b-tp1"]), 1, 8192, 1024, (0, 31, 0))
    assert dense.kept_workspace == 0 and dense.torch_peak == max(dense.activation_peak, dense.sampler_peak)
