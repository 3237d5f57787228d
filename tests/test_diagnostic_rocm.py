"""scripts/diagnostic/rocm.py: ``rocm-smi --json`` read into GPU records (keys matched loosely, memory bounded,
garbage refused with a reason). End to end through a fake rocm-smi: tests/test_diagnostic_gpus.py."""

from __future__ import annotations

import json

import pytest
from diagnostic.rocm import parse_rocm_json

from diagnostic_helpers import ROCM_JSON


def test_two_mi300x_cards_with_their_driver() -> None:
    gpus, reason = parse_rocm_json("WARNING: a banner line\n" + json.dumps(ROCM_JSON))
    assert reason == "" and gpus is not None
    assert [(g["index"], g["name"], g["arch"], g["driver"]) for g in gpus] == [
        (0, "AMD Instinct MI300X", "gfx942", "6.7.0"),
        (1, "AMD Instinct MI300X", "gfx942", "6.7.0"),
    ]
    assert gpus[0]["memory_total_mib"] == 205822885888 // 1048576
    assert gpus[0]["memory_free_mib"] == gpus[0]["memory_total_mib"] - 293994496 // 1048576


def test_an_impossible_memory_reading_is_unknown_not_a_number() -> None:
    card = dict(ROCM_JSON["card0"], **{"VRAM Total Memory (B)": "9" * 40})
    [gpu], _ = parse_rocm_json(json.dumps({"card0": card}))
    assert gpu["memory_total_mib"] is None and gpu["memory_free_mib"] is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [("no json here", "not a JSON object"), ("[1, 2]", "not a JSON object"), ('{"system": {}}', "no cardN entries")],
)
def test_garbage_is_refused_with_a_reason(text: str, reason: str) -> None:
    assert parse_rocm_json(text) == (None, reason)
