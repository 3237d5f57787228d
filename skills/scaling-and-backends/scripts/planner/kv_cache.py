"""vLLM capacity for the planner: KV cache groups, sequences that fit, the non-KV overhead, served weights, TP rules.

A sibling module of ``plan_training.py`` (not a command); standard library only. The KV figures follow vLLM's own
code (``vllm/v1/core/kv_cache_utils.py`` and ``vllm/v1/kv_cache_interface.py``, read in the 0.22.0-0.31.0 wheels,
the releases TRL 1.16 accepts); the overhead term is approximate and says so.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the siblings must not leave __pycache__ in scripts/

from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional, Tuple  # noqa: E402

_HERE = Path(__file__).resolve().parent.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from planner.hardware import GIB  # noqa: E402
from planner.inputs import VLLM_RELEASE_DEFAULT  # noqa: E402
from planner.model import ModelFacts  # noqa: E402

# ==============================================================================================================
# Release facts (vLLM wheels 0.22.0-0.31.0; TRL 1.16.0 METADATA: vllm>=0.22.0,<=0.31.0)
# ==============================================================================================================

DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE @0.22-0.31
MLA_BLOCK_SIZE = 64  # FlashMLA's only kernel block size (Hopper); CUTLASS MLA on Blackwell takes 128 @0.31.0
# Sliding-window layers hold the window plus the tokens in flight: max_num_batched_tokens in 0.22.0-0.25.1; from
# 0.26.0 max_concurrent_batches x max_num_batched_tokens, and async scheduling (on by default, also under TRL's
# external launcher) makes that 2 batches (SlidingWindowSpec.max_memory_usage_bytes, VllmConfig.max_in_flight_tokens).
IN_FLIGHT_BATCHES_FROM = (0, 26, 0)
# trl/generation/vllm_generation.py @1.16.0 passes max_num_batched_tokens=4096 in colocate mode (an offline LLM);
# trl vllm-serve execs `vllm serve` (trl/scripts/vllm_serve.py build_command @1.16.0) without it, so the API
# server's defaults apply: 16384 from 160 GiB, 8192 from 70 GiB (2048 on an A100: 8192 is the conservative
# reading), else 2048; max_num_seqs 1024 from 70 GiB, else 256 (EngineArgs.get_batch_defaults @0.31.0).
TRL_COLOCATE_BATCHED_TOKENS = 4096
MAX_NUM_SEQS_DEFAULT = {True: 1024, False: 256}  # >= 70 GiB, smaller GPUs
MXFP4_BYTES_PER_PARAM = 4.25 / 8  # 4-bit values plus one 8-bit scale per 32 (OCP microscaling)


def served_defaults(mode: str, gpu_bytes: int) -> Tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM runs with under TRL when the user sets neither."""
    big = gpu_bytes >= 70 * GIB
    server = 16384 if gpu_bytes >= 160 * GIB else (8192 if big else 2048)
    tokens = TRL_COLOCATE_BATCHED_TOKENS if mode == "colocate" else server
    return tokens, MAX_NUM_SEQS_DEFAULT[big]


