"""nodes/facts.py: the facts the rules read from one loaded report."""

from __future__ import annotations

from typing import Any, Dict

from nodes import facts


def node(**report: Any) -> Dict[str, Any]:
    return {"index": 0, "report": {"node": {}, **report}}


def test_package_versions() -> None:
    packages = {"trl": {"installed": True, "version": "1.16.0"}, "vllm": {"installed": True}, "peft": {}}
    entry = node(packages=packages)
    assert facts.package_version(entry, "trl") == "1.16.0"
    assert facts.package_version(entry, "vllm") == "installed, version unknown"
    assert facts.package_version(entry, "peft") is None and facts.package_version(entry, "absent") is None


def test_torch_build_text() -> None:
    assert facts.torch_build_text(node(torch_build={"kind": "cuda", "cuda": "12.8"})) == "CUDA 12.8"
    assert facts.torch_build_text(node(torch_build={"kind": "rocm", "hip": "6.4"})) == "ROCm 6.4"
    assert facts.torch_build_text(node(torch_build={"kind": "cpu"})) == "CPU-only"
    assert facts.torch_build_text(node(torch_build={})) == "unknown"


def test_gpu_models_only_when_the_listing_worked() -> None:
    gpus = [{"name": "H100", "visible": True}, {"name": "A100", "visible": False}, {"name": "H100", "visible": True}]
    listed = node(accelerators={"nvidia_smi": {"status": "ok"}, "gpus": gpus})
    assert facts.gpu_models(listed) == "H100" and len(facts.visible_gpus(listed)) == 2
    assert facts.gpu_models(node(accelerators={"nvidia_smi": {"status": "ok"}, "gpus": []})) == "no visible GPU"
    assert facts.gpu_models(node(accelerators={"nvidia_smi": {"status": "missing"}, "gpus": gpus})) is None


def test_config_env_and_integers() -> None:
    entry = {"report": {"node": {"accelerate": {"num_machines": 2}, "env": {"MASTER_PORT": "29500"}}}}
    assert facts.config_fields(entry) == {"num_machines": 2}
    assert facts.node_env(entry) == {"MASTER_PORT": "29500"}
    assert facts.config_fields(node()) == {} and facts.node_env(node()) == {}
    assert facts.as_int("3") == 3 and facts.as_int(None) is None and facts.as_int("x") is None
