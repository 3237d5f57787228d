#!/usr/bin/env python3
"""Offline planner for TRL training: per-GPU memory, the GPU split for vLLM generation, and config lint.

Read-only: no download, no torch import, reads only the files it is given. The commands it prints are templates
that need the user's approval to run.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import plan_rules  # noqa: E402
from plan_rules import PlanInputError  # noqa: E402

SCHEMA_VERSION = 1
GIB = 2**30

MEMORY_MODEL = """\
memory model (per GPU; P = parameters, T = trainable, N = training GPUs, n = GPUs per node, L = largest module):
  exact model states, by strategy (formulas reproduced from the cited code):
    DDP / 1 GPU   weights P*w + grads P*w + AdamW m,v 2*P*w (w = 4 for the float32 TRL loads by default,
                  2 with dtype bfloat16; adamw-8bit: 2 bytes/param) + DDP gradient buckets P*w when N > 1
                  (torch DistributedDataParallel gradient_as_bucket_view=False, accelerate's default)
    ZeRO-2        2P + 18P/N; optimizer offload: 2P on GPU, host P*max(4N,16)*1.5 (DeepSpeed uses all GPUs here)
    ZeRO-3        4L + 18P/N; + optimizer offload: 4L + 2P/N; + param offload: 4L
                  (deepspeed/runtime/zero/stage_1_and_2.py and stage3.py @0.19.8,
                  estimate_zero{2,3}_model_states_mem_needs; host RAM per node as there, zero_init on)
    FSDP2         (w_master 4 + grads 4 + AdamW 8) * T/N (accelerate 1.15 upcasts trainable params to fp32 under
                  mixed precision, utils/fsdp_utils.py); frozen params at load dtype /N; offload moves all of it
                  to host RAM
    LoRA          T = r*(in+out) per targeted linear (all-linear = attention and dense MLP projections, never
                  lm_head; MoE experts are fused 3-D parameters in transformers 5.x, not Linear layers);
                  adapters fp32: 16 bytes/T; DeepSpeed: frozen base in bf16 (2 bytes) + 18*T/N
    QLoRA         NF4: 0.5 byte/param + absmax 4/64 (double quant: 1/64 + 4/(64*256)) for every nn.Linear except
                  lm_head; other params at the load dtype; trainable cast to bf16 by TRL: 8 bytes/T (AdamW);
                  FSDP shards the 4-bit weights only with a float bnb_4bit_quant_storage
    reference model (DPO; RLOO and GRPO when beta != 0; full fine-tune only): frozen copy, sharded like the policy
  approximate (marked "approx" in the output):
    activations   bf16, t = seq_len*micro_batch tokens (x2 for DPO pairs), per layer and token
                  a = 6h + 2*kv_dim + 4*I_active (2*I for a non-gated MLP) elements, SDPA/flash (no s^2);
                  no checkpointing: layers*t*a*2 bytes; checkpointing: layers*t*h*2 + 2*t*a*2 (one layer
                  recomputed with its gradients); + TRL fused LM-head tile min(t,4096)*min(V,32768)*4*2
    FSDP2 gather  2 blocks + root (embeddings, lm_head) unsharded at 2 bytes, + their bf16 grads when trained
    autocast      float32 weights under bf16 autocast cache a 2-byte copy of trainable weights (DDP)
    generate()    GRPO/RLOO without vLLM: KV cache for per_device * steps_per_generation sequences of seq_len
    overhead      1.5 GiB per training process (CUDA context, workspaces, NCCL); 2.0 GiB per vLLM GPU
    headroom      a candidate fits when estimate <= usable * (1 - headroom), default 10%
  vLLM: weights at 2 bytes/param (4-bit in colocate QLoRA) / TP; KV cache = 2 * layers * kv_heads * head_dim *
    2 bytes per token per sequence (vllm/v1/kv_cache_interface.py @0.31.0, AttentionSpec page size), at
    max_model_len x concurrency; vLLM takes gpu_memory_utilization * total memory per GPU
    (vllm/v1/worker/utils.py request_memory), so in colocate mode the trainer keeps total * (1 - utilization).
    Colocate default utilization: the smallest 0.05 step holding weights, overhead and max_num_seqs sequences
    (per_device * TP * steps_per_generation, grpo_trainer.py) plus 0.05.
ranking, least invasive first: DDP (1 GPU) < ZeRO-2 (shards grads and optimizer) < FSDP2 < ZeRO-3 (shard weights
  too) < ZeRO-2 optimizer offload < ZeRO-3 optimizer offload < FSDP2 CPU offload < ZeRO-3 full offload. The first
  candidate that fits is recommended. LoRA/QLoRA are listed only when nothing fits: they change what is trained.
GPU split (server mode): the smallest TP (dividing the attention heads, within one node) whose GPUs hold the weights
  and one max_model_len sequence; the trainer gets the other GPUs (--num_processes). Several nodes: equal trainer
  processes per node, or a node for the server when that leaves more. Generation batch = per_device * processes *
  steps_per_generation, which must be divisible by num_generations (trl/trainer/grpo_config.py __post_init__).
"""

EPILOG = (
    MEMORY_MODEL
    + """
inputs: the model is --params or --model-config (a local config.json of a Llama, Mistral, Mixtral, Qwen2/2.5/3,
  Qwen2-MoE/Qwen3-MoE, Gemma/Gemma2/Gemma3-text or Phi/Phi-3 decoder). With --params alone, activations and the KV
  cache use the nearest published reference shape (named in the output). Hardware is --gpus/--gpu-memory-gib or
  --hardware-json (the output of check_optional_backends.py --json; its visible GPUs); --gpus is per node.
lint: --lint-accelerate-config and/or --lint-trl-config (TRL CLI YAML, or JSON of config values); every finding
  names the setting to change and its upstream source. Without --params/--model-config only the lint runs.
exit codes: 0 report produced; 1 --require-fit found no fitting candidate for the requested method (or the vLLM
  side does not fit), or --require-lint-clean found a lint error; 2 usage error or unusable input (unknown
  architecture, malformed YAML/JSON, impossible hardware).
The commands in the output are templates: never run them without the user's approval.
"""
)

# Byte sizes and allowances (documented in MEMORY_MODEL).
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
NF4_BYTES = 0.5
QUANT_STATE_BYTES = 4 / 64  # one fp32 absmax per 64-value block (bitsandbytes blocksize 64)
QUANT_STATE_DOUBLE_BYTES = 1 / 64 + 4 / (64 * 256)  # 8-bit absmax, fp32 second level per 256 blocks
TRAIN_OVERHEAD_GIB = 1.5
VLLM_OVERHEAD_GIB = 2.0
LM_HEAD_TOKEN_TILE = 4096  # trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE @1.16.0
LM_HEAD_VOCAB_TILE = 32768  # trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE @1.16.0
DS_BUFFER_FACTOR = 1.5  # additional_buffer_factor default of the DeepSpeed estimators
TRL_COLOCATE_UTIL_DEFAULT = 0.3  # GRPOConfig/RLOOConfig.vllm_gpu_memory_utilization @1.16.0
SERVER_UTIL_DEFAULT = 0.9  # what trl vllm-serve passes as --gpu-memory-utilization @1.16.0
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # trl/experimental/async_grpo/async_grpo_trainer.py
ASYNC_MAX_STALENESS = 4  # AsyncGRPOConfig.max_staleness default

TRAINERS = ("sft", "dpo", "grpo", "rloo", "async-grpo")
GENERATING = ("grpo", "rloo", "async-grpo")
# Trainers that hold a reference model by default (full fine-tune only; PEFT disables the adapter instead).
REF_MODEL_DEFAULT = {"sft": False, "dpo": True, "grpo": False, "rloo": True, "async-grpo": False}

STRATEGIES = {
    # key: (label, invasiveness rank, TRL preset or None)
    "ddp": ("DDP", 1, "multi_gpu"),
    "zero2": ("DeepSpeed ZeRO-2", 2, "zero2"),
    "fsdp2": ("FSDP2 full shard", 3, "fsdp2"),
    "zero3": ("DeepSpeed ZeRO-3", 4, "zero3"),
    "zero2-offload": ("ZeRO-2 + optimizer offload", 5, None),
    "zero3-offload-opt": ("ZeRO-3 + optimizer offload", 6, None),
    "fsdp2-offload": ("FSDP2 + CPU offload", 7, None),
    "zero3-offload-all": ("ZeRO-3 + optimizer and param offload", 8, None),
}
PRESET_CHANGES = {
    "zero2-offload": ("zero2", {"deepspeed_config.offload_optimizer_device": "cpu"}),
    "zero3-offload-opt": ("zero3", {"deepspeed_config.offload_optimizer_device": "cpu"}),
    "zero3-offload-all": (
        "zero3",
        {"deepspeed_config.offload_optimizer_device": "cpu", "deepspeed_config.offload_param_device": "cpu"},
    ),
    "fsdp2-offload": ("fsdp2", {"fsdp_config.fsdp_offload_params": True}),
}


# ==============================================================================================================
# Model architecture
# ==============================================================================================================


@dataclass
class Linear:
    """One nn.Linear per layer of a kind: name, in/out features, layers that have it."""

    name: str
    fan_in: int
    fan_out: int
    layers: int


@dataclass
class ModelFacts:
    """The counts the memory model needs, from a config.json or a reference shape."""

    name: str
    source: str
    total: int
    active: int
    embedding: int
    lm_head: int
    quantizable: int  # params of every nn.Linear except lm_head (what bitsandbytes 4-bit quantizes)
    largest_module: int  # DeepSpeed's largest_layer_params (one module, its own parameters)
    block: int  # params of the largest decoder layer
    block_quantizable: int
    largest_linear: int  # in*out of the largest Linear (bnb dequantizes one at a time)
    linears: List[Linear]
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    mlp_active: int  # intermediate width a token passes through (top-k experts for MoE, + shared expert)
    gated_mlp: bool
    is_moe: bool
    max_position_embeddings: Optional[int] = None
    torch_dtype: Optional[str] = None
    notes: List[str] = field(default_factory=list)

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim


FAMILIES = {
    # model_type: (tied default, qkv bias, o bias, norms per layer, q/k norm, gated MLP, layer-norm with bias)
    "llama": (False, None, None, 2, False, True, False),
    "mistral": (False, False, False, 2, False, True, False),
    "mixtral": (False, False, False, 2, False, True, False),
    "qwen2": (False, True, False, 2, False, True, False),
    "qwen2_moe": (False, True, False, 2, False, True, False),
    "qwen3": (False, None, None, 2, True, True, False),
    "qwen3_moe": (False, None, None, 2, True, True, False),
    "gemma": (True, None, None, 2, False, True, False),
    "gemma2": (True, None, None, 4, False, True, False),
    "gemma3_text": (True, None, None, 4, True, True, False),
    "phi3": (False, False, False, 2, False, True, False),
    "phi": (False, True, True, 1, False, False, True),
}
MOE_TYPES = {"mixtral", "qwen2_moe", "qwen3_moe"}


def _cfg_int(config: Dict[str, Any], key: str, path: str, default: Optional[int] = None) -> int:
    value = config.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        if value is None:
            raise PlanInputError(f"{path}: missing integer field {key!r}")
        raise PlanInputError(f"{path}: field {key!r} must be an integer, got {value!r}")
    if int(value) < 0:
        raise PlanInputError(f"{path}: field {key!r} must not be negative")
    return int(value)


def facts_from_config(config: Dict[str, Any], path: str) -> ModelFacts:
    """Count parameters of a decoder from its config.json, family by family."""
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        if isinstance(config.get("text_config"), dict):
            raise PlanInputError(
                f"{path}: model_type {model_type!r} is a multimodal wrapper; pass --params, or a config.json of the "
                f"text model (supported model_type: {', '.join(sorted(FAMILIES))})"
            )
        raise PlanInputError(
            f"{path}: unknown model_type {model_type!r} (architectures {config.get('architectures')}); supported: "
            f"{', '.join(sorted(FAMILIES))}. Pass --params instead to plan with a reference shape."
        )
    tied_default, qkv_bias, o_bias, norms, qk_norm, gated, layer_norm = FAMILIES[model_type]
    h = _cfg_int(config, "hidden_size", path)
    layers = _cfg_int(config, "num_hidden_layers", path)
    heads = _cfg_int(config, "num_attention_heads", path)
    kv = _cfg_int(config, "num_key_value_heads", path, heads) if config.get("num_key_value_heads") else heads
    vocab = _cfg_int(config, "vocab_size", path)
    inter = _cfg_int(config, "intermediate_size", path)
    if min(h, layers, heads, kv, vocab) <= 0:
        raise PlanInputError(f"{path}: hidden_size, num_hidden_layers, heads and vocab_size must be positive")
    head_dim = config.get("head_dim") or h // heads
    head_dim = _cfg_int({"head_dim": head_dim}, "head_dim", path)
    tied = config.get("tie_word_embeddings", tied_default)
    if qkv_bias is None:
        qkv_bias = bool(config.get("attention_bias", False))
    if o_bias is None:
        o_bias = bool(config.get("attention_bias", False))
    mlp_bias = bool(config.get("mlp_bias", False)) or model_type == "phi"
    norm_params = 2 * h if layer_norm else h

    q_out, kv_out = heads * head_dim, kv * head_dim
    attn_linears = [("q_proj", h, q_out), ("k_proj", h, kv_out), ("v_proj", h, kv_out)]
    o_name = "dense" if model_type == "phi" else "o_proj"
    if model_type == "phi3":
        attn_linears = [("qkv_proj", h, q_out + 2 * kv_out)]
    attn_linears.append((o_name, q_out, h))
    attn = sum(i * o for _, i, o in attn_linears)
    attn += (q_out + 2 * kv_out if qkv_bias else 0) + (h if o_bias else 0)
    attn += 2 * head_dim if qk_norm else 0

    def dense_mlp(width: int) -> List[Tuple[str, int, int]]:
        if model_type == "phi":
            return [("fc1", h, width), ("fc2", width, h)]
        if model_type == "phi3":
            return [("gate_up_proj", h, 2 * width), ("down_proj", width, h)]
        return [("gate_proj", h, width), ("up_proj", h, width), ("down_proj", width, h)]

    def mlp_params(linears: List[Tuple[str, int, int]]) -> int:
        return sum(i * o + (o if mlp_bias else 0) for _, i, o in linears)

    layer_norms = norms * norm_params
    linears: Dict[str, Linear] = {}

    def add(entries: List[Tuple[str, int, int]], count: int, prefix: str = "") -> None:
        for name, fan_in, fan_out in entries:
            key = prefix + name
            if key in linears:
                linears[key].layers += count
            else:
                linears[key] = Linear(name, fan_in, fan_out, count)

    add(attn_linears, layers)
    total_layers = 0
    active_layers = 0
    largest_module = vocab * h
    block = block_q = 0
    mlp_active = inter
    notes: List[str] = []
    is_moe = model_type in MOE_TYPES
    if is_moe:
        if model_type == "mixtral":
            experts = _cfg_int(config, "num_local_experts", path)
            expert_inter = inter
            moe_layer_ids = set(range(layers))
            shared_inter = 0
        else:
            experts = _cfg_int(config, "num_experts", path)
            expert_inter = _cfg_int(config, "moe_intermediate_size", path)
            step = _cfg_int(config, "decoder_sparse_step", path, 1) or 1
            mlp_only = set(config.get("mlp_only_layers") or [])
            moe_layer_ids = {i for i in range(layers) if i not in mlp_only and experts > 0 and (i + 1) % step == 0}
            shared_inter = int(config.get("shared_expert_intermediate_size") or 0) if model_type == "qwen2_moe" else 0
        top_k = _cfg_int(config, "num_experts_per_tok", path)
        if experts <= 0 or top_k <= 0 or top_k > experts:
            raise PlanInputError(f"{path}: MoE needs 0 < num_experts_per_tok <= number of experts")
        expert_params = 3 * h * expert_inter
        router = h * experts
        shared = mlp_params(dense_mlp(shared_inter)) + h if shared_inter else 0  # + shared_expert_gate (h x 1)
        moe_layer = attn + layer_norms + experts * expert_params + router + shared
        dense_layer = attn + layer_norms + mlp_params(dense_mlp(inter))
        n_moe = len(moe_layer_ids)
        n_dense = layers - n_moe
        total_layers = n_moe * moe_layer + n_dense * dense_layer
        active_layers = total_layers - n_moe * (experts - top_k) * expert_params
        largest_module = max(largest_module, experts * expert_params)
        if shared_inter:
            add(dense_mlp(shared_inter), n_moe, "shared_expert.")
            add([("shared_expert_gate", h, 1)], n_moe)
        if n_dense:
            add(dense_mlp(inter), n_dense)
        block = max(moe_layer if n_moe else 0, dense_layer if n_dense else 0)
        block_q = sum(i * o for _, i, o in attn_linears) + (
            sum(i * o for _, i, o in dense_mlp(shared_inter)) + h if shared_inter and n_moe else 0
        )
        mlp_active = top_k * expert_inter + shared_inter
        notes.append(
            f"MoE: {experts} experts, top-{top_k}; in transformers 5.x the experts are fused 3-D parameters, so "
            "bitsandbytes 4-bit and LoRA all-linear leave them alone (QLoRA keeps them at the load dtype)"
        )
    else:
        mlp = dense_mlp(inter)
        add(mlp, layers)
        dense_layer = attn + layer_norms + mlp_params(mlp)
        total_layers = active_layers = layers * dense_layer
        block = dense_layer
        block_q = sum(i * o for _, i, o in attn_linears) + sum(i * o for _, i, o in mlp)
    embedding = vocab * h
    lm_head = 0 if tied else vocab * h + (vocab if model_type == "phi" else 0)
    final_norm = norm_params
    total = embedding + lm_head + final_norm + total_layers
    active = embedding + lm_head + final_norm + active_layers
    quantizable = sum(lin.fan_in * lin.fan_out * lin.layers for lin in linears.values())
    largest_linear = max(lin.fan_in * lin.fan_out for lin in linears.values())
    name = str(config.get("_name_or_path") or Path(path).parent.name or model_type)
    dtype = config.get("torch_dtype") or config.get("dtype")
    max_pos = config.get("max_position_embeddings")
    return ModelFacts(
        name=name,
        source=f"config.json ({path}, model_type {model_type})",
        total=total,
        active=active,
        embedding=embedding,
        lm_head=lm_head,
        quantizable=quantizable,
        largest_module=largest_module,
        block=block,
        block_quantizable=block_q,
        largest_linear=largest_linear,
        linears=list(linears.values()),
        layers=layers,
        hidden=h,
        heads=heads,
        kv_heads=kv,
        head_dim=head_dim,
        vocab=vocab,
        mlp_active=mlp_active,
        gated_mlp=gated,
        is_moe=is_moe,
        max_position_embeddings=int(max_pos) if isinstance(max_pos, int) else None,
        torch_dtype=str(dtype) if dtype else None,
        notes=notes,
    )


def _reference(
    name: str, model_type: str, h: int, inter: int, layers: int, heads: int, kv: int, vocab: int, tied: bool
) -> Dict[str, Any]:
    return {
        "_name_or_path": name,
        "model_type": model_type,
        "hidden_size": h,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
    }


# Published architectures of common dense decoders, used for the shape when only --params is given.
REFERENCE_SHAPES = [
    _reference("Qwen2.5-0.5B", "qwen2", 896, 4864, 24, 14, 2, 151936, True),
    _reference("Qwen2.5-1.5B", "qwen2", 1536, 8960, 28, 12, 2, 151936, True),
    _reference("Qwen2.5-3B", "qwen2", 2048, 11008, 36, 16, 2, 151936, True),
    _reference("Mistral-7B-v0.1", "mistral", 4096, 14336, 32, 32, 8, 32000, False),
    _reference("Qwen2.5-7B", "qwen2", 3584, 18944, 28, 28, 4, 152064, False),
    _reference("Llama-3.1-8B", "llama", 4096, 14336, 32, 32, 8, 128256, False),
    _reference("Qwen2.5-14B", "qwen2", 5120, 13824, 48, 40, 8, 152064, False),
    _reference("Qwen2.5-32B", "qwen2", 5120, 27648, 64, 40, 8, 152064, False),
    _reference("Llama-3.1-70B", "llama", 8192, 28672, 80, 64, 8, 128256, False),
    _reference("Qwen2.5-72B", "qwen2", 8192, 29568, 80, 64, 8, 152064, False),
]


def facts_from_params(total: int) -> ModelFacts:
    """Exact parameter count, with the structure of the nearest published reference shape."""
    candidates = [facts_from_config(cfg, "reference") for cfg in REFERENCE_SHAPES]
    ref = min(candidates, key=lambda f: abs(math.log(total / f.total)))
    scale = total / ref.total
    facts = ModelFacts(
        name=f"{total / 1e9:.2f}B-parameter model",
        source=f"--params {total:,}; shape of {ref.name} ({ref.total / 1e9:.2f}B) for layers, KV heads and activations",
        total=total,
        active=total,
        embedding=ref.embedding,
        lm_head=ref.lm_head,
        quantizable=min(total, int(ref.quantizable * scale)),
        largest_module=ref.largest_module,
        block=int(ref.block * scale),
        block_quantizable=int(ref.block_quantizable * scale),
        largest_linear=ref.largest_linear,
        linears=ref.linears,
        layers=ref.layers,
        hidden=ref.hidden,
        heads=ref.heads,
        kv_heads=ref.kv_heads,
        head_dim=ref.head_dim,
        vocab=ref.vocab,
        mlp_active=ref.mlp_active,
        gated_mlp=ref.gated_mlp,
        is_moe=False,
        max_position_embeddings=None,
        torch_dtype="bfloat16",
        notes=[
            f"shape approximated by {ref.name}: pass --model-config <config.json> for exact activations, KV cache, "
            "LoRA sizes and the ZeRO-3 largest layer"
        ],
    )
    if abs(math.log(scale)) > math.log(1.25):
        facts.notes.append(f"--params is {scale:.2f}x the nearest reference shape; treat activations as rough")
    return facts


def parse_param_count(text: str) -> int:
    """'7B', '7e9', '70.6B', '500M', '7000000000' -> int."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBtT]?)\s*", str(text))
    if not match:
        raise PlanInputError(f"--params {text!r}: expected a count such as 7B, 0.5B, 7e9 or 500M")
    value = float(match.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}[match.group(2).lower()]
    if value < 1e6:
        raise PlanInputError(f"--params {text!r}: {value:g} parameters is not a plausible model size")
    return round(value)


