"""Validation of the planner's inputs, before any arithmetic: command-line numbers, config files (model config.json,
TRL and Accelerate configs) and the hardware JSON. Every value is checked for type and range with the shared
``common.values`` helpers; a bad one is a ``PlanInputError`` (exit 2) that names the flag or the key.

Bounds are generous (no real job comes near them) but finite, so no loop, list or product can grow without limit:
``--gpus 100000000`` or ``num_processes: 1000000000000`` is refused instead of allocating or enumerating for hours.
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
from typing import Any, Dict, Iterator, List, Optional, Tuple

from common.values import InvalidValue, integer, number, short
from planner.rules import PlanInputError

MAX_GPUS_PER_NODE = 1024
MAX_NODES = 10_000
MAX_COUNT = 10_000_000  # batch sizes, sequence lengths, generations, ranks
MAX_GPU_MEMORY_GIB = 100_000.0
MAX_HOST_MEMORY_GIB = 10_000_000.0
MAX_PARAMS = 1e15

# (flag attribute, flag, minimum, maximum); None values are skipped (the flag was not given).
# A minimum of None leaves the lower bound to the check that follows with a more specific message
# ("impossible hardware: --gpus 0").
_INT_FLAGS: Tuple[Tuple[str, str, Optional[int], int], ...] = (
    ("gpus", "--gpus", None, MAX_GPUS_PER_NODE),
    ("nodes", "--nodes", None, MAX_NODES),
    ("lora_rank", "--lora-rank", 1, 65_536),
    ("seq_len", "--seq-len", 1, MAX_COUNT),
    ("micro_batch", "--micro-batch", 1, MAX_COUNT),
    ("grad_accum", "--grad-accum", 1, MAX_COUNT),
    ("num_generations", "--num-generations", 1, MAX_COUNT),
    ("steps_per_generation", "--steps-per-generation", 1, MAX_COUNT),
    ("vllm_tp", "--vllm-tp", 1, MAX_GPUS_PER_NODE * MAX_NODES),
    ("max_model_len", "--max-model-len", 1, MAX_COUNT * 10),
    ("vllm_concurrency", "--vllm-concurrency", 1, MAX_COUNT),
    ("num_processes", "--num-processes", 1, MAX_GPUS_PER_NODE * MAX_NODES),
    ("vllm_server_gpus", "--vllm-server-gpus", 0, MAX_GPUS_PER_NODE),
)
_FLOAT_FLAGS: Tuple[Tuple[str, str, Optional[float], float, bool], ...] = (
    ("gpu_memory_gib", "--gpu-memory-gib", None, MAX_GPU_MEMORY_GIB, True),
    ("host_memory_gib", "--host-memory-gib", 0.0, MAX_HOST_MEMORY_GIB, True),
    ("beta", "--beta", 0.0, 1e6, False),
)
_SAFE_MODEL_ID = re.compile(r"^[A-Za-z0-9._/:@+=~-]+$")


def check_args(args: argparse.Namespace) -> None:
    """Refuse out-of-range or non-finite command-line numbers (argparse accepts ``1e400``, ``nan``, ``-5``)."""
    for attr, flag, low, high in _INT_FLAGS:
        value = getattr(args, attr, None)
        if value is not None:
            try:
                integer(value, flag, low, high)
            except InvalidValue as error:
                raise PlanInputError(str(error)) from None
    for attr, flag, low, high, exclusive in _FLOAT_FLAGS:
        value = getattr(args, attr, None)
        if value is not None:
            try:
                number(value, flag, low, high, exclusive_minimum=exclusive)
            except InvalidValue as error:
                raise PlanInputError(str(error)) from None


def check_params_text(text: Optional[str]) -> None:
    """``--params``: a finite count up to 1e15 (``1e400`` and ``nan`` are refused before any arithmetic)."""
    if text is None:
        return
    match = re.fullmatch(r"\s*([0-9.eE+-]{1,40}|nan|inf|infinity)\s*([kKmMbBtT]?)\s*", str(text), re.IGNORECASE)
    if not match:
        return  # not a number at all: the parser's own message says what it expects
    try:
        value = float(match.group(1))
    except ValueError:
        return
    scale = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}[match.group(2).lower()]
    if not math.isfinite(value * scale) or value * scale > MAX_PARAMS:
        raise PlanInputError(f"--params {short(text)}: must be a finite count up to 1e15 parameters")


def shell_safe(value: Optional[str]) -> Optional[str]:
    """A value for the printed command templates: as it is when it holds no shell syntax, else shell-quoted."""
    if value is None or _SAFE_MODEL_ID.match(value):
        return value
    return shlex.quote(value)


# --------------------------------------------------------------------------------------------------------------
# Config files
# --------------------------------------------------------------------------------------------------------------

# Model config.json fields that are counts (checked wherever they appear, text_config included).
_MODEL_COUNTS: Dict[str, Tuple[int, int]] = {
    "hidden_size": (1, 1_000_000),
    "num_hidden_layers": (1, 100_000),
    "num_attention_heads": (1, 100_000),
    "num_key_value_heads": (1, 100_000),
    "intermediate_size": (1, 10_000_000),
    "moe_intermediate_size": (1, 10_000_000),
    "shared_expert_intermediate_size": (0, 10_000_000),
    "vocab_size": (1, 100_000_000),
    "head_dim": (1, 100_000),
    "num_local_experts": (1, 100_000),
    "num_experts": (1, 100_000),
    "n_routed_experts": (1, 100_000),
    "num_experts_per_tok": (1, 100_000),
    "max_position_embeddings": (1, 1_000_000_000),
}
# TRL config fields that are counts; TRL itself rejects zero for each of these where it divides by them.
_TRL_COUNTS: Dict[str, Tuple[int, int]] = {
    "per_device_train_batch_size": (1, MAX_COUNT),
    "gradient_accumulation_steps": (1, MAX_COUNT),
    "num_generations": (1, MAX_COUNT),
    "steps_per_generation": (1, MAX_COUNT),
    "generation_batch_size": (1, MAX_COUNT),
    "max_length": (1, MAX_COUNT * 10),
    "max_prompt_length": (1, MAX_COUNT * 10),
    "max_completion_length": (1, MAX_COUNT * 10),
    "num_processes": (1, MAX_GPUS_PER_NODE * MAX_NODES),
    "num_machines": (1, MAX_NODES),
    "vllm_tensor_parallel_size": (1, MAX_GPUS_PER_NODE * MAX_NODES),
    "max_staleness": (0, MAX_COUNT),
    "lora_r": (1, 65_536),
}
_ACCELERATE_COUNTS: Dict[str, Tuple[int, int]] = {
    "num_processes": (1, MAX_GPUS_PER_NODE * MAX_NODES),
    "num_machines": (1, MAX_NODES),
    "machine_rank": (0, MAX_NODES),
    "main_process_port": (0, 65_535),
}


def _walk(value: Any, path: str = "") -> Iterator[Tuple[str, Any]]:
    stack = [(path, value)]
    while stack:
        where, node = stack.pop()
        yield where, node
        if isinstance(node, dict):
            stack.extend((f"{where}.{key}" if where else str(key), child) for key, child in node.items())
        elif isinstance(node, (list, tuple)):
            stack.extend((f"{where}[{index}]", child) for index, child in enumerate(node))


def check_finite(data: Any, label: str) -> None:
    """Every number in a parsed config is finite and of sane size (YAML reads ``.nan``, ``.inf``, huge ints)."""
    for where, node in _walk(data):
        if isinstance(node, float) and not math.isfinite(node):
            raise PlanInputError(f"{label}: {where or 'the document'} is {node}, not a finite number")
        if isinstance(node, int) and not isinstance(node, bool) and node.bit_length() > 64:
            raise PlanInputError(f"{label}: {where or 'the document'} is an integer too large to be a setting")


def _check_counts(data: Dict[str, Any], label: str, counts: Dict[str, Tuple[int, int]], prefix: str = "") -> None:
    for key, (low, high) in counts.items():
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise PlanInputError(f"{label}: {prefix}{key} must be an integer, not {type(value).__name__}")
        try:
            integer(value, f"{prefix}{key}", low, high)
        except InvalidValue as error:
            raise PlanInputError(f"{label}: {prefix}{key} must be an integer in [{low}, {high}] ({error})") from None


def check_model_config(data: Dict[str, Any], label: str) -> None:
    """Counts in a model config.json are whole numbers in range, and the KV heads divide among the heads."""
    check_finite(data, label)
    sections: List[Tuple[str, Dict[str, Any]]] = [("", data)]
    for name in ("text_config", "language_config", "llm_config"):
        if isinstance(data.get(name), dict):
            sections.append((name + ".", data[name]))
    for prefix, section in sections:
        _check_counts(section, label, _MODEL_COUNTS, prefix)
        heads, kv = section.get("num_attention_heads"), section.get("num_key_value_heads")
        if isinstance(heads, int) and isinstance(kv, int) and not isinstance(kv, bool) and kv > heads:
            raise PlanInputError(
                f"{label}: {prefix}num_key_value_heads ({kv}) is above {prefix}num_attention_heads ({heads}); "
                "no attention layer can be built from that"
            )


def check_trl_config(data: Dict[str, Any], label: str) -> None:
    """Counts in a TRL config are whole numbers in range (``num_generations: 0`` is refused); numbers finite."""
    check_finite(data, label)
    _check_counts(data, label, _TRL_COUNTS)
    beta = data.get("beta")
    if beta is not None and not isinstance(beta, bool):
        try:
            number(beta, "beta", 0.0, 1e6)
        except InvalidValue as error:
            raise PlanInputError(f"{label}: {error}") from None


def check_accelerate_config(data: Dict[str, Any], label: str) -> None:
    """Counts in an Accelerate config are whole numbers in range; numbers finite; distributed_type a string."""
    check_finite(data, label)
    _check_counts(data, label, _ACCELERATE_COUNTS)
    dtype = data.get("distributed_type")
    if isinstance(dtype, bool):
        raise PlanInputError(
            f"{label}: distributed_type parsed as the boolean {dtype} (YAML 1.1 reads a bare NO/yes as a boolean, "
            "and Accelerate then fails on it); write it quoted: distributed_type: 'NO'"
        )
