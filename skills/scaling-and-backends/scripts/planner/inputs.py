"""The planner's first stage: the command line (``Flags``) becomes one ``PlanRequest`` with validated values and
loaded inputs (model config.json, TRL and Accelerate configs, the hardware JSON), the trainer resolved and the batch
and sequence inputs filled from flag > TRL config > default. Nothing after this stage reads a file or a flag.

Every value is checked for type and range with the shared ``common.values`` helpers; a bad one is a
``PlanInputError`` (exit 2) that names the flag or the key.

Bounds are generous (no real job comes near them) but finite, so no loop, list or product can grow without limit:
``--gpus 100000000`` or ``num_processes: 1000000000000`` is refused instead of allocating or enumerating for hours.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from common import recorded, simple_yaml
from common.output import escape_controls, shell_word
from common.read import InputError, read_bytes
from common.values import InvalidValue, NotJson, integer, load_json, number, short


class PlanInputError(Exception):
    """Unusable input (bad file, unknown architecture, impossible hardware): exit code 2, no traceback."""


# The TRL trainers the planner knows (the --trainer choices).
TRAINERS = ("sft", "dpo", "grpo", "rloo", "async-grpo")
GENERATING = ("grpo", "rloo", "async-grpo")

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
    ("max_completion_length", "--max-completion-length", 1, MAX_COUNT),
    ("cp_size", "--cp-size", 1, MAX_GPUS_PER_NODE * MAX_NODES),
    ("sp_size", "--sp-size", 1, MAX_GPUS_PER_NODE * MAX_NODES),
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


@dataclass(frozen=True)
class Flags:
    """The parsed command line, one field per flag (defaults as the flags have them)."""

    params: Optional[str] = None
    model_config: Optional[str] = None
    model_id: Optional[str] = None
    model_dtype: Optional[str] = None
    method: str = "full"
    lora_rank: int = 16
    lora_targets: str = "all-linear"
    optimizer: str = "adamw"
    bnb_double_quant: bool = False
    bnb_quant_storage: Optional[str] = None
    trainer: Optional[str] = None
    seq_len: Optional[int] = None
    micro_batch: Optional[int] = None
    grad_accum: Optional[int] = None
    gradient_checkpointing: Optional[bool] = None
    num_generations: Optional[int] = None
    steps_per_generation: Optional[int] = None
    full_logits: bool = False
    beta: Optional[float] = None
    gpus: Optional[int] = None
    gpu_memory_gib: Optional[float] = None
    compute_capability: Optional[str] = None
    hardware_json: Optional[str] = None
    nodes: int = 1
    host_memory_gib: Optional[float] = None
    headroom: float = 0.10
    vllm_mode: Optional[str] = None
    vllm_gpu_memory_utilization: Optional[float] = None
    vllm_tp: Optional[int] = None
    max_model_len: Optional[int] = None
    vllm_concurrency: Optional[int] = None
    lint_accelerate_config: Optional[str] = None
    lint_trl_config: Optional[str] = None
    num_processes: Optional[int] = None
    vllm_server_gpus: Optional[int] = None
    yaml_parser: str = "auto"
    trl_version: str = "1.16.0"
    vllm_version: Optional[str] = None
    max_completion_length: Optional[int] = None
    cp_size: int = 1
    sp_size: int = 1
    json: bool = False
    require_fit: bool = False
    require_lint_clean: bool = False


def check_flags(flags: Flags) -> None:
    """Refuse out-of-range or non-finite command-line numbers (the parser accepts ``1e400``, ``nan``, ``-5``)."""
    for attr, flag, low, high in _INT_FLAGS:
        value = getattr(flags, attr)
        if value is not None:
            try:
                integer(value, flag, low, high)
            except InvalidValue as error:
                raise PlanInputError(str(error)) from None
    for attr, flag, low, high, exclusive in _FLOAT_FLAGS:
        value = getattr(flags, attr)
        if value is not None:
            try:
                number(value, flag, low, high, exclusive_minimum=exclusive)
            except InvalidValue as error:
                raise PlanInputError(str(error)) from None


def check_params_text(text: Optional[str]) -> None:
    """``--params``: a finite count up to 1e15 (``1e400`` and ``nan`` are refused before any arithmetic)."""
    if text is None:
        return
    match = re.fullmatch(r"\s*([0-9.eE+-]+|nan|inf|infinity)\s*([kKmMbBtT]?)\s*", str(text), re.IGNORECASE)
    if not match:
        return  # not a number at all: the parser's own message says what it expects
    if len(match.group(1)) > 40:  # hundreds of digits: float() gives inf or a value no model has
        raise PlanInputError(f"--params {short(text)}: must be a finite count up to 1e15 parameters")
    try:
        value = float(match.group(1))
    except ValueError:
        return
    scale = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}[match.group(2).lower()]
    if not math.isfinite(value * scale) or value * scale > MAX_PARAMS:
        raise PlanInputError(f"--params {short(text)}: must be a finite count up to 1e15 parameters")


def shell_safe(value: Optional[str]) -> Optional[str]:
    """A value for the printed command templates: as it is when it holds no shell syntax, else scrubbed and
    shell-quoted (common.output.shell_word)."""
    if value is None or _SAFE_MODEL_ID.match(value):
        return value
    return shell_word(value)


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


# The other fields of a model config.json the planner reads, by kind: one table, checked before any use.
_MODEL_FIELDS: Dict[str, str] = {
    "model_type": "text",
    "architectures": "text-list",
    "mlp_only_layers": "count-list",
    "tie_word_embeddings": "bool",
    "mlp_bias": "bool",
    "attention_bias": "bool",
    "first_k_dense_replace": "count",
    "decoder_sparse_step": "count",
    "n_shared_experts": "count",
    "v_head_dim": "count",
    "qk_rope_head_dim": "count",
    "qk_nope_head_dim": "count",
    "kv_lora_rank": "count",
    "q_lora_rank": "count",
}
# The hardware JSON (check_optional_backends.py --json): the top level and each accelerators.gpus entry.
_HARDWARE_TOP: Dict[str, str] = {"schema_version": "one"}
_HARDWARE_GPU_FIELDS: Dict[str, str] = {
    "visible": "bool",
    "index": "count",
    "memory_total_mib": "number",
    "memory_free_mib": "number",
    "compute_capability": "text",
    "name": "text",
}
_KIND_WORDS = {
    "text": "a string",
    "text-list": "a list of strings",
    "count-list": "a list of whole numbers",
    "bool": "true or false (a JSON/YAML boolean, not a string)",
    "count": "a whole number",
    "number": "a number",
    "one": "the integer 1",
}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _fits(kind: str, value: Any) -> bool:
    if kind == "text":
        return isinstance(value, str)
    if kind == "text-list":
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if kind == "count-list":
        return isinstance(value, list) and all(_is_count(item) for item in value)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "count":
        return _is_count(value)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "one":
        return type(value) is int and value == 1  # not true, not 1.0
    raise ValueError(kind)


def check_fields(data: Dict[str, Any], label: str, table: Dict[str, str], prefix: str = "") -> None:
    """Each field of ``table`` present in ``data`` has its kind (``null`` counts as absent)."""
    for key, kind in table.items():
        value = data.get(key)
        if value is not None and not _fits(kind, value):
            raise PlanInputError(f"{label}: {prefix}{key} must be {_KIND_WORDS[kind]}, not {short(value)}")


def check_hardware_json(data: Dict[str, Any], label: str) -> None:
    """The hardware JSON's schema_version is exactly the integer 1 and each GPU entry's fields have their kind
    (``"visible": "false"`` is a string, and would count as visible)."""
    if data.get("schema_version") is None or not _fits("one", data.get("schema_version")):
        raise PlanInputError(
            f"{label}: schema_version {short(data.get('schema_version'))} is not supported (expected the integer 1, "
            "from check_optional_backends.py --json)"
        )
    accelerators = data.get("accelerators")
    gpus = accelerators.get("gpus") if isinstance(accelerators, dict) else None
    for index, gpu in enumerate(gpus if isinstance(gpus, list) else []):
        if not isinstance(gpu, dict):
            raise PlanInputError(f"{label}: accelerators.gpus[{index}] must be an object, not {short(gpu)}")
        check_fields(gpu, label, _HARDWARE_GPU_FIELDS, f"accelerators.gpus[{index}].")


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
        check_fields(section, label, _MODEL_FIELDS, prefix)
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


# --------------------------------------------------------------------------------------------------------------
# Values as config files spell them
# --------------------------------------------------------------------------------------------------------------


def as_int(value: Any) -> Optional[int]:
    """A whole number up to 10**7 (no setting is larger), else None: 10**12 processes must not be enumerated."""
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    if len(text) > 12:
        return None
    try:
        number = int(text)
    except ValueError:
        return None
    return number if abs(number) <= 10_000_000 else None


# Spellings read as booleans when a setting arrives as a string (a quoted YAML value, JSON, a CLI override).
_BOOL_TRUE = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"}
_BOOL_FALSE = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"}


def as_bool(value: Any) -> Optional[bool]:
    if isinstance(value, bool):
        return value
    if value is None:
        return None
    text = str(value).strip()
    if text in _BOOL_TRUE or text == "1":
        return True
    if text in _BOOL_FALSE or text == "0":
        return False
    return None


# --------------------------------------------------------------------------------------------------------------
# Files: YAML / JSON configs, TRL's Accelerate presets, the hardware JSON
# --------------------------------------------------------------------------------------------------------------


def load_yaml_text(text: str, source: str, parser: str = "auto") -> Tuple[Any, str]:
    """Parse YAML text; return (data, parser used: ``"pyyaml"`` or ``"builtin"``). Raises ``PlanInputError``."""
    if parser == "pyyaml" and not simple_yaml.pyyaml_available():
        raise PlanInputError("--yaml-parser pyyaml was asked for, but PyYAML is not installed")
    try:
        return simple_yaml.load(text, prefer_pyyaml=parser != "builtin")
    except simple_yaml.YamlError as exc:
        where = source if exc.line is None else f"{source}:{exc.line}"
        used = "PyYAML" if exc.parser == "pyyaml" else "built-in parser"
        raise PlanInputError(f"{where}: malformed YAML ({used}): {exc.message}") from None


CONFIG_LIMIT = 4_000_000  # bytes; a config.json or TRL/Accelerate config is a few kB


def load_config_file(path: str, parser: str = "auto") -> Tuple[Dict[str, Any], str]:
    """Read a YAML or JSON config file into a mapping; return (mapping, parser name).

    The file is read through safe_read (a FIFO, device or directory is refused without blocking; at most
    CONFIG_LIMIT bytes), JSON strictly and within bounds (no NaN/Infinity, no 5,000-digit integers, no 100k-deep
    nesting), YAML through simple_yaml (size and alias-expansion budget)."""
    try:
        read = read_bytes(path, CONFIG_LIMIT)
    except InputError as error:
        raise PlanInputError(f"{path}: {error.reason}") from None
    if read.truncated:
        raise PlanInputError(f"{path}: larger than {CONFIG_LIMIT:,} bytes; not a config file")
    try:
        text = read.data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PlanInputError(f"{path}: not UTF-8 text (byte offset {error.start})") from None
    if Path(path).suffix.lower() == ".json":
        try:
            data = load_json(text, path, max_bytes=CONFIG_LIMIT)
        except NotJson as error:
            raise PlanInputError(f"{path}: malformed JSON: {str(error).split('is not valid JSON: ', 1)[-1]}") from None
        except InvalidValue as error:
            raise PlanInputError(str(error)) from None
        used = "json"
    else:
        data, used = load_yaml_text(text, path, parser)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PlanInputError(f"{path}: expected a mapping of settings at the top level, got {type(data).__name__}")
    return data, used


# TRL's packaged Accelerate presets (trl/accelerate_configs/*.yaml @ 1.16.0): the values that matter here.
# Every one of them says num_processes: 8, single_gpu included.
TRL_PRESETS: Dict[str, Dict[str, Any]] = {
    "single_gpu": {"distributed_type": "NO", "num_processes": 8, "mixed_precision": "bf16", "num_machines": 1},
    "multi_gpu": {"distributed_type": "MULTI_GPU", "num_processes": 8, "mixed_precision": "bf16", "num_machines": 1},
    "fsdp1": {
        "distributed_type": "FSDP",
        "num_processes": 8,
        "mixed_precision": "bf16",
        "num_machines": 1,
        "fsdp_config": {"fsdp_version": 1, "fsdp_offload_params": False, "fsdp_activation_checkpointing": False},
    },
    "fsdp2": {
        "distributed_type": "FSDP",
        "num_processes": 8,
        "mixed_precision": "bf16",
        "num_machines": 1,
        "fsdp_config": {"fsdp_version": 2, "fsdp_offload_params": False, "fsdp_activation_checkpointing": False},
    },
    "zero1": {
        "distributed_type": "DEEPSPEED",
        "num_processes": 8,
        "mixed_precision": "bf16",
        "num_machines": 1,
        "deepspeed_config": {"zero_stage": 1, "zero3_init_flag": False},
    },
    "zero2": {
        "distributed_type": "DEEPSPEED",
        "num_processes": 8,
        "mixed_precision": "bf16",
        "num_machines": 1,
        "deepspeed_config": {
            "zero_stage": 2,
            "offload_optimizer_device": "none",
            "offload_param_device": "none",
            "zero3_init_flag": False,
        },
    },
    "zero3": {
        "distributed_type": "DEEPSPEED",
        "num_processes": 8,
        "mixed_precision": "bf16",
        "num_machines": 1,
        "deepspeed_config": {
            "zero_stage": 3,
            "offload_optimizer_device": "none",
            "offload_param_device": "none",
            "zero3_init_flag": True,
        },
    },
}


def resolve_accelerate(
    accelerate_path: Optional[str], trl_config: Optional[Dict[str, Any]], trl_label: Optional[str], parser: str
) -> Tuple[Optional[Dict[str, Any]], Optional[str], Optional[str]]:
    """Load the Accelerate config: a file, or the preset/path a TRL CLI YAML names in ``accelerate_config``."""
    if accelerate_path:
        data, used = load_config_file(accelerate_path, parser)
        if "distributed_type" not in data and "compute_environment" not in data:
            raise PlanInputError(
                f"{accelerate_path}: not an Accelerate config (no distributed_type or compute_environment key)"
            )
        return data, accelerate_path, used
    name = (trl_config or {}).get("accelerate_config")
    if name:
        if str(name) in TRL_PRESETS:
            return dict(TRL_PRESETS[str(name)]), f"TRL preset '{name}' (named in {trl_label})", None
        raise PlanInputError(
            f"{trl_label}: accelerate_config '{name}' is not a TRL preset ({', '.join(sorted(TRL_PRESETS))}); "
            "pass the file with --lint-accelerate-config"
        )
    return None, None, None


HARDWARE_JSON_LIMIT = 16_000_000
MAX_JSON_GPUS = 4096 * 16
MAX_GPU_MIB = 2**31


def load_hardware_json(path: str) -> Dict[str, Any]:
    """The visible GPUs from ``check_optional_backends.py --json`` (schema_version 1)."""
    try:
        read = read_bytes(path, HARDWARE_JSON_LIMIT)
    except InputError as error:
        raise PlanInputError(f"{path}: {error.reason}") from None
    if read.truncated:
        raise PlanInputError(f"{path}: larger than {HARDWARE_JSON_LIMIT:,} bytes; not a diagnostic report")
    try:
        data = load_json(read.data, path, max_bytes=HARDWARE_JSON_LIMIT)
    except InvalidValue as error:
        raise PlanInputError(str(error)) from None
    if not isinstance(data, dict):
        raise PlanInputError(f"{path}: expected the JSON object of check_optional_backends.py --json")
    check_hardware_json(data, path)  # the validation table above: schema_version, each GPU's fields
    gpus = (data.get("accelerators") or {}).get("gpus") if isinstance(data.get("accelerators"), dict) else None
    if not isinstance(gpus, list):
        raise PlanInputError(f"{path}: no accelerators.gpus list")
    if len(gpus) > MAX_JSON_GPUS:
        raise PlanInputError(f"{path}: accelerators.gpus lists {len(gpus):,} GPUs (more than {MAX_JSON_GPUS})")
    visible = [g for g in gpus if isinstance(g, dict) and g.get("visible", True)]
    if not visible:
        raise PlanInputError(f"{path}: no visible GPU (accelerators.gpus has {len(gpus)} entries, none visible)")
    memories = []
    for gpu in visible:
        mib = gpu.get("memory_total_mib")
        if not isinstance(mib, (int, float)) or isinstance(mib, bool) or not 0 < mib <= MAX_GPU_MIB:
            raise PlanInputError(f"{path}: GPU {short(gpu.get('index'))} has no memory_total_mib in (0, 2**31]")
        memories.append(float(mib))
    notes = []
    if len(set(memories)) > 1:
        notes.append(f"GPUs differ in memory ({sorted(set(memories))} MiB); planning with the smallest")
    for gpu in visible:
        free, total = gpu.get("memory_free_mib"), gpu.get("memory_total_mib")
        if (
            isinstance(free, (int, float))
            and not isinstance(free, bool)
            and 0 <= free <= MAX_GPU_MIB
            and isinstance(total, (int, float))
            and total - free > 1024
        ):
            notes.append(
                f"GPU {gpu.get('index')} already has {(total - free) / 1024:.1f} GiB in use by other processes"
            )
    return {
        "count": len(visible),
        "memory_gib": min(memories) / 1024.0,
        "compute_capabilities": [
            cc if isinstance(cc, str) and re.fullmatch(r"\d{1,2}\.\d{1,2}", cc) else None
            for cc in (g.get("compute_capability") for g in visible)
        ],
        "names": [str(g.get("name", "?"))[:120] for g in visible],
        "notes": notes,
    }


# --------------------------------------------------------------------------------------------------------------
# The trainer and the TRL config's batch and sequence inputs
# --------------------------------------------------------------------------------------------------------------

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


def resolve_trainer(
    asked: Optional[str], trl_config: Optional[Dict[str, Any]], trl_label: Optional[str]
) -> Tuple[str, Optional[str]]:
    """The trainer to plan for (``--trainer``, else inferred from the TRL config, else sft) and, when a TRL config
    was read and the trainer not given, the sentence saying how it was chosen."""
    if asked is not None:
        return asked, None
    inferred, keys = infer_trainer(trl_config)
    trainer = inferred or "sft"
    if trl_config is None:
        return trainer, None
    if inferred is None:
        return trainer, f"no trainer-specific fields in {trl_label}: linted as an SFT config"
    message = f"trainer inferred as {inferred} from {', '.join(keys)} in {trl_label}"
    if inferred == "grpo":
        message += " (RLOO has the same lint rules)"
    return trainer, message


# Plan inputs a TRL config can set (TRL 1.16.0 field names).
# sft_config.py / dpo_config.py max_length; grpo_config.py / rloo_config.py vllm_max_model_length (prompt +
# completion); base_config.py gradient_checkpointing (default True); TrainingArguments per_device_train_batch_size
# and gradient_accumulation_steps.
TRL_CONFIG_INPUTS: Tuple[Tuple[str, str, str, str, Any, Tuple[str, ...]], ...] = (
    # (Flags field, flag, config field, kind, default, trainers whose config has the field)
    ("micro_batch", "--micro-batch", "per_device_train_batch_size", "int", 8, TRAINERS),
    ("grad_accum", "--grad-accum", "gradient_accumulation_steps", "int", 1, TRAINERS),
    ("seq_len", "--seq-len", "max_length", "int", 2048, ("sft", "dpo")),
    ("seq_len", "--seq-len", "vllm_max_model_length", "int", 2048, ("grpo", "rloo")),
    ("num_generations", "--num-generations", "num_generations", "int", 8, ("grpo", "rloo", "async-grpo")),
    ("steps_per_generation", "--steps-per-generation", "steps_per_generation", "int", None, ("grpo", "rloo")),
    ("gradient_checkpointing", "--gradient-checkpointing", "gradient_checkpointing", "bool", True, TRAINERS),
    ("beta", "--beta", "beta", "float", None, ("grpo", "rloo")),
    ("max_completion_length", "--max-completion-length", "max_completion_length", "int", None, GENERATING),
)

# TRL's own defaults per release and trainer (scripts/planner/trl_defaults.json, made by
# tools/facts/planner_defaults.py from the recorded release history). The planner's prompt length for generating
# trainers when no sequence length is given: TRL truncated prompts at max_prompt_length=512 up to 0.25 and no longer
# truncates them, so 512 is an assumption, printed as one.
TRL_DEFAULTS_FILE = Path(__file__).resolve().parent / "trl_defaults.json"
ASSUMED_PROMPT_TOKENS = 512
_CONFIG_CLASS = {"sft": "SFTConfig", "dpo": "DPOConfig", "grpo": "GRPOConfig", "rloo": "RLOOConfig"}
_CONFIG_CLASS["async-grpo"] = "AsyncGRPOConfig"


def load_trl_defaults() -> Dict[str, Any]:
    """The shipped defaults table: {"releases": [...], "defaults": {release: {trainer: {field: value}}}}."""
    try:
        read = read_bytes(str(TRL_DEFAULTS_FILE), CONFIG_LIMIT)
        data = load_json(read.data, str(TRL_DEFAULTS_FILE), max_bytes=CONFIG_LIMIT)
    except (InputError, InvalidValue) as error:
        raise PlanInputError(f"the planner's TRL defaults table cannot be read: {error}") from None
    return data


def trl_releases() -> List[str]:
    return list(load_trl_defaults()["releases"])


def trl_default(table: Dict[str, Any], release: str, trainer: str, dest: str) -> Tuple[Any, Optional[str]]:
    """TRL's default for one planner input in one release, and where it comes from; (None, None) when TRL has none.
    Generating trainers: the sequence is the assumed prompt plus TRL's max_completion_length."""
    values = table["defaults"].get(release, {}).get(trainer, {})
    cls = _CONFIG_CLASS[trainer]
    if dest == "seq_len":
        if trainer in GENERATING:
            completion = values.get("max_completion_length")
            prompt = values.get("max_prompt_length") or ASSUMED_PROMPT_TOKENS
            if completion:
                prompt_source = (
                    f"{cls}.max_prompt_length {prompt}"
                    if values.get("max_prompt_length")
                    else f"an assumed {prompt}-token prompt"
                )
                return prompt + completion, f"{prompt_source} + {cls}.max_completion_length {completion}"
            return None, None
        key = "max_length"
    elif dest == "gradient_checkpointing" and "gradient_checkpointing" not in values:
        return False, "transformers TrainingArguments.gradient_checkpointing (TRL sets none)"
    else:
        key = dest
    value = values.get(key)
    return (value, f"{cls}.{key}") if value is not None else (None, None)


