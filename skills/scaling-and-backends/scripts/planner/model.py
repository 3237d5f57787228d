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

_HERE = Path(__file__).resolve().parent.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from planner.inputs import PlanInputError  # noqa: E402

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
    path: str = ""  # inside a decoder layer, e.g. "self_attn.q_proj", "mlp.shared_expert.down_proj"

    def __post_init__(self) -> None:
        self.path = self.path or self.name


@dataclass
class ExpertParam:
    """A parameter that is not an nn.Linear (fused experts, a router weight): LoRA reaches it only through PEFT's
    ``target_parameters``. Shape ``(experts, dim_a, dim_b)``, or ``(dim_a, dim_b)`` with ``experts == 1``."""

    path: str  # inside a decoder layer, e.g. "mlp.experts.gate_up_proj", "mlp.gate.weight"
    experts: int
    dim_a: int
    dim_b: int
    layers: int
    lora: bool = True  # False for a bias (PEFT's ParamWrapper needs a 2-D or 3-D parameter)

    @property
    def numel(self) -> int:
        return self.experts * self.dim_a * self.dim_b


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
    model_type: str = ""
    expert_params: List[ExpertParam] = field(default_factory=list)
    mla_kv_dim: Optional[int] = None  # multi-head latent attention: cached latent + rope key per token and layer
    layer_windows: List[Optional[int]] = field(default_factory=list)  # per layer: sliding window, None for full
    mlp_width: int = 0  # intermediate width of the dense MLP layers (0 when every layer routes to experts)
    expert_width: int = 0  # intermediate width of one routed expert (MoE)
    experts_per_token: int = 0  # top-k routed experts (MoE)
    quantization: Optional[str] = None  # the checkpoint's quantization_config.quant_method (e.g. "mxfp4")

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
    "deepseek_v2": (False, None, None, 2, False, True, False),
    "deepseek_v3": (False, None, None, 2, False, True, False),
    "gpt_oss": (False, None, None, 2, False, True, False),
    "olmoe": (False, None, None, 2, False, True, False),
    "glm4_moe": (False, None, False, 2, False, True, False),
    "granitemoe": (False, None, None, 2, False, True, False),
    "llama4_text": (False, None, None, 2, False, True, False),  # its qk_norm is an L2 norm without weights
    "qwen3_next": (False, None, None, 2, True, True, False),
}
MOE_TYPES = {
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "gpt_oss",
    "olmoe",
    "glm4_moe",
    "granitemoe",
    "llama4_text",
    "qwen3_next",
}
# Families refused on purpose, with the reason the refusal gives (the way out is --params, which always plans).
NOT_COUNTED: Dict[str, str] = {}
# Families whose vLLM memory the planner does not model (the reason; generation without vLLM still plans).
NO_VLLM_SIZING = {
    "qwen3_next": "its Gated DeltaNet layers (3 of every 4) keep a recurrent state that vLLM's hybrid KV manager "
    "pages with the attention layers' KV cache, which the planner does not model",
}
# Linears bitsandbytes 4-bit leaves alone: replace_with_bnb_linear swaps a module only when its type is nn.Linear
# itself (transformers/integrations/bitsandbytes.py @5.24.0), and Llama4Router subclasses it.
NOT_4BIT = {"feed_forward.router"}
MLA_TYPES = {"deepseek_v2", "deepseek_v3"}  # multi-head latent attention (transformers 5.24.0 modeling files)


def family_names() -> List[str]:
    """Each supported model_type, marked (MoE), (MLA + MoE) or (vision + language), from the family tables: what
    --help lists."""
    marks = {**{t: " (MoE)" for t in MOE_TYPES}, **{t: " (MLA + MoE)" for t in MLA_TYPES}}
    marks.update({t: " (vision + language)" for t in MULTIMODAL})
    return [t + marks.get(t, "") for t in sorted({*FAMILIES, *MULTIMODAL})]


def wrap_words(words: List[str], width: int, indent: str = "  ") -> List[str]:
    """Words packed greedily into lines of at most ``width`` columns, each line after the first indented."""
    lines: List[str] = []
    line = ""
    for word in words:
        candidate = f"{line} {word}" if line else (indent if lines else "") + word
        if line and len(candidate) > width:
            lines.append(line)
            line = indent + word
        else:
            line = candidate
    return lines + ([line] if line else [])


# Where a config.json has no layer_types, transformers 5.24.0 fills them in per family: gemma2 and gpt_oss
# alternate sliding and full from layer 0, gemma3_text has 5 sliding layers per full one (sliding_window_pattern 6).
SLIDING_PATTERN = {"gemma2": 2, "gpt_oss": 2, "gemma3_text": 6}


def _layer_windows(config: Dict[str, Any], model_type: str, layers: int) -> List[Optional[int]]:
    """Per decoder layer, the sliding window vLLM gives its attention (per_layer_sliding_window in the vLLM model
    files: the window on layers whose layer_types entry is sliding_attention), or None for full attention."""
    window = config.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return [None] * layers
    types = config.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return [window if t == "sliding_attention" else None for t in types]
    pattern = config.get("sliding_window_pattern") or SLIDING_PATTERN.get(model_type)
    if not isinstance(pattern, int) or pattern <= 0:
        return [None] * layers  # e.g. Mistral v0.1: vLLM's llama/mistral code reads layer_types only
    return [window if (i + 1) % pattern else None for i in range(layers)]


def _cfg_int(config: Dict[str, Any], key: str, path: str, default: Optional[int] = None) -> int:
    value = config.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        if value is None:
            raise PlanInputError(f"{path}: missing integer field {key!r}")
        raise PlanInputError(f"{path}: field {key!r} must be an integer, got {value!r}")
    if int(value) < 0:
        raise PlanInputError(f"{path}: field {key!r} must not be negative")
    return int(value)


# Linear = (path inside a decoder layer, in features, out features, has bias)
_Lin = Tuple[str, int, int, bool]


