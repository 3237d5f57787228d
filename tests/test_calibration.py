"""The planner against published, measured runs (tests/fixtures/calibration/published_runs.json): per GPU within
0.85-1.15 and host RAM within 0.75-1.25 of what the source printed. `pytest -s` prints the table."""

from __future__ import annotations

import json

import pytest

import plan_training as pt
from conftest import REPO_ROOT

DATA = json.loads((REPO_ROOT / "tests" / "fixtures" / "calibration" / "published_runs.json").read_text())
CASES = {case["id"]: case for case in DATA["cases"]}


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