def lora_trainable(facts: ModelFacts, rank: int, targets: str) -> Tuple[int, List[str]]:
    """LoRA params r*(in+out) for every targeted Linear; ``all-linear`` = every Linear but lm_head (PEFT)."""
    names = sorted({lin.name for lin in facts.linears})
    if targets.strip().lower() == "all-linear":
        chosen = facts.linears
    else:
        wanted = [t.strip() for t in targets.split(",") if t.strip()]
        unknown = [t for t in wanted if t not in names]
        if "lm_head" in wanted:
            raise PlanInputError(
                "--lora-targets lm_head: TRL 1.16 refuses a PEFT adapter on lm_head (the fused LM head reads "
                "lm_head.weight directly)"
            )
        if unknown or not wanted:
            raise PlanInputError(
                f"--lora-targets {targets!r}: {', '.join(unknown) or 'nothing'} not among this model's linear "
                f"layers ({', '.join(names)}); PEFT would raise that the target modules were not found"
            )
        chosen = [lin for lin in facts.linears if lin.name in wanted]
    trainable = sum(rank * (lin.fan_in + lin.fan_out) * lin.layers for lin in chosen)
    return trainable, sorted({lin.name for lin in chosen})


# ==============================================================================================================
# Hardware
# ==============================================================================================================