def _config_value(value: Any, kind: str) -> Any:
    """A TRL config value converted like the flag it stands for; None when it is unusable."""
    if kind == "bool":
        return as_bool(value)
    if isinstance(value, bool):
        return None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    if kind == "float":
        return number if number == number and abs(number) != float("inf") else None
    return int(number) if number.is_integer() and number >= 1 else None


def trl_config_inputs(
    flags: Flags, trainer: str, trl_config: Optional[Dict[str, Any]], trl_label: Optional[str]
) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """The batch, sequence and generation inputs: a flag wins over the TRL config, which wins over the default.
    Returns the values by flag attribute and one record per input the config or a flag set, saying which won."""
    values: Dict[str, Any] = {}
    sources: List[Dict[str, Any]] = []
    done = set()
    for dest, flag, key, kind, _default, trainers in TRL_CONFIG_INPUTS:
        if dest in done:
            continue
        flag_value = getattr(flags, dest)
        in_config = trl_config is not None and trainer in trainers and key in trl_config and trl_config[key] is not None
        config_value = _config_value(trl_config[key], kind) if in_config else None
        if in_config and config_value is None:
            raise PlanInputError(f"{trl_label}: {key} {trl_config[key]!r} is not a usable value")
        if flag_value is not None:
            values[dest] = flag_value
            if in_config:
                done.add(dest)
                sources.append(
                    {"input": flag, "value": flag_value, "source": "flag", "overrides": f"{key}: {config_value}"}
                )
            continue
        if in_config:
            done.add(dest)
            values[dest] = config_value
            sources.append({"input": flag, "value": config_value, "source": f"{key} in {trl_label}"})
    table = load_trl_defaults()
    for dest, flag, _key, _kind, default, _trainers in TRL_CONFIG_INPUTS:
        if values.get(dest) is not None:
            continue
        value, where = trl_default(table, flags.trl_version, trainer, dest)
        if value is not None:
            values[dest] = value
            sources.append({"input": flag, "value": value, "source": f"TRL {flags.trl_version} default ({where})"})
        else:
            values[dest] = default
    return values, sources


