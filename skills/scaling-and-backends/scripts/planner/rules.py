"""Launch-config lint rules for ``plan_training.py``: a judge stage that reads the configs the request loaded
(planner.inputs reads the files) and the plan's split.

Standard library only. Every rule is one function that returns ``Finding`` objects; each finding names the exact
setting to change and the upstream file it comes from.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

_HERE = Path(__file__).resolve().parent.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from planner.assemble import Plan  # noqa: E402
from planner.hardware import Hardware, cc_value  # noqa: E402
from planner.inputs import PlanRequest, as_bool, as_int  # noqa: E402

TRL = "1.16.0"
ACCELERATE = "1.15.0"
TRANSFORMERS = "5.24.0"
VLLM = "0.31.0"


PRESET_SOURCE = f"trl/accelerate_configs/*.yaml@{TRL}"


# --------------------------------------------------------------------------------------------------------------
# Lint context and findings
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Finding:
    id: str
    severity: str  # "error" | "warning" | "info"
    message: str
    fix: str
    source: str

    def as_dict(self) -> Dict[str, str]:
        return {
            "id": self.id,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "source": self.source,
        }


@dataclass
class LintContext:
    """Everything the rules read. ``accelerate`` is the merged Accelerate config (file or TRL preset)."""

    trainer: str
    accelerate: Optional[Dict[str, Any]] = None
    accelerate_label: Optional[str] = None
    trl: Optional[Dict[str, Any]] = None
    trl_label: Optional[str] = None
    launch_num_processes: Optional[int] = None
    gpus_per_node: Optional[int] = None
    nodes: int = 1
    server_gpus: int = 0
    server_gpus_reason: str = ""
    compute_capabilities: List[Optional[str]] = field(default_factory=list)
    vllm_mode_cli: Optional[str] = None

    # ---- derived facts ----
    def trl_get(self, key: str, default: Any = None) -> Any:
        return (self.trl or {}).get(key, default)

    def trl_has(self, key: str) -> bool:
        return self.trl is not None and key in self.trl and self.trl[key] is not None

    def acc_get(self, key: str, default: Any = None) -> Any:
        return (self.accelerate or {}).get(key, default)

    def acc_nested(self, section: str, key: str, default: Any = None) -> Any:
        block = self.acc_get(section) or {}
        if not isinstance(block, dict):
            return default
        return block.get(key, default)

    @property
    def distributed_type(self) -> Optional[str]:
        value = self.acc_get("distributed_type")
        return None if value is None else str(value).upper()

    @property
    def zero_stage(self) -> Optional[int]:
        if self.distributed_type != "DEEPSPEED":
            return None
        stage = self.acc_nested("deepspeed_config", "zero_stage")
        return as_int(stage)

    @property
    def fsdp_version(self) -> Optional[int]:
        if self.distributed_type != "FSDP":
            return None
        return as_int(self.acc_nested("fsdp_config", "fsdp_version", 1))

    def num_processes(self) -> Tuple[Optional[int], str]:
        """The process count the launch will use and where it comes from (CLI flag > TRL YAML > Accelerate file)."""
        if self.launch_num_processes is not None:
            return self.launch_num_processes, "--num_processes on the command line"
        if self.trl_has("num_processes"):
            return as_int(self.trl_get("num_processes")), f"num_processes in {self.trl_label}"
        if self.accelerate is not None and self.acc_get("num_processes") is not None:
            return as_int(self.acc_get("num_processes")), f"num_processes in {self.accelerate_label}"
        return None, ""

    def world_size(self) -> Optional[int]:
        """Processes that actually start: ``distributed_type: NO`` starts one, whatever num_processes says."""
        if self.distributed_type == "NO":
            return 1
        value, _ = self.num_processes()
        return value

    @property
    def use_vllm(self) -> bool:
        if self.trl is not None and "use_vllm" in self.trl:
            return bool(as_bool(self.trl_get("use_vllm")))
        return self.vllm_mode_cli in ("server", "colocate")

    @property
    def vllm_mode(self) -> Optional[str]:
        if not self.use_vllm:
            return None
        if self.trl_has("vllm_mode"):
            return str(self.trl_get("vllm_mode"))
        if self.trl is not None and "use_vllm" in self.trl:
            return "colocate"  # GRPOConfig/RLOOConfig default (grpo_config.py L594)
        return self.vllm_mode_cli

    def parallelism_sizes(self) -> Tuple[int, int, str]:
        """(cp_size, sp_size, where) from the TRL config's parallelism_config or the Accelerate YAML."""
        cp = sp = 1
        where = ""
        trl_pc = self.trl_get("parallelism_config")
        if isinstance(trl_pc, dict):
            cp = as_int(trl_pc.get("cp_size", trl_pc.get("parallelism_config_cp_size", 1))) or 1
            sp = as_int(trl_pc.get("sp_size", trl_pc.get("parallelism_config_sp_size", 1))) or 1
            where = f"parallelism_config in {self.trl_label}"
        acc_pc = self.acc_get("parallelism_config")
        if isinstance(acc_pc, dict):
            acc_cp = as_int(acc_pc.get("parallelism_config_cp_size", 1)) or 1
            acc_sp = as_int(acc_pc.get("parallelism_config_sp_size", 1)) or 1
            if acc_cp > 1 or acc_sp > 1:
                cp, sp = max(cp, acc_cp), max(sp, acc_sp)
                where = f"parallelism_config in {self.accelerate_label}"
        return cp, sp, where

    def gradient_checkpointing(self) -> Tuple[bool, str]:
        """Effective activation checkpointing: transformers 5.x reads activation_checkpointing, else its alias."""
        for key in ("activation_checkpointing", "gradient_checkpointing"):
            if self.trl_has(key):
                return bool(as_bool(self.trl_get(key))), f"{key} in {self.trl_label}"
        return True, "TRL's default gradient_checkpointing=True (trl/trainer/base_config.py)"

    def bf16_sources(self) -> List[str]:
        found = []
        if self.trl is not None:
            if self.trl_has("bf16"):
                if as_bool(self.trl_get("bf16")):
                    found.append(f"bf16: true in {self.trl_label}")
            elif not as_bool(self.trl_get("fp16", False)):
                found.append(f"bf16 (TRL defaults it to True when fp16 is unset) in {self.trl_label}")
        if str(self.acc_get("mixed_precision", "")).lower() == "bf16":
            found.append(f"mixed_precision: bf16 in {self.accelerate_label}")
        return found

    def quantization(self) -> Dict[str, Any]:
        """4-/8-bit loading as the TRL CLI (ModelConfig) or model_init_kwargs.quantization_config says."""
        out: Dict[str, Any] = {"load_in_4bit": False, "load_in_8bit": False, "quant_storage": None, "where": ""}
        if self.trl is None:
            return out
        if as_bool(self.trl_get("load_in_4bit", False)):
            out.update(load_in_4bit=True, where=f"load_in_4bit in {self.trl_label}")
        if as_bool(self.trl_get("load_in_8bit", False)):
            out.update(load_in_8bit=True, where=f"load_in_8bit in {self.trl_label}")
        out["quant_storage"] = self.trl_get("bnb_4bit_quant_storage")
        kwargs = self.trl_get("model_init_kwargs")
        if isinstance(kwargs, dict) and isinstance(kwargs.get("quantization_config"), dict):
            qc = kwargs["quantization_config"]
            where = f"model_init_kwargs.quantization_config in {self.trl_label}"
            if as_bool(qc.get("load_in_4bit", False)):
                out.update(load_in_4bit=True, where=where)
            if as_bool(qc.get("load_in_8bit", False)):
                out.update(load_in_8bit=True, where=where)
            if qc.get("bnb_4bit_quant_storage") is not None:
                out["quant_storage"] = qc.get("bnb_4bit_quant_storage")
        return out

    def model_dtype(self) -> Optional[str]:
        if self.trl_has("dtype"):
            return str(self.trl_get("dtype"))
        kwargs = self.trl_get("model_init_kwargs")
        if isinstance(kwargs, dict) and kwargs.get("dtype") is not None:
            return str(kwargs["dtype"])
        return None


