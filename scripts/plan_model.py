"""Model architecture for the planner: parameter counts, shapes and LoRA targets from config.json or a count.

A sibling module of ``plan_training.py`` (not a command); standard library only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the siblings must not leave __pycache__ in scripts/

import math  # noqa: E402
import re  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional, Tuple  # noqa: E402

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from plan_rules import PlanInputError  # noqa: E402

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


def kv_bytes_per_token(facts: ModelFacts, tp: int, dtype_bytes: int = 2) -> int:
    """Per GPU: 2 (K and V) * layers * kv_heads_per_rank * head_dim * bytes (vLLM AttentionSpec page size)."""
    kv_per_rank = max(1, math.ceil(facts.kv_heads / tp))
    return 2 * facts.layers * kv_per_rank * facts.head_dim * dtype_bytes