# --------------------------------------------------------------------------------------------------------------
# The request
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRequest:
    """What the planner was asked, validated, with its input files loaded. Every later stage reads only this."""

    planning: bool  # a model was given: plan memory and the GPU split
    linting: bool  # a config was given: run the lint
    # model
    params: Optional[str]  # --params text (finite, bounded; the model stage parses it)
    model_config: Optional[Dict[str, Any]]  # the loaded config.json
    model_config_path: Optional[str]
    model_id: Optional[str]  # shell-safe, for the command templates
    model_dtype: Optional[str]  # as asked; None lets the method choose
    # method
    method: str
    lora_rank: int
    lora_targets: str
    optimizer: str
    bnb_double_quant: bool
    bnb_quant_storage: Optional[str]
    # trainer and batch, resolved (flag > TRL config > default)
    trainer: str
    trainer_note: Optional[str]  # how the trainer was chosen, when a TRL config was read without --trainer
    seq_len: int
    micro_batch: int
    grad_accum: int
    gradient_checkpointing: bool
    num_generations: int
    steps_per_generation: Optional[int]
    full_logits: bool
    beta: Optional[float]
    trl_version: str  # the TRL release whose defaults and LM head the plan uses
    max_completion_length: Optional[int]  # generating trainers: completion tokens (logits are computed for these)
    lm_head: str  # how this trainer's release computes logits: fused | chunked | full (trl_defaults.json)
    cp_size: int  # context parallelism (accelerate ParallelismConfig, FSDP2): ranks one sequence is split over
    sp_size: int  # Ulysses sequence parallelism (DeepSpeed ALST, sp_backend deepspeed)
    input_sources: Tuple[Dict[str, Any], ...]  # which of flag / TRL config set an input
    # hardware
    gpus: Optional[int]
    gpu_memory_gib: Optional[float]
    compute_capability: Optional[str]
    hardware_json_path: Optional[str]
    hardware_info: Optional[Dict[str, Any]]  # the visible GPUs read from --hardware-json
    nodes: int
    host_memory_gib: Optional[float]
    headroom: float
    # vLLM generation
    vllm_mode: Optional[str]
    vllm_gpu_memory_utilization: Optional[float]
    vllm_tp: Optional[int]
    max_model_len: Optional[int]
    vllm_concurrency: Optional[int]
    vllm_release: Tuple[int, ...]  # the vLLM release whose KV and overhead rules apply
    vllm_release_source: str  # "--vllm-version" or the default's reason
    # lint
    trl_config: Optional[Dict[str, Any]]
    trl_label: Optional[str]
    accelerate: Optional[Dict[str, Any]]  # the Accelerate config file, or the TRL preset the TRL config names
    accelerate_label: Optional[str]
    yaml_parsers: Tuple[str, ...]
    num_processes: Optional[int]
    vllm_server_gpus: Optional[int]
    # output
    json: bool
    require_fit: bool
    require_lint_clean: bool


