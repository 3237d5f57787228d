"""scripts/planner/inputs.py: the planner's inputs are validated before any arithmetic."""

from __future__ import annotations

import argparse

import pytest

from planner.inputs import (
    check_accelerate_config,
    check_args,
    check_model_config,
    check_params_text,
    check_trl_config,
    shell_safe,
)
from planner.rules import PlanInputError


def _args(**values) -> argparse.Namespace:
    return argparse.Namespace(**values)


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
        check_args(_args(**values))


def test_lower_bounds_of_hardware_are_left_to_the_hardware_check() -> None:
    check_args(_args(gpus=0, nodes=0, gpu_memory_gib=-1.0))  # "impossible hardware: ..." is said later
    check_args(_args(gpus=8, gpu_memory_gib=80.0, beta=0.04, host_memory_gib=512.0))


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