@dataclass
class Hardware:
    gpus_per_node: int
    nodes: int
    memory_gib: float
    compute_capabilities: List[Optional[str]]
    names: List[str]
    source: str
    notes: List[str] = field(default_factory=list)

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GIB)


def load_hardware_json(path: str) -> Dict[str, Any]:
    """The visible GPUs from ``check_optional_backends.py --json`` (schema_version 1)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanInputError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise PlanInputError(f"{path}:{exc.lineno}: malformed JSON: {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanInputError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise PlanInputError(f"{path}: expected the JSON object of check_optional_backends.py --json")
    if data.get("schema_version") != 1:
        raise PlanInputError(
            f"{path}: schema_version {data.get('schema_version')!r} is not supported (expected 1, from "
            "check_optional_backends.py --json)"
        )
    gpus = (data.get("accelerators") or {}).get("gpus") if isinstance(data.get("accelerators"), dict) else None
    if not isinstance(gpus, list):
        raise PlanInputError(f"{path}: no accelerators.gpus list")
    visible = [g for g in gpus if isinstance(g, dict) and g.get("visible", True)]
    if not visible:
        raise PlanInputError(f"{path}: no visible GPU (accelerators.gpus has {len(gpus)} entries, none visible)")
    memories = []
    for gpu in visible:
        mib = gpu.get("memory_total_mib")
        if not isinstance(mib, (int, float)) or isinstance(mib, bool) or mib <= 0:
            raise PlanInputError(f"{path}: GPU {gpu.get('index')} has no positive memory_total_mib")
        memories.append(float(mib))
    notes = []
    if len(set(memories)) > 1:
        notes.append(f"GPUs differ in memory ({sorted(set(memories))} MiB); planning with the smallest")
    for gpu in visible:
        free, total = gpu.get("memory_free_mib"), gpu.get("memory_total_mib")
        if isinstance(free, (int, float)) and isinstance(total, (int, float)) and total - free > 1024:
            notes.append(
                f"GPU {gpu.get('index')} already has {(total - free) / 1024:.1f} GiB in use by other processes"
            )
    return {
        "count": len(visible),
        "memory_gib": min(memories) / 1024.0,
        "compute_capabilities": [g.get("compute_capability") for g in visible],
        "names": [str(g.get("name", "?")) for g in visible],
        "notes": notes,
    }


def resolve_hardware(args: argparse.Namespace, need_memory: bool = True) -> Optional[Hardware]:
    info: Dict[str, Any] = {}
    source = []
    if args.hardware_json:
        info = load_hardware_json(args.hardware_json)
        source.append(f"{args.hardware_json} (visible GPUs)")
    gpus = args.gpus if args.gpus is not None else info.get("count")
    memory = args.gpu_memory_gib if args.gpu_memory_gib is not None else info.get("memory_gib")
    if gpus is None and memory is None:
        return None
    if gpus is None or (memory is None and need_memory):
        raise PlanInputError("hardware: give both --gpus and --gpu-memory-gib, or --hardware-json")
    if memory is None:
        memory = math.inf  # lint only: the rules need the GPU count, not the memory
    if gpus < 1:
        raise PlanInputError(f"impossible hardware: --gpus {gpus} (need at least 1 GPU)")
    if memory <= 0 or (need_memory and not math.isfinite(memory)):
        raise PlanInputError(f"impossible hardware: GPU memory {memory} GiB")
    if args.nodes < 1:
        raise PlanInputError(f"impossible hardware: --nodes {args.nodes}")
    if args.gpus is not None or args.gpu_memory_gib is not None:
        source.append("command-line flags")
    ccs = info.get("compute_capabilities") or []
    if args.compute_capability:
        ccs = [args.compute_capability] * gpus
    return Hardware(
        gpus_per_node=gpus,
        nodes=args.nodes,
        memory_gib=float(memory),
        compute_capabilities=list(ccs),
        names=info.get("names") or [],
        source=" + ".join(source),
        notes=list(info.get("notes") or []),
    )


# ==============================================================================================================
# Training setup and memory model
# ==============================================================================================================


@dataclass
class Setup:
    method: str
    trainer: str
    seq_len: int
    micro_batch: int
    grad_ckpt: bool
    optimizer: str
    model_dtype: str
    mixed_precision: str
    lora_rank: int
    lora_targets: str
    double_quant: bool
    quant_storage: str
    ref_model: bool
    grad_accum: int
    generate_sequences: int = 0  # GRPO/RLOO without vLLM: sequences model.generate() holds a KV cache for


@dataclass
class Estimate:
    method: str
    strategy: str
    world: int
    states: Dict[str, int]
    approx: Dict[str, int]
    host_bytes: Optional[int]
    formula: str
    source: str
    notes: List[str] = field(default_factory=list)
    usable_bytes: int = 0
    headroom: float = 0.1
    fits: Optional[bool] = None
    reason: str = ""

    @property
    def label(self) -> str:
        return STRATEGIES[self.strategy][0] if self.world > 1 or "offload" in self.strategy else "1 GPU"

    @property
    def rank(self) -> int:
        return STRATEGIES[self.strategy][1]

    @property
    def states_bytes(self) -> int:
        return sum(self.states.values())

    @property
    def approx_bytes(self) -> int:
        return sum(self.approx.values())

    @property
    def total_bytes(self) -> int:
        return self.states_bytes + self.approx_bytes


def ds_zero2_model_states(
    total_params: int,
    gpus_per_node: int,
    nodes: int,
    cpu_offload: bool,
    additional_buffer_factor: float = DS_BUFFER_FACTOR,
) -> Tuple[int, int]:
    """(cpu, gpu) bytes exactly as deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs."""
    total_gpus = nodes * gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def ds_zero3_model_states(
    total_params: int,
    largest_layer_params: int,
    gpus_per_node: int,
    nodes: int,
    cpu_offload: bool,
    cpu_offload_params: bool,
    zero_init: bool = True,
    additional_buffer_factor: float = DS_BUFFER_FACTOR,
) -> Tuple[int, int, int]:
    """(cpu, gpu, largest layer) bytes exactly as estimate_zero3_model_states_mem_needs in deepspeed stage3.py."""
    total_gpus = nodes * gpus_per_node
    gpus_factor = 1 / nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            if zero_init:
                cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * gpus_per_node, 18 * gpus_factor) * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            if zero_init:
                cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * gpus_per_node, 16 * gpus_factor) * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu_mem = largest_layer_params * 4 * gpus_per_node * additional_buffer_factor
        else:
            cpu_mem = total_params * 4 * gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory


DS_SOURCE = "deepspeed/runtime/zero/{}@0.19.8 ({})"
FSDP_SOURCE = "accelerate/utils/fsdp_utils.py@1.15.0 (fsdp2_prepare_model: fp32 upcast of trainable params)"
DDP_SOURCE = (
    "torch DistributedDataParallel (gradient_as_bucket_view=False keeps a bucket copy of the gradients; "
    "accelerate/utils/dataclasses.py@1.15.0 default, unchanged by transformers/trainer.py@5.24.0)"
)


def optimizer_bytes(optimizer: str, param_bytes: int) -> float:
    """Bytes of optimizer state per trainable parameter: AdamW m and v in the parameter's dtype, or 8-bit."""
    return 2.0 if optimizer == "adamw-8bit" else 2.0 * param_bytes


