"""tools/measure_memory.py and tools/memory/: the record's schema, the prepared suite (every run plannable), the
comparison with the real planner, the --compare command, and the real SFT/DPO/GRPO x full/LoRA/QLoRA code path on a
tiny CPU model when torch, transformers, peft, trl, datasets and bitsandbytes are importable (not in the test extra).
Records measured on a GPU (tests/fixtures/memory/) are checked against the planner's band."""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import plan_training as pt
import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
from memory import compare, record, suite

TOOL = REPO_ROOT / "tools" / "measure_memory.py"
SUITE = REPO_ROOT / "tools" / "measure_suite.json"
GPU_RECORDS = sorted((REPO_ROOT / "tests" / "fixtures" / "memory").glob("*.json"))
GIB = 2**30
H200_GIB = 139.8


def _plan_in_process(flags: list) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        assert pt.main([*(str(REPO_ROOT / f) if f.startswith("tests/") else f for f in flags), "--json"]) == 0, flags
    return json.loads(out.getvalue())


def _ddp(data: dict) -> dict:
    return next(c for c in data["candidates"] if c["strategy"] == "ddp")


def _cuda_record(measured_gib: dict) -> dict:
    """A cuda record of the suite's runs whose peaks are the given GiB per label (a label missing: an OOM)."""
    runs = []
    for spec in suite.load(SUITE):
        run = {**spec.as_dict(), "label": spec.label(), "planner_args": suite.planner_args(spec, H200_GIB)}
        if spec.label() in measured_gib:
            peak = int(measured_gib[spec.label()] * GIB) - 2**29
            run.update(error=None, steps=[{"step": 1, "max_memory_allocated": peak, "max_memory_reserved": peak}])
        else:
            run.update(error="OutOfMemoryError: CUDA out of memory", steps=[])
        runs.append(run)
    return {
        "schema": record.SCHEMA,
        "versions": {"torch": "2.11.0", "transformers": "5.17.0", "trl": "1.16.0", "peft": "0.18.0"},
        "device": "cuda",
        "gpu": "NVIDIA H200",
        "gpu_total_bytes": int(H200_GIB * GIB),
        "cuda_context_bytes": 2**29,  # 0.5 GiB: measured = peak reserved + context
        "runs": runs,
    }


def _tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=120)


def _compare(path: Path) -> subprocess.CompletedProcess:
    return _tool("--compare", str(path))


def test_a_good_record_passes_and_each_defect_is_named():
    good = _cuda_record({suite.load(SUITE)[0].label(): 30.0})
    assert record.check(good) == []
    cases = {
        "schema must be": lambda r: r.update(schema=1),
        "name torch and trl": lambda r: r["versions"].pop("trl"),
        "names its GPU": lambda r: r.update(gpu=None),
        "cuda_context_bytes": lambda r: r.pop("cuda_context_bytes"),
        "trainer must be one of": lambda r: r["runs"][0].update(trainer="ppo"),
        "method must be one of": lambda r: r["runs"][0].update(method="dora"),
        "seq_len must be": lambda r: r["runs"][0].update(seq_len=0),
        "planner_args must be": lambda r: r["runs"][0].pop("planner_args"),
        "without an error has steps": lambda r: r["runs"][0].update(steps=[]),
        "positive byte count on cuda": lambda r: r["runs"][0]["steps"][0].update(max_memory_allocated=None),
        "null on cpu": lambda r: r.update(device="cpu"),
        "non-empty list": lambda r: r.update(runs=[]),
        "a run is a JSON object": lambda r: r["runs"].append(3),
        "a step is a JSON object": lambda r: r["runs"][0]["steps"].append("x"),
    }
    for expected, breaks in cases.items():
        broken = copy.deepcopy(good)
        breaks(broken)
        assert any(expected in problem for problem in record.check(broken)), expected


def test_every_suite_run_is_runnable_and_the_planner_plans_it_as_one_gpu():
    specs = suite.load(SUITE)
    assert len(specs) >= 10 and {s.trainer for s in specs} == set(suite.TRAINERS)
    assert {s.method for s in specs} == set(suite.METHODS)
    for spec in specs:
        assert suite.problems(spec) == [], spec.label()
        assert (REPO_ROOT / spec.config).is_file(), spec.config
        data = _plan_in_process(suite.planner_args(spec, H200_GIB))
        assert data["setup"]["method"] == spec.method and data["setup"]["seq_len"] == spec.seq_len
        assert any(c["strategy"] == "ddp" for c in data["candidates"]), spec.label()


def test_a_suite_that_cannot_be_read_is_refused_in_one_line(tmp_path: Path):
    for text in ("{", '{"runs": [{"config": "x"}]}', "[]"):
        (tmp_path / "suite.json").write_text(text)
        done = _tool("--suite", str(tmp_path / "suite.json"))
        assert done.returncode == 2 and "cannot read a suite" in done.stderr and "Traceback" not in done.stderr


