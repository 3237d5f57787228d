"""scripts/planner/inputs.py: the planner's inputs are validated before any arithmetic."""

from __future__ import annotations

import dataclasses

import pytest

import plan_training as pt
from planner.inputs import (
    Flags,
    PlanInputError,
    check_accelerate_config,
    check_flags,
    check_model_config,
    check_params_text,
    check_trl_config,
    load_request,
    shell_safe,
)


@pytest.mark.parametrize(
    ("values", "flag"),
    [
        ({"gpus": 100_000_000}, "--gpus"),
        ({"gpu_memory_gib": 1e300}, "--gpu-memory-gib"),
        ({"gpu_memory_gib": float("inf")}, "--gpu-memory-gib"),
        ({"host_memory_gib": float("nan")}, "--host-memory-gib"),
        ({"host_memory_gib": -64.0}, "--host-memory-gib"),
        ({"beta": float("nan")}, "--beta"),
        ({"num_processes": 10**12}, "--num-processes"),
        ({"seq_len": 10**100}, "--seq-len"),
    ],
)
def test_command_line_numbers_are_bounded_and_finite(values, flag) -> None:
    with pytest.raises(PlanInputError, match=flag):
        check_flags(Flags(**values))


def test_lower_bounds_of_hardware_are_left_to_the_hardware_check() -> None:
    check_flags(Flags(gpus=0, nodes=0, gpu_memory_gib=-1.0))  # "impossible hardware: ..." is said later
    check_flags(Flags(gpus=8, gpu_memory_gib=80.0, beta=0.04, host_memory_gib=512.0))


@pytest.mark.parametrize("text", ["1e400", "nan", "inf", "2e15"])
def test_params_must_be_finite_and_plausible(text: str) -> None:
    with pytest.raises(PlanInputError, match="--params"):
        check_params_text(text)
    check_params_text("70B")
    check_params_text("seven")  # left to the parser's own message


def test_model_config_counts() -> None:
    good = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}
    check_model_config(good, "config.json")
    for bad, needle in (
        ({**good, "num_key_value_heads": 64}, "above"),
        ({**good, "hidden_size": [1]}, "hidden_size must be an integer"),
        ({**good, "hidden_size": True}, "hidden_size"),
        ({**good, "rope_theta": float("nan")}, "not a finite number"),
        ({**good, "text_config": {"num_hidden_layers": 0}}, "text_config.num_hidden_layers"),
        ({**good, "x": [1, {"y": 10**30}]}, "too large"),
    ):
        with pytest.raises(PlanInputError, match=needle):
            check_model_config(bad, "config.json")


def test_trl_and_accelerate_configs() -> None:
    check_trl_config({"num_generations": 8, "beta": 0.0}, "trl.yaml")
    with pytest.raises(PlanInputError, match="num_generations"):
        check_trl_config({"num_generations": 0}, "trl.yaml")
    with pytest.raises(PlanInputError, match="beta"):
        check_trl_config({"beta": float("inf")}, "trl.yaml")
    check_accelerate_config({"distributed_type": "NO", "num_processes": 1}, "acc.yaml")
    with pytest.raises(PlanInputError, match="quoted"):
        check_accelerate_config({"distributed_type": False}, "acc.yaml")
    with pytest.raises(PlanInputError, match="num_processes"):
        check_accelerate_config({"num_processes": 10**12}, "acc.yaml")


def test_shell_safe_quotes_only_when_needed() -> None:
    assert shell_safe("meta-llama/Llama-3.1-8B") == "meta-llama/Llama-3.1-8B"
    assert shell_safe("/models/qwen3@main") == "/models/qwen3@main"
    assert shell_safe("x; rm -rf ~") == "'x; rm -rf ~'"
    assert shell_safe(None) is None


def test_flags_mirror_the_command_line() -> None:
    """Every flag the parser defines is a Flags field with the same default, and nothing else is."""
    parsed = vars(pt.build_parser().parse_args([]))
    defaults = {f.name: f.default for f in dataclasses.fields(Flags)}
    assert parsed == defaults


def test_the_request_holds_the_loaded_config_and_the_resolved_trainer(tmp_path) -> None:
    trl = tmp_path / "trl.yaml"
    trl.write_text("num_generations: 4\nper_device_train_batch_size: 2\nmax_length: 512\n")
    request = load_request(Flags(params="8B", lint_trl_config=str(trl), micro_batch=4))
    assert request.trainer == "grpo" and "num_generations" in (request.trainer_note or "")
    assert request.trl_config == {"num_generations": 4, "per_device_train_batch_size": 2, "max_length": 512}
    assert (request.micro_batch, request.num_generations, request.grad_accum) == (4, 4, 1)
    assert request.seq_len == 2048  # max_length belongs to SFT/DPO configs; GRPO reads vllm_max_model_length
    won = {item["input"]: item["source"] for item in request.input_sources}
    assert won == {"--micro-batch": "flag", "--num-generations": f"num_generations in {trl}"}
    assert request.planning and request.linting and request.accelerate is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.trainer = "sft"  # type: ignore[misc]


def test_the_request_names_the_file_it_cannot_use(tmp_path) -> None:
    bad = tmp_path / "trl.yaml"
    bad.write_text("max_length: lots\n")
    with pytest.raises(PlanInputError, match=r"trl\.yaml: max_length must be an integer"):
        load_request(Flags(params="8B", trainer="sft", lint_trl_config=str(bad)))
    with pytest.raises(PlanInputError, match="nothing to do"):
        load_request(Flags())