def model_states(
    method: str,
    strategy: str,
    facts: ModelFacts,
    setup: Setup,
    trainable: int,
    world: int,
    gpus_per_node: int,
    nodes: int,
) -> Tuple[Dict[str, int], Optional[int], str, str, List[str]]:
    """Exact model-state bytes per GPU for one (method, strategy): (terms, host bytes per node, formula, source)."""
    P, N, n = facts.total, world, gpus_per_node
    w = DTYPE_BYTES[setup.model_dtype]
    L = facts.largest_module
    notes: List[str] = []
    ds_note = "DeepSpeed's estimator assumes Adam with fp32 states" if setup.optimizer != "adamw" else ""
    if ds_note and strategy.startswith("zero"):
        notes.append(ds_note)
    terms: Dict[str, int] = {}
    host: Optional[int] = None
    if method == "full":
        T = P
        if strategy == "ddp":
            opt = optimizer_bytes(setup.optimizer, w)
            terms = {"weights": P * w, "grads": P * w, "optimizer": int(P * opt)}
            if N > 1:
                terms["ddp_buckets"] = P * w
            formula = f"P*({w}+{w}+{opt:g})" + (f" + buckets P*{w}" if N > 1 else "")
            return terms, None, formula, DDP_SOURCE if N > 1 else "weights, grads, AdamW states by dtype", notes
        if strategy in ("zero2", "zero2-offload"):
            offload = strategy == "zero2-offload"
            cpu, gpu = ds_zero2_model_states(P, n, nodes, offload)
            if offload:
                terms = {"16-bit weights": gpu}
            else:
                terms = {"16-bit weights": 2 * P, "sharded grads+fp32 master+Adam": gpu - 2 * P}
            formula = "2P" if offload else "2P + 18P/N"
            fn = "estimate_zero2_model_states_mem_needs"
            return terms, cpu, formula, DS_SOURCE.format("stage_1_and_2.py", fn), notes
        if strategy.startswith("zero3"):
            off_opt = strategy in ("zero3-offload-opt", "zero3-offload-all")
            off_par = strategy == "zero3-offload-all"
            cpu, gpu, largest = ds_zero3_model_states(P, L, n, nodes, off_opt, off_par)
            terms = {"largest layer gathered (4L)": largest}
            if gpu > largest:
                terms["sharded states"] = gpu - largest
            formula = {"zero3": "4L + 18P/N", "zero3-offload-opt": "4L + 2P/N", "zero3-offload-all": "4L"}[strategy]
            return terms, cpu, formula, DS_SOURCE.format("stage3.py", "estimate_zero3_model_states_mem_needs"), notes
        opt = optimizer_bytes(setup.optimizer, 4)
        per_param = 4 + 4 + opt
        if strategy == "fsdp2":
            terms = {"sharded fp32 weights+grads+optimizer": int(T * per_param / N)}
            return terms, None, f"(4+4+{opt:g})*P/N", FSDP_SOURCE, notes
        host = int(T * per_param * n / N)
        return {}, host, f"host (4+4+{opt:g})*P*n/N", FSDP_SOURCE + "; torch FSDP2 CPUOffloadPolicy", notes
    if method == "lora":
        tb = 4 + 4 + optimizer_bytes(setup.optimizer, 4)
        if strategy == "ddp":
            terms = {"frozen base": P * w, "fp32 adapters+grads+optimizer": int(trainable * tb)}
            if N > 1:
                terms["ddp_buckets"] = trainable * 4
            return terms, None, f"P*{w} + T*{tb:g}", "PEFT autocast_adapter_dtype=True keeps adapters in fp32", notes
        if strategy == "zero2":
            cpu, gpu = ds_zero2_model_states(trainable, n, nodes, False)
            terms = {"16-bit base": 2 * P, "16-bit adapters + sharded (18T/N)": gpu}
            return (
                terms,
                None,
                "2P + 2T + 18T/N",
                DS_SOURCE.format("stage_1_and_2.py", "estimator terms applied to trainable params only"),
                notes,
            )
        if strategy == "zero3":
            terms = {
                "largest layer gathered (4L)": 4 * L,
                "sharded 16-bit base (2P/N)": int(2 * P / N),
                "sharded trainable (18T/N)": int(18 * trainable / N),
            }
            return (
                terms,
                None,
                "4L + 2P/N + 18T/N",
                DS_SOURCE.format("stage3.py", "estimator terms; frozen base needs only its 16-bit copy"),
                notes,
            )
        if strategy == "zero3-offload-all":
            host = int((2 * P + 18 * trainable) / nodes * DS_BUFFER_FACTOR)
            return (
                {"largest layer gathered (4L)": 4 * L},
                host,
                "4L",
                DS_SOURCE.format("stage3.py", "offload_param+optimizer case"),
                notes,
            )
        if strategy == "fsdp2":
            terms = {
                "sharded frozen base": int(P * w / N),
                "sharded fp32 adapters+grads+optimizer": int(trainable * tb / N),
            }
            return terms, None, f"P*{w}/N + T*{tb:g}/N", FSDP_SOURCE, notes
        host = int((P * w + trainable * tb) * n / N)
        return {}, host, f"host (P*{w} + T*{tb:g})*n/N", FSDP_SOURCE + "; torch FSDP2 CPUOffloadPolicy", notes
    # QLoRA
    qs = QUANT_STATE_DOUBLE_BYTES if setup.double_quant else QUANT_STATE_BYTES
    Q = facts.quantizable
    NQ = P - Q
    q_bytes = int(Q * (NF4_BYTES + qs))
    tb = 2 + 2 + optimizer_bytes(setup.optimizer, 2)
    float_storage = setup.quant_storage != "uint8"
    qlora_src = (
        "bitsandbytes NF4 blocksize 64 (bitsandbytes/nn/modules.py@0.50.2 Params4bit); TRL casts trainable "
        "params to bf16 (trl/trainer/sft_trainer.py@1.16.0 L908-911)"
    )
    if strategy == "ddp":
        terms = {
            "4-bit base + quant state": q_bytes,
            "non-quantized params": NQ * w,
            "bf16 adapters+grads+optimizer": int(trainable * tb),
        }
        if N > 1:
            terms["ddp_buckets"] = trainable * 2
        return terms, None, f"Q*(0.5+{qs:.4f}) + (P-Q)*{w} + T*{tb:g}", qlora_src, notes
    if strategy == "zero3":
        terms = {
            "largest layer gathered (4L)": 4 * L,
            "sharded base": int((q_bytes + 2 * NQ) / N),
            "sharded trainable (18T/N)": int(18 * trainable / N),
        }
        return (
            terms,
            None,
            "4L + (4-bit Q + 2(P-Q))/N + 18T/N",
            qlora_src + "; " + DS_SOURCE.format("stage3.py", "estimator terms"),
            notes,
        )
    if strategy == "zero3-offload-all":
        host = int((q_bytes + 2 * NQ + 18 * trainable) / nodes * DS_BUFFER_FACTOR)
        return {"largest layer gathered (4L)": 4 * L}, host, "4L", qlora_src, notes
    base_replicated = 0 if float_storage else q_bytes
    if not float_storage:
        notes.append("bnb_4bit_quant_storage uint8: FSDP2 keeps the 4-bit weights out of sharding (full copy per GPU)")
    sharded = (0 if not float_storage else q_bytes) + NQ * w + trainable * tb
    if strategy == "fsdp2":
        terms = {"sharded 4-bit base + params + adapters": int(sharded / N)}
        if base_replicated:
            terms["unsharded 4-bit base (uint8 storage)"] = base_replicated
        return terms, None, f"(Q*(0.5+{qs:.4f}) + (P-Q)*{w} + T*{tb:g})/N", qlora_src + "; " + FSDP_SOURCE, notes
    host = int(sharded * n / N)
    terms = {"unsharded 4-bit base (uint8 storage)": base_replicated} if base_replicated else {}
    return terms, host, "host (4-bit base + rest)*n/N", qlora_src + "; torch FSDP2 CPUOffloadPolicy", notes


def reference_model_bytes(strategy: str, facts: ModelFacts, setup: Setup, world: int) -> int:
    """Frozen reference copy (full fine-tune): TRL prepares it with the policy's backend (trl/models/utils.py)."""
    P, w = facts.total, DTYPE_BYTES[setup.model_dtype]
    if strategy == "ddp":
        return P * w
    if strategy in ("zero2", "zero2-offload"):
        return 2 * P  # prepare_deepspeed: stage 0 with bf16
    if strategy in ("zero3", "zero3-offload-opt"):
        return int(2 * P / world)
    if strategy == "fsdp2":
        return int(P * w / world)
    return 0  # parameters offloaded with the policy's config


