"""A tiny fix index in the shipped format, for the fixes tests."""

from __future__ import annotations

import gzip
import json
from typing import Any, Dict

from fixes.load import FixIndex, parse


def tiny_raw() -> Dict[str, Any]:
    return {
        "schema": 1,
        "fields": ["release", "pr", "title", "paths", "broke"],
        "packages": {
            "trl": {"repo": "huggingface/trl", "releases": ["1.0.0", "1.1.0", "1.2.0"], "snapshot": "2026-07-24"},
            "deepspeed": {
                "repo": "deepspeedai/DeepSpeed",
                "releases": ["0.17.0", "0.17.1", "0.17.2", "0.17.3"],
                "snapshot": "2026-08-22",
            },
        },
        "changes": {
            "trl": [
                [0, 10, "Fix GRPOTrainer vllm_group_port timeout", "trainer/grpo_trainer", 0],
                [1, 11, "Fix GRPOTrainer crash with vllm colocate", "trainer/grpo_trainer,extras/vllm_client", 0],
                [2, 12, "Document something unrelated", "trainer/sft_config", 0],
                [-1, 13, "Fix GRPOTrainer vllm colocate sleep", "trainer/grpo_trainer", 0],
            ],
            "deepspeed": [
                [1, 100, "Speed up ZeRO-3 partition hooks", "runtime/zero/partition_parameters", 0],
                [2, 101, "Fix ZeRO-Offload CPULion optimizer check", "runtime/engine", 0],
                [
                    3,
                    102,
                    'Revert "Speed up ZeRO-3 partition hooks (#100)"',
                    "runtime/zero/partition_parameters",
                    [100, "0.17.1"],
                ],
            ],
        },
    }


def tiny_bytes(raw: Dict[str, Any]) -> bytes:
    return gzip.compress(json.dumps(raw).encode("utf-8"), mtime=0)


def tiny_index() -> FixIndex:
    return parse(tiny_bytes(tiny_raw()))
