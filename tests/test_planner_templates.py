"""scripts/planner/templates.py: the launch templates follow the picked candidate and its setup."""

from __future__ import annotations

from plan_training import model_facts
from planner.assemble import build_plan
from planner.hardware import resolve_hardware
from planner.inputs import Flags, load_request
from planner.templates import build_commands


def _commands(**flags):
    request = load_request(Flags(**flags))
    plan = build_plan(request, model_facts(request), resolve_hardware(request))
    return plan, build_commands(request, plan)


def test_an_offload_change_names_its_preset_settings() -> None:
    plan, out = _commands(params="70B", method="qlora", trainer="sft", gpus=2, gpu_memory_gib=24.0, micro_batch=4)
    assert plan.recommended is None and plan.alternative_pick is not None
    assert plan.alternative_pick.strategy == "fsdp2-offload"
    notes = " ".join(c["note"] for c in out.commands)
    assert "start from TRL preset fsdp2" in notes and "fsdp_offload_params: true" in notes
    assert out.config_fields["per_device_train_batch_size"] == plan.alternative_pick.setup.micro_batch


def test_fp16_gpus_get_fp16_switches_everywhere() -> None:
    _plan, out = _commands(
        params="1B", method="lora", trainer="sft", gpus=1, gpu_memory_gib=16.0, compute_capability="7.5",
        micro_batch=1, model_dtype="float16",
    )  # fmt: skip
    trl = next(c["command"] for c in out.commands if " trl sft" in f" {c['command']}")
    assert "--bf16 false --fp16 true" in trl and out.config_fields["fp16"] is True and not out.config_fields["bf16"]


def test_nothing_to_template_when_nothing_fits() -> None:
    plan, out = _commands(params="400B", trainer="sft", gpus=1, gpu_memory_gib=8.0, host_memory_gib=16.0)
    assert plan.recommended is None and plan.alternative_pick is None
    assert out.commands == [] and out.config_fields == {}
