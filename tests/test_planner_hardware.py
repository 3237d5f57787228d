"""scripts/planner/hardware.py: the GPUs to plan for, from the flags or the diagnostic's visible GPUs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from planner.hardware import GIB, cc_value, resolve_hardware
from planner.inputs import Flags, PlanInputError, load_request

JSON_INFO = {"count": 4, "memory_gib": 79.6, "compute_capabilities": ["9.0"] * 4, "names": ["H100"] * 4, "notes": []}


def _request(**flags):
    return load_request(Flags(params="8B", **flags))


@pytest.mark.parametrize(("text", "value"), [("8.6", 8.6), ("10.0", 10.0), ("7", 7.0), ("x.y", None), (None, None)])
def test_compute_capability_values(text, value) -> None:
    assert cc_value(text) == value


def test_flags_win_over_the_hardware_json_and_memory_is_in_bytes() -> None:
    request = _request(gpus=2, gpu_memory_gib=24.0, nodes=2)
    hw = resolve_hardware(request)
    assert (hw.gpus_per_node, hw.nodes, hw.total_gpus, hw.memory_bytes) == (2, 2, 4, 24 * GIB)
    from_json = resolve_hardware(replace(request, gpus=None, gpu_memory_gib=40.0, hardware_info=JSON_INFO))
    assert from_json.gpus_per_node == 4 and from_json.memory_gib == 40.0 and from_json.compute_capabilities[0] == "9.0"


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        ({"gpus": 2}, "give both --gpus and --gpu-memory-gib"),
        ({"gpus": 0, "gpu_memory_gib": 80.0}, "impossible hardware: --gpus 0"),
        ({"gpus": 1, "gpu_memory_gib": 80.0, "nodes": 0}, "impossible hardware: --nodes 0"),
    ],
)
def test_impossible_hardware_is_refused(flags, needle) -> None:
    with pytest.raises(PlanInputError, match=needle):
        resolve_hardware(_request(**flags))


def test_no_hardware_at_all_is_none_for_a_lint_only_run() -> None:
    assert resolve_hardware(_request(), need_memory=False) is None