def activation_terms(facts: ModelFacts, setup: Setup) -> Dict[str, int]:
    """Approximate activation memory per GPU (bf16, SDPA/flash attention)."""
    tokens = setup.seq_len * setup.micro_batch * (2 if setup.trainer == "dpo" else 1)
    per_token_layer = 6 * facts.hidden + 2 * facts.kv_dim + (4 if facts.gated_mlp else 2) * facts.mlp_active
    layer_bytes = tokens * per_token_layer * 2
    terms: Dict[str, int] = {}
    if setup.grad_ckpt:
        terms["activations: checkpointed layer inputs"] = facts.layers * tokens * facts.hidden * 2
        terms["activations: one layer recomputed + grads"] = 2 * layer_bytes
    else:
        terms["activations: all layers"] = facts.layers * layer_bytes
    terms["LM-head tile"] = min(tokens, LM_HEAD_TOKEN_TILE) * min(facts.vocab, LM_HEAD_VOCAB_TILE) * 4 * 2
    if setup.generate_sequences:
        # Without vLLM the trainer generates with model.generate(): a KV cache for its slice of the batch.
        terms["generate() KV cache"] = kv_bytes_per_token(facts, 1) * setup.seq_len * setup.generate_sequences
    return terms


def fsdp_working_set(method: str, facts: ModelFacts, setup: Setup) -> Dict[str, int]:
    """FSDP2 unsharded working set: two blocks in flight plus the root unit (embeddings, lm_head), 2 bytes each."""
    root = facts.embedding + facts.lm_head
    if method == "qlora":
        qs = QUANT_STATE_DOUBLE_BYTES if setup.double_quant else QUANT_STATE_BYTES
        block = int(facts.block_quantizable * (NF4_BYTES + qs) + (facts.block - facts.block_quantizable) * 2)
        terms = {"gathered blocks + root": 2 * block + root * 2, "4-bit dequantized Linear": facts.largest_linear * 2}
        return terms
    gathered = (2 * facts.block + root) * 2
    terms = {"gathered blocks + root": gathered}
    if method == "full":
        terms["unsharded bf16 grads (block + root)"] = (facts.block + root) * 2
    return terms


def strategies_for(method: str, trainer: str, world: int) -> List[str]:
    if method == "full":
        keys = list(STRATEGIES)
    elif method == "lora":
        keys = ["ddp", "zero2", "fsdp2", "zero3", "fsdp2-offload", "zero3-offload-all"]
    else:
        keys = ["ddp", "fsdp2", "zero3", "fsdp2-offload", "zero3-offload-all"]
    if world == 1:
        keys = [k for k in keys if k == "ddp" or "offload" in k]
    if trainer == "async-grpo":
        keys = [k for k in keys if k in ("fsdp2", "fsdp2-offload") or (k == "ddp" and world == 1)]
    return keys


def estimate(
    method: str,
    strategy: str,
    facts: ModelFacts,
    setup: Setup,
    trainable: int,
    world: int,
    gpus_per_node: int,
    nodes: int,
) -> Estimate:
    states, host, formula, source, notes = model_states(
        method, strategy, facts, setup, trainable, world, gpus_per_node, nodes
    )
    if setup.ref_model and method == "full":
        ref = reference_model_bytes(strategy, facts, setup, world)
        if ref:
            states["reference model"] = ref
    approx = activation_terms(facts, setup)
    if strategy.startswith("fsdp2"):
        approx.update(fsdp_working_set(method, facts, setup))
    if strategy == "ddp" and method == "full" and setup.model_dtype == "float32" and setup.mixed_precision != "no":
        approx["autocast bf16 weight cache"] = facts.total * 2
    approx["CUDA/NCCL overhead"] = int(TRAIN_OVERHEAD_GIB * GIB)
    return Estimate(method, strategy, world, states, approx, host, formula, source, notes)


def judge(candidate: Estimate, usable_bytes: int, headroom: float, host_limit: Optional[int]) -> None:
    candidate.usable_bytes = usable_bytes
    candidate.headroom = headroom
    limit = usable_bytes * (1 - headroom)
    if candidate.total_bytes > limit:
        candidate.fits = False
        candidate.reason = f"needs {candidate.total_bytes / GIB:.1f} GiB > {limit / GIB:.1f} GiB"
    elif (
        host_limit is not None
        and candidate.host_bytes is not None
        and "offload" in candidate.strategy
        and (candidate.host_bytes > host_limit)
    ):
        candidate.fits = False
        candidate.reason = f"host RAM {candidate.host_bytes / GIB:.0f} GiB per node > {host_limit / GIB:.0f} GiB"
    else:
        candidate.fits = True
        candidate.reason = f"{limit / GIB - candidate.total_bytes / GIB:.1f} GiB spare after headroom"


# ==============================================================================================================
# vLLM sizing and the GPU split
# ==============================================================================================================


def kv_bytes_per_token(facts: ModelFacts, tp: int, dtype_bytes: int = 2) -> int:
    """Per GPU: 2 (K and V) * layers * kv_heads_per_rank * head_dim * bytes (vLLM AttentionSpec page size)."""
    kv_per_rank = max(1, math.ceil(facts.kv_heads / tp))
    return 2 * facts.layers * kv_per_rank * facts.head_dim * dtype_bytes


def vllm_weight_bytes(facts: ModelFacts, method: str, mode: str, double_quant: bool, serve_bytes: int = 2) -> int:
    """Colocate QLoRA: vLLM loads the checkpoint 4-bit (quantization="bitsandbytes", vllm_generation.py)."""
    if method == "qlora" and mode == "colocate":
        qs = QUANT_STATE_DOUBLE_BYTES if double_quant else QUANT_STATE_BYTES
        return int(facts.quantizable * (NF4_BYTES + qs) + (facts.total - facts.quantizable) * 2)
    return facts.total * serve_bytes


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

    def as_dict(self) -> Dict[str, Any]:
        return {
            "mode": self.mode,
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
) -> VllmPlan:
    weights = vllm_weight_bytes(facts, method, mode, double_quant, serve_bytes) // tp
    overhead = int(VLLM_OVERHEAD_GIB * GIB)
    budget = int(gpu_bytes * util) - weights - overhead
    per_seq = kv_bytes_per_token(facts, tp) * max_model_len
    capacity = max(0, budget // per_seq) if per_seq else 0
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
    """TP sizes vLLM accepts: total attention heads divisible by TP (vllm/config/model.py@0.31.0)."""
    return [tp for tp in (1, 2, 4, 8, 16) if tp <= limit and facts.heads % tp == 0]


def served_dtype_bytes(trainer: str, model_dtype: str) -> int:
    """vLLM serves 16-bit weights (--dtype auto); AsyncGRPO asks for the trainer's dtype on the server too."""
    return DTYPE_BYTES[model_dtype] if trainer == "async-grpo" else 2


def server_concurrency(args: argparse.Namespace, world: int, geometry: Optional[BatchGeometry]) -> Tuple[int, str]:
    """Sequences in flight on the server: GRPO/RLOO send the whole generation batch at once; AsyncGRPO keeps
    max_inflight_tasks = max_staleness * per_device * gradient_accumulation_steps * processes (its config help)."""
    if args.vllm_concurrency:
        return args.vllm_concurrency, "--vllm-concurrency"
    if geometry is not None:
        return geometry.generation_batch, "the generation batch"
    return ASYNC_MAX_STALENESS * args.micro_batch * args.grad_accum * world, "AsyncGRPO max_inflight_tasks (auto)"


def plan_server(
    args: argparse.Namespace, facts: ModelFacts, hw: Hardware, setup: Setup, max_model_len: int, serve_bytes: int
) -> Tuple[VllmPlan, Split]:
    """Smallest TP whose GPUs hold the weights and one max_model_len sequence; the trainer gets the rest."""
    limit = min(hw.gpus_per_node, hw.total_gpus - 1)
    choices = tp_choices(facts, limit)
    if args.vllm_tp is not None:
        if args.vllm_tp > hw.gpus_per_node or args.vllm_tp >= hw.total_gpus:
            raise PlanInputError(
                f"impossible hardware: --vllm-tp {args.vllm_tp} leaves no GPU for the trainer or exceeds the "
                f"{hw.gpus_per_node} GPUs of a node"
            )
        if facts.heads % args.vllm_tp:
            raise PlanInputError(
                f"--vllm-tp {args.vllm_tp}: vLLM needs the {facts.heads} attention heads divisible by the TP size"
            )
        choices = [args.vllm_tp]
    if not choices:
        raise PlanInputError("impossible hardware: no tensor-parallel size leaves a GPU for the trainer")
    util = args.vllm_gpu_memory_utilization or SERVER_UTIL_DEFAULT
    util_source = (
        "--vllm-gpu-memory-utilization"
        if args.vllm_gpu_memory_utilization
        else ("0.9, what trl vllm-serve passes; vLLM's own default is 0.92")
    )
    gpu_bytes = hw.memory_bytes

    def sized(tp: int, concurrency: int) -> VllmPlan:
        return size_vllm(
            facts,
            args.method,
            "server",
            tp,
            util,
            gpu_bytes,
            max_model_len,
            concurrency,
            args.bnb_double_quant,
            util_source,
            serve_bytes,
        )

    tp = next((t for t in choices if sized(t, 1).fits), choices[-1])
    split = plan_split(hw, tp)
    geometry = None
    if args.trainer in ("grpo", "rloo"):
        geometry = batch_geometry(
            args.micro_batch, split.trainer_world, args.grad_accum, args.steps_per_generation, args.num_generations
        )
    concurrency, why = server_concurrency(args, split.trainer_world, geometry)
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
) -> float:
    need = (
        vllm_weight_bytes(facts, method, "colocate", double_quant, serve_bytes) // tp
        + VLLM_OVERHEAD_GIB * GIB
        + kv_bytes_per_token(facts, tp) * max_model_len * max_num_seqs
    )
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


# ==============================================================================================================
# Command templates
# ==============================================================================================================


def _round_lora_rank(rank: int) -> int:
    return next((r for r in VLLM_LORA_RANKS if r >= rank), VLLM_LORA_RANKS[-1])