# The first indexed release whose config refuses cp_size/sp_size > 1 ("... does not support sequence-dim
# parallelism", GRPOConfig/RLOOConfig/AsyncGRPOConfig __post_init__); earlier releases do not check, and the trainer
# still builds its inputs after generation, so the split is wrong there too.
SEQUENCE_PARALLEL_REFUSED_SINCE = {"grpo": "1.4.0", "rloo": "1.4.0", "async-grpo": "1.11.0"}


def check_sequence_parallelism(cp: int, sp: int, trainer: str, release: str) -> None:
    """--cp-size/--sp-size: one of them at most (accelerate ParallelismConfig), and not for generating trainers."""
    if cp > 1 and sp > 1:
        raise PlanInputError(
            f"--cp-size {cp} and --sp-size {sp}: accelerate refuses both ('Context Parallelism (CP) and Sequence "
            "Parallelism (SP) are mutually exclusive.', accelerate/parallelism_config.py@1.15.0); set one to 1"
        )
    if (cp > 1 or sp > 1) and trainer in SEQUENCE_PARALLEL_REFUSED_SINCE:
        since = SEQUENCE_PARALLEL_REFUSED_SINCE[trainer]
        raise PlanInputError(
            f"--trainer {trainer} does not support sequence-dim parallelism (cp_size/sp_size > 1): its config "
            f"refuses it from TRL {since}, and earlier releases split the generation batch wrongly; use "
            "--cp-size 1 --sp-size 1 (shorter sequences, LoRA, or sharding instead)"
        )


