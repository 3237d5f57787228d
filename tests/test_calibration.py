"""The planner against published, measured runs (tests/fixtures/calibration/published_runs.json): per GPU within
0.85-1.15 and host RAM within 0.75-1.25 of what the source printed; and the fit verdict on those runs' GPUs and on
held-apart published runs and OOMs it was not fitted to (held_apart_runs.json). `pytest -s` prints the table and
the rates."""

from __future__ import annotations

import json

import plan_training as pt
import pytest

from conftest import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "calibration"
DATA = json.loads((FIXTURES / "published_runs.json").read_text())
CASES = {case["id"]: case for case in DATA["cases"]}
HELD_APART = json.loads((FIXTURES / "held_apart_runs.json").read_text())
HELD_CASES = {case["id"]: case for case in HELD_APART["cases"]}


def _published(value) -> float:
    return sum(value) / len(value) if isinstance(value, list) else float(value)


def _planned(capsys, case: dict) -> dict:
    argv = [*case["planner_args"], "--gpu-memory-gib", "80", "--json"]
    argv = [str(REPO_ROOT / a) if a.startswith("tests/fixtures/") else a for a in argv]
    assert pt.main(argv) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    return next(c for c in data["candidates"] if c["strategy"] == case["strategy"])


def test_every_case_names_its_source_and_setup():
    assert len(CASES) >= 6
    for case in CASES.values():
        source = case["source"]
        assert source["repository"] and source["path"] and len(source["commit"]) == 40 and source["commit_date"]
        assert case["setup"] and case["published"]["unit"] == "GB" and case["published"]["text"]


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_planner_matches_published_runs(capsys, case_id):
    case = CASES[case_id]
    candidate = _planned(capsys, case)
    published = case["published"]
    ratio = candidate["per_gpu_gib"] / _published(published["per_gpu"])
    line = f"{case_id}: per GPU planned {candidate['per_gpu_gib']:.1f} / published {published['per_gpu']} = {ratio:.2f}"
    low, high = DATA["bands"]["per_gpu"]
    assert low <= ratio <= high, line
    if "host_ram" in published:
        host_ratio = candidate["host_ram_per_node_gib"] / published["host_ram"]
        line += f"; host planned {candidate['host_ram_per_node_gib']:.0f} / {published['host_ram']} = {host_ratio:.2f}"
        low, high = DATA["bands"]["host_ram"]
        assert low <= host_ratio <= high, line
    # The band the planner prints covers the published figure.
    band = candidate["per_gpu_band_gib"]
    assert band["low"] <= _published(published["per_gpu"]) <= band["high"], (line, band)
    with capsys.disabled():
        print("\n" + line)


# The GPU each published run trained on, in GiB as the driver reports it (nvidia-smi memory.total): a 24 GB card
# (RTX 3090/4090 class) 24576 MiB, A10G 23028 MiB, A100 40GB 40960 MiB, H100 80GB 81559 MiB. The case without a stated
# GPU (peft-fsdp-qlora-llama2-70b-2gpu) is left out.
TRAINED_ON_GIB = {
    "peft-fsdp-qlora-llama2-70b-2gpu-offload": 24.0,
    "peft-deepspeed-zero3-qlora-llama2-70b-2x40gb": 40.0,
    "peft-deepspeed-zero3-lora-llama2-70b-8xh100": 81559 / 1024,
    "peft-fsdp-lora-llama2-70b-8xh100": 81559 / 1024,
    "philschmid-fsdp-qlora-llama3-70b-4x24gb-offload": 23028 / 1024,
}
# Runs that trained and the fit rule calls fitting on their own GPUs (default headroom 10%), kept apart by set. The
# calibration runs: 3 of 5 at the point estimate (the upper edge called 1 of 5); the two missed ran at 90-98% of the
# GPU, inside the headroom.
CALLED_FITTING = {
    "peft-fsdp-qlora-llama2-70b-2gpu-offload",
    "peft-deepspeed-zero3-qlora-llama2-70b-2x40gb",
    "peft-deepspeed-zero3-lora-llama2-70b-8xh100",
}