def build_commands(args: argparse.Namespace, plan: Plan) -> Tuple[List[Dict[str, str]], Dict[str, Any]]:
    """Launch templates for the recommended candidate. They are shown, never run."""
    pick = plan.recommended or plan.alternative_pick
    if pick is None:
        return [], {}
    model = args.model_id or "<model>"
    trainer = plan.setup.trainer
    world = plan.split.trainer_world
    preset, changes = (STRATEGIES[pick.strategy][2], {}) if pick.strategy in STRATEGIES else (None, {})
    if pick.strategy in PRESET_CHANGES:
        preset, changes = PRESET_CHANGES[pick.strategy]
    if world == 1 and pick.strategy == "ddp":
        preset = "single_gpu"
    commands: List[Dict[str, str]] = []
    fields: Dict[str, Any] = {}
    nodes_training = len(plan.split.trainer_masks)
    v = plan.vllm
    if plan.vllm_mode == "server" and v is not None:
        env = f"CUDA_VISIBLE_DEVICES={plan.split.server_mask} VLLM_SERVER_DEV_MODE=1"
        extra = ""
        if trainer == "async-grpo" and pick.method != "full":
            env += " VLLM_ALLOW_RUNTIME_LORA_UPDATING=1"
            extra = (
                f" --enable-lora --max-lora-rank {_round_lora_rank(args.lora_rank)} --max-loras "
                f"{ASYNC_MAX_STALENESS + 2}"
            )
        dtype = f" --dtype {plan.setup.model_dtype}" if trainer == "async-grpo" else ""
        commands.append(
            {
                "role": "vLLM server (node 0)",
                "command": (
                    f"{env} vllm serve {model} --tensor-parallel-size {v.tp} --data-parallel-size 1 "
                    f"--gpu-memory-utilization {v.util:g} --max-model-len {v.max_model_len}{dtype}{extra} "
                    '--enable-scale-out --weight-transfer-config \'{"backend": "nccl"}\' '
                    "--logprobs-mode processed_logprobs --max-logprobs -1"
                ),
                "note": "mirrors what the deprecated trl vllm-serve execs (trl/scripts/vllm_serve.py@1.16.0 "
                "build_command); --enable-scale-out needs vLLM >= 0.30",
            }
        )
    cfg = "<accelerate_config.yaml>"
    preset_note = f"start from TRL preset {preset} (trl/accelerate_configs/{preset}.yaml)" if preset else ""
    if changes:
        preset_note += "; change " + ", ".join(f"{k}: {str(v_).lower()}" for k, v_ in changes.items())
    preset_note += f"; num_processes {world} (the preset says 8)"
    if pick.method == "qlora" and pick.strategy.startswith("fsdp2"):
        preset_note += "; keep fsdp_cpu_ram_efficient_loading: true"
    multi = nodes_training > 1
    for node, mask in enumerate(plan.split.trainer_masks):
        machine = ""
        if multi:
            machine = (
                f" --num_machines {nodes_training} --machine_rank {node} --main_process_ip <node0-ip> "
                "--main_process_port 29500"
            )
        role = "trainer" + (
            f" (node {node + (1 if plan.split.layout.startswith('node 0 runs') else 0)})" if multi else ""
        )
        commands.append(
            {
                "role": role,
                "command": (
                    f"CUDA_VISIBLE_DEVICES={mask} accelerate launch --config_file {cfg} --num_processes {world}"
                    f"{machine} train.py"
                ),
                "note": preset_note.strip("; "),
            }
        )
    if trainer in ("sft", "dpo", "grpo", "rloo") and not multi:
        parts = [f"CUDA_VISIBLE_DEVICES={plan.split.trainer_masks[0]} trl {trainer}"]
        parts.append(f"--accelerate_config {preset if not changes and preset else cfg}")
        parts.append(f"--num_processes {world}")
        parts.append(f"--model_name_or_path {model} --dataset_name <dataset>")
        if trainer in ("grpo", "rloo"):
            parts.append("--reward_funcs <reward>")
        parts.append(f"--dtype {plan.setup.model_dtype}")
        parts.append(f"--per_device_train_batch_size {plan.setup.micro_batch}")
        if plan.geometry is not None:
            parts.append(f"--num_generations {plan.geometry.num_generations}")
            if plan.geometry.steps_per_generation != plan.setup.grad_accum:
                parts.append(f"--steps_per_generation {plan.geometry.steps_per_generation}")
        if plan.setup.grad_accum != 1:
            parts.append(f"--gradient_accumulation_steps {plan.setup.grad_accum}")
        if plan.vllm_mode in ("server", "colocate"):
            parts.append(f"--use_vllm --vllm_mode {plan.vllm_mode}")
            if plan.vllm_mode == "colocate" and v is not None:
                parts.append(f"--vllm_gpu_memory_utilization {v.util:g} --vllm_tensor_parallel_size {v.tp}")
                parts.append(f"--vllm_max_model_length {v.max_model_len}")
        if pick.method != "full":
            targets = args.lora_targets if args.lora_targets != "all-linear" else "all-linear"
            parts.append(f"--use_peft --lora_r {args.lora_rank} --lora_target_modules {targets}")
        if pick.method == "qlora":
            parts.append("--load_in_4bit")
            if args.bnb_double_quant:
                parts.append("--use_bnb_nested_quant")
            if pick.strategy.startswith("fsdp2") or pick.strategy.startswith("zero3"):
                parts.append(f"--bnb_4bit_quant_storage {args.bnb_quant_storage}")
        if not plan.setup.grad_ckpt:
            parts.append("--gradient_checkpointing false")
        parts.append("--output_dir <output_dir>")
        commands.append(
            {
                "role": "trainer via the TRL CLI (alternative)",
                "command": " ".join(parts),
                "note": "trl <command> resolves --accelerate_config NAME to the packaged preset and passes "
                "--num_processes to accelerate launch (trl/cli/accelerate_config.py@1.16.0)",
            }
        )
    # Config fields for a Python script (train.py)
    fields["per_device_train_batch_size"] = plan.setup.micro_batch
    if plan.setup.grad_accum != 1:
        fields["gradient_accumulation_steps"] = plan.setup.grad_accum
    fields["gradient_checkpointing"] = plan.setup.grad_ckpt
    fields["bf16" if plan.setup.mixed_precision == "bf16" else "fp16"] = True
    if plan.setup.model_dtype != "float32" or pick.method == "qlora":
        fields["model_init_kwargs"] = {"dtype": plan.setup.model_dtype}
    if plan.geometry is not None:
        fields["num_generations"] = plan.geometry.num_generations
        if plan.geometry.steps_per_generation != plan.setup.grad_accum:
            fields["steps_per_generation"] = plan.geometry.steps_per_generation
    if trainer in ("grpo", "rloo") and plan.vllm_mode != "none" and v is not None:
        fields["use_vllm"] = True
        fields["vllm_mode"] = plan.vllm_mode
        if plan.vllm_mode == "colocate":
            fields["vllm_gpu_memory_utilization"] = v.util
            fields["vllm_tensor_parallel_size"] = v.tp
            fields["vllm_max_model_length"] = v.max_model_len
        elif nodes_training > 1 or plan.split.layout.startswith("node 0 runs"):
            fields["vllm_server_base_url"] = "http://<node0-ip>:8000"
    if trainer == "async-grpo" and v is not None:
        fields["vllm_server_base_url"] = "http://<server-host>:8000"
        fields["dtype"] = plan.setup.model_dtype
        fields["max_completion_length"] = f"<= {v.max_model_len} - prompt length"
    if pick.method != "full":
        fields["peft_config"] = f"LoraConfig(r={args.lora_rank}, target_modules={args.lora_targets!r})"
    if pick.method == "qlora":
        storage = args.bnb_quant_storage if pick.strategy.startswith(("fsdp2", "zero3")) else None
        fields["quantization_config"] = (
            "BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_compute_dtype=torch.bfloat16"
            + (", bnb_4bit_use_double_quant=True" if args.bnb_double_quant else "")
            + (f", bnb_4bit_quant_storage=torch.{storage}" if storage else "")
            + ")"
        )
    return commands, fields


# ==============================================================================================================
# Rendering
# ==============================================================================================================


def _gib(value: Optional[int]) -> str:
    return "-" if value is None else f"{value / GIB:.1f}"


def candidate_dict(c: Estimate) -> Dict[str, Any]:
    return {
        "method": c.method,
        "strategy": c.strategy,
        "label": c.label,
        "invasiveness_rank": c.rank,
        "world_size": c.world,
        "fits": c.fits,
        "verdict": c.reason,
        "per_gpu_gib": round(c.total_bytes / GIB, 2),
        "model_states_gib_exact": round(c.states_bytes / GIB, 2),
        "approx_gib": round(c.approx_bytes / GIB, 2),
        "usable_gib": round(c.usable_bytes / GIB, 2),
        "headroom": c.headroom,
        "host_ram_per_node_gib": None if c.host_bytes is None else round(c.host_bytes / GIB, 1),
        "terms_gib": {
            "exact": {k: round(v / GIB, 3) for k, v in c.states.items()},
            "approx": {k: round(v / GIB, 3) for k, v in c.approx.items()},
        },
        "formula": c.formula,
        "source": c.source,
        "notes": c.notes,
    }


