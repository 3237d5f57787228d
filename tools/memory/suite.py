"""The runs to measure: one spec per run, expanded from a suite file, and the planner flags that describe it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List

TRAINERS = ("sft", "dpo", "grpo")
METHODS = ("full", "lora", "qlora")
LORA_RANK = 16
TINY = "tiny"  # the config name of the built-in tiny model (a CPU run: a schema check, no memory)


@dataclass(frozen=True)
class RunSpec:
    """One measured run. seq_len is the tokens per sequence (GRPO: prompt + completion); the data are made so that
    every sequence has exactly that many tokens (DPO: half prompt, half answer)."""

    config: str  # a config.json path relative to the repository root, or TINY
    trainer: str
    method: str
    seq_len: int
    micro_batch: int
    completion_len: int = 0  # GRPO: max_completion_length (the prompt is seq_len - completion_len)
    num_generations: int = 0  # GRPO

    def label(self) -> str:
        model = Path(self.config).parent.name if self.config != TINY else TINY
        grpo = f" C={self.completion_len} G={self.num_generations}" if self.trainer == "grpo" else ""
        return f"{model} {self.trainer}/{self.method} L={self.seq_len} B={self.micro_batch}{grpo}"

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def problems(spec: RunSpec) -> List[str]:
    """What makes a spec unrunnable, or an empty list."""
    out = []
    if spec.trainer not in TRAINERS:
        out.append(f"trainer must be one of {', '.join(TRAINERS)}")
    if spec.method not in METHODS:
        out.append(f"method must be one of {', '.join(METHODS)}")
    if spec.trainer == "dpo" and spec.method == "full":
        out.append("DPO is measured with LoRA or QLoRA (the adapter-off model is the reference: no second copy)")
    if spec.seq_len < 2 or spec.micro_batch < 1:
        out.append("seq_len must be at least 2 and micro_batch at least 1")
    if spec.trainer == "grpo":
        if not 0 < spec.completion_len < spec.seq_len:
            out.append("GRPO needs 0 < completion_len < seq_len")
        if spec.num_generations < 2 or spec.micro_batch % spec.num_generations:
            out.append("GRPO needs num_generations >= 2 dividing micro_batch")
    return out


def expand(suite: Dict[str, Any]) -> List[RunSpec]:
    """Every run of a suite file: each entry's seq_len and micro_batch lists are crossed."""
    specs = []
    for entry in suite["runs"]:
        for seq_len in _as_list(entry["seq_len"]):
            for batch in _as_list(entry["micro_batch"]):
                specs.append(
                    RunSpec(
                        config=entry["config"],
                        trainer=entry["trainer"],
                        method=entry["method"],
                        seq_len=seq_len,
                        micro_batch=batch,
                        completion_len=entry.get("completion_len", 0),
                        num_generations=entry.get("num_generations", 0),
                    )
                )
    return specs


def load(path: Path) -> List[RunSpec]:
    return expand(json.loads(path.read_text(encoding="utf-8")))


def _as_list(value: Any) -> List[int]:
    return list(value) if isinstance(value, list) else [value]


def planner_args(spec: RunSpec, gpu_memory_gib: float) -> List[str]:
    """plan_training.py flags that describe the run as measure.py performs it: one GPU, weights built in bf16, torch
    AdamW (states in the parameter dtype), gradient checkpointing, LoRA rank 16 on all-linear, no vLLM."""
    args = ["--model-config", spec.config, "--method", spec.method, "--trainer", spec.trainer]
    args += ["--seq-len", str(spec.seq_len), "--micro-batch", str(spec.micro_batch), "--gpus", "1"]
    args += ["--model-dtype", "bfloat16", "--optimizer", "adamw", "--gradient-checkpointing"]
    args += ["--gpu-memory-gib", f"{gpu_memory_gib:.3f}", "--host-memory-gib", "4096"]
    if spec.method != "full":
        args += ["--lora-rank", str(LORA_RANK), "--lora-targets", "all-linear"]
    if spec.method == "qlora":
        args += ["--bnb-double-quant"]
    if spec.trainer == "grpo":
        args += ["--max-completion-length", str(spec.completion_len), "--num-generations", str(spec.num_generations)]
        args += ["--vllm-mode", "none"]
    return args