GENERATING_TRAINERS = ("grpo", "rloo", "async-grpo")
SEQ_PARALLEL_REJECTING = {
    "grpo": f"trl/trainer/grpo_config.py@{TRL} (GRPOConfig.__post_init__, L1068-1075)",
    "rloo": f"trl/trainer/rloo_config.py@{TRL} (RLOOConfig.__post_init__, L639-646)",
    "async-grpo": f"trl/experimental/async_grpo/async_grpo_config.py@{TRL} (AsyncGRPOConfig.__post_init__, L399-407)",
}


# --------------------------------------------------------------------------------------------------------------
# Rules: one function each
# --------------------------------------------------------------------------------------------------------------


def rule_num_processes(ctx: LintContext) -> List[Finding]:
    """``num_processes`` must equal the GPUs left to the trainer (visible GPUs x nodes minus vLLM server GPUs)."""
    if ctx.accelerate is None and not ctx.trl_has("num_processes") and ctx.launch_num_processes is None:
        return []
    if ctx.gpus_per_node is None:
        return []
    source = (
        f"{PRESET_SOURCE} (num_processes: 8 in every preset); accelerate/commands/launch.py@{ACCELERATE} "
        "(_validate_launch_command: a --num_processes flag wins over the file; distributed_type NO uses "
        "simple_launcher, one process)"
    )
    trainer_gpus = ctx.gpus_per_node * ctx.nodes - ctx.server_gpus
    reserved = (
        f" minus {ctx.server_gpus} reserved for the vLLM server ({ctx.server_gpus_reason})" if ctx.server_gpus else ""
    )
    visible = f"{ctx.gpus_per_node} visible GPU(s) x {ctx.nodes} node(s){reserved}"
    value, where = ctx.num_processes()
    findings: List[Finding] = []
    if ctx.distributed_type == "NO":
        if ctx.gpus_per_node - (ctx.server_gpus if ctx.nodes == 1 else 0) > 1:
            findings.append(
                Finding(
                    "num-processes",
                    "error",
                    f"{ctx.accelerate_label} has distributed_type NO, so accelerate starts one process, but "
                    f"{visible} leave {trainer_gpus} GPUs visible to it; TRL trainers then refuse nn.DataParallel.",
                    "Use a multi-process config (multi_gpu, fsdp2, zero2/zero3) with --num_processes "
                    f"{trainer_gpus}, or make one GPU visible: CUDA_VISIBLE_DEVICES=<one id>",
                    source + f"; nn.DataParallel guard in trl/trainer/grpo_trainer.py@{TRL} L976",
                )
            )
        return findings
    if value is None:
        return findings
    if trainer_gpus < 1:
        findings.append(
            Finding(
                "num-processes",
                "error",
                f"No GPU is left for the trainer: {visible}.",
                "Reserve fewer GPUs for the vLLM server, or add GPUs.",
                source,
            )
        )
    elif value != trainer_gpus:
        findings.append(
            Finding(
                "num-processes",
                "error",
                f"{where} is {value}, but the trainer gets {trainer_gpus} GPU(s): {visible}.",
                f"num_processes: {trainer_gpus} (or pass --num_processes {trainer_gpus} to accelerate launch / trl)",
                source,
            )
        )
    return findings


