"""diagnostic/crosschecks.py: findings that need two gathered facts at once (torch build against the GPUs and the
driver, visibility, the accelerate config against the GPUs), on small hand-built reports."""

from __future__ import annotations

from typing import Any, Dict, List

from diagnostic.crosschecks import environment_findings


def report(**changes: Any) -> Dict[str, Any]:
    gpu = {"vendor": "nvidia", "driver": "550.54.15", "visible": True, "bf16": True}
    value: Dict[str, Any] = {
        "packages": {"torch": {"problems": [], "installed": True}, "deepspeed": {"problems": [], "installed": False}},
        "compatibility": [],
        "torch_build": {"kind": "cuda", "version": "2.13.0", "cuda": "12.8"},
        "accelerators": {
            "gpus": [dict(gpu), dict(gpu)],
            "nvidia_smi": {"status": "ok"},
            "rocm_smi": {"status": "missing"},
            "visible_devices": {},
        },
        "launch": {"accelerate_config": {"status": "none"}},
    }
    value.update(changes)
    return value


def codes(value: Dict[str, Any]) -> List[str]:
    return [f["code"] for f in environment_findings(value)]


def test_a_consistent_machine_has_no_findings() -> None:
    assert codes(report()) == []


def test_the_torch_build_is_checked_against_the_gpus_and_the_driver() -> None:
    assert codes(report(torch_build={"kind": "cpu", "version": "2.13.0"})) == ["torch_cpu_build_with_gpu"]
    assert codes(report(torch_build={"kind": "rocm", "version": "2.13.0"})) == ["torch_build_mismatch"]
    old = report()
    for gpu in old["accelerators"]["gpus"]:
        gpu["driver"] = "520.61.05"
    [finding] = environment_findings(old)
    assert finding["code"] == "driver_too_old" and "needs NVIDIA driver >= 525.60.13" in finding["message"]


def test_visibility_and_the_accelerate_config_are_checked_against_the_gpus() -> None:
    hidden = report()
    hidden["accelerators"]["visible_devices"] = {"resolved": [], "variable": "CUDA_VISIBLE_DEVICES", "raw": ""}
    assert codes(hidden) == ["no_visible_gpu"]
    settings = {"num_processes": 4, "distributed_type": "FSDP", "mixed_precision": "bf16"}
    config = {"status": "found", "problems": [], "settings": settings, "path": "c.yaml"}
    [finding] = environment_findings(report(launch={"accelerate_config": config}))
    assert finding["code"] == "accelerate_num_processes" and "num_processes=4 but 2 GPU(s)" in finding["message"]
    deepspeed = {**config, "settings": {"distributed_type": "DEEPSPEED"}}
    assert codes(report(launch={"accelerate_config": deepspeed})) == ["accelerate_deepspeed_missing"]
    broken = {"status": "malformed", "problems": ["not a mapping"], "path": "c.yaml"}
    assert codes(report(launch={"accelerate_config": broken})) == ["accelerate_config_malformed"]


def test_install_problems_and_unmet_pins_become_findings() -> None:
    problems = [{"code": "metadata_without_module", "message": "no module"}, {"code": "other", "message": "odd"}]
    value = report(packages={**report()["packages"], "trl": {"problems": problems, "installed": True}})
    value["compatibility"] = [
        {"status": "outside", "kind": "dependency", "subject": "accelerate", "installed": "0.1",
         "required_by": "trl 1.16.0", "requirement": ">=1.4.0"},
        {"status": "missing", "kind": "dependency", "subject": "datasets", "required_by": "trl 1.16.0"},
    ]  # fmt: skip
    found = environment_findings(value)
    assert [(f["severity"], f["code"]) for f in found] == [
        ("error", "metadata_without_module"),
        ("warning", "other"),
        ("warning", "pin_outside"),
        ("warning", "pin_missing"),
    ]
