"""vLLM sizing for the planner: weights and KV cache per GPU, the server/trainer GPU split, batch geometry.

A sibling module of ``plan_training.py`` (not a command); standard library only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the siblings must not leave __pycache__ in scripts/

import math  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional, Tuple  # noqa: E402

_HERE = Path(__file__).resolve().parent.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from planner.hardware import GIB, Hardware  # noqa: E402
from planner.inputs import VLLM_RELEASE_DEFAULT, PlanInputError, PlanRequest  # noqa: E402
from planner.kv_cache import (  # noqa: E402
    OVERHEAD_BAND,
    SORTED_SAMPLER_BEFORE,
    SORTED_SAMPLER_EXTRA_BYTES,
    KvCapacity,
    kv_capacity,
    non_kv_overhead,
    served_defaults,
    served_weight_bytes,
    tp_refusal,
    tp_sizes,
)
from planner.memory import DTYPE_BYTES, NF4_BYTES, QUANT_STATE_BYTES, QUANT_STATE_DOUBLE_BYTES, Setup  # noqa: E402
from planner.model import ModelFacts  # noqa: E402

TRL_COLOCATE_UTIL_DEFAULT = 0.3  # GRPOConfig/RLOOConfig.vllm_gpu_memory_utilization @1.16.0

SERVER_UTIL_DEFAULT = 0.9  # what trl vllm-serve passes as --gpu-memory-utilization @1.16.0

ASYNC_MAX_STALENESS = 4  # AsyncGRPOConfig.max_staleness default


# ==============================================================================================================
# vLLM sizing and the GPU split
# ==============================================================================================================


def vllm_weight_bytes(facts: ModelFacts, method: str, mode: str, double_quant: bool, serve_bytes: int = 2) -> int:
    """Colocate QLoRA: vLLM loads the checkpoint 4-bit (quantization="bitsandbytes", vllm_generation.py)."""
    if method == "qlora" and mode == "colocate":
        qs = QUANT_STATE_DOUBLE_BYTES if double_quant else QUANT_STATE_BYTES
        return int(facts.quantizable * (NF4_BYTES + qs) + (facts.total - facts.quantizable) * 2)
    return served_weight_bytes(facts, serve_bytes)


@dataclass
class VllmPlan:
    mode: str
    tp: int
    util: float
    max_model_len: int
    concurrency: int
    weights_per_gpu: int
    overhead: int
    kv_budget: int
    kv_per_seq: int
    capacity: int
    fits: bool
    util_source: str
    notes: List[str] = field(default_factory=list)
    concurrency_source: str = ""
    kv: Optional[KvCapacity] = None
    overhead_terms: Dict[str, float] = field(default_factory=dict)
    release: Tuple[int, ...] = VLLM_RELEASE_DEFAULT

    @property
    def release_text(self) -> str:
        return ".".join(str(part) for part in self.release)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "kv_cache": self.kv.as_dict() if self.kv else None,
            "overhead_terms_gib": self.overhead_terms,
            "mode": self.mode,
            "vllm_release": self.release_text,
            "tensor_parallel_size": self.tp,
            "gpu_memory_utilization": self.util,
            "utilization_source": self.util_source,
            "max_model_len": self.max_model_len,
            "concurrency_needed": self.concurrency,
            "concurrency_source": self.concurrency_source,
            "weights_per_gpu_gib": round(self.weights_per_gpu / GIB, 2),
            "overhead_gib_approx": round(self.overhead / GIB, 2),
            "kv_budget_gib": round(self.kv_budget / GIB, 2),
            "kv_per_sequence_gib": round(self.kv_per_seq / GIB, 3),
            "sequences_at_max_len": self.capacity,
            "fits": self.fits,
            "notes": self.notes,
        }


def size_vllm(
    facts: ModelFacts,
    method: str,
    mode: str,
    tp: int,
    util: float,
    gpu_bytes: int,
    max_model_len: int,
    concurrency: int,
    double_quant: bool,
    util_source: str,
    serve_bytes: int = 2,
    release: Tuple[int, ...] = VLLM_RELEASE_DEFAULT,
) -> VllmPlan:
    weights = vllm_weight_bytes(facts, method, mode, double_quant, serve_bytes) // tp
    batched, max_seqs = served_defaults(mode, gpu_bytes)
    terms = non_kv_overhead(facts, tp, batched, max_seqs, release)
    # The fit is judged at the overhead band's upper edge: a wrong "fits" costs more than a queued sequence.
    overhead = int(terms.total * OVERHEAD_BAND[1])
    budget = int(gpu_bytes * util) - weights - overhead
    kv = kv_capacity(facts, tp, max_model_len, budget, batched, release)
    per_seq = kv.bytes_per_sequence
    capacity = kv.sequences
    plan = VllmPlan(
        mode,
        tp,
        util,
        max_model_len,
        concurrency,
        weights,
        overhead,
        budget,
        per_seq,
        capacity,
        capacity >= 1,
        util_source,
        kv=kv,
        overhead_terms=terms.as_dict(),
        release=tuple(release),
    )
    plan.notes.extend(kv.notes)
    plan.notes.append(
        f"non-KV overhead ~{terms.total / GIB:.1f} GiB (activations at max_num_batched_tokens {batched}, sampler "
        f"over {max_seqs} sequences, CUDA graphs, non-torch), judged at {overhead / GIB:.1f} GiB (+25%)"
    )
    if tuple(release) < SORTED_SAMPLER_BEFORE:
        plan.notes.append(
            f"vLLM {plan.release_text} sorts the dummy sampler batch in PyTorch (top-k/top-p before 0.17): its "
            f"sampler term counts {SORTED_SAMPLER_EXTRA_BYTES:g} more bytes per logit, read off published 0.15/0.16 "
            "start-up logs (one model), so that term is less certain than the band says"
        )
    if capacity < 1:
        plan.notes.append(
            f"vLLM cannot hold one {max_model_len}-token sequence: KV budget {budget / GIB:.1f} GiB < "
            f"{per_seq / GIB:.2f} GiB per sequence (vLLM refuses to start)"
        )
    elif capacity < concurrency:
        plan.notes.append(
            f"KV cache holds {capacity} of {concurrency} concurrent sequences at {max_model_len} tokens; the rest "
            "queue (slower generation, not an OOM)"
        )
    if facts.max_position_embeddings and max_model_len > facts.max_position_embeddings:
        plan.notes.append(
            f"max_model_len {max_model_len} exceeds the model's max_position_embeddings "
            f"{facts.max_position_embeddings}; vLLM rejects it"
        )
    return plan


def tp_choices(facts: ModelFacts, limit: int) -> List[int]:
    """TP sizes vLLM can load: every divisibility rule it checks (planner/kv_cache.py tp_refusal)."""
    return tp_sizes(facts, limit)


def served_dtype_bytes(trainer: str, model_dtype: str) -> int:
    """vLLM serves 16-bit weights (--dtype auto); AsyncGRPO asks for the trainer's dtype on the server too."""
    return DTYPE_BYTES[model_dtype] if trainer == "async-grpo" else 2


