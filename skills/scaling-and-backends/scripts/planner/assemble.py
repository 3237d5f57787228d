"""Plan assembly: evaluates every candidate strategy and method and picks the least invasive one that fits.

A sibling module of ``plan_training.py`` (not a command); standard library only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the siblings must not leave __pycache__ in scripts/

import math  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Dict, List, Optional, Tuple  # noqa: E402

_HERE = Path(__file__).resolve().parent.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from planner.hardware import GIB, Hardware, cc_value  # noqa: E402
from planner.inputs import PlanInputError, PlanRequest  # noqa: E402
from planner.kv_cache import tp_refusal, tp_sizes  # noqa: E402
from planner.memory import GENERATING, REF_MODEL_DEFAULT, Estimate, Setup, estimate, judge, strategies_for  # noqa: E402
from planner.model import NO_VLLM_SIZING, LoraTargets, ModelFacts, lora_trainable, resolve_lora  # noqa: E402
from planner.split import (  # noqa: E402
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
    lora: Optional[LoraTargets] = None  # what PEFT trains, when the plan's method (or its fallback) is LoRA/QLoRA
    input_sources: List[Dict[str, Any]] = field(default_factory=list)  # which of flag / TRL config set an input
    changes: List[Change] = field(default_factory=list)  # when nothing fits as asked: ranked smallest changes
    trl_version: str = ""  # the TRL release the defaults and the LM head come from

    @property
    def fits_as_asked(self) -> bool:
        """The requested method fits without CPU offload and the vLLM side fits."""
        return self.recommended is not None and (self.vllm is None or self.vllm.fits)


# The one ranking of memory fixes, least invasive first. backend-selection/README.md "Escalation order" lists the
# same steps in the same order (tests/test_planner_assemble.py reads both). The planner models the steps marked True;
# it orders its "nothing fits" suggestions by this list, and CPU offload comes last.
ESCALATION: Tuple[Tuple[str, str, bool], ...] = (
    # (key, what the skill's list item says first, modelled by the planner)
    ("shrink-step", "Shrink the step", True),
    ("adapters", "Adapters", True),
    ("kernels", "Kernels and sequence tricks", True),  # modelled: context / Ulysses sequence parallelism
    ("sharding", "Sharding", True),
    ("offload", "CPU offload", True),
)
STEP_RANK = {key: i for i, (key, _, _) in enumerate(ESCALATION)}


@dataclass
class Change:
    """One smallest change that would make the plan fit, with the number it gives."""

    step: str  # an ESCALATION key (a pair of changes is ranked by its later step)
    label: str  # what to pass, e.g. "--micro-batch 2 --grad-accum 8"
    candidate: Estimate  # the least invasive candidate under the change (the first that fits, else the smallest)
    changes_training: bool = False  # LoRA/QLoRA: what is trained changes, so the user decides

    @property
    def fits(self) -> bool:
        return bool(self.candidate.fits)


def chosen_change(changes: List[Change]) -> Optional[Change]:
    """The change the templates are for: the first that fits and keeps what is trained, else the first that fits."""
    fitting = [change for change in changes if change.fits]
    return next((change for change in fitting if not change.changes_training), fitting[0] if fitting else None)


def _best(candidates: List[Estimate], offload: bool) -> Optional[Estimate]:
    pool = [c for c in candidates if ("offload" in c.strategy) == offload]
    if not pool:
        return None
    return next((c for c in pool if c.fits), min(pool, key=lambda c: c.verdict_bytes))


def smallest_changes(
    request: PlanRequest,
    facts: ModelFacts,
    setup: Setup,
    split: Split,
    usable: int,
    host_limit: Optional[int],
) -> List[Change]:
    """When nothing fits as asked: single changes in ESCALATION order, then pairs with a smaller step, offload
    last. Each change is evaluated with the same memory model; the first that fits is what the templates show."""

    def run(method: str, dtype: Optional[str], micro: int, offload: bool) -> Optional[Estimate]:
        accum = max(1, math.ceil(setup.grad_accum * setup.micro_batch / micro))
        shrunk = Setup(**{**setup.__dict__, "micro_batch": micro, "grad_accum": accum})
        cands, _t, _m = evaluate(method, facts, shrunk, split, usable, request.headroom, host_limit, dtype)
        return _best(cands, offload)

    def run_sharded(changed: Setup) -> Optional[Estimate]:
        cands, _t, _m = evaluate(method, facts, changed, split, usable, request.headroom, host_limit, explicit)
        return _best(cands, False)

    def shrink(method: str, dtype: Optional[str], offload: bool) -> Optional[Tuple[int, Estimate]]:
        """The largest smaller micro-batch that fits (halving), else micro-batch 1's number."""
        sizes = sorted({max(1, setup.micro_batch // 2**i) for i in range(1, 12)} - {setup.micro_batch}, reverse=True)
        last = None
        for micro in sizes:
            best = run(method, dtype, micro, offload)
            if best is None:
                return None
            last = (micro, best)
            if best.fits:
                return last
        return last

    def micro_label(micro: int) -> str:
        accum = max(1, math.ceil(setup.grad_accum * setup.micro_batch / micro))
        return f"--micro-batch {micro} --grad-accum {accum}"

    method, explicit = setup.method, request.model_dtype
    adapters: List[Tuple[str, str, Optional[str], bool]] = []  # (label, method, dtype, changes what is trained)
    if method in ("lora", "qlora") and explicit is None and setup.model_dtype == "float32":
        adapters.append(("--model-dtype bfloat16", method, "bfloat16", False))
    half = "float16" if setup.mixed_precision == "fp16" else "bfloat16"
    if method == "full":
        adapters.append((f"--method lora --model-dtype {explicit or half}", "lora", explicit or half, True))
    if method in ("full", "lora"):
        adapters.append(("--method qlora", "qlora", explicit, True))
    singles: List[Change] = []
    if setup.micro_batch > 1:
        found = shrink(method, explicit, False)
        if found:
            singles.append(Change("shrink-step", micro_label(found[0]), found[1]))
    for label, m, dtype, changes in adapters:
        best = run(m, dtype, setup.micro_batch, False)
        if best:
            singles.append(Change("adapters", label, best, changes))
    singles.extend(sequence_parallel_changes(facts, setup, split, run_sharded))
    pairs: List[Change] = []
    # Pairs when no single change fits that keeps what is trained (a QLoRA that fits does not end the search).
    if not any(c.fits and not c.changes_training for c in singles) and setup.micro_batch > 1:
        for label, m, dtype, changes in adapters:
            found = shrink(m, dtype, False)
            if found:
                pairs.append(Change("adapters", f"{label} {micro_label(found[0])}", found[1], changes))
    offload: List[Change] = []
    best = run(method, explicit, setup.micro_batch, True)
    if best:
        offload.append(Change("offload", f"CPU offload ({best.label})", best))
        if not best.fits and setup.micro_batch > 1:
            found = shrink(method, explicit, True)
            if found:
                offload.append(Change("offload", f"CPU offload ({found[1].label}) {micro_label(found[0])}", found[1]))
    return singles + pairs + offload


def sequence_parallel_changes(
    facts: ModelFacts, setup: Setup, split: Split, run: Callable[[Setup], Optional[Estimate]]
) -> List[Change]:
    """SFT/DPO on several GPUs: the smallest context-parallel size that fits (FSDP2), else the smallest Ulysses size
    (DeepSpeed; the attention heads must divide), each as one change; nothing when neither fits or applies."""
    world = split.trainer_world
    if setup.trainer in GENERATING or world < 2 or setup.cp_size > 1 or setup.sp_size > 1:
        return []
    sizes = [k for k in (2, 4, 8, 16, 32, 64) if k <= world and world % k == 0]
    out: List[Change] = []
    for flag, field_name, label in (
        ("--cp-size", "cp_size", "context parallelism"),
        ("--sp-size", "sp_size", "Ulysses"),
    ):
        last = None
        for k in sizes:
            if field_name == "sp_size" and facts.heads % k:
                continue
            best = run(Setup(**{**setup.__dict__, field_name: k}))
            if best is None:
                break
            last = Change("kernels", f"{flag} {k} ({label}, {best.label})", best)
            if best.fits:
                break
        if last is not None:
            out.append(last)
            if last.fits:
                break  # CP fits: Ulysses is not needed as well
    return out


def _methods_to_try(method: str) -> List[str]:
    return {"full": ["lora", "qlora"], "lora": ["qlora"], "qlora": []}[method]


def method_dtype(method: str, explicit: Optional[str], mixed: str = "bf16") -> str:
    """TRL loads in float32 unless told; QLoRA plans with bfloat16, which TRL also uses as the 4-bit compute dtype
    (float16 below compute capability 8.0, where bf16 is not available)."""
    half = "float16" if mixed == "fp16" else "bfloat16"
    return explicit or (half if method == "qlora" else "float32")


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
    method_setup = Setup(
        **{
            **setup.__dict__,
            "method": method,
            "model_dtype": method_dtype(method, explicit_dtype, setup.mixed_precision),
        }
    )
    trainable, modules = (
        (facts.total, []) if method == "full" else lora_trainable(facts, setup.lora_rank, setup.lora_targets)
    )
    out = []
    world = split.trainer_world
    nodes = len(split.trainer_masks)  # training nodes; DeepSpeed's host RAM formulas are per node
    per_node = world // nodes
    for key in strategies_for(method, setup.trainer, world, setup.cp_size, setup.sp_size):
        cand = estimate(method, key, facts, method_setup, trainable, world, per_node, nodes)
        judge(cand, usable, headroom, host_limit)
        out.append(cand)
    out.sort(key=lambda c: c.rank)
    return out, trainable, modules


def build_plan(request: PlanRequest, facts: ModelFacts, hw: Hardware) -> Plan:
    notes: List[str] = list(facts.notes) + list(hw.notes)
    trainer = request.trainer
    low_cc = [cc for cc in hw.compute_capabilities if cc_value(cc) is not None and cc_value(cc) < 8.0]
    mixed = "fp16" if low_cc else "bf16"
    if low_cc:
        notes.append("compute capability below 8.0: planning with fp16 mixed precision (bf16 is not available)")
    ref_model = REF_MODEL_DEFAULT[trainer]
    if request.beta is not None and trainer in ("grpo", "rloo"):
        ref_model = request.beta != 0
    setup = Setup(
        method=request.method,
        trainer=trainer,
        seq_len=request.seq_len,
        micro_batch=request.micro_batch,
        grad_ckpt=request.gradient_checkpointing,
        optimizer=request.optimizer,
        model_dtype=method_dtype(request.method, request.model_dtype, mixed),
        mixed_precision=mixed,
        lora_rank=request.lora_rank,
        lora_targets=request.lora_targets,
        double_quant=request.bnb_double_quant,
        quant_storage=request.bnb_quant_storage or ("float32" if mixed == "fp16" else "bfloat16"),
        ref_model=ref_model,
        grad_accum=request.grad_accum,
        full_logits=request.full_logits,
        lm_head=request.lm_head,
        cp_size=request.cp_size,
        sp_size=request.sp_size,
        scored_tokens=min(request.max_completion_length or request.seq_len, request.seq_len)
        if trainer in GENERATING
        else 0,
    )
    mode = resolve_vllm_mode(request, hw)
    if mode != "none" and facts.model_type in NO_VLLM_SIZING:
        raise PlanInputError(
            f"--vllm-mode {mode}: the planner cannot size vLLM for {facts.model_type}: "
            f"{NO_VLLM_SIZING[facts.model_type]}; plan the trainer with --vllm-mode none (generation with "
            "model.generate(), the same training memory) and size the vLLM server from its own start-up log"
        )
    gpu_bytes = hw.memory_bytes
    max_model_len = request.max_model_len or request.seq_len
    serve_bytes = served_dtype_bytes(trainer, setup.model_dtype)
    vllm_plan: Optional[VllmPlan] = None
    usable = gpu_bytes
    if mode == "server":
        vllm_plan, split = plan_server(request, facts, hw, setup, max_model_len, serve_bytes)
    else:
        split = plan_split(hw, 0)
    world = split.trainer_world
    if world < 1:
        raise PlanInputError("impossible hardware: no GPU is left for the trainer")
    shards = request.cp_size * request.sp_size
    if world % shards:
        raise PlanInputError(
            f"--cp-size/--sp-size {shards}: the {world} training processes must be a multiple of it (accelerate: "
            "'ParallelismConfig total_size ... does not match num_processes')"
        )
    if request.sp_size > 1 and facts.heads % request.sp_size:
        raise PlanInputError(f"--sp-size {request.sp_size}: the {facts.heads} attention heads must divide by it")
    geometry = None
    if trainer in ("grpo", "rloo"):
        geometry = batch_geometry(
            request.micro_batch, world, request.grad_accum, request.steps_per_generation, request.num_generations
        )
    if mode == "none" and geometry is not None:
        # Each process generates its share of the generation batch: per_device x steps_per_generation.
        setup.generate_sequences = request.micro_batch * geometry.steps_per_generation
        notes.append("no vLLM: the trainer generates with model.generate(), so its KV cache counts against training")
    if mode == "colocate":
        tp = request.vllm_tp or 1
        if world % tp:
            raise PlanInputError(
                f"--vllm-tp {tp}: in colocate mode the TP size must divide the world size {world} (TRL raises "
                f"'tensor_parallel_size ({tp}) must divide world size ({world}) evenly.')"
            )
        why = tp_refusal(facts, tp)  # every divisibility rule vLLM checks, as in server mode
        if why:
            loadable = ", ".join(str(t) for t in tp_sizes(facts, world) if world % t == 0) or "none"
            raise PlanInputError(
                f"--vllm-tp {tp}: vLLM cannot load this model: {why} (TP sizes that also divide the world size "
                f"{world}: {loadable})"
            )
        spg = geometry.steps_per_generation if geometry else request.grad_accum
        max_num_seqs = request.vllm_concurrency or request.micro_batch * tp * spg  # grpo_trainer.py L1124-1126
        if request.vllm_gpu_memory_utilization:
            util, util_source = request.vllm_gpu_memory_utilization, "--vllm-gpu-memory-utilization"
        else:
            util = colocate_util_needed(
                facts,
                request.method,
                tp,
                gpu_bytes,
                max_model_len,
                max_num_seqs,
                request.bnb_double_quant,
                serve_bytes,
                request.vllm_release,
            )
            util_source = (
                f"smallest that holds weights + {max_num_seqs} sequences + a 0.05 buffer; TRL's default is "
                f"{TRL_COLOCATE_UTIL_DEFAULT}"
            )
        vllm_plan = size_vllm(
            facts,
            request.method,
            "colocate",
            tp,
            util,
            gpu_bytes,
            max_model_len,
            max_num_seqs,
            request.bnb_double_quant,
            util_source,
            serve_bytes,
            request.vllm_release,
        )
        vllm_plan.concurrency_source = (
            "--vllm-concurrency"
            if request.vllm_concurrency
            else "max_num_seqs = per_device x TP x steps_per_generation"
        )
        usable = int(gpu_bytes * (1 - util))
        notes.append(
            f"colocate: vLLM takes {util:.2f} x {hw.memory_gib:.0f} GiB on every training GPU; the trainer keeps "
            f"{usable / GIB:.1f} GiB (vllm_enable_sleep_mode frees vLLM's share during the optimizer step)"
        )
    host_limit = int(request.host_memory_gib * GIB) if request.host_memory_gib else None
    candidates, trainable, modules = evaluate(
        request.method, facts, setup, split, usable, request.headroom, host_limit, request.model_dtype
    )
    alternatives: List[Estimate] = []
    for method in _methods_to_try(request.method):
        alts, _t, _m = evaluate(method, facts, setup, split, usable, request.headroom, host_limit, request.model_dtype)
        alternatives.extend(alts)
    # Offload is the last resort (ESCALATION): a candidate that fits only with offload is a change, not the answer.
    recommended = next((c for c in candidates if c.fits and "offload" not in c.strategy), None)
    changes: List[Change] = []
    if recommended is None:
        changes = smallest_changes(request, facts, setup, split, usable, host_limit)
    chosen = chosen_change(changes)
    alternative_pick = chosen.candidate if chosen else None
    if trainer == "async-grpo" and setup.model_dtype == "float32":
        notes.append(
            "AsyncGRPO trains in AsyncGRPOConfig.dtype (default float32) and wants the server in the same dtype "
            "(vllm serve --dtype); --model-dtype bfloat16 halves both"
        )
    uses_lora = request.method != "full" or (alternative_pick is not None and alternative_pick.method != "full")
    lora = resolve_lora(facts, request.lora_rank, request.lora_targets) if uses_lora else None
    if lora is not None:
        notes.extend(lora.notes)
    if request.method != "full" and trainer == "async-grpo":
        if lora is not None and lora.merged_sync_reason:
            notes.append(f"AsyncGRPO syncs merged weights, not the adapter: {lora.merged_sync_reason}")
        elif mode == "server":
            notes.append(
                "AsyncGRPO with LoRA syncs only the adapter when the server has --enable-lora (see the template)"
            )
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
        request.headroom,
        candidates,
        alternatives,
        recommended,
        alternative_pick,
        geometry,
        notes,
    )
    plan.lora = lora
    plan.changes = changes
    plan.input_sources = list(request.input_sources)
    plan.trl_version = request.trl_version
    return plan


def path_candidate(plan: Plan) -> Optional[Estimate]:
    """The candidate the plan recommends: the one that fits as asked, else the change the templates are for."""
    return plan.recommended or plan.alternative_pick


# A candidate's strategy as the diagnostic's backend id (the install planner's goal ids).
STRATEGY_GOALS = {"ddp": "ddp", "zero": "deepspeed", "fsdp2": "fsdp2"}


def path_goals(plan: Plan) -> List[str]:
    """The backend ids (the diagnostic's, which plan_install.py --want takes) of the path the plan recommends:
    method, sharding, vLLM mode, AsyncGRPO and its adapter-only sync, context parallelism. Empty when nothing fits."""
    chosen = path_candidate(plan)
    if chosen is None:
        return []
    goals: List[str] = []
    if chosen.method in ("lora", "qlora"):
        goals.append("peft" if chosen.method == "lora" else "qlora")
    kind = next((goal for prefix, goal in STRATEGY_GOALS.items() if chosen.strategy.startswith(prefix)), None)
    if kind is not None and (kind != "ddp" or chosen.world > 1):
        goals.append(kind)
    setup = chosen.setup or plan.setup
    if setup.cp_size > 1:
        goals.append("context-parallel")
    if setup.trainer == "async-grpo":
        goals.append("async-grpo")
        if chosen.method != "full" and plan.vllm_mode == "server" and not (plan.lora and plan.lora.merged_sync_reason):
            goals.append("async-grpo-lora")
    elif plan.vllm_mode in ("server", "colocate"):
        goals.append(f"vllm-{plan.vllm_mode}")
    return goals


def resolve_vllm_mode(request: PlanRequest, hw: Hardware) -> str:
    mode = request.vllm_mode
    trainer = request.trainer
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