# The vLLM release the planner's KV and overhead rules were read from (planner/kv_cache.py, TRL 1.16.0 METADATA
# vllm>=0.22.0,<=0.31.0), and the oldest one a TRL 1.x extra accepts (vllm>=0.10.2 in TRL 1.0.0's metadata).
VLLM_RELEASE_DEFAULT = (0, 31, 0)
VLLM_RELEASE_TEXT = ".".join(str(part) for part in VLLM_RELEASE_DEFAULT)
VLLM_OLDEST = (0, 10, 2)
_VLLM_VERSION = re.compile(r"^v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?(?:\.post\d+|rc\d+|\+\S+)?$")


def vllm_release_of(text: Optional[str]) -> Tuple[Tuple[int, ...], str]:
    """``--vllm-version`` as a release tuple and where it came from; the default release when it is not given."""
    if text is None:
        return VLLM_RELEASE_DEFAULT, "default (the release the KV and overhead rules were read from)"
    match = _VLLM_VERSION.match(text.strip())
    if not match:
        raise PlanInputError(f"--vllm-version {short(text)}: a release such as 0.19.1")
    release = tuple(int(part or 0) for part in match.groups())
    if release < VLLM_OLDEST:
        raise PlanInputError(
            f"--vllm-version {short(text)}: older than vLLM 0.10.2, the oldest release a TRL 1.x extra accepts"
        )
    return release, "--vllm-version"