def _linear_params(entries: List[_Lin]) -> int:
    return sum(i * o + (o if bias else 0) for _, i, o, bias in entries)


def _attention(config: Dict[str, Any], model_type: str, path: str, h: int, heads: int, kv: int, head_dim: int):
    """Attention Linears of one layer and its other parameters (norms inside attention, sinks)."""
    qkv_bias, o_bias, qk_norm = FAMILIES[model_type][1], FAMILIES[model_type][2], FAMILIES[model_type][4]
    if qkv_bias is None:
        qkv_bias = bool(config.get("attention_bias", False))
    if o_bias is None:
        o_bias = bool(config.get("attention_bias", False))
    if model_type in MLA_TYPES:
        nope = _cfg_int(config, "qk_nope_head_dim", path)
        rope = _cfg_int(config, "qk_rope_head_dim", path)
        v_dim = _cfg_int(config, "v_head_dim", path)
        kv_rank = _cfg_int(config, "kv_lora_rank", path)
        q_rank = config.get("q_lora_rank")
        q_head = nope + rope
        linears: List[_Lin] = []
        extra = kv_rank  # kv_a_layernorm
        if q_rank:
            q_rank = _cfg_int(config, "q_lora_rank", path)
            linears += [
                ("self_attn.q_a_proj", h, q_rank, qkv_bias),
                ("self_attn.q_b_proj", q_rank, heads * q_head, False),
            ]
            extra += q_rank  # q_a_layernorm
        else:
            linears.append(("self_attn.q_proj", h, heads * q_head, False))
        linears += [
            ("self_attn.kv_a_proj_with_mqa", h, kv_rank + rope, qkv_bias),
            ("self_attn.kv_b_proj", kv_rank, heads * (nope + v_dim), False),
            ("self_attn.o_proj", heads * v_dim, h, o_bias),
        ]
        return linears, extra
    q_out, kv_out = heads * head_dim, kv * head_dim
    if model_type == "qwen3_next":  # q_proj also produces the output gate (Qwen3NextAttention @5.24.0)
        linears = [
            ("self_attn.q_proj", h, 2 * q_out, qkv_bias),
            ("self_attn.k_proj", h, kv_out, qkv_bias),
            ("self_attn.v_proj", h, kv_out, qkv_bias),
            ("self_attn.o_proj", q_out, h, o_bias),
        ]
        return linears, 2 * head_dim
    if model_type == "phi3":
        linears = [("self_attn.qkv_proj", h, q_out + 2 * kv_out, qkv_bias)]
    else:
        linears = [
            ("self_attn.q_proj", h, q_out, qkv_bias),
            ("self_attn.k_proj", h, kv_out, qkv_bias),
            ("self_attn.v_proj", h, kv_out, qkv_bias),
        ]
    linears.append(("self_attn.dense" if model_type == "phi" else "self_attn.o_proj", q_out, h, o_bias))
    extra = 2 * head_dim if qk_norm else 0
    if model_type == "glm4_moe" and config.get("use_qk_norm"):
        extra = 2 * head_dim
    if model_type == "olmoe":
        extra = h + (h // heads) * kv  # q_norm over hidden_size, k_norm over the KV projection (modeling_olmoe.py)
    if model_type == "gpt_oss":
        extra += heads  # attention sinks, one per head
    return linears, extra


def _dense_mlp(model_type: str, prefix: str, h: int, width: int, bias: bool) -> List[_Lin]:
    if model_type == "phi":
        return [(prefix + "fc1", h, width, bias), (prefix + "fc2", width, h, bias)]
    if model_type == "phi3":
        return [(prefix + "gate_up_proj", h, 2 * width, bias), (prefix + "down_proj", width, h, bias)]
    return [
        (prefix + "gate_proj", h, width, bias),
        (prefix + "up_proj", h, width, bias),
        (prefix + "down_proj", width, h, bias),
    ]


@dataclass
class _Moe:
    experts: int
    top_k: int
    expert_inter: int
    moe_layers: int
    shared: List[_Lin]
    params: List[ExpertParam]  # per MoE layer (layers filled in by the caller)
    expert_params: int  # parameters of one routed expert (what top-k leaves out of the active count)
    router_params: int


def _moe(config: Dict[str, Any], model_type: str, path: str, h: int, inter: int, layers: int) -> _Moe:
    """Routed experts, router and shared experts of one MoE layer, as transformers 5.24.0 builds them."""
    if model_type in ("mixtral", "gpt_oss"):
        experts = _cfg_int(config, "num_local_experts", path)
        expert_inter = inter
        moe_ids = set(range(layers))
    elif model_type == "granitemoe":
        experts = _cfg_int(config, "num_local_experts", path, 8)
        expert_inter = inter
        moe_ids = set(range(layers))
    elif model_type == "olmoe":
        key = "num_experts" if "num_experts" in config else "num_local_experts"
        experts = _cfg_int(config, key, path)
        expert_inter = inter
        moe_ids = set(range(layers))
    elif model_type == "llama4_text":  # Llama4TextConfig: MoE on every interleave_moe_layer_step-th layer
        experts = _cfg_int(config, "num_local_experts", path, 16)
        expert_inter = inter
        listed = config.get("moe_layers")
        step = _cfg_int(config, "interleave_moe_layer_step", path, 1) or 1
        moe_ids = set(listed) if isinstance(listed, list) else set(range(step - 1, layers, step))
    elif model_type in MLA_TYPES or model_type == "glm4_moe":
        experts = _cfg_int(config, "n_routed_experts", path)
        expert_inter = _cfg_int(config, "moe_intermediate_size", path)
        first_dense = _cfg_int(config, "first_k_dense_replace", path, 0)
        moe_ids = {i for i in range(layers) if i >= first_dense}
    else:
        experts = _cfg_int(config, "num_experts", path)
        expert_inter = _cfg_int(config, "moe_intermediate_size", path)
        step = _cfg_int(config, "decoder_sparse_step", path, 1) or 1
        mlp_only = set(config.get("mlp_only_layers") or [])
        moe_ids = {i for i in range(layers) if i not in mlp_only and experts > 0 and (i + 1) % step == 0}
    top_k = _cfg_int(config, "num_experts_per_tok", path)
    if experts <= 0 or top_k <= 0 or top_k > experts:
        raise PlanInputError(f"{path}: MoE needs 0 < num_experts_per_tok <= number of experts")
    i2 = 2 * expert_inter
    shared: List[_Lin] = []
    if model_type == "gpt_oss":
        params = [
            ExpertParam("mlp.router.weight", 1, experts, h, 0),
            ExpertParam("mlp.router.bias", 1, 1, experts, 0, lora=False),
            ExpertParam("mlp.experts.gate_up_proj", experts, h, i2, 0),
            ExpertParam("mlp.experts.gate_up_proj_bias", experts, 1, i2, 0, lora=False),
            ExpertParam("mlp.experts.down_proj", experts, expert_inter, h, 0),
            ExpertParam("mlp.experts.down_proj_bias", experts, 1, h, 0, lora=False),
        ]
        expert_params = 3 * h * expert_inter + i2 + h
    elif model_type == "llama4_text":
        # Llama4TextMoe: fused experts (gate_up_proj is (E, h, 2I), down_proj (E, I, h)), a router that is an
        # nn.Linear (Llama4Router), and a shared expert as wide as one routed expert (modeling_llama4.py @5.24.0).
        params = [
            ExpertParam("feed_forward.experts.gate_up_proj", experts, h, i2, 0),
            ExpertParam("feed_forward.experts.down_proj", experts, expert_inter, h, 0),
        ]
        expert_params = 3 * h * expert_inter
        shared = [("feed_forward.router", h, experts, False)]
        shared += _dense_mlp(model_type, "feed_forward.shared_expert.", h, expert_inter, False)
    elif model_type == "granitemoe":  # the MoE block is block_sparse_moe, its router a bare parameter
        params = [
            ExpertParam("block_sparse_moe.router.weight", 1, experts, h, 0),
            ExpertParam("block_sparse_moe.experts.gate_up_proj", experts, i2, h, 0),
            ExpertParam("block_sparse_moe.experts.down_proj", experts, h, expert_inter, 0),
        ]
        expert_params = 3 * h * expert_inter
    else:
        params = [
            ExpertParam("mlp.gate.weight", 1, experts, h, 0),
            ExpertParam("mlp.experts.gate_up_proj", experts, i2, h, 0),
            ExpertParam("mlp.experts.down_proj", experts, h, expert_inter, 0),
        ]
        expert_params = 3 * h * expert_inter
        if model_type in ("qwen2_moe", "qwen3_next"):
            width = int(config.get("shared_expert_intermediate_size") or 0)
            if width:
                shared = _dense_mlp(model_type, "mlp.shared_expert.", h, width, False)
                shared.append(("mlp.shared_expert_gate", h, 1, False))
        elif model_type in MLA_TYPES or model_type == "glm4_moe":
            n_shared = int(config.get("n_shared_experts") or 0)
            if n_shared:
                shared = _dense_mlp(model_type, "mlp.shared_experts.", h, n_shared * expert_inter, False)
    router = experts * h + (experts if model_type == "gpt_oss" else 0)
    return _Moe(experts, top_k, expert_inter, len(moe_ids), shared, params, expert_params, router)


def _moe_module_sizes(params: List[ExpertParam]) -> List[int]:
    """Own parameters of each module that holds expert parameters: ``mlp.experts`` (all fused tensors and biases
    together), the router (weight + bias)."""
    owners: Dict[str, int] = {}
    for p in params:
        owner = p.path.rsplit(".", 1)[0]
        owners[owner] = owners.get(owner, 0) + p.numel
    return list(owners.values())


@dataclass
class _Hybrid:
    layers: int  # Gated DeltaNet layers
    linears: List[_Lin]
    params: int  # one Gated DeltaNet token mixer, everything in it
    module_sizes: List[int]


def _gated_deltanet(config: Dict[str, Any], path: str, h: int, layers: int) -> _Hybrid:
    """Qwen3NextGatedDeltaNet (modeling_qwen3_next.py @5.24.0) on the layers layer_types calls linear_attention
    (default: all but every full_attention_interval-th, 4): in_proj_qkvz, in_proj_ba, a depthwise conv1d without bias,
    dt_bias and A_log per value head, a gated RMSNorm over the value head dim, out_proj."""
    types = config.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        n = sum(1 for t in types if t == "linear_attention")
    else:
        interval = _cfg_int(config, "full_attention_interval", path, 4) or 4
        n = sum(1 for i in range(layers) if (i + 1) % interval)
    nk, nv = _cfg_int(config, "linear_num_key_heads", path, 16), _cfg_int(config, "linear_num_value_heads", path, 32)
    dk, dv = _cfg_int(config, "linear_key_head_dim", path, 128), _cfg_int(config, "linear_value_head_dim", path, 128)
    kernel = _cfg_int(config, "linear_conv_kernel_dim", path, 4)
    key_dim, value_dim = nk * dk, nv * dv
    linears: List[_Lin] = [
        ("linear_attn.in_proj_qkvz", h, 2 * key_dim + 2 * value_dim, False),
        ("linear_attn.in_proj_ba", h, 2 * nv, False),
        ("linear_attn.out_proj", value_dim, h, False),
    ]
    conv = (2 * key_dim + value_dim) * kernel
    own = 2 * nv  # dt_bias, A_log sit on the module itself
    params = _linear_params(linears) + conv + own + dv
    return _Hybrid(n, linears, params, [conv, own, dv] + [_linear_params([lin]) for lin in linears])


# ==============================================================================================================
# Vision-language models: the language model (a family above) plus the vision tower and projector
# ==============================================================================================================

# model_type: (the text family the language model is counted as, where its fields are). transformers 5.24.0:
# Gemma3ForConditionalGeneration (a SigLIP tower, models/gemma3 and models/siglip) keeps them in text_config;
# Qwen2_5_VLForConditionalGeneration reads a Hub config's flat fields into text_config (Qwen2_5_VLConfig
# __post_init__), and its language model is Qwen2's (q/k/v with bias, o_proj without).
MULTIMODAL = {"gemma3": "gemma3_text", "qwen2_5_vl": "qwen2", "llama4": "llama4_text"}
# Class defaults for the fields a published config.json leaves out (gemma-3-4b-it names only a few).
TEXT_DEFAULTS = {
    "gemma3": {  # Gemma3TextConfig @5.24.0; tie_word_embeddings from Gemma3Config
        "vocab_size": 262208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "tie_word_embeddings": True,
    },
    "qwen2_5_vl": {"tie_word_embeddings": False},  # Qwen2_5_VLConfig @5.24.0
    "llama4": {"tie_word_embeddings": False},  # Llama4Config @5.24.0
}
VISION_DEFAULTS = {
    "gemma3": {  # SiglipVisionConfig @5.24.0
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "num_channels": 3,
        "image_size": 224,
        "patch_size": 16,
        "vision_use_head": True,
    },
    "qwen2_5_vl": {  # Qwen2_5_VLVisionConfig @5.24.0
        "depth": 32,
        "hidden_size": 3584,
        "intermediate_size": 3420,
        "in_channels": 3,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 3584,
    },
    "llama4": {  # Llama4VisionConfig @5.24.0
        "hidden_size": 768,
        "intermediate_size": 5632,
        "num_hidden_layers": 34,
        "num_channels": 3,
        "image_size": 448,
        "patch_size": 14,
        "projector_input_dim": 4096,
        "projector_output_dim": 4096,
        "vision_output_dim": 7680,
    },
}


@dataclass
class _Tower:
    """A vision tower and projector: per-layer Linears, parameters outside them, and module sizes."""

    linears: List[_Lin]  # per layer (paths under the tower's prefix)
    layers: int
    layer_params: int  # one layer, everything in it
    singles: List[_Lin]  # Linears that occur once (the projector's)
    other: int  # parameters outside the Linears: embeddings, norms, a projection weight
    module_sizes: List[int]


def _siglip_tower(v: Dict[str, Any], text_hidden: int, path: str) -> _Tower:
    """SiglipVisionModel without the pooling head, and Gemma3MultiModalProjector (a bare projection weight and an
    RMSNorm): modeling_siglip.py and modeling_gemma3.py @5.24.0."""
    if v.get("vision_use_head"):
        raise PlanInputError(
            f"{path}: vision_config.vision_use_head is true (SigLIP's default): Gemma 3 checkpoints set it to false "
            "and the planner counts that tower; set it as the checkpoint does"
        )
    h, i = _cfg_int(v, "hidden_size", path), _cfg_int(v, "intermediate_size", path)
    layers, channels = _cfg_int(v, "num_hidden_layers", path), _cfg_int(v, "num_channels", path)
    image, patch = _cfg_int(v, "image_size", path), _cfg_int(v, "patch_size", path)
    if min(h, i, layers, channels, image, patch) <= 0:
        raise PlanInputError(f"{path}: vision_config sizes must be positive")
    prefix = "vision_tower.encoder."
    linears: List[_Lin] = [
        (prefix + "self_attn.q_proj", h, h, True),
        (prefix + "self_attn.k_proj", h, h, True),
        (prefix + "self_attn.v_proj", h, h, True),
        (prefix + "self_attn.out_proj", h, h, True),
        (prefix + "mlp.fc1", h, i, True),
        (prefix + "mlp.fc2", i, h, True),
    ]
    layer = _linear_params(linears) + 2 * 2 * h  # layer_norm1, layer_norm2 (LayerNorm: weight and bias)
    conv = channels * h * patch * patch + h  # patch_embedding Conv2d with bias
    positions = (image // patch) ** 2 * h
    projection = h * text_hidden  # mm_input_projection_weight
    other = conv + positions + 2 * h + projection + h  # + post_layernorm, the projector's RMSNorm
    sizes = [conv, positions, 2 * h, projection] + [_linear_params([lin]) for lin in linears]
    return _Tower(linears, layers, layer, [], other, sizes)


def _qwen25_vl_tower(v: Dict[str, Any], path: str) -> _Tower:
    """Qwen2_5_VisionTransformerPretrainedModel: a Conv3d patch embedding without bias, blocks of RMSNorms, a fused
    qkv and a gated MLP (all with bias), and the patch merger (modeling_qwen2_5_vl.py @5.24.0)."""
    h, i, depth = _cfg_int(v, "hidden_size", path), _cfg_int(v, "intermediate_size", path), _cfg_int(v, "depth", path)
    channels = _cfg_int(v, "in_chans" if "in_chans" in v else "in_channels", path)
    patch, t = _cfg_int(v, "patch_size", path), _cfg_int(v, "temporal_patch_size", path)
    merge, out = _cfg_int(v, "spatial_merge_size", path), _cfg_int(v, "out_hidden_size", path)
    if min(h, i, depth, channels, patch, t, merge, out) <= 0:
        raise PlanInputError(f"{path}: vision_config sizes must be positive")
    prefix = "visual.blocks."
    linears: List[_Lin] = [
        (prefix + "attn.qkv", h, 3 * h, True),
        (prefix + "attn.proj", h, h, True),
        (prefix + "mlp.gate_proj", h, i, True),
        (prefix + "mlp.up_proj", h, i, True),
        (prefix + "mlp.down_proj", i, h, True),
    ]
    merged = h * merge * merge
    singles: List[_Lin] = [("visual.merger.mlp.0", merged, merged, True), ("visual.merger.mlp.2", merged, out, True)]
    layer = _linear_params(linears) + 2 * h  # norm1, norm2 (RMSNorm)
    conv = channels * t * patch * patch * h
    other = conv + h  # + the merger's ln_q
    sizes = [conv, h] + [_linear_params([lin]) for lin in linears + singles]
    return _Tower(linears, depth, layer, singles, other, sizes)


def _llama4_tower(v: Dict[str, Any], text_hidden: int, path: str) -> _Tower:
    """Llama4VisionModel (an unfolded patch Linear, class and position embeddings, LayerNorm encoder layers with
    biased q/k/v/o and fc1/fc2, the pixel-shuffle adapter MLP) and Llama4MultiModalProjector, none of the adapter and
    projector Linears with bias (modeling_llama4.py @5.24.0)."""
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_channels", "image_size", "patch_size")
    h, i, layers, channels, image, patch = (_cfg_int(v, key, path) for key in keys)
    p_in, p_out = _cfg_int(v, "projector_input_dim", path), _cfg_int(v, "projector_output_dim", path)
    out = _cfg_int(v, "vision_output_dim", path)
    if min(h, i, layers, channels, image, patch, p_in, p_out, out) <= 0:
        raise PlanInputError(f"{path}: vision_config sizes must be positive")
    prefix = "vision_model.model.layers."
    linears: List[_Lin] = [
        (prefix + "self_attn.q_proj", h, h, True),
        (prefix + "self_attn.k_proj", h, h, True),
        (prefix + "self_attn.v_proj", h, h, True),
        (prefix + "self_attn.o_proj", h, h, True),
        (prefix + "mlp.fc1", h, i, True),
        (prefix + "mlp.fc2", i, h, True),
    ]
    singles: List[_Lin] = [
        ("vision_model.patch_embedding.linear", channels * patch * patch, h, False),
        ("vision_model.vision_adapter.mlp.fc1", i, p_in, False),
        ("vision_model.vision_adapter.mlp.fc2", p_out, p_out, False),
        ("multi_modal_projector.linear_1", out, text_hidden, False),
    ]
    layer = _linear_params(linears) + 2 * 2 * h  # input_layernorm, post_attention_layernorm (LayerNorm)
    embeddings = h + ((image // patch) ** 2 + 1) * h  # class_embedding, positional_embedding_vlm
    other = embeddings + 2 * 2 * h  # + layernorm_pre, layernorm_post
    sizes = [embeddings, 2 * h] + [_linear_params([lin]) for lin in linears + singles]
    return _Tower(linears, layers, layer, singles, other, sizes)


def _multimodal_facts(config: Dict[str, Any], path: str, model_type: str) -> ModelFacts:
    """A vision-language model: its language model counted as its text family, then the vision tower and projector
    added to the totals, the Linears (what LoRA and 4-bit see) and the largest module."""
    nested = config.get("text_config")
    text = dict(nested) if isinstance(nested, dict) else {k: v for k, v in config.items() if k != "vision_config"}
    for key, value in TEXT_DEFAULTS[model_type].items():
        text.setdefault(key, config.get(key, value) if key == "tie_word_embeddings" else value)
    text["model_type"] = MULTIMODAL[model_type]
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        raise PlanInputError(
            f"{path}: model_type {model_type!r} needs its vision_config block (the tower the planner counts); for "
            "the language model alone save its text fields as a config.json of their own with model_type "
            f"{MULTIMODAL[model_type]!r}"
        )
    vision = {**VISION_DEFAULTS[model_type], **vision}
    facts = facts_from_config(text, path)
    if model_type == "gemma3":
        tower = _siglip_tower(vision, facts.hidden, path)
    elif model_type == "llama4":
        tower = _llama4_tower(vision, facts.hidden, path)
    else:
        tower = _qwen25_vl_tower(vision, path)
    tower_params = tower.layers * tower.layer_params + tower.other + _linear_params(tower.singles)
    facts.total += tower_params
    facts.active += tower_params
    for key, fan_in, fan_out, _ in tower.linears:
        facts.linears.append(Linear(key.rsplit(".", 1)[-1], fan_in, fan_out, tower.layers, key))
    for key, fan_in, fan_out, _ in tower.singles:
        facts.linears.append(Linear(key.rsplit(".", 1)[-1], fan_in, fan_out, 1, key))
    tower_linears = tower.linears + tower.singles
    weights = sum(i * o for _, i, o, _ in tower.linears) * tower.layers + sum(i * o for _, i, o, _ in tower.singles)
    facts.quantizable += weights
    facts.largest_module = max(facts.largest_module, *tower.module_sizes)
    facts.largest_linear = max(facts.largest_linear, *(i * o for _, i, o, _ in tower_linears))
    facts.model_type = model_type
    facts.source = f"config.json ({path}, model_type {model_type})"
    facts.notes.append(
        f"vision-language model: the vision tower and projector ({tower_params / 1e6:,.0f}M parameters) are counted "
        "in the model states; the activations of image tokens are not (the plan sizes text sequences)"
    )
    facts.notes.append(
        f"LoRA on {model_type}: PEFT 0.21.2's all-linear takes every nn.Linear but the output layer, so it trains the "
        "vision tower's Linears too; a name list matches them wherever the names occur (q_proj, gate_proj, ...)"
    )
    return facts


def facts_from_config(config: Dict[str, Any], path: str) -> ModelFacts:
    """Count parameters of a decoder from its config.json, family by family (transformers 5.24.0 modeling)."""
    model_type = config.get("model_type")
    if model_type in MULTIMODAL:
        return _multimodal_facts(config, path, str(model_type))
    if model_type not in FAMILIES:
        text = config.get("text_config")
        if isinstance(text, dict):
            inner = text.get("model_type")
            if inner in FAMILIES:
                way = (
                    f"save its text_config block (model_type {inner!r}) as a config.json of its own and pass that; "
                    "add the vision tower's parameters by hand, the planner counts the language model only"
                )
            else:
                way = (
                    f"its text model ({inner!r}) is not supported either; pass --params with the total count (a "
                    "dense approximation: it cannot count experts or the vision tower)"
                )
            raise PlanInputError(
                f"{path}: model_type {model_type!r} is a multimodal wrapper (a vision tower and projector the planner "
                f"does not count); {way} (supported model_type: {', '.join(sorted({*FAMILIES, *MULTIMODAL}))})"
            )
        moe = any(k in config for k in ("num_experts", "num_local_experts", "n_routed_experts"))
        caveat = (
            " It is an MoE: --params plans a dense shape and cannot count its experts (LoRA sizes and the ZeRO-3 "
            "largest layer will be wrong)."
            if moe
            else ""
        )
        why = f" {NOT_COUNTED[model_type]}" if model_type in NOT_COUNTED else ""
        raise PlanInputError(
            f"{path}: unknown model_type {model_type!r} (architectures {config.get('architectures')}); supported: "
            f"{', '.join(sorted({*FAMILIES, *MULTIMODAL}))}.{why} Pass --params with the model's total parameter "
            f"count instead (e.g. --params 80B) to plan with a reference shape.{caveat}"
        )
    tied_default, _, _, norms, _, gated, layer_norm = FAMILIES[model_type]
    h = _cfg_int(config, "hidden_size", path)
    layers = _cfg_int(config, "num_hidden_layers", path)
    heads = _cfg_int(config, "num_attention_heads", path)
    kv = _cfg_int(config, "num_key_value_heads", path, heads) if config.get("num_key_value_heads") else heads
    vocab = _cfg_int(config, "vocab_size", path)
    inter = _cfg_int(config, "intermediate_size", path)
    if min(h, layers, heads, kv, vocab) <= 0:
        raise PlanInputError(f"{path}: hidden_size, num_hidden_layers, heads and vocab_size must be positive")
    if model_type in MLA_TYPES:
        head_dim = _cfg_int(config, "v_head_dim", path)
        if head_dim <= 0:
            raise PlanInputError(f"{path}: v_head_dim must be a positive whole number, not {head_dim}")
    elif config.get("head_dim"):
        head_dim = _cfg_int(config, "head_dim", path)
    elif heads > h:  # the derived width hidden_size // num_attention_heads would be 0 (and divide by zero later)
        raise PlanInputError(
            f"{path}: num_attention_heads ({heads}) is above hidden_size ({h}) and there is no head_dim; "
            "transformers derives the head width as hidden_size // num_attention_heads, which is 0 here"
        )
    else:
        head_dim = h // heads
    tied = config.get("tie_word_embeddings", tied_default)
    mlp_bias = bool(config.get("mlp_bias", False)) or model_type == "phi"
    norm_params = 2 * h if layer_norm else h
    layer_norms = norms * norm_params

    attn_linears, attn_extra = _attention(config, model_type, path, h, heads, kv, head_dim)
    attn = _linear_params(attn_linears) + attn_extra
    linears: Dict[str, Linear] = {}

    def add(entries: List[_Lin], count: int) -> None:
        for key, fan_in, fan_out, _ in entries:
            if not count:
                continue
            if key in linears:
                linears[key].layers += count
            else:
                linears[key] = Linear(key.rsplit(".", 1)[-1], fan_in, fan_out, count, key)

    add(attn_linears, layers)
    dense_width = inter
    if model_type == "llama4_text":  # its dense layers have their own width; intermediate_size is an expert's
        dense_width = _cfg_int(config, "intermediate_size_mlp", path, 16384)
    dense_mlp = _dense_mlp(
        model_type, "feed_forward." if model_type == "llama4_text" else "mlp.", h, dense_width, mlp_bias
    )
    dense_layer = attn + layer_norms + _linear_params(dense_mlp)
    # DeepSpeed's largest_layer_params: the most parameters one module holds itself (not counting its children),
    # over every module: embedding, lm_head, each Linear (weight + bias), a fused experts module, norms.
    module_sizes = [vocab * h, norm_params] + [_linear_params([lin]) for lin in attn_linears]
    if attn_extra and model_type == "gpt_oss":
        module_sizes.append(heads)  # sinks sit on the attention module itself
    notes: List[str] = []
    expert_params: List[ExpertParam] = []
    is_moe = model_type in MOE_TYPES
    mlp_active = inter
    mla_kv_dim: Optional[int] = None
    n_dense_layers, expert_width, top_k = layers, 0, 0
    if model_type in MLA_TYPES:
        mla_kv_dim = _cfg_int(config, "kv_lora_rank", path) + _cfg_int(config, "qk_rope_head_dim", path)
    if model_type == "llama4_text" and config.get("attention_chunk_size"):
        notes.append(
            f"llama4: the RoPE layers attend within chunks of {config['attention_chunk_size']} tokens; the vLLM KV "
            "figures treat every layer as full attention, so they are an upper bound"
        )
    if is_moe:
        moe = _moe(config, model_type, path, h, inter, layers)
        n_moe, n_dense = moe.moe_layers, layers - moe.moe_layers
        n_dense_layers, expert_width, top_k = n_dense, moe.expert_inter, moe.top_k
        fused = sum(p.numel for p in moe.params)
        moe_layer = attn + layer_norms + fused + _linear_params(moe.shared)
        total_layers = n_moe * moe_layer + n_dense * dense_layer
        active_layers = total_layers - n_moe * (moe.experts - moe.top_k) * moe.expert_params
        module_sizes += _moe_module_sizes(moe.params) + [_linear_params([lin]) for lin in moe.shared]
        if n_dense:
            module_sizes += [_linear_params([lin]) for lin in dense_mlp]
        add(moe.shared, n_moe)
        add(dense_mlp, n_dense)
        for p in moe.params:
            expert_params.append(ExpertParam(p.path, p.experts, p.dim_a, p.dim_b, n_moe, p.lora))
        block = max(moe_layer if n_moe else 0, dense_layer if n_dense else 0)
        block_q = sum(i * o for _, i, o, _ in attn_linears) + (
            sum(i * o for key, i, o, _ in moe.shared if key not in NOT_4BIT)
            if n_moe and block == moe_layer
            else sum(i * o for _, i, o, _ in dense_mlp)
        )
        shared_width = sum(o for key, _, o, _ in moe.shared if key.endswith("up_proj"))
        mlp_active = moe.top_k * moe.expert_inter + shared_width
        notes.append(
            f"MoE: {moe.experts} experts, top-{moe.top_k}; in transformers 5.x the experts are fused 3-D parameters, "
            "so bitsandbytes 4-bit leaves them at the load dtype; which of them LoRA trains depends on the target "
            "list (see the LoRA note)"
        )
    else:
        module_sizes += [_linear_params([lin]) for lin in dense_mlp]
        add(dense_mlp, layers)
        total_layers = active_layers = layers * dense_layer
        block = dense_layer
        block_q = sum(i * o for _, i, o, _ in attn_linears) + sum(i * o for _, i, o, _ in dense_mlp)
    if model_type == "qwen3_next":
        hybrid = _gated_deltanet(config, path, h, layers)
        attention = sum(i * o for _, i, o, _ in attn_linears)
        mixer_delta = hybrid.params - attn
        total_layers += hybrid.layers * mixer_delta
        active_layers += hybrid.layers * mixer_delta
        for key, _, _, _ in attn_linears:
            linears[key].layers -= hybrid.layers
        add(hybrid.linears, hybrid.layers)
        linears = {k: v for k, v in linears.items() if v.layers}
        module_sizes += hybrid.module_sizes
        if hybrid.layers and mixer_delta > 0:
            block += mixer_delta
            block_q += sum(i * o for _, i, o, _ in hybrid.linears) - attention
        notes.append(
            f"qwen3_next: {hybrid.layers} of {layers} layers are Gated DeltaNet (linear attention) with a fixed "
            "recurrent state; the generate() KV figure counts every layer as attention, an upper bound"
        )
    embedding = vocab * h
    lm_head = 0 if tied else vocab * h + (vocab if model_type == "phi" else 0)
    largest_module = max(*module_sizes, lm_head)
    final_norm = norm_params
    total = embedding + lm_head + final_norm + total_layers
    active = embedding + lm_head + final_norm + active_layers
    quantizable = sum(lin.fan_in * lin.fan_out * lin.layers for lin in linears.values() if lin.path not in NOT_4BIT)
    largest_linear = max(lin.fan_in * lin.fan_out for lin in linears.values())
    name = str(config.get("_name_or_path") or Path(path).parent.name or model_type)
    dtype = config.get("torch_dtype") or config.get("dtype")
    max_pos = config.get("max_position_embeddings")
    quant = config.get("quantization_config")
    quant_method = quant.get("quant_method") if isinstance(quant, dict) else None
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
        model_type=str(model_type),
        expert_params=expert_params,
        mla_kv_dim=mla_kv_dim,
        layer_windows=_layer_windows(config, str(model_type), layers),
        mlp_width=dense_width if (not is_moe or n_dense_layers) else 0,
        expert_width=expert_width,
        experts_per_token=top_k,
        quantization=str(quant_method) if quant_method else None,
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
            "LoRA sizes and the ZeRO-3 largest layer",
            "--params plans a dense decoder: it cannot count experts, so for an MoE model the LoRA sizes, active "
            "parameters and largest layer are not its own; pass --model-config for an MoE",
        ],
    )
    facts.layer_windows, facts.mlp_width = list(ref.layer_windows), ref.mlp_width
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


# PEFT 0.21.2 converts a LoRA config for MoE models whose layout changed in transformers v5
# (peft/utils/transformers_weight_conversion.py, _convert_peft_config_moe). The model types come from transformers
# 5.24.0 conversion_mapping._MODEL_TO_CONVERSION_PATTERN (PEFT adds "mixtral"); only those the planner counts are
# listed. qwen2_moe itself is not a key there, and gpt_oss has no conversion: neither is converted.
PEFT_MOE_CONVERSION = {
    "mixtral": "mixtral",
    "qwen3_moe": "qwen2_moe",
    "qwen3_next": "qwen2_moe",
    "olmoe": "qwen2_moe",
    "glm4_moe": "qwen2_moe",
    "deepseek_v2": "qwen2_moe",
    "deepseek_v3": "qwen2_moe",
}
PEFT_MOE_TARGET_MAPPING = {  # _MOE_TARGET_MODULE_MAPPING: v4 module leaf name -> v5 parameter
    "mixtral": {"gate": "gate.weight", "w1": "gate_up_proj", "w3": "gate_up_proj", "w2": "down_proj"},
    "qwen2_moe": {
        "gate": "gate.weight",
        "gate_proj": "gate_up_proj",
        "up_proj": "gate_up_proj",
        "down_proj": "down_proj",
    },
}
PEFT_MOE_FUSED = {"mixtral": {"gate_up_proj": ("w1", "w3")}, "qwen2_moe": {"gate_up_proj": ("gate_proj", "up_proj")}}
PEFT_VERSIONS = "PEFT 0.21.2 with transformers 5.24.0"


@dataclass
class LoraTargets:
    """What PEFT's get_peft_model trains for a target list: modules, parameters, counts, and what the user must know."""

    trainable: int
    modules: List[str]  # leaf names of the targeted nn.Linear layers
    parameters: List[str]  # PEFT target_parameters that matched (after its MoE conversion)
    rank_pattern: Dict[str, int]
    unmatched: List[str]
    notes: List[str] = field(default_factory=list)
    merged_sync_reason: Optional[str] = None  # why AsyncGRPO cannot sync the adapter alone

    @property
    def names(self) -> List[str]:
        return self.modules + self.parameters


def _suffix_match(path: str, target: str) -> bool:
    """PEFT's list matching (check_target_module_exists): the key equals the target or ends with '.' + target."""
    return path == target or path.endswith("." + target)


def resolve_lora(facts: ModelFacts, rank: int, targets: str) -> LoraTargets:
    """LoRA trainable parameters as PEFT 0.21.2 computes them: r*(in+out) per targeted Linear, and for a parameter
    reached through ``target_parameters`` (peft/tuners/lora/layer.py ParamWrapper) r*experts*(dim_a+dim_b), with the
    rank doubled on a fused gate_up_proj (the conversion's rank_pattern)."""
    all_linear = targets.strip().lower() == "all-linear"
    wanted: List[str] = [] if all_linear else [t.strip() for t in targets.split(",") if t.strip()]
    if "lm_head" in wanted:
        raise PlanInputError(
            "--lora-targets lm_head: TRL 1.16 refuses a PEFT adapter on lm_head (the fused LM head reads "
            "lm_head.weight directly)"
        )
    if not all_linear and not wanted:
        raise PlanInputError(f"--lora-targets {targets!r}: no target names")
    base = PEFT_MOE_CONVERSION.get(facts.model_type)
    mapping = PEFT_MOE_TARGET_MAPPING.get(base or "", {})
    modules: List[str]
    if all_linear:
        modules = sorted({lin.name for lin in facts.linears}) + (sorted(mapping) if mapping else [])
    else:
        modules = list(wanted)
    parameters: List[str] = []
    rank_pattern: Dict[str, int] = {}
    if mapping:
        remaining: List[str] = []
        present: Dict[str, set] = {new: set() for new in PEFT_MOE_FUSED[base]}
        for target in modules:
            hit = next(((old, new) for old, new in mapping.items() if _suffix_match(target, old)), None)
            if hit is None:
                remaining.append(target)
                continue
            if hit[1] not in parameters:
                parameters.append(hit[1])
            if hit[1] in present:
                present[hit[1]].add(hit[0])
        for new, olds in PEFT_MOE_FUSED[base].items():
            have = present[new]
            if 0 < len(have) < len(olds):
                missing = ", ".join(sorted(set(olds) - have))
                raise PlanInputError(
                    f'--lora-targets {targets!r}: PEFT raises "Cannot convert PEFT target(s) {", ".join(sorted(have))} '
                    f'without also targeting {missing} because they are fused into {new}." '
                    f"({PEFT_VERSIONS}); add {missing}"
                )
            if len(have) == len(olds) > 1:
                rank_pattern[new] = rank * len(olds)
        modules = remaining
    chosen = [lin for lin in facts.linears if any(_suffix_match(lin.path, t) for t in modules)]
    chosen_params = [p for p in facts.expert_params if p.lora and any(_suffix_match(p.path, t) for t in parameters)]
    if not chosen and not chosen_params:
        shown = "{" + ", ".join(repr(t) for t in sorted(modules)) + "}"
        raise PlanInputError(
            f"--lora-targets {targets!r}: none of these names is a linear layer of this model "
            f'({", ".join(sorted({lin.name for lin in facts.linears}))}); PEFT raises "Target modules {shown} not '
            f'found in the base model. Please check the target modules and try again."'
        )
    trainable = sum(rank * (lin.fan_in + lin.fan_out) * lin.layers for lin in chosen)
    for p in chosen_params:
        r = rank_pattern.get(p.path.rsplit(".", 1)[-1], rank)
        trainable += r * p.experts * (p.dim_a + p.dim_b) * p.layers
    matched_names = {lin.name for lin in chosen} | {lin.path for lin in chosen}
    unmatched = (
        []
        if all_linear
        else [t for t in wanted if not any(_suffix_match(n, t) for n in matched_names) and t not in mapping]
    )
    notes: List[str] = []
    if unmatched:
        notes.append(
            f"--lora-targets: {', '.join(unmatched)} match no layer of this model and are ignored (PEFT trains the "
            "names that match and raises only when none does)"
        )
    reason = None
    if facts.expert_params and not chosen_params and not base:
        notes.append(
            f"LoRA on {facts.model_type}: {PEFT_VERSIONS} does not turn these targets into target_parameters, so "
            "the fused experts and the router stay frozen; only the listed Linear layers train"
        )
    if chosen_params:
        router = " and the router" if "gate.weight" in parameters else ""
        layout = "".join(f"; {k} at rank {v}" for k, v in rank_pattern.items())
        notes.append(
            f"LoRA on {facts.model_type}: {PEFT_VERSIONS} turns these targets into target_parameters "
            f"{sorted(set(parameters))}, so the fused experts{router} are trained too{layout}; they need "
            "lora_dropout 0 (PEFT's ParamWrapper raises otherwise, and TRL's default lora_dropout is 0.05)"
        )
        reason = (
            "the LoRA config uses target_parameters (fused-MoE LoRA), which AsyncGRPO's adapter-only vLLM sync "
            "refuses; it falls back to syncing merged weights (trl/experimental/async_grpo/async_grpo_trainer.py "
            "validate_lora_for_vllm_sync @1.16.0)"
        )
    return LoraTargets(
        trainable=trainable,
        modules=sorted({lin.name for lin in chosen}),
        parameters=sorted({t for t in parameters if any(_suffix_match(p.path, t) for p in chosen_params)}),
        rank_pattern=rank_pattern,
        unmatched=unmatched,
        notes=notes,
        merged_sync_reason=reason,
    )


def lora_trainable(facts: ModelFacts, rank: int, targets: str) -> Tuple[int, List[str]]:
    """(trainable parameters, targeted module and parameter names) as PEFT computes them; see ``resolve_lora``."""
    result = resolve_lora(facts, rank, targets)
    return result.trainable, result.names


def kv_bytes_per_token(facts: ModelFacts, tp: int, dtype_bytes: int = 2) -> int:
    """Per GPU: 2 (K and V) * layers * kv_heads_per_rank * head_dim * bytes (vLLM AttentionSpec page size); with
    multi-head latent attention one latent of kv_lora_rank + qk_rope_head_dim per layer, on every rank (MLA spec)."""
    if facts.mla_kv_dim:
        return facts.layers * facts.mla_kv_dim * dtype_bytes
    kv_per_rank = max(1, math.ceil(facts.kv_heads / tp))
    return 2 * facts.layers * kv_per_rank * facts.head_dim * dtype_bytes