def server_concurrency(request: PlanRequest, world: int, geometry: Optional[BatchGeometry]) -> Tuple[int, str]:
    """Sequences in flight on the server: GRPO/RLOO send the whole generation batch at once; AsyncGRPO keeps
    max_inflight_tasks = max_staleness * per_device * gradient_accumulation_steps * processes (its config help)."""
    if request.vllm_concurrency:
        return request.vllm_concurrency, "--vllm-concurrency"
    if geometry is not None:
        return geometry.generation_batch, "the generation batch"
    return ASYNC_MAX_STALENESS * request.micro_batch * request.grad_accum * world, "AsyncGRPO max_inflight_tasks (auto)"


def plan_server(
    request: PlanRequest, facts: ModelFacts, hw: Hardware, setup: Setup, max_model_len: int, serve_bytes: int
) -> Tuple[VllmPlan, Split]:
    """Smallest TP whose GPUs hold the weights and one max_model_len sequence; the trainer gets the rest."""
    limit = min(hw.gpus_per_node, hw.total_gpus - 1)
    choices = tp_choices(facts, limit)
    if request.vllm_tp is not None:
        if request.vllm_tp > hw.gpus_per_node or request.vllm_tp >= hw.total_gpus:
            raise PlanInputError(
                f"impossible hardware: --vllm-tp {request.vllm_tp} leaves no GPU for the trainer or exceeds the "
                f"{hw.gpus_per_node} GPUs of a node"
            )
        why = tp_refusal(facts, request.vllm_tp)
        if why:
            fits = ", ".join(str(t) for t in tp_sizes(facts, hw.gpus_per_node)) or "none"
            raise PlanInputError(f"--vllm-tp {request.vllm_tp}: vLLM cannot load this model: {why} (TP sizes: {fits})")
        choices = [request.vllm_tp]
    if not choices:
        raise PlanInputError("impossible hardware: no tensor-parallel size leaves a GPU for the trainer")
    util = request.vllm_gpu_memory_utilization or SERVER_UTIL_DEFAULT
    util_source = (
        "--vllm-gpu-memory-utilization"
        if request.vllm_gpu_memory_utilization
        else ("0.9, what trl vllm-serve passes; vLLM's own default is 0.92")
    )
    gpu_bytes = hw.memory_bytes

    def sized(tp: int, concurrency: int) -> VllmPlan:
        return size_vllm(
            facts,
            request.method,
            "server",
            tp,
            util,
            gpu_bytes,
            max_model_len,
            concurrency,
            request.bnb_double_quant,
            util_source,
            serve_bytes,
            request.vllm_release,
        )

    tp = next((t for t in choices if sized(t, 1).fits), choices[-1])
    split = plan_split(hw, tp)
    geometry = None
    if request.trainer in ("grpo", "rloo"):
        geometry = batch_geometry(
            request.micro_batch,
            split.trainer_world,
            request.grad_accum,
            request.steps_per_generation,
            request.num_generations,
        )
    concurrency, why = server_concurrency(request, split.trainer_world, geometry)
    plan = sized(tp, concurrency)
    plan.concurrency_source = why
    if plan.fits and plan.capacity < concurrency:
        bigger = [t for t in choices if t > tp]
        for t in bigger:
            alt = sized(t, concurrency)
            if alt.capacity >= concurrency:
                plan.notes.append(
                    f"--vllm-tp {t} would hold all {concurrency} sequences, with fewer GPUs left to the trainer"
                )
                break
    return plan, split