def shown_path(path: Optional[str]) -> Optional[str]:
    """A path as the report shows it: control characters escaped, so a file name cannot start a line of its own."""
    return escape_controls(path) if path is not None else None


def load_request(flags: Flags) -> PlanRequest:
    """Validate the flags and load every input file; raises ``PlanInputError`` naming the flag, file or key."""
    check_flags(flags)
    check_params_text(flags.params)
    planning = flags.params is not None or flags.model_config is not None
    linting = bool(flags.lint_accelerate_config or flags.lint_trl_config)
    if not planning and not linting:
        raise PlanInputError("nothing to do: give --params or --model-config, and/or a config to lint")
    yaml_parsers: List[str] = []
    trl_config = None
    trl_label = shown_path(flags.lint_trl_config)
    if flags.lint_trl_config:
        trl_config, used = load_config_file(flags.lint_trl_config, flags.yaml_parser)
        check_trl_config(trl_config, trl_label or "")
        yaml_parsers.append(used)
    trainer, trainer_note = resolve_trainer(flags.trainer, trl_config, trl_label)
    table = load_trl_defaults()
    if flags.trl_version not in table["releases"]:
        past = recorded.beyond("trl", flags.trl_version.strip())
        why = f"{past}, so its defaults were never read; " if past else ""
        raise PlanInputError(f"--trl-version {short(flags.trl_version)}: {why}one of {', '.join(table['releases'])}")
    batch, sources = trl_config_inputs(flags, trainer, trl_config, trl_label)
    check_sequence_parallelism(flags.cp_size, flags.sp_size, trainer, flags.trl_version)
    lm_head = table["defaults"][flags.trl_version].get(trainer, {}).get("lm_head")
    if lm_head is None:
        raise PlanInputError(f"--trainer {trainer}: TRL {flags.trl_version} has no {_CONFIG_CLASS[trainer]}")
    vllm_release, vllm_source = vllm_release_of(flags.vllm_version)
    model_config = None
    if flags.model_config:
        model_config, _used = load_config_file(flags.model_config, flags.yaml_parser)
        check_model_config(model_config, shown_path(flags.model_config) or "")
    hardware_info = load_hardware_json(flags.hardware_json) if flags.hardware_json else None
    accelerate, accelerate_label = None, None
    if linting:
        accelerate, accelerate_label, used = resolve_accelerate(
            flags.lint_accelerate_config, trl_config, trl_label, flags.yaml_parser
        )
        accelerate_label = shown_path(accelerate_label)
        if used:
            yaml_parsers.append(used)
        if isinstance(accelerate, dict):
            check_accelerate_config(accelerate, accelerate_label or "the Accelerate config")
        if flags.vllm_server_gpus is not None and flags.vllm_server_gpus < 0:
            raise PlanInputError("--vllm-server-gpus must not be negative")
    return PlanRequest(
        planning=planning,
        linting=linting,
        params=flags.params,
        model_config=model_config,
        model_config_path=shown_path(flags.model_config),
        model_id=shell_safe(flags.model_id),
        model_dtype=flags.model_dtype,
        method=flags.method,
        lora_rank=flags.lora_rank,
        lora_targets=flags.lora_targets,
        optimizer=flags.optimizer,
        bnb_double_quant=flags.bnb_double_quant,
        bnb_quant_storage=flags.bnb_quant_storage,
        trainer=trainer,
        trainer_note=trainer_note,
        seq_len=batch["seq_len"],
        micro_batch=batch["micro_batch"],
        grad_accum=batch["grad_accum"],
        gradient_checkpointing=batch["gradient_checkpointing"],
        num_generations=batch["num_generations"],
        steps_per_generation=batch["steps_per_generation"],
        full_logits=flags.full_logits,
        beta=batch["beta"],
        trl_version=flags.trl_version,
        max_completion_length=batch["max_completion_length"],
        lm_head=lm_head,
        cp_size=flags.cp_size,
        sp_size=flags.sp_size,
        input_sources=tuple(sources),
        gpus=flags.gpus,
        gpu_memory_gib=flags.gpu_memory_gib,
        compute_capability=flags.compute_capability,
        hardware_json_path=shown_path(flags.hardware_json),
        hardware_info=hardware_info,
        nodes=flags.nodes,
        host_memory_gib=flags.host_memory_gib,
        headroom=flags.headroom,
        vllm_mode=flags.vllm_mode,
        vllm_gpu_memory_utilization=flags.vllm_gpu_memory_utilization,
        vllm_tp=flags.vllm_tp,
        max_model_len=flags.max_model_len,
        vllm_concurrency=flags.vllm_concurrency,
        vllm_release=vllm_release,
        vllm_release_source=vllm_source,
        trl_config=trl_config,
        trl_label=trl_label,
        accelerate=accelerate,
        accelerate_label=accelerate_label,
        yaml_parsers=tuple(yaml_parsers),
        num_processes=flags.num_processes,
        vllm_server_gpus=flags.vllm_server_gpus,
        json=flags.json,
        require_fit=flags.require_fit,
        require_lint_clean=flags.require_lint_clean,
    )