def test_the_fit_rule_on_the_gpus_the_published_runs_trained_on(capsys):
    called, upper_edge_called = set(), set()
    for case_id, gib in TRAINED_ON_GIB.items():
        case = CASES[case_id]
        argv = [str(REPO_ROOT / a) if a.startswith("tests/fixtures/") else a for a in case["planner_args"]]
        assert pt.main([*argv, "--gpu-memory-gib", f"{gib:.4f}", "--host-memory-gib", "4096", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        candidate = next(c for c in data["candidates"] if c["strategy"] == case["strategy"])
        if candidate["fits"]:
            called.add(case_id)
        if candidate["per_gpu_band_gib"]["high"] <= candidate["usable_gib"] * (1 - candidate["headroom"]):
            upper_edge_called.add(case_id)
    assert called == CALLED_FITTING, sorted(called)
    assert len(upper_edge_called) == 1 and upper_edge_called < called
    with capsys.disabled():
        print(f"\ntrained runs called fitting: calibration {len(called)}/{len(TRAINED_ON_GIB)} (upper edge: "
              f"{len(upper_edge_called)}/{len(TRAINED_ON_GIB)})")  # fmt: skip


def _resolved(args: list) -> list:
    return [str(REPO_ROOT / a) if a.startswith("tests/fixtures/") else a for a in args]


def test_every_held_apart_case_names_its_source_setup_gpu_and_outcome():
    assert {c["outcome"] for c in HELD_CASES.values()} == {"trained", "oom"}
    assert not set(HELD_CASES) & set(CASES)  # held apart: none of the calibration runs
    for case in HELD_CASES.values():
        source = case["source"]
        assert source["repository"] and (source.get("path") or source.get("thread"))
        assert len(source.get("commit", "")) == 40 or source.get("date")
        assert case["setup"] and case["published"]["text"] and case["gpu"]["memory_gib"] > 0
        assert case["gpu"]["compute_capability"] and case["strategy"]
    for case in HELD_APART["left_out"]:
        assert case["what"] and case["why"]


# Trained held-apart runs the fit rule calls fitting on their own GPUs (default headroom 10%). The seven it misses carry
# "fit_rule_miss" in the fixture, with the term that is off: one is the headroom alone (a T4 run at 95%), three are
# GRPO without vLLM on a T4 where the plan is 1.5x the published peak, 0.3-1.4 GiB over the line (lengths sized at
# their maxima, the overhead term), two are Liger-Kernel's FSDP1 Alpaca runs without Liger where the
# materialised logits are sized at the 512-token cap (1.6-1.8x), one is open-r1's OlympicCoder-32B at 22528 tokens
# (logits, recomputed layer and their reserve summed, 1.31x the GPU). Every published OOM is called not fitting.
HELD_APART_CALLED_FITTING = {
    "liger-hf-qwen2-7b-fsdp1-4xa100-80gb-mb64-liger",
    "liger-hf-llama3-8b-fsdp1-4xa100-80gb-mb64-liger",
    "trl-docs-cp-qwen3-8b-8xh100-300k",
    "trl-notebook-sft-qlora-qwen3-8b-t4",
    "trl-notebook-sft-qlora-llama-3.1-8b-t4",
    "trl-notebook-sft-qlora-qwen2.5-7b-t4",
    "openrlhf-698-llama3-8b-full-zero2-adam-offload-a100-80gb",
    "open-r1-506-qwen2.5-1.5b-sft-zero3-8xh20-mb2",
}


def _held_apart_candidate(capsys, case: dict) -> dict:
    gpu = case["gpu"]
    argv = [*_resolved(case["planner_args"]), "--gpu-memory-gib", str(gpu["memory_gib"])]
    argv += ["--compute-capability", gpu["compute_capability"], "--host-memory-gib", "4096", "--json"]
    assert pt.main(argv) == 0, case["id"]
    data = json.loads(capsys.readouterr().out)
    return next(c for c in data["candidates"] if c["strategy"] == case["strategy"])


def test_the_fit_rule_on_the_held_apart_cases(capsys):
    called, lines = set(), []
    for case_id, case in sorted(HELD_CASES.items()):
        candidate = _held_apart_candidate(capsys, case)
        if candidate["fits"]:
            called.add(case_id)
        published = case["published"].get("per_gpu")
        ratio = f" = {candidate['per_gpu_gib'] / published:.2f} of published {published}" if published else ""
        verdict = "fits" if candidate["fits"] else "does not fit"
        lines.append(f"{case_id} ({case['outcome']}): {candidate['per_gpu_gib']:.1f} GiB{ratio}; {verdict}")
    trained = {i for i, c in HELD_CASES.items() if c["outcome"] == "trained"}
    ooms = set(HELD_CASES) - trained
    assert not called & ooms, sorted(called & ooms)  # a wrong "fits" is the costliest answer
    assert called == HELD_APART_CALLED_FITTING, sorted(called)
    assert {i for i in trained - called} == {i for i, c in HELD_CASES.items() if "fit_rule_miss" in c}
    with capsys.disabled():
        print("\n" + "\n".join(lines))
        print(f"held apart: trained runs called fitting {len(called)}/{len(trained)}, "
              f"OOMs called not fitting {len(ooms)}/{len(ooms)}")  # fmt: skip