# ==============================================================================================================
# KV cache groups and sequences that fit
# ==============================================================================================================


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def kv_heads_per_rank(facts: ModelFacts, tp: int) -> int:
    """ModelConfig.get_num_kv_heads: KV heads split across TP ranks, at least one (replicated); MLA caches one."""
    if facts.mla_kv_dim:
        return 1
    return max(1, facts.kv_heads // tp)


def page_bytes(facts: ModelFacts, tp: int, block_size: int, dtype_bytes: int = 2) -> int:
    """AttentionSpec.page_size_bytes: heads x block tokens x (K + V head sizes) x dtype; MLA stores one latent
    (kv_lora_rank + qk_rope_head_dim) and no V (MLAAttentionSpec)."""
    if facts.mla_kv_dim:
        return block_size * facts.mla_kv_dim * dtype_bytes
    return kv_heads_per_rank(facts, tp) * block_size * 2 * facts.head_dim * dtype_bytes


@dataclass
class KvGroups:
    """How vLLM's hybrid KV manager lays the attention layers out: one block table per group, equal group sizes."""

    kinds: List[Tuple[Optional[int], int, int]]  # (sliding window or None for full, real layers, groups)
    group_size: int  # layers per group (padding included)
    padding_layers: int

    @property
    def hybrid(self) -> bool:
        return len(self.kinds) > 1


def kv_groups(layer_windows: List[Optional[int]]) -> KvGroups:
    """_get_kv_cache_groups_uniform_page_size: layers bucketed by attention type; the group size is the smallest
    bucket, or the largest when it is under 1.5x the smallest; each bucket is padded to whole groups."""
    counts: Dict[Optional[int], int] = {}
    for window in layer_windows:
        counts[window] = counts.get(window, 0) + 1
    if len(counts) == 1:
        ((window, n),) = counts.items()
        return KvGroups([(window, n, 1)], n, 0)
    smallest, largest = min(counts.values()), max(counts.values())
    size = largest if largest < smallest * 1.5 else smallest
    kinds = [(window, n, _cdiv(n, size)) for window, n in counts.items()]
    padding = sum(groups * size - n for _, n, groups in kinds)
    return KvGroups(kinds, size, padding)


def blocks_for(window: Optional[int], max_model_len: int, block_size: int, in_flight_tokens: int) -> int:
    """Blocks one request at max_model_len takes in a group: all tokens for full attention; for a sliding window
    the window less one, plus the tokens in flight, capped at max_model_len, plus one block for the window's
    misaligned start (SlidingWindowSpec.max_admission_blocks_per_request)."""
    if window is None:
        return _cdiv(max_model_len, block_size)
    tokens = min(window - 1 + in_flight_tokens, max_model_len)
    return _cdiv(tokens, block_size) + 1


@dataclass
class KvCapacity:
    groups: KvGroups
    block_size: int
    page: int  # bytes of one block of one layer on one GPU
    bytes_per_block: int  # a block across the layers of one group
    num_blocks: int
    blocks_per_request: int
    in_flight_tokens: int
    notes: List[str] = field(default_factory=list)

    @property
    def concurrency(self) -> float:
        """get_max_concurrency_for_kv_cache_config: what vLLM logs as 'Maximum concurrency for N tokens'."""
        return self.num_blocks / self.blocks_per_request if self.blocks_per_request else 0.0

    @property
    def sequences(self) -> int:
        return self.num_blocks // self.blocks_per_request if self.blocks_per_request else 0

    @property
    def bytes_per_sequence(self) -> int:
        return self.blocks_per_request * self.bytes_per_block

    def as_dict(self) -> Dict[str, Any]:
        return {
            "block_size": self.block_size,
            "groups": [
                {"sliding_window": w, "layers": n, "groups": g, "layers_per_group": self.groups.group_size}
                for w, n, g in self.groups.kinds
            ],
            "padding_layers": self.groups.padding_layers,
            "num_blocks": self.num_blocks,
            "blocks_per_request": self.blocks_per_request,
            "max_concurrency": round(self.concurrency, 2),
        }


def in_flight_tokens(release: Tuple[int, ...], max_num_batched_tokens: int, async_scheduling: bool = True) -> int:
    batches = 2 if async_scheduling and tuple(release) >= IN_FLIGHT_BATCHES_FROM else 1
    return batches * max_num_batched_tokens


def kv_capacity(
    facts: ModelFacts,
    tp: int,
    max_model_len: int,
    available_bytes: int,
    max_num_batched_tokens: int,
    release: Tuple[int, ...] = VLLM_RELEASE_DEFAULT,
    block_size: Optional[int] = None,
    dtype_bytes: int = 2,
    async_scheduling: bool = True,
) -> KvCapacity:
    """Blocks vLLM allocates from ``available_bytes`` and how many max_model_len requests they hold at once
    (get_kv_cache_config_from_groups: available // bytes per block of the widest group)."""
    block = block_size or (MLA_BLOCK_SIZE if facts.mla_kv_dim else DEFAULT_BLOCK_SIZE)
    groups = kv_groups(facts.layer_windows or [None] * facts.layers)
    page = page_bytes(facts, tp, block, dtype_bytes)
    per_block = groups.group_size * page
    flight = in_flight_tokens(release, max_num_batched_tokens, async_scheduling)
    per_request = sum(g * blocks_for(w, max_model_len, block, flight) for w, _, g in groups.kinds)
    num_blocks = max(0, available_bytes) // per_block
    cap = KvCapacity(groups, block, page, per_block, num_blocks, per_request, flight)
    if groups.padding_layers:
        cap.notes.append(
            f"vLLM's hybrid KV manager pads {groups.padding_layers} layer(s) so every group has "
            f"{groups.group_size} layers (vllm/v1/core/kv_cache_utils.py)"
        )
    sliding = [w for w, _, _ in groups.kinds if w is not None]
    if sliding and len(groups.kinds) > 1:
        cap.notes.append(
            f"sliding-window layers (window {sliding[0]}) keep window + {flight} in-flight tokens, not the whole "
            "sequence; full-attention layers keep all of it"
        )
    return cap


# ==============================================================================================================
# Non-KV overhead (approximate)
# ==============================================================================================================

# Memory outside PyTorch's allocator that vLLM charges to the KV budget: only what grows after the worker's init
# snapshot, which Worker.init_device takes after the CUDA context exists and the distributed environment is set up
# (vllm/v1/worker/gpu_worker.py, read in the 0.19.0 and 0.31.0 wheels), so the context itself is not in it. The
# published start-up logs (tests/fixtures/calibration/vllm_startup_logs.json, H100 SXM) log 0.24-0.27 GiB at TP 1 on
# 0.18-0.19 (0.13 on 0.15-0.17) and 2.06-2.13 GiB at TP 2 and 4, nearly independent of the model; vLLM's own
# maintainer check in vllm-project/vllm#10511 (V0 profiler, H100) shows the same step from TP 1 to TP 2 (+1.79 GiB).
# Read as NCCL memory set up during the profile run's first collectives; the code path was not traced, and GPUs
# without NVLink may grow less, which makes the figure err on the safe side (a smaller KV budget).
NON_TORCH_GIB = 0.25
NON_TORCH_TP_GIB = 1.85  # added when TP > 1 (2.1 GiB in all)
# The CUDA-graph pool as vLLM's dummy capture estimates it (GPUModelRunner.profile_cudagraph_memory): 0.57-1.69 GiB in
# the logs above, median 0.84; 1.0 GiB keeps the median inside the band and errs high.
CUDA_GRAPH_GIB = 1.0
# vLLM subtracts its CUDA-graph estimate from the KV budget only when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is
# on (gpu_worker.determine_available_memory, `cudagraph_memory_estimate_applied`); vllm/envs.py defaults it to "0"
# in 0.19.0 and to "1" from 0.20.0 (read in the 0.19.0, 0.20.0, 0.21.0 and 0.31.0 wheels). Before 0.20.0 the graphs
# are captured after the KV cache is sized, so they are not part of the KV budget's overhead.
CUDA_GRAPHS_IN_KV_BUDGET_FROM = (0, 20, 0)
OVERHEAD_BAND = (0.75, 1.25)
# The dummy sampler run (GPUModelRunner._dummy_sampler_run) over max_num_seqs rows of the vocabulary holds, at its
# peak, these [max_num_seqs, vocab] tensors at once (bytes per element): the model-dtype logits the run keeps, their
# float32 copy (Sampler.forward), the float32 probabilities (TopKTopPSampler.forward_native) and the float32
# exponential noise (random_sample); top-k/top-p run in place through the Triton kernel (apply_top_k_top_p), and
# temperature in place. With logprobs_mode "processed_logprobs" forward_native also keeps a float32 log_softmax.
# Read in the 0.19.0 and 0.31.0 wheels (vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py); the sort-based path of
# older releases is SORTED_SAMPLER_EXTRA_BYTES below.
SAMPLER_FLOAT32_COPIES = 3  # float32 logits, probabilities, exponential noise
# Before 0.17.0 the dummy run's top-k/top-p sort the whole [max_num_seqs, vocab] float32 batch in PyTorch (values and
# int64 indices, then softmax, cumsum and a scatter back; apply_top_k_top_p in vllm/v1/sample/ops/topk_topp_sampler.py,
# 0.15.0 and 0.16.0 wheels). What that adds per element is read off the published logs of one Qwen3-14B run on
# 0.15/0.16 and 0.17 (5.64 - 2.23 GiB over 1024 x 151936 elements, tests/fixtures/calibration/vllm_startup_logs.json);
# the plan's notes say the figure rests on one model.
SORTED_SAMPLER_BEFORE = (0, 17, 0)
SORTED_SAMPLER_EXTRA_BYTES = 23.5
# The fused-MoE workspace outlives the forward pass: one buffer shared by every MoE layer and grown to the largest
# request (FusedMoEModularKernel.SharedBuffers in 0.11-0.12, the WorkspaceManager of vllm/v1/worker/workspace.py from
# 0.13; read in the 0.11.0, 0.13.0, 0.15.0, 0.19.0 and 0.31.0 wheels, absent from 0.10.2). So the dummy sampler run,
# which comes after the forward at max_num_batched_tokens, peaks on top of it.
MOE_WORKSPACE_PERSISTS_FROM = (0, 11, 0)
TRL_LOGPROBS_MODE = "processed_logprobs"  # trl/generation/vllm_generation.py and vllm_client.py @1.16.0


@dataclass
class Overhead:
    non_torch: int
    activation_peak: int
    sampler_peak: int
    cuda_graphs: int
    cuda_graphs_in_budget: bool = True  # False before CUDA_GRAPHS_IN_KV_BUDGET_FROM
    kept_workspace: int = 0  # the fused-MoE workspace still held during the sampler run (MOE_WORKSPACE_PERSISTS_FROM)

    @property
    def torch_peak(self) -> int:
        """The profile run's PyTorch peak: the forward pass, or the sampler run on top of what the forward kept."""
        return max(self.activation_peak, self.kept_workspace + self.sampler_peak)

    @property
    def total(self) -> int:
        """What vLLM takes from the requested memory before the KV cache (besides weights)."""
        graphs = self.cuda_graphs if self.cuda_graphs_in_budget else 0
        return self.non_torch + self.torch_peak + graphs

    def as_dict(self) -> Dict[str, float]:
        return {
            "non_torch_gib": round(self.non_torch / GIB, 2),
            "activation_peak_gib": round(self.activation_peak / GIB, 2),
            "sampler_peak_gib": round(self.sampler_peak / GIB, 2),
            "kept_moe_workspace_gib": round(self.kept_workspace / GIB, 2),
            "cuda_graphs_gib": round(self.cuda_graphs / GIB, 2),
            "total_gib": round(self.total / GIB, 2),
        }


def non_kv_overhead(
    facts: ModelFacts,
    tp: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    release: Tuple[int, ...] = VLLM_RELEASE_DEFAULT,
    logprobs_mode: str = TRL_LOGPROBS_MODE,
    serve_bytes: int = 2,
) -> Overhead:
    """What vLLM's profile run measures besides weights (gpu_worker.determine_available_memory): the forward
    peak at max_num_batched_tokens (the MLP's gate/up output and activation per rank, hidden states), the dummy
    sampler run over max_num_seqs rows of the vocabulary (SAMPLER_FLOAT32_COPIES, logprobs_mode) on top of the
    fused-MoE workspace the forward left allocated (MOE_WORKSPACE_PERSISTS_FROM), the CUDA graph
    pool (in the KV budget from vLLM 0.20.0) and memory outside PyTorch. Approximate: the band is OVERHEAD_BAND;
    tests/fixtures/calibration/vllm_startup_logs.json holds the published start-up logs it is checked against."""
    h = facts.hidden
    workspace = 0
    if facts.is_moe and facts.expert_width:
        # Triton fused-MoE workspaces per token (TritonExperts.workspace_shapes @0.31.0): top_k rows of
        # max(width, hidden) and of max(2 x width, hidden), 16-bit.
        w = max(1, facts.expert_width // tp)
        top_k = max(1, facts.experts_per_token)
        workspace_per_token = top_k * (max(w, h) + max(2 * w, h)) * 2
        workspace = max_num_batched_tokens * workspace_per_token
        per_token = workspace_per_token + 6 * h * 2
    else:
        width = max(1, facts.mlp_width // tp)
        gate = 2 if facts.gated_mlp else 1
        per_token = (gate * width + width + 6 * h) * 2
    activation = max_num_batched_tokens * per_token
    copies = SAMPLER_FLOAT32_COPIES + (1 if logprobs_mode == "processed_logprobs" else 0)
    sampler = max_num_seqs * facts.vocab * (serve_bytes + 4 * copies)
    if tuple(release) < SORTED_SAMPLER_BEFORE:
        sampler += int(max_num_seqs * facts.vocab * SORTED_SAMPLER_EXTRA_BYTES)
    non_torch = int((NON_TORCH_GIB + (NON_TORCH_TP_GIB if tp > 1 else 0.0)) * GIB)
    in_budget = tuple(release) >= CUDA_GRAPHS_IN_KV_BUDGET_FROM
    kept = workspace if tuple(release) >= MOE_WORKSPACE_PERSISTS_FROM else 0
    return Overhead(non_torch, activation, sampler, int(CUDA_GRAPH_GIB * GIB), in_budget, kept)


# ==============================================================================================================
# Weights as served and TP sizes vLLM can load
# ==============================================================================================================


def served_weight_bytes(facts: ModelFacts, serve_bytes: int = 2) -> int:
    """Checkpoint weights as vLLM holds them: gpt-oss ships its routed experts in MXFP4 and vLLM keeps them so
    (quantization 'mxfp4', vllm/model_executor/models/gpt_oss.py); everything else at the serving dtype."""
    if facts.quantization == "mxfp4":
        experts = sum(p.numel * p.layers for p in facts.expert_params if p.path.startswith("mlp.experts.") and p.lora)
        return int(experts * MXFP4_BYTES_PER_PARAM + (facts.total - experts) * 2)
    return facts.total * serve_bytes


def tp_refusal(facts: ModelFacts, tp: int) -> Optional[str]:
    """Why vLLM cannot load the model at this TP size, or None. Rules: attention heads divisible
    (ModelConfig.verify_with_parallel_config, vllm/config/model.py); KV heads divisible by TP, or TP a multiple of
    them (QKVParallelLinear replicates, vllm/model_executor/layers/linear.py); the MLP width and each expert's
    width divisible (ColumnParallelLinear/RowParallelLinear divide(); FusedMoE splits the expert width)."""
    if facts.heads % tp:
        return f"the {facts.heads} attention heads are not divisible by {tp}"
    if not facts.mla_kv_dim:
        kv = facts.kv_heads
        if (tp >= kv and tp % kv) or (tp < kv and kv % tp):
            return f"the {kv} KV heads neither divide by {tp} nor divide {tp} (vLLM cannot split or replicate them)"
    for width, what in ((facts.mlp_width, "MLP width"), (facts.expert_width, "expert width")):
        if width and width % tp:
            return f"the {what} {width} is not divisible by {tp}"
    return None


def tp_sizes(facts: ModelFacts, limit: int) -> List[int]:
    return [tp for tp in (1, 2, 4, 8, 16) if tp <= limit and tp_refusal(facts, tp) is None]