def colocate_util_needed(
    facts: ModelFacts,
    method: str,
    tp: int,
    gpu_bytes: int,
    max_model_len: int,
    max_num_seqs: int,
    double_quant: bool,
    serve_bytes: int = 2,
    release: Tuple[int, ...] = VLLM_RELEASE_DEFAULT,
) -> float:
    batched, max_seqs = served_defaults("colocate", gpu_bytes)
    overhead = non_kv_overhead(facts, tp, batched, max_seqs, release).total * OVERHEAD_BAND[1]
    per_seq = kv_capacity(facts, tp, max_model_len, 0, batched, release).bytes_per_sequence
    need = vllm_weight_bytes(facts, method, "colocate", double_quant, serve_bytes) // tp + overhead
    need += per_seq * max_num_seqs
    # TRL's docs advise a small buffer on top (+0.05); round up to 0.05 steps.
    return round(min(0.95, math.ceil((need / gpu_bytes + 0.05) / 0.05 - 1e-9) * 0.05), 2)


@dataclass
class Split:
    server_gpus: List[str]  # "node:index"
    trainer_world: int
    trainer_masks: List[str]  # CUDA_VISIBLE_DEVICES per trainer node
    server_mask: str
    layout: str
    idle: int = 0


def plan_split(hw: Hardware, server_gpu_count: int) -> Split:
    g, nodes = hw.gpus_per_node, hw.nodes
    if server_gpu_count == 0:
        return Split([], g * nodes, [",".join(str(i) for i in range(g))] * nodes, "", "all GPUs train")
    if server_gpu_count > g:
        raise PlanInputError(
            f"impossible hardware: the vLLM server needs {server_gpu_count} GPUs on one node, the nodes have {g}"
        )
    uniform = nodes * (g - server_gpu_count)
    dedicated = (nodes - 1) * g
    server_mask = ",".join(str(i) for i in range(server_gpu_count))
    if nodes > 1 and dedicated > uniform:
        return Split(
            [f"0:{i}" for i in range(server_gpu_count)],
            dedicated,
            [",".join(str(i) for i in range(g))] * (nodes - 1),
            server_mask,
            f"node 0 runs the vLLM server, nodes 1-{nodes - 1} train",
            g - server_gpu_count,
        )
    masks = [",".join(str(i) for i in range(server_gpu_count, g))] * nodes
    layout = "the vLLM server and the trainer share node 0 on disjoint GPUs"
    idle = 0
    if nodes > 1:
        layout += f"; every node trains on GPUs {masks[0]} (equal processes per node)"
        idle = (nodes - 1) * server_gpu_count
    return Split([f"0:{i}" for i in range(server_gpu_count)], uniform, masks, server_mask, layout, idle)


@dataclass
class BatchGeometry:
    per_device: int
    world: int
    grad_accum: int
    steps_per_generation: int
    num_generations: int
    generation_batch: int
    divisible: bool
    suggestion: Optional[int] = None

    def as_dict(self) -> Dict[str, Any]:
        return {
            "per_device_train_batch_size": self.per_device,
            "num_processes": self.world,
            "gradient_accumulation_steps": self.grad_accum,
            "steps_per_generation": self.steps_per_generation,
            "num_generations": self.num_generations,
            "generation_batch_size": self.generation_batch,
            "divisible": self.divisible,
            "suggested_steps_per_generation": self.suggestion,
        }


def batch_geometry(
    per_device: int, world: int, grad_accum: int, steps: Optional[int], num_generations: int
) -> BatchGeometry:
    """GRPO/RLOO: generation batch = per_device * processes * steps_per_generation (grpo_config.py __post_init__)."""
    spg = steps or grad_accum
    gen = per_device * world * spg
    ok = gen % num_generations == 0
    suggestion = None
    if not ok:
        step = num_generations // math.gcd(per_device * world, num_generations)
        suggestion = step * math.ceil(spg / step)
    return BatchGeometry(per_device, world, grad_accum, spg, num_generations, gen, ok, suggestion)
