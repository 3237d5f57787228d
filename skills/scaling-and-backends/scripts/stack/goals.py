"""What each goal (a backend id of the diagnostic, plus the planner-only async-grpo and context-parallel) needs:
TRL extras, the packages that must be present, and the feature names whose floors (matrix ``floors``) apply.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Sequence, Tuple


class Goal(NamedTuple):
    trl_extras: Tuple[str, ...]
    packages: Tuple[str, ...]  # must be installed (beyond trl, transformers, torch, accelerate)
    features: Tuple[str, ...]  # floor features that apply
    note: str


GOALS: Dict[str, Goal] = {
    "ddp": Goal((), (), (), "data parallel needs only TRL's base requirements"),
    "fsdp2": Goal((), (), ("fsdp2",), "FSDP2 through Accelerate"),
    "deepspeed": Goal(("deepspeed",), ("deepspeed",), (), "DeepSpeed ZeRO through TRL's deepspeed extra"),
    "peft": Goal(("peft",), ("peft",), (), "LoRA through TRL's peft extra"),
    "qlora": Goal(
        ("peft", "quantization"), ("peft", "bitsandbytes"), ("qlora",), "QLoRA (with fsdp2: the FSDP+QLoRA floors)"
    ),
    "liger": Goal(("liger",), ("liger-kernel",), ("liger",), "Liger kernels through TRL's liger extra"),
    "hub-kernels": Goal(("kernels",), ("kernels",), ("hub-kernels",), "Hub kernels through TRL's kernels extra"),
    "vllm-colocate": Goal(("vllm",), ("vllm",), ("vllm",), "vLLM inside the training processes"),
    "vllm-server": Goal(("vllm",), ("vllm",), ("vllm",), "vLLM server (trl vllm-serve) in this environment"),
    "async-grpo": Goal(("vllm",), ("vllm",), ("vllm", "async-grpo"), "AsyncGRPO with NCCL weight transfer"),
    "async-grpo-lora": Goal(
        ("vllm", "peft"),
        ("vllm", "peft"),
        ("vllm", "async-grpo", "async-grpo-lora"),
        "AsyncGRPO with adapter-only LoRA sync",
    ),
    "context-parallel": Goal((), (), ("context-parallel",), "context parallelism (Accelerate ParallelismConfig)"),
}
GOAL_IDS = tuple(GOALS)
NOT_PLANNED = {
    "flash-attn": "flash-attn builds against the local torch and CUDA; it is outside the recorded matrix",
    "unsloth": "unsloth pins its own stack; it is outside the recorded matrix",
}
BASE_PACKAGES = ("trl", "transformers", "torch", "accelerate")
# Features that only a pair of goals needs: FSDP sharding 4-bit weights needs a float quant storage.
PAIR_FEATURES: Dict[Tuple[str, str], str] = {("fsdp2", "qlora"): "fsdp-qlora"}


def combined(goal_ids: Sequence[str]) -> Goal:
    """The union of several goals."""
    extras: List[str] = []
    packages: List[str] = []
    features: List[str] = []
    for gid in goal_ids:
        goal = GOALS[gid]
        extras += [e for e in goal.trl_extras if e not in extras]
        packages += [p for p in goal.packages if p not in packages]
        features += [f for f in goal.features if f not in features]
    for (first, second), feature in PAIR_FEATURES.items():
        if first in goal_ids and second in goal_ids and feature not in features:
            features.append(feature)
    return Goal(tuple(sorted(extras)), tuple(packages), tuple(features), "; ".join(GOALS[g].note for g in goal_ids))