def rule_colocate_tp(ctx: LintContext) -> List[Finding]:
    """Colocate mode: ``vllm_tensor_parallel_size`` must divide the number of training processes."""
    if ctx.trainer not in ("grpo", "rloo") or ctx.vllm_mode != "colocate":
        return []
    tp = as_int(ctx.trl_get("vllm_tensor_parallel_size", 1)) or 1
    world = ctx.world_size()
    if world is None:
        world = ctx.gpus_per_node * ctx.nodes if ctx.gpus_per_node else None
    if world is None or world % tp == 0:
        return []
    small = [d for d in range(1, math.isqrt(world) + 1) if world % d == 0]  # O(sqrt(world))
    divisors = sorted(set(small + [world // d for d in small]))
    if len(divisors) > 12:
        divisors = [*divisors[:6], "...", *divisors[-3:]]
    return [
        Finding(
            "colocate-tp",
            "error",
            f"vllm_tensor_parallel_size={tp} does not divide the world size {world}; TRL raises "
            f"'tensor_parallel_size ({tp}) must divide world size ({world}) evenly.'",
            f"vllm_tensor_parallel_size: one of {divisors}",
            f"trl/generation/vllm_generation.py@{TRL} (VLLMGeneration._init_vllm, L314-318)",
        )
    ]


def rule_generation_batch(ctx: LintContext) -> List[Finding]:
    """GRPO/RLOO: the generation batch must split into whole prompt groups of ``num_generations``."""
    if ctx.trainer not in ("grpo", "rloo") or ctx.trl is None:
        return []
    src_file = "grpo_config.py" if ctx.trainer == "grpo" else "rloo_config.py"
    source = f"trl/trainer/{src_file}@{TRL} (__post_init__: generation_batch_size rules)"
    world = ctx.world_size()
    if world is None:
        world = (ctx.gpus_per_node * ctx.nodes - ctx.server_gpus) if ctx.gpus_per_node else None
    if world is None or world < 1:
        return []
    per_device = as_int(ctx.trl_get("per_device_train_batch_size", 8)) or 8
    grad_acc = as_int(ctx.trl_get("gradient_accumulation_steps", 1)) or 1
    num_generations = as_int(ctx.trl_get("num_generations", 8)) or 8
    gen_batch = as_int(ctx.trl_get("generation_batch_size"))
    steps = as_int(ctx.trl_get("steps_per_generation"))
    global_batch = per_device * world
    findings: List[Finding] = []
    if gen_batch is not None and steps is not None:
        return [
            Finding(
                "generation-batch",
                "error",
                "generation_batch_size and steps_per_generation are both set; TRL raises "
                "''generation_batch_size' and 'steps_per_generation' can not be both configured at the same time'.",
                "Remove one of generation_batch_size / steps_per_generation",
                source,
            )
        ]
    if gen_batch is None:
        steps = steps or grad_acc
        gen_batch = global_batch * steps
        how = f"per_device_train_batch_size {per_device} x {world} processes x steps_per_generation {steps}"
    else:
        how = "generation_batch_size"
        if gen_batch % global_batch:
            findings.append(
                Finding(
                    "generation-batch",
                    "error",
                    f"generation_batch_size ({gen_batch}) must be divisible by the global batch size "
                    f"({global_batch} = {per_device} x {world} processes).",
                    f"generation_batch_size: {global_batch * max(1, round(gen_batch / global_batch))}",
                    source,
                )
            )
    if num_generations < 2:
        findings.append(
            Finding(
                "generation-batch",
                "error",
                f"num_generations={num_generations}: GRPO/RLOO need at least 2 completions per prompt.",
                "num_generations: 2 or more (default 8)",
                source,
            )
        )
    elif gen_batch % num_generations:
        need = num_generations // math.gcd(global_batch, num_generations)
        fix = (
            f"steps_per_generation: {need} (generation batch {global_batch * need}), or "
            f"per_device_train_batch_size so that it x {world} is a multiple of {num_generations}, or "
            f"num_generations dividing {gen_batch}"
        )
        findings.append(
            Finding(
                "generation-batch",
                "error",
                f"generation batch {gen_batch} ({how}) is not divisible by num_generations={num_generations}; "
                f"TRL raises 'generation_batch_size ({gen_batch}) must be divisible by num_generations "
                f"({num_generations}).'",
                fix,
                source,
            )
        )
    return findings


def rule_bf16_compute_capability(ctx: LintContext) -> List[Finding]:
    """bf16 needs compute capability 8.0+ (Ampere); TRL turns bf16 on by default."""
    ccs = [(cc, cc_value(cc)) for cc in ctx.compute_capabilities]
    low = [cc for cc, value in ccs if value is not None and value < 8.0]
    if not low:
        return []
    sources = ctx.bf16_sources()
    if not sources:
        return []
    return [
        Finding(
            "bf16-compute-capability",
            "error",
            f"bf16 is on ({'; '.join(sources)}) but GPU compute capability {', '.join(sorted(set(low)))} is below "
            "8.0: transformers refuses it ('Your setup doesn't support bf16/gpu. ...') or torch emulates it slowly, "
            "and vLLM refuses bf16 weights ('Bfloat16 is only supported on GPUs with compute capability of at least "
            "8.0.').",
            "fp16: true and bf16: false in the TRL config; mixed_precision: fp16 in the Accelerate config; "
            "vllm serve --dtype half",
            f"transformers/training_args.py@{TRANSFORMERS} (bf16 check); trl/trainer/base_config.py@{TRL} "
            f"(bf16 defaults to not fp16); vllm/platforms/cuda.py@{VLLM}",
        )
    ]


_FLOAT_STORAGE = {"bfloat16", "float16", "float32", "bf16", "fp16", "fp32", "torch.bfloat16", "torch.float16"}


def rule_qlora_fsdp_quant_storage(ctx: LintContext) -> List[Finding]:
    """QLoRA under FSDP needs ``bnb_4bit_quant_storage`` set to the float dtype the model trains in."""
    quant = ctx.quantization()
    if ctx.distributed_type != "FSDP" or not quant["load_in_4bit"]:
        return []
    storage = quant["quant_storage"]
    dtype = ctx.model_dtype() or "float32"
    wanted = "bfloat16" if str(ctx.acc_get("mixed_precision", "bf16")).lower() != "fp16" else "float32"
    if storage is not None and str(storage).lower() in _FLOAT_STORAGE:
        if str(storage).replace("torch.", "") == dtype.replace("torch.", ""):
            return []
        return [
            Finding(
                "qlora-fsdp-quant-storage",
                "warning",
                f"bnb_4bit_quant_storage={storage} differs from the model dtype ({dtype}); FSDP needs every "
                "parameter of a wrapped unit in one dtype.",
                f"dtype: {storage} (the TRL CLI flag --dtype, or model_init_kwargs.dtype)",
                f"transformers/distributed/fsdp.py@{TRANSFORMERS} (update_fsdp_plugin_peft: mixed precision follows "
                "the quant storage); huggingface/peft docs/source/accelerate/fsdp.md (dtype equal to quant storage)",
            )
        ]
    return [
        Finding(
            "qlora-fsdp-quant-storage",
            "error",
            f"4-bit QLoRA ({quant['where']}) under FSDP with bnb_4bit_quant_storage="
            f"{storage if storage is not None else 'unset (uint8)'}: FSDP2 leaves the non-float 4-bit weights out "
            "of sharding (every GPU holds the whole base model) and FSDP1 cannot flatten them with the bf16 "
            "parameters.",
            f"bnb_4bit_quant_storage: {wanted} and dtype: {wanted} (TRL CLI --bnb_4bit_quant_storage {wanted} "
            f"--dtype {wanted})",
            f"accelerate/utils/fsdp_utils.py@{ACCELERATE} (fsdp2_prepare_model: non-floating Params4bit excluded); "
            f"transformers/distributed/fsdp.py@{TRANSFORMERS}",
        )
    ]


def rule_device_map(ctx: LintContext) -> List[Finding]:
    """A ``device_map`` has no place under ZeRO-3 or multi-process DDP."""
    kwargs = ctx.trl_get("model_init_kwargs")
    if not isinstance(kwargs, dict) or kwargs.get("device_map") is None:
        return []
    world = ctx.world_size() or 1
    dist = ctx.distributed_type
    if not (dist == "DEEPSPEED" or (dist == "MULTI_GPU" and world > 1)):
        return []
    what = f"DeepSpeed ZeRO-{ctx.zero_stage}" if dist == "DEEPSPEED" else f"DDP with {world} processes"
    return [
        Finding(
            "device-map-distributed",
            "warning",
            f"model_init_kwargs.device_map={kwargs.get('device_map')!r} under {what}: TRL replaces it with None "
            "when it loads the model from a name (it does nothing), and a model you load yourself with a device_map "
            "fails (ZeRO-3: 'DeepSpeed Zero-3 is not compatible with passing a `device_map`.') or is split across "
            "GPUs instead of one replica per process.",
            "Remove device_map from model_init_kwargs (each process places its replica or shard itself)",
            f"trl/trainer/grpo_trainer.py@{TRL} L343-345 and trl/trainer/sft_trainer.py@{TRL} L691-693; "
            f"transformers/integrations/accelerate.py@{TRANSFORMERS} L136-137",
        )
    ]


def rule_double_activation_checkpointing(ctx: LintContext) -> List[Finding]:
    """FSDP activation checkpointing and the trainer's gradient checkpointing cannot both be on."""
    if ctx.distributed_type != "FSDP":
        return []
    if not as_bool(ctx.acc_nested("fsdp_config", "fsdp_activation_checkpointing", False)):
        return []
    enabled, where = ctx.gradient_checkpointing()
    if not enabled:
        return []
    return [
        Finding(
            "double-activation-checkpointing",
            "error",
            f"fsdp_activation_checkpointing: true in {ctx.accelerate_label} and activation checkpointing is on "
            f"({where}); transformers raises '`fsdp_config['activation_checkpointing']` (FSDP's own activation "
            "checkpointing) and the `activation_checkpointing` training argument can't both be set to True.'",
            "gradient_checkpointing: false in the TRL config (keep FSDP's), or fsdp_activation_checkpointing: false",
            f"transformers/trainer.py@{TRANSFORMERS} L879-884; trl/trainer/base_config.py@{TRL} "
            "(gradient_checkpointing defaults to True)",
        )
    ]


def rule_sequence_parallel_trainer(ctx: LintContext) -> List[Finding]:
    """GRPO, RLOO and AsyncGRPO reject context and sequence parallelism."""
    if ctx.trainer not in SEQ_PARALLEL_REJECTING:
        return []
    cp, sp, where = ctx.parallelism_sizes()
    if cp <= 1 and sp <= 1:
        return []
    extra = ""
    if ctx.accelerate_label and where.endswith(ctx.accelerate_label):
        extra = (
            " Set through the Accelerate YAML it can slip past the config-time check (that check reads "
            "args.parallelism_config), and the generation batch is then sharded wrongly."
        )
    name = {"grpo": "GRPOTrainer", "rloo": "RLOOTrainer", "async-grpo": "AsyncGRPOTrainer"}[ctx.trainer]
    return [
        Finding(
            "sequence-parallel-trainer",
            "error",
            f"{where}: cp_size={cp}, sp_size={sp}; {name} does not support sequence-dim parallelism.{extra}",
            "parallelism_config_cp_size: 1 and parallelism_config_sp_size: 1 (or drop parallelism_config); shorten "
            "sequences, use PEFT or shard with FSDP2/ZeRO-3 instead",
            SEQ_PARALLEL_REJECTING[ctx.trainer],
        )
    ]


def rule_packing_context_parallel(ctx: LintContext) -> List[Finding]:
    """SFT packing cannot be combined with context parallelism."""
    if ctx.trainer != "sft":
        return []
    cp, _sp, where = ctx.parallelism_sizes()
    packing = as_bool(ctx.trl_get("packing", False)) or as_bool(ctx.trl_get("eval_packing", False))
    if cp <= 1 or not packing:
        return []
    return [
        Finding(
            "packing-context-parallel",
            "error",
            f"packing is on and {where} sets cp_size={cp}; SFTTrainer raises 'Packing is not compatible with "
            "context parallelism (`cp_size > 1`). ...': CP drops the block-diagonal mask that keeps packed "
            "documents apart.",
            "packing: false and eval_packing: false (or parallelism_config_cp_size: 1)",
            f"trl/trainer/sft_trainer.py@{TRL} L1149-1161",
        )
    ]


def rule_async_grpo_deepspeed(ctx: LintContext) -> List[Finding]:
    """AsyncGRPO is FSDP2-only for distributed training."""
    if ctx.trainer != "async-grpo":
        return []
    source = (
        f"trl/experimental/async_grpo/async_grpo_trainer.py@{TRL} (L1174-1175 'AsyncGRPO is FSDP2-only'; "
        "_streaming_iter gathers only FSDP2 DTensors)"
    )
    if ctx.distributed_type == "DEEPSPEED":
        return [
            Finding(
                "async-grpo-deepspeed",
                "error",
                f"AsyncGRPO under DeepSpeed ({ctx.accelerate_label}): only FSDP2 is supported. No check stops it at "
                "start-up; the weight sync streams each rank's local parameters, which under ZeRO-3 are empty "
                "shards.",
                "distributed_type: FSDP with fsdp_config.fsdp_version: 2 (TRL preset fsdp2)",
                source,
            )
        ]
    if ctx.distributed_type == "FSDP" and ctx.fsdp_version not in (None, 2):
        return [
            Finding(
                "async-grpo-deepspeed",
                "error",
                f"AsyncGRPO under FSDP version {ctx.fsdp_version}: only FSDP2 is supported.",
                "fsdp_config.fsdp_version: 2",
                source,
            )
        ]
    return []


def rule_liger_deprecated(ctx: LintContext) -> List[Finding]:
    """``use_liger_kernel`` is deprecated (and unsupported in AsyncGRPO)."""
    if not as_bool(ctx.trl_get("use_liger_kernel", False)):
        return []
    fix = 'use_liger_kernel: false and model_init_kwargs: {"use_kernels": true} (needs transformers>=5.4.0)'
    if ctx.trainer == "async-grpo":
        return [
            Finding(
                "liger-deprecated",
                "error",
                "use_liger_kernel=True: AsyncGRPOTrainer raises NotImplementedError('`use_liger_kernel` is not "
                "supported yet.').",
                "use_liger_kernel: false",
                f"trl/experimental/async_grpo/async_grpo_trainer.py@{TRL} L1090-1091",
            )
        ]
    return [
        Finding(
            "liger-deprecated",
            "warning",
            "use_liger_kernel=True is deprecated in TRL and will be removed in v2.0.0; TRL also turns off Liger's "
            "fused linear cross-entropy (it patches its own fused LM head).",
            fix,
            f"trl/trainer/base_config.py@{TRL} (use_liger_kernel help); trl/trainer/grpo_trainer.py@{TRL} L1051-1060",
        )
    ]


def rule_eight_bit_colocate(ctx: LintContext) -> List[Finding]:
    """vLLM colocate mode rejects 8-bit bitsandbytes models."""
    if ctx.trainer not in ("grpo", "rloo") or ctx.vllm_mode != "colocate":
        return []
    quant = ctx.quantization()
    if not quant["load_in_8bit"]:
        return []
    return [
        Finding(
            "eight-bit-colocate",
            "error",
            f"8-bit loading ({quant['where']}) with vllm_mode colocate: TRL raises 'vLLM does not support in-flight "
            "8-bit quantization.'",
            "load_in_4bit: true (QLoRA) instead of load_in_8bit, or vllm_mode: server",
            f"trl/generation/vllm_generation.py@{TRL} L337-344",
        )
    ]


_SERVER_IGNORED = {
    "vllm_gpu_memory_utilization": (0.3, "--gpu-memory-utilization"),
    "vllm_tensor_parallel_size": (1, "--tensor-parallel-size"),
}


def rule_server_mode_ignored(ctx: LintContext) -> List[Finding]:
    """``vllm_gpu_memory_utilization``/``vllm_tensor_parallel_size`` do nothing in server mode."""
    if ctx.trainer not in ("grpo", "rloo") or ctx.vllm_mode != "server":
        return []
    findings: List[Finding] = []
    for key, (default, flag) in _SERVER_IGNORED.items():
        if not ctx.trl_has(key):
            continue
        value = ctx.trl_get(key)
        try:
            same = float(value) == float(default)
        except (TypeError, ValueError):
            same = False
        if same:
            continue  # a to_dict() dump carries every default; only a changed value was meant to matter
        findings.append(
            Finding(
                "server-mode-ignored",
                "warning",
                f"{key}={value} in {ctx.trl_label} has no effect with vllm_mode server: the trainer never starts "
                "vLLM there.",
                f"Remove {key}; pass {flag} {value} to vllm serve instead",
                f"trl/trainer/grpo_config.py@{TRL} (help of {key}: colocate only); trl/generation/vllm_generation.py"
                f"@{TRL} (server branch of _init_vllm reads neither)",
            )
        )
    return findings


RuleFunction = Callable[[LintContext], List[Finding]]
RULES: Dict[str, RuleFunction] = {
    "num-processes": rule_num_processes,
    "colocate-tp": rule_colocate_tp,
    "generation-batch": rule_generation_batch,
    "bf16-compute-capability": rule_bf16_compute_capability,
    "qlora-fsdp-quant-storage": rule_qlora_fsdp_quant_storage,
    "device-map-distributed": rule_device_map,
    "double-activation-checkpointing": rule_double_activation_checkpointing,
    "sequence-parallel-trainer": rule_sequence_parallel_trainer,
    "packing-context-parallel": rule_packing_context_parallel,
    "async-grpo-deepspeed": rule_async_grpo_deepspeed,
    "liger-deprecated": rule_liger_deprecated,
    "eight-bit-colocate": rule_eight_bit_colocate,
    "server-mode-ignored": rule_server_mode_ignored,
}


def run_lint(ctx: LintContext) -> List[Finding]:
    findings: List[Finding] = []
    for rule in RULES.values():
        findings.extend(rule(ctx))
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda finding: order.get(finding.severity, 3))


def trainer_finding(request: PlanRequest) -> Optional[Finding]:
    """An info finding saying how the trainer was chosen, when the TRL config chose it."""
    if request.trainer_note is None:
        return None
    return Finding(
        id="trainer-inferred",
        severity="info",
        message=request.trainer_note,
        fix="pass --trainer to choose it explicitly",
        source=f"trl/trainer/grpo_config.py@{TRL}, trl/experimental/async_grpo/async_grpo_config.py@{TRL}",
    )


def server_gpus_for_lint(request: PlanRequest, plan: Optional[Plan]) -> Tuple[int, str]:
    """GPUs per machine the launch leaves to a vLLM server: the flag, else what the plan's split reserves."""
    server_gpus, reason = 0, ""
    if request.vllm_server_gpus is not None:
        return request.vllm_server_gpus, "--vllm-server-gpus"
    if plan is None:
        return server_gpus, reason
    if plan.vllm_mode == "server" and plan.split.server_gpus:
        server_gpus, reason = len(plan.split.server_gpus), "the plan's server split"
    if plan.split.layout.startswith("node 0 runs"):
        server_gpus, reason = plan.hardware.gpus_per_node, "the plan dedicates node 0 to the server"
    return server_gpus, reason


def lint(request: PlanRequest, plan: Optional[Plan], hardware: Optional[Hardware]) -> List[Finding]:
    """Every rule over the request's configs and the plan's split; how the trainer was chosen comes first."""
    server_gpus, reason = server_gpus_for_lint(request, plan)
    ctx = LintContext(
        trainer=request.trainer,
        accelerate=request.accelerate,
        accelerate_label=request.accelerate_label,
        trl=request.trl_config,
        trl_label=request.trl_label,
        launch_num_processes=request.num_processes,
        gpus_per_node=hardware.gpus_per_node if hardware else None,
        nodes=hardware.nodes if hardware else request.nodes,
        server_gpus=server_gpus,
        server_gpus_reason=reason,
        compute_capabilities=hardware.compute_capabilities if hardware else [],
        vllm_mode_cli=request.vllm_mode,
    )
    findings = run_lint(ctx)
    note = trainer_finding(request)
    if note:
        findings.insert(0, note)
    return findings