def test_a_bad_spec_is_named():
    base = suite.RunSpec("tiny", "grpo", "qlora", 16, 8, completion_len=8, num_generations=8)
    assert suite.problems(base) == []
    assert any("completion_len" in p for p in suite.problems(suite.RunSpec("tiny", "grpo", "lora", 16, 8, 16, 8)))
    assert any("dividing micro_batch" in p for p in suite.problems(suite.RunSpec("tiny", "grpo", "lora", 16, 6, 8, 4)))
    assert any("DPO is measured" in p for p in suite.problems(suite.RunSpec("tiny", "dpo", "full", 16, 2)))


def test_the_comparison_uses_the_planners_point_and_band_and_judges_the_verdict():
    specs = suite.load(SUITE)
    planned = {s.label(): _plan_in_process(suite.planner_args(s, H200_GIB)) for s in specs[:3]}
    point = {label: _ddp(data)["per_gpu_gib"] for label, data in planned.items()}
    measured = {specs[0].label(): point[specs[0].label()], specs[1].label(): point[specs[1].label()] * 2}
    rows = compare.rows(_cuda_record(measured), _plan_in_process)
    by_label = {row.label: row for row in rows}
    first, second, oom = by_label[specs[0].label()], by_label[specs[1].label()], by_label[specs[2].label()]
    assert first.ratio == pytest.approx(1.0, abs=0.01) and first.inside_band
    assert second.ratio == pytest.approx(0.5, abs=0.01) and second.inside_band is False
    assert oom.measured_gib is None and oom.verdict_right is (not oom.planned_fits)
    assert first.verdict_right is first.planned_fits
    text = compare.render(rows)
    assert "inside the band: 1/2 measured runs" in text and "fit verdict right:" in text
    assert all(len(line) <= 100 for line in text.splitlines())


def test_the_compare_command_prints_the_table_and_refuses_a_cpu_record(tmp_path: Path):
    specs = suite.load(SUITE)
    good = _cuda_record({specs[0].label(): 30.0})
    (tmp_path / "gpu.json").write_text(json.dumps(good))
    done = _compare(tmp_path / "gpu.json")
    assert done.returncode == 0, done.stderr
    assert specs[0].label()[:40] in done.stdout and "inside the band:" in done.stdout
    cpu = {**good, "device": "cpu", "runs": [{**good["runs"][1]}]}
    (tmp_path / "cpu.json").write_text(json.dumps(cpu))
    done = _compare(tmp_path / "cpu.json")
    assert done.returncode == 2 and "not a cuda record" in done.stderr and "Traceback" not in done.stderr
    (tmp_path / "cut.json").write_text('{"schema":')
    for path, message in [(tmp_path / "cut.json", "cannot read a record"), (tmp_path / "none.json", "cannot read")]:
        done = _compare(path)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


NO_RECORD = pytest.param(
    None, marks=pytest.mark.skip(reason="no GPU record yet: tools/device_measure.sh writes one on a GPU machine")
)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in GPU_RECORDS] or [NO_RECORD])
def test_gpu_records_lie_inside_the_planners_band(path: Path):
    data = json.loads(path.read_text(encoding="utf-8"))
    assert record.check(data) == [] and data["device"] == "cuda"
    rows = compare.rows(data, _plan_in_process)
    outside = [row.label for row in rows if row.inside_band is False]
    wrong = [row.label for row in rows if row.verdict_right is False]
    assert not outside and not wrong, (outside, wrong)


MISSING = [
    name
    for name in ("torch", "transformers", "peft", "trl", "datasets", "bitsandbytes")
    if importlib.util.find_spec(name) is None
]
NEEDS_TORCH_STACK = pytest.mark.skipif(
    bool(MISSING), reason=f"needs {', '.join(MISSING)} (not in the test extra; see the tool's docstring)"
)


@NEEDS_TORCH_STACK
def test_the_tiny_cpu_run_goes_through_every_suite_run_and_its_record_checks(tmp_path: Path):
    out = tmp_path / "tiny.json"
    done = subprocess.run(
        [sys.executable, str(TOOL), "--suite", str(SUITE), "--tiny", "--steps", "1", "--write", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert record.check(data) == [] and data["device"] == "cpu"
    assert [(r["trainer"], r["method"]) for r in data["runs"]] == [(s.trainer, s.method) for s in suite.load(SUITE)]
    assert all(r["error"] is None and len(r["steps"]) == 1 for r in data["runs"]), [r["error"] for r in data["runs"]]


@NEEDS_TORCH_STACK
def test_the_qlora_stand_in_is_bitsandbytes_nf4_with_double_quantization():
    import bitsandbytes as bnb

    from memory.measure import TINY_CONFIG, _model

    model = _model(TINY_CONFIG, "qlora", "cpu")
    quantized = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert len(quantized) == 7 * TINY_CONFIG["num_hidden_layers"] and model.is_loaded_in_4bit
    state = quantized[0].weight.quant_state
    assert state.quant_type == "nf4" and state.nested  # double quantization: the absmax quantized too
    assert not isinstance(model.lm_head, bnb.nn.Linear4bit)


def test_the_device_command_parses_pins_its_wheels_and_refuses_to_run_off_the_device():
    script = REPO_ROOT / "tools" / "device_measure.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    wheels = next(line for line in script.read_text().splitlines() if line.startswith("WHEELS="))
    assert all("==" in name for name in wheels.split("=", 1)[1].strip('"').split())
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode != 0 and "run this on the device machine" in done.stderr