def plan_dict(plan: Plan) -> Dict[str, Any]:
    f = plan.facts
    return {
        "model": {
            "name": f.name,
            "source": f.source,
            "params_total": f.total,
            "params_active": f.active,
            "embedding_params": f.embedding,
            "lm_head_params": f.lm_head,
            "quantizable_linear_params": f.quantizable,
            "largest_module_params": f.largest_module,
            "layers": f.layers,
            "hidden": f.hidden,
            "attention_heads": f.heads,
            "kv_heads": f.kv_heads,
            "head_dim": f.head_dim,
            "vocab": f.vocab,
            "moe": f.is_moe,
        },
        "setup": {**plan.setup.__dict__, "trainable_params": plan.trainable, "lora_modules": plan.lora_modules},
        "hardware": {
            "gpus_per_node": plan.hardware.gpus_per_node,
            "nodes": plan.hardware.nodes,
            "gpu_memory_gib": plan.hardware.memory_gib,
            "compute_capabilities": plan.hardware.compute_capabilities,
            "source": plan.hardware.source,
        },
        "vllm_mode": plan.vllm_mode,
        "vllm": plan.vllm.as_dict() if plan.vllm else None,
        "split": {
            "layout": plan.split.layout,
            "server_gpus": plan.split.server_gpus,
            "server_cuda_visible_devices": plan.split.server_mask or None,
            "trainer_cuda_visible_devices": plan.split.trainer_masks,
            "num_processes": plan.split.trainer_world,
            "idle_gpus": plan.split.idle,
        },
        "trainer_usable_gib_per_gpu": round(plan.usable_bytes / GIB, 2),
        "candidates": [candidate_dict(c) for c in plan.candidates],
        "alternatives": [candidate_dict(c) for c in plan.alternatives],
        "recommendation": candidate_dict(plan.recommended) if plan.recommended else None,
        "alternative_if_method_may_change": candidate_dict(plan.alternative_pick) if plan.alternative_pick else None,
        "fits": plan.fits,
        "batch": plan.geometry.as_dict() if plan.geometry else None,
        "commands": plan.commands,
        "commands_are_templates": "run only with the user's explicit approval",
        "config_fields": plan.config_fields,
        "notes": plan.notes,
    }


def render_text(
    plan: Optional[Plan], findings: List[plan_rules.Finding], lint_ran: bool, yaml_parsers: List[str]
) -> str:
    out: List[str] = []
    if plan is not None:
        f, s, hw = plan.facts, plan.setup, plan.hardware
        moe = f" ({f.active / 1e9:.2f}B active)" if f.is_moe else ""
        method = {"full": "full fine-tune", "lora": f"LoRA r={s.lora_rank}", "qlora": f"QLoRA r={s.lora_rank}"}
        out.append(
            f"model: {f.total / 1e9:.2f}B params{moe}, {f.source}; {method[s.method]}"
            + (f" ({plan.trainable / 1e6:.1f}M trainable: {','.join(plan.lora_modules)})" if s.method != "full" else "")
        )
        out.append(
            f"setup: {s.trainer}, seq {s.seq_len} x micro-batch {s.micro_batch}, gradient checkpointing "
            f"{'on' if s.grad_ckpt else 'off'}, {s.optimizer}, weights {s.model_dtype}, {s.mixed_precision} mixed "
            f"precision{', reference model' if s.ref_model and s.method == 'full' else ''}"
        )
        out.append(
            f"hardware: {hw.nodes} node(s) x {hw.gpus_per_node} GPU(s) x {hw.memory_gib:.1f} GiB ({hw.source}); "
            f"a candidate fits under {(1 - plan.headroom) * 100:.0f}% of {plan.usable_bytes / GIB:.1f} GiB"
        )
        v = plan.vllm
        if v is not None:
            if plan.vllm_mode == "server":
                out.append(
                    f"split: vLLM server on GPU {plan.split.server_mask} (node 0, TP {v.tp}); trainer on "
                    f"{plan.split.trainer_world} GPU(s), CUDA_VISIBLE_DEVICES={plan.split.trainer_masks[0]}"
                    f"{' per node' if len(plan.split.trainer_masks) > 1 else ''}, --num_processes "
                    f"{plan.split.trainer_world}; {plan.split.layout}"
                    + (f"; {plan.split.idle} GPU(s) idle" if plan.split.idle else "")
                )
            else:
                out.append(
                    f"split: colocate, vLLM TP {v.tp} inside each of the {plan.split.trainer_world} training processes"
                )
            out.append(
                f"vLLM per GPU: weights {_gib(v.weights_per_gpu)} + overhead {_gib(v.overhead)} (approx) of "
                f"{v.util:g} x {hw.memory_gib:.0f} GiB [{v.util_source}] -> KV budget {_gib(v.kv_budget)} GiB = "
                f"{v.capacity} sequences of {v.max_model_len} tokens ({v.kv_per_seq / 2**20:.0f} MiB each); needs "
                f"{v.concurrency} ({v.concurrency_source}): {'fits' if v.fits else 'DOES NOT FIT'}"
            )
            out.extend(f"  ! {note}" for note in v.notes)
        out.append(
            f"candidates per GPU, least invasive first (world {plan.split.trainer_world}; exact model states + "
            "approx activations/overhead = total):"
        )
        for c in plan.candidates:
            out.append(_candidate_line(c))
        if plan.recommended:
            r = plan.recommended
            out.append(f"recommendation: {r.label} ({r.method}) - {r.total_bytes / GIB:.1f} GiB per GPU, {r.reason}")
        else:
            out.append(f"recommendation: nothing fits with {s.method}")
            if plan.alternative_pick:
                a = plan.alternative_pick
                out.append(
                    f"  if the method may change: {a.method} with {a.label} fits ({a.total_bytes / GIB:.1f} GiB per "
                    "GPU); that changes what is trained, so ask the user"
                )
        if plan.alternatives and plan.recommended is None:
            for c in plan.alternatives:
                out.append(_candidate_line(c))
        if plan.geometry is not None:
            gm = plan.geometry
            line = (
                f"batch: per_device_train_batch_size {gm.per_device} x {gm.world} processes x steps_per_generation "
                f"{gm.steps_per_generation} = generation batch {gm.generation_batch}, num_generations "
                f"{gm.num_generations}: "
            )
            line += (
                "divisible"
                if gm.divisible
                else (f"NOT divisible; set steps_per_generation {gm.suggestion} (or change the per-device batch)")
            )
            out.append(line)
        if plan.commands:
            out.append("commands (TEMPLATES: show them; run only with the user's explicit approval):")
            for cmd in plan.commands:
                out.append(f"  # {cmd['role']}: {cmd['note']}")
                out.append(f"  {cmd['command']}")
            out.append("config fields: " + json.dumps(plan.config_fields))
        for note in plan.notes:
            out.append(f"note: {note}")
        out.append(
            "approximate: activations, FSDP gather, autocast cache, overheads; exact: model states per the cited "
            "formulas (run --help for the memory model)"
        )
    if lint_ran:
        parsers = f" (YAML parser: {', '.join(sorted(set(yaml_parsers)))})" if yaml_parsers else ""
        if not findings:
            out.append(f"lint: no findings{parsers}")
        else:
            out.append(f"lint: {len(findings)} finding(s){parsers}")
            for finding in findings:
                out.append(f"  [{finding.severity}] {finding.id}: {finding.message}")
                out.append(f"    fix: {finding.fix}")
                out.append(f"    source: {finding.source}")
    return "\n".join(out)


def _candidate_line(c: Estimate) -> str:
    mark = "fits" if c.fits else "no  "
    host = f", host {c.host_bytes / GIB:.0f} GiB/node" if c.host_bytes is not None and "offload" in c.strategy else ""
    return (
        f"  [{mark}] {c.method:5} {c.label:38} {_gib(c.states_bytes):>6} + {_gib(c.approx_bytes):>5} = "
        f"{_gib(c.total_bytes):>6} GiB  ({c.formula}{host})"
    )


