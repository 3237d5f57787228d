"""Plan assembly: evaluates every candidate strategy and method and picks the least invasive one that fits.

A sibling module of ``plan_training.py`` (not a command); standard library only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the siblings must not leave __pycache__ in scripts/

import argparse  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional, Tuple  # noqa: E402

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import plan_rules  # noqa: E402
from plan_hardware import GIB, Hardware  # noqa: E402
from plan_memory import GENERATING, REF_MODEL_DEFAULT, Estimate, Setup, estimate, judge, strategies_for  # noqa: E402
from plan_model import ModelFacts, lora_trainable  # noqa: E402
from plan_rules import PlanInputError  # noqa: E402
from plan_split import (  # noqa: E402
    TRL_COLOCATE_UTIL_DEFAULT,
    BatchGeometry,
    Split,
    VllmPlan,
    batch_geometry,
    colocate_util_needed,
    plan_server,
    plan_split,
    served_dtype_bytes,
    size_vllm,
)
from plan_templates import build_commands  # noqa: E402

# ==============================================================================================================
# Plan assembly
# ==============================================================================================================


@dataclass
class Plan:
    facts: ModelFacts
    setup: Setup
    hardware: Hardware
    trainable: int
    lora_modules: List[str]
    vllm_mode: str
    vllm: Optional[VllmPlan]
    split: Split
    usable_bytes: int
    headroom: float
    candidates: List[Estimate]
    alternatives: List[Estimate]
    recommended: Optional[Estimate]
    alternative_pick: Optional[Estimate]
    geometry: Optional[BatchGeometry]
    notes: List[str]
    commands: List[Dict[str, str]] = field(default_factory=list)
    config_fields: Dict[str, Any] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return self.recommended is not None and (self.vllm is None or self.vllm.fits)


def _methods_to_try(method: str) -> List[str]:
    return {"full": ["lora", "qlora"], "lora": ["qlora"], "qlora": []}[method]


def method_dtype(method: str, explicit: Optional[str]) -> str:
    """TRL loads in float32 unless told; QLoRA plans with bfloat16, which TRL also uses as the 4-bit compute dtype."""
    return explicit or ("bfloat16" if method == "qlora" else "float32")


def evaluate(
    method: str,
    facts: ModelFacts,
    setup: Setup,
    split: Split,
    usable: int,
    headroom: float,
    host_limit: Optional[int],
    explicit_dtype: Optional[str],
) -> Tuple[List[Estimate], int, List[str]]:
    method_setup = Setup(**{**setup.__dict__, "method": method, "model_dtype": method_dtype(method, explicit_dtype)})
    trainable, modules = (
        (facts.total, []) if method == "full" else lora_trainable(facts, setup.lora_rank, setup.lora_targets)
    )
    out = []
    world = split.trainer_world
    nodes = len(split.trainer_masks)  # training nodes; DeepSpeed's host RAM formulas are per node
    per_node = world // nodes
    for key in strategies_for(method, setup.trainer, world):
        cand = estimate(method, key, facts, method_setup, trainable, world, per_node, nodes)
        judge(cand, usable, headroom, host_limit)
        out.append(cand)
    out.sort(key=lambda c: c.rank)
    return out, trainable, modules


def build_plan(args: argparse.Namespace, facts: ModelFacts, hw: Hardware) -> Plan:
    notes: List[str] = list(facts.notes) + list(hw.notes)
    trainer = args.trainer
    low_cc = [
        cc for cc in hw.compute_capabilities if plan_rules._cc_value(cc) is not None and plan_rules._cc_value(cc) < 8.0
    ]
    mixed = "fp16" if low_cc else "bf16"
    if low_cc:
        notes.append("compute capability below 8.0: planning with fp16 mixed precision (bf16 is not available)")
    ref_model = REF_MODEL_DEFAULT[trainer]
    if args.beta is not None and trainer in ("grpo", "rloo"):
        ref_model = args.beta != 0
    setup = Setup(
        method=args.method,
        trainer=trainer,
        seq_len=args.seq_len,
        micro_batch=args.micro_batch,
        grad_ckpt=args.gradient_checkpointing,
        optimizer=args.optimizer,
        model_dtype=method_dtype(args.method, args.model_dtype),
        mixed_precision=mixed,
        lora_rank=args.lora_rank,
        lora_targets=args.lora_targets,
        double_quant=args.bnb_double_quant,
        quant_storage=args.bnb_quant_storage,
        ref_model=ref_model,
        grad_accum=args.grad_accum,
    )
    mode = resolve_vllm_mode(args, hw)
    gpu_bytes = hw.memory_bytes
    max_model_len = args.max_model_len or args.seq_len
    serve_bytes = served_dtype_bytes(trainer, setup.model_dtype)
    vllm_plan: Optional[VllmPlan] = None
    usable = gpu_bytes
    if mode == "server":
        vllm_plan, split = plan_server(args, facts, hw, setup, max_model_len, serve_bytes)
    else:
        split = plan_split(hw, 0)
    world = split.trainer_world
    if world < 1:
        raise PlanInputError("impossible hardware: no GPU is left for the trainer")
    geometry = None
    if trainer in ("grpo", "rloo"):
        geometry = batch_geometry(
            args.micro_batch, world, args.grad_accum, args.steps_per_generation, args.num_generations
        )
    if mode == "none" and geometry is not None:
        # Each process generates its share of the generation batch: per_device x steps_per_generation.
        setup.generate_sequences = args.micro_batch * geometry.steps_per_generation
        notes.append("no vLLM: the trainer generates with model.generate(), so its KV cache counts against training")
    if mode == "colocate":
        tp = args.vllm_tp or 1
        if world % tp:
            raise PlanInputError(
                f"--vllm-tp {tp}: in colocate mode the TP size must divide the world size {world} (TRL raises "
                f"'tensor_parallel_size ({tp}) must divide world size ({world}) evenly.')"
            )
        if facts.heads % tp:
            raise PlanInputError(f"--vllm-tp {tp}: vLLM needs the {facts.heads} attention heads divisible by it")
        spg = geometry.steps_per_generation if geometry else args.grad_accum
        max_num_seqs = args.vllm_concurrency or args.micro_batch * tp * spg  # grpo_trainer.py L1124-1126
        if args.vllm_gpu_memory_utilization:
            util, util_source = args.vllm_gpu_memory_utilization, "--vllm-gpu-memory-utilization"
        else:
            util = colocate_util_needed(
                facts, args.method, tp, gpu_bytes, max_model_len, max_num_seqs, args.bnb_double_quant, serve_bytes
            )
            util_source = (
                f"smallest that holds weights + {max_num_seqs} sequences + a 0.05 buffer; TRL's default is "
                f"{TRL_COLOCATE_UTIL_DEFAULT}"
            )
        vllm_plan = size_vllm(
            facts,
            args.method,
            "colocate",
            tp,
            util,
            gpu_bytes,
            max_model_len,
            max_num_seqs,
            args.bnb_double_quant,
            util_source,
            serve_bytes,
        )
        vllm_plan.concurrency_source = (
            "--vllm-concurrency" if args.vllm_concurrency else "max_num_seqs = per_device x TP x steps_per_generation"
        )
        usable = int(gpu_bytes * (1 - util))
        notes.append(
            f"colocate: vLLM takes {util:.2f} x {hw.memory_gib:.0f} GiB on every training GPU; the trainer keeps "
            f"{usable / GIB:.1f} GiB (vllm_enable_sleep_mode frees vLLM's share during the optimizer step)"
        )
    host_limit = int(args.host_memory_gib * GIB) if args.host_memory_gib else None
    candidates, trainable, modules = evaluate(
        args.method, facts, setup, split, usable, args.headroom, host_limit, args.model_dtype
    )
    alternatives: List[Estimate] = []
    for method in _methods_to_try(args.method):
        alts, _t, _m = evaluate(method, facts, setup, split, usable, args.headroom, host_limit, args.model_dtype)
        alternatives.extend(alts)
    recommended = next((c for c in candidates if c.fits), None)
    alternative_pick = None if recommended else next((c for c in alternatives if c.fits), None)
    if trainer == "async-grpo" and setup.model_dtype == "float32":
        notes.append(
            "AsyncGRPO trains in AsyncGRPOConfig.dtype (default float32) and wants the server in the same dtype "
            "(vllm serve --dtype); --model-dtype bfloat16 halves both"
        )
    if args.method != "full" and mode == "server" and trainer == "async-grpo":
        notes.append("AsyncGRPO with LoRA syncs only the adapter when the server has --enable-lora (see the template)")
    plan = Plan(
        facts,
        setup,
        hw,
        trainable,
        modules,
        mode,
        vllm_plan,
        split,
        usable,
        args.headroom,
        candidates,
        alternatives,
        recommended,
        alternative_pick,
        geometry,
        notes,
    )
    plan.commands, plan.config_fields = build_commands(args, plan)
    return plan


def resolve_vllm_mode(args: argparse.Namespace, hw: Hardware) -> str:
    mode = args.vllm_mode
    trainer = args.trainer
    if trainer not in GENERATING:
        if mode not in (None, "none"):
            raise PlanInputError(f"--vllm-mode {mode}: only GRPO, RLOO and AsyncGRPO generate with vLLM")
        return "none"
    if trainer == "async-grpo":
        if mode in ("colocate", "none"):
            raise PlanInputError("--trainer async-grpo always generates on a vLLM server: use --vllm-mode server")
        mode = "server"
    if mode is None:
        mode = "server" if hw.total_gpus >= 2 else "colocate"
    if mode == "server" and hw.total_gpus < 2:
        raise PlanInputError(
            "impossible hardware: vLLM server mode needs its own GPU next to the trainer's; with one GPU use "
            "--vllm-mode colocate"
        )
    return mode
