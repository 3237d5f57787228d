"""scripts/planner/inputs.py: the planner's inputs are validated before any arithmetic."""

from __future__ import annotations

import dataclasses

import plan_training as pt
import pytest
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
    vllm_release_of,
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
    # max_length belongs to SFT/DPO configs; GRPO's sequence is TRL 1.16's default: assumed prompt + completion
    assert request.seq_len == 512 + 512 and request.max_completion_length == 512
    won = {item["input"]: item["source"] for item in request.input_sources}
    assert won["--micro-batch"] == "flag" and won["--num-generations"] == f"num_generations in {trl}"
    assert "GRPOConfig.max_completion_length 512" in won["--seq-len"] and won["--seq-len"].startswith("TRL 1.16.0")
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


def test_the_trl_defaults_table_is_fresh() -> None:
    """scripts/planner/trl_defaults.json is what tools/facts/planner_defaults.py makes from the recorded history."""
    import json

    from tools.facts import planner_defaults

    from conftest import REPO_ROOT, SKILL_DIR

    history = json.loads((REPO_ROOT / "tests" / "facts" / "release_history.json").read_text(encoding="utf-8"))
    shipped = (SKILL_DIR / "scripts" / "planner" / "trl_defaults.json").read_text(encoding="utf-8")
    assert planner_defaults.render(planner_defaults.build(history)) == shipped, (
        "stale: run python3 -m tools.facts.planner_defaults"
    )


@pytest.mark.parametrize(
    ("release", "trainer", "lm_head"),
    [
        ("1.6.0", "sft", "full"),  # loss_type None resolves to nll, with a warning that 1.7 changes it
        ("1.7.1", "sft", "chunked"),  # chunked_nll by default
        ("1.15.0", "sft", "fused"),
        ("1.0.0", "async-grpo", "full"),
        ("1.1.0", "async-grpo", "chunked"),  # patch_chunked_lm_head
        ("1.14.2", "grpo", "full"),  # logits materialised, completion tokens only
        ("1.16.0", "grpo", "fused"),
        ("1.16.0", "dpo", "fused"),
    ],
)
def test_the_lm_head_per_trainer_and_release(release, trainer, lm_head) -> None:
    assert load_request(Flags(params="8B", trainer=trainer, trl_version=release)).lm_head == lm_head


def test_trl_defaults_are_used_when_nothing_is_given_and_said() -> None:
    sft = load_request(Flags(params="8B", trainer="sft"))
    assert sft.seq_len == 1024 and sft.gradient_checkpointing is True
    rloo = load_request(Flags(params="8B", trainer="rloo"))
    assert rloo.num_generations == 2 and rloo.beta == 0.05  # RLOOConfig's own, not GRPO's 8 and 0.0
    old = load_request(Flags(params="8B", trainer="grpo", trl_version="1.9.2"))
    assert old.max_completion_length == 256 and old.seq_len == 512 + 256
    said = {item["input"]: item["source"] for item in old.input_sources}
    assert said["--max-completion-length"] == "TRL 1.9.2 default (GRPOConfig.max_completion_length)"
    given = load_request(Flags(params="8B", trainer="sft", seq_len=4096))
    assert given.seq_len == 4096 and "--seq-len" not in {item["input"] for item in given.input_sources}


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("0.16.0", (0, 16, 0)),
        ("v0.19.1", (0, 19, 1)),
        ("0.20", (0, 20, 0)),
        ("0.10.2", (0, 10, 2)),
        ("0.31.0.post1", (0, 31, 0)),
    ],
)
def test_vllm_version_is_read_as_a_release(text: str, release: tuple) -> None:
    assert vllm_release_of(text) == (release, "--vllm-version")


@pytest.mark.parametrize(
    ("text", "says"), [("0.9", "older than vLLM 0.10.2"), ("latest", "a release such as"), ("", "a release")]
)
def test_a_vllm_version_the_planner_cannot_use_is_refused(text: str, says: str) -> None:
    with pytest.raises(PlanInputError, match=says):
        vllm_release_of(text)


def test_without_vllm_version_the_rules_default_to_the_release_they_were_read_from() -> None:
    release, source = vllm_release_of(None)
    assert release == (0, 31, 0) and source.startswith("default")
