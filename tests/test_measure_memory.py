"""tools/measure_memory.py: the record's schema always; the real SFT/LoRA/DPO/GRPO code path on a tiny CPU model when
torch, transformers, peft, trl and datasets are importable (they are not in the test extra)."""

from __future__ import annotations

import copy
import importlib.util
import sys

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
import measure_memory as mm

GOOD = {
    "schema": 1,
    "versions": {"torch": "2.13.0", "transformers": "5.24.0", "trl": "1.16.0", "peft": "0.21.2"},
    "device": "cuda",
    "gpu": "NVIDIA H100 80GB HBM3",
    "runs": [
        {
            "trainer": "sft",
            "seq_len": 2048,
            "micro_batch": 4,
            "error": None,
            "steps": [{"step": 1, "max_memory_allocated": 40 * 2**30, "max_memory_reserved": 42 * 2**30}],
        },
        {
            "trainer": "grpo",
            "seq_len": 4096,
            "micro_batch": 8,
            "error": "OutOfMemoryError: CUDA out of memory",
            "steps": [],
        },
    ],
}


def test_a_good_record_passes_and_each_defect_is_named():
    assert mm.check_record(GOOD) == []
    cases = {
        "schema must be": lambda r: r.update(schema=2),
        "name torch and trl": lambda r: r["versions"].pop("trl"),
        "names its GPU": lambda r: r.update(gpu=None),
        "trainer must be one of": lambda r: r["runs"][0].update(trainer="ppo"),
        "seq_len must be": lambda r: r["runs"][0].update(seq_len=0),
        "without an error has steps": lambda r: r["runs"][0].update(steps=[]),
        "positive byte count on cuda": lambda r: r["runs"][0]["steps"][0].update(max_memory_allocated=None),
        "null on cpu": lambda r: r.update(device="cpu"),
        "non-empty list": lambda r: r.update(runs=[]),
    }
    for expected, breaks in cases.items():
        record = copy.deepcopy(GOOD)
        breaks(record)
        assert any(expected in problem for problem in mm.check_record(record)), expected


MISSING = [
    name for name in ("torch", "transformers", "peft", "trl", "datasets") if importlib.util.find_spec(name) is None
]


@pytest.mark.skipif(
    bool(MISSING), reason=f"needs {', '.join(MISSING)} (not in the test extra; see the tool's docstring)"
)
def test_the_tiny_cpu_run_goes_through_every_trainer_and_its_record_checks():
    record = mm.measure(None, [16], [2], 1, tiny=True)
    assert mm.check_record(record) == []
    assert record["device"] == "cpu" and record["model"]["config"] == "tiny"
    assert [run["trainer"] for run in record["runs"]] == list(mm.TRAINERS)
    assert all(run["error"] is None and len(run["steps"]) == 1 for run in record["runs"])