# ==============================================================================================================
# CLI
# ==============================================================================================================


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def _headroom(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value < 0.9:
        raise argparse.ArgumentTypeError(f"must be in [0, 0.9), got {value}")
    return value


def _compute_capability(text: str) -> str:
    if not re.fullmatch(r"\d+\.\d+", text):
        raise argparse.ArgumentTypeError(f"expected MAJOR.MINOR such as 8.0, got {text!r}")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plan_training.py",
        description=(
            "Offline planner for TRL training: per-GPU memory for DDP, ZeRO-2/3, FSDP2 (with and without offload) "
            "under full fine-tuning, LoRA and QLoRA; the vLLM GPU split and launch templates for GRPO, RLOO and "
            "AsyncGRPO; and a lint of Accelerate/TRL configs. Reads only the files given; no download, no torch."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    model = parser.add_argument_group("model")
    source = model.add_mutually_exclusive_group()
    source.add_argument("--params", help="parameter count: 7B, 0.5B, 7e9, 500M")
    source.add_argument("--model-config", metavar="PATH", help="a local config.json (no download)")
    model.add_argument("--model-id", help="model name or path to put into the command templates")
    model.add_argument(
        "--model-dtype",
        choices=sorted(DTYPE_BYTES),
        help="dtype the trainer loads the model in (TRL --dtype / model_init_kwargs dtype); default "
        "float32 as TRL does, except bfloat16 for QLoRA (TRL uses it as bnb_4bit_compute_dtype)",
    )
    method = parser.add_argument_group("method")
    method.add_argument("--method", choices=("full", "lora", "qlora"), default="full")
    method.add_argument("--lora-rank", type=_positive_int, default=16, help="LoRA r (TRL's lora_r default: 16)")
    method.add_argument(
        "--lora-targets", default="all-linear", help="all-linear, or a comma list of linear names (q_proj,v_proj,...)"
    )
    method.add_argument(
        "--optimizer",
        choices=("adamw", "adamw-8bit"),
        default="adamw",
        help="adamw: m and v in the parameter dtype; adamw-8bit: bitsandbytes 8-bit states",
    )
    method.add_argument(
        "--bnb-double-quant",
        action="store_true",
        help="QLoRA nested quantization (TRL use_bnb_nested_quant; default off)",
    )
    method.add_argument(
        "--bnb-quant-storage",
        choices=("bfloat16", "float16", "float32", "uint8"),
        default="bfloat16",
        help="bnb_4bit_quant_storage assumed for FSDP QLoRA (TRL leaves it unset = uint8, which "
        "FSDP cannot shard); default bfloat16",
    )
    train = parser.add_argument_group("trainer and batch")
    train.add_argument(
        "--trainer",
        choices=TRAINERS,
        default=None,
        help="the TRL trainer (default: inferred from --lint-trl-config when it has trainer-specific fields, else sft)",
    )
    train.add_argument(
        "--seq-len",
        type=_positive_int,
        default=2048,
        help="tokens per sequence (prompt + completion for GRPO/RLOO); default 2048",
    )
    train.add_argument(
        "--micro-batch", type=_positive_int, default=8, help="per_device_train_batch_size (TRL's default: 8)"
    )
    train.add_argument("--grad-accum", type=_positive_int, default=1, help="gradient_accumulation_steps (default 1)")
    ckpt = train.add_mutually_exclusive_group()
    ckpt.add_argument(
        "--gradient-checkpointing",
        dest="gradient_checkpointing",
        action="store_true",
        default=True,
        help="on (TRL's default)",
    )
    ckpt.add_argument("--no-gradient-checkpointing", dest="gradient_checkpointing", action="store_false")
    train.add_argument("--num-generations", type=_positive_int, default=8, help="GRPO/RLOO num_generations (8)")
    train.add_argument(
        "--steps-per-generation",
        type=_positive_int,
        help="GRPO/RLOO steps_per_generation (default: gradient_accumulation_steps)",
    )
    train.add_argument(
        "--beta",
        type=float,
        help="KL coefficient for GRPO/RLOO: non-zero loads a reference model (GRPO default 0.0, RLOO 0.05)",
    )
    hw = parser.add_argument_group("hardware")
    hw.add_argument("--gpus", type=int, help="GPUs per node")
    hw.add_argument("--gpu-memory-gib", type=float, help="memory per GPU in GiB (80 for an A100 80GB)")
    hw.add_argument("--compute-capability", type=_compute_capability, help="e.g. 8.0; enables the bf16 check")
    hw.add_argument("--hardware-json", metavar="PATH", help="output of check_optional_backends.py --json")
    hw.add_argument("--nodes", type=int, default=1, help="number of nodes (default 1)")
    hw.add_argument("--host-memory-gib", type=float, help="host RAM per node; offload candidates must fit in it")
    hw.add_argument("--headroom", type=_headroom, default=0.10, help="fraction of GPU memory kept free (0.10)")
    gen = parser.add_argument_group("vLLM generation (GRPO, RLOO, AsyncGRPO)")
    gen.add_argument(
        "--vllm-mode",
        choices=("none", "colocate", "server"),
        help="default: server with 2+ GPUs, else colocate; AsyncGRPO: server",
    )
    gen.add_argument(
        "--vllm-gpu-memory-utilization",
        type=_fraction,
        help="server: --gpu-memory-utilization (default 0.9); colocate: vllm_gpu_memory_utilization "
        "(default: the smallest that fits)",
    )
    gen.add_argument("--vllm-tp", type=_positive_int, help="vLLM tensor-parallel size (default: smallest that fits)")
    gen.add_argument("--max-model-len", type=_positive_int, help="vLLM max_model_len (default: --seq-len)")
    gen.add_argument(
        "--vllm-concurrency",
        type=_positive_int,
        help="sequences generated at once (default: the generation batch; colocate: max_num_seqs)",
    )
    lint = parser.add_argument_group("config lint")
    lint.add_argument("--lint-accelerate-config", metavar="PATH", help="an Accelerate config YAML")
    lint.add_argument("--lint-trl-config", metavar="PATH", help="a TRL CLI YAML, or JSON of config values")
    lint.add_argument(
        "--num-processes",
        type=_positive_int,
        help="the --num_processes the user passes on the command line (wins over the files)",
    )
    lint.add_argument(
        "--vllm-server-gpus",
        type=int,
        help="GPUs per machine reserved for a vLLM server (default: the plan's server GPUs)",
    )
    lint.add_argument(
        "--yaml-parser",
        choices=("auto", "pyyaml", "builtin"),
        default="auto",
        help="auto: PyYAML when installed, else the built-in parser",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="JSON instead of text")
    out.add_argument(
        "--require-fit",
        action="store_true",
        help="exit 1 when no candidate of the requested method fits (or the vLLM side does not)",
    )
    out.add_argument("--require-lint-clean", action="store_true", help="exit 1 when the lint reports an error")
    return parser


# Fields that only one trainer family's config has (TRL 1.16.0): AsyncGRPOConfig
# (trl/experimental/async_grpo/async_grpo_config.py) and GRPOConfig/RLOOConfig (trl/trainer/grpo_config.py,
# rloo_config.py; reward_funcs is their scripts' argument). The lint rules for GRPO and RLOO are the same.
_ASYNC_GRPO_FIELDS = ("max_staleness", "weight_sync_steps", "max_inflight_tasks")
_GRPO_FIELDS = (
    "num_generations",
    "use_vllm",
    "vllm_mode",
    "generation_batch_size",
    "steps_per_generation",
    "reward_funcs",
)


def infer_trainer(trl_config: Optional[Dict[str, Any]]) -> Tuple[Optional[str], List[str]]:
    """The trainer a TRL config belongs to, judged by the trainer-specific fields it sets, and those fields."""
    if not isinstance(trl_config, dict):
        return None, []
    async_keys = [key for key in _ASYNC_GRPO_FIELDS if key in trl_config]
    if async_keys:
        return "async-grpo", async_keys
    grpo_keys = [key for key in _GRPO_FIELDS if key in trl_config]
    if grpo_keys:
        return "grpo", grpo_keys
    return None, []


def resolve_trainer(args: argparse.Namespace, trl_config: Optional[Dict[str, Any]]) -> Optional[plan_rules.Finding]:
    """Set ``args.trainer`` when it was not given; return an info finding saying how it was chosen."""
    if args.trainer is not None:
        return None
    inferred, keys = infer_trainer(trl_config)
    args.trainer = inferred or "sft"
    if trl_config is None:
        return None
    if inferred is None:
        message = f"no trainer-specific fields in {args.lint_trl_config}: linted as an SFT config"
    else:
        message = f"trainer inferred as {inferred} from {', '.join(keys)} in {args.lint_trl_config}"
        if inferred == "grpo":
            message += " (RLOO has the same lint rules)"
    return plan_rules.Finding(
        id="trainer-inferred",
        severity="info",
        message=message,
        fix="pass --trainer to choose it explicitly",
        source="trl/trainer/grpo_config.py@1.16.0, trl/experimental/async_grpo/async_grpo_config.py@1.16.0",
    )


def run(args: argparse.Namespace) -> Tuple[Dict[str, Any], str, int]:
    planning = args.params is not None or args.model_config is not None
    linting = bool(args.lint_accelerate_config or args.lint_trl_config)
    if not planning and not linting:
        raise PlanInputError("nothing to do: give --params or --model-config, and/or a config to lint")
    yaml_parsers: List[str] = []
    trl_cfg = None
    if args.lint_trl_config:
        trl_cfg, used = plan_rules.load_config_file(args.lint_trl_config, args.yaml_parser)
        yaml_parsers.append(used)
    trainer_note = resolve_trainer(args, trl_cfg)
    facts = None
    if args.model_config:
        data, used = plan_rules.load_config_file(args.model_config, args.yaml_parser)
        facts = facts_from_config(data, args.model_config)
    elif args.params is not None:
        facts = facts_from_params(parse_param_count(args.params))
    hardware = resolve_hardware(args, need_memory=planning)
    plan = None
    if planning:
        if hardware is None:
            raise PlanInputError("hardware: give --gpus and --gpu-memory-gib, or --hardware-json")
        assert facts is not None
        plan = build_plan(args, facts, hardware)
    findings: List[plan_rules.Finding] = []
    if linting:
        acc, acc_label, used = plan_rules.resolve_accelerate(
            args.lint_accelerate_config, trl_cfg, args.lint_trl_config, args.yaml_parser
        )
        if used:
            yaml_parsers.append(used)
        server_gpus, reason = 0, ""
        if args.vllm_server_gpus is not None:
            if args.vllm_server_gpus < 0:
                raise PlanInputError("--vllm-server-gpus must not be negative")
            server_gpus, reason = args.vllm_server_gpus, "--vllm-server-gpus"
        elif plan is not None and plan.vllm_mode == "server" and plan.split.server_gpus:
            server_gpus, reason = len(plan.split.server_gpus), "the plan's server split"
        if args.vllm_server_gpus is None and plan is not None and plan.split.layout.startswith("node 0 runs"):
            server_gpus, reason = hardware.gpus_per_node, "the plan dedicates node 0 to the server"
        ctx = plan_rules.LintContext(
            trainer=args.trainer,
            accelerate=acc,
            accelerate_label=acc_label,
            trl=trl_cfg,
            trl_label=args.lint_trl_config,
            launch_num_processes=args.num_processes,
            gpus_per_node=hardware.gpus_per_node if hardware else None,
            nodes=hardware.nodes if hardware else args.nodes,
            server_gpus=server_gpus,
            server_gpus_reason=reason,
            compute_capabilities=hardware.compute_capabilities if hardware else [],
            vllm_mode_cli=args.vllm_mode,
        )
        findings = plan_rules.run_lint(ctx)
        if trainer_note:
            findings.insert(0, trainer_note)
    result: Dict[str, Any] = {"schema_version": SCHEMA_VERSION, "tool": "plan_training.py"}
    if plan is not None:
        result.update(plan_dict(plan))
    result["lint"] = {
        "ran": linting,
        "yaml_parser": sorted(set(yaml_parsers)) or None,
        "findings": [finding.as_dict() for finding in findings],
    }
    text = render_text(plan, findings, linting, yaml_parsers)
    code = 0
    if args.require_fit and plan is not None and not plan.fits:
        code = 1
    if args.require_lint_clean and any(finding.severity == "error" for finding in findings):
        code = 1
    result["exit_code"] = code
    return result, text, code


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 0 for --help, 2 for usage errors
        return int(exc.code or 0)
    try:
        result, text, code = run(args)
    except PlanInputError as exc:
        if args.json:
            print(
                json.dumps(
                    {"schema_version": SCHEMA_VERSION, "tool": "plan_training.py", "error": str(exc), "exit_code": 2},
                    indent=2,
                )
            )
        else:
            print(f"plan_training.py: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else text)
    return code


if __name__ == "__main__":
    sys.exit(main())
