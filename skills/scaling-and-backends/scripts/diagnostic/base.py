"""Shared pieces of the readiness diagnostic: the stack and backend tables, the safety-promise lists, secret
redaction and small utilities (reading text, version tuples, running a command with a hard timeout).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Sequence, Tuple

from common.lazy_re import lazy
from common.output import one_line, scrub
from common.read import InputError, read_bytes, run_capped

SCHEMA_VERSION = 1
TOOL = "check_optional_backends"

ALLOWED_COMMANDS = ("nvidia-smi", "rocm-smi")
DEFAULT_NETWORK_TIMEOUT = 3.0  # per --probe-network target (diagnostic/network.py)
DEFAULT_PROBE_TIMEOUT = 60.0  # seconds per opt-in import probe
PROBE_WORKERS = 4  # import probes run at a time

# id, candidate distribution names (PEP 503), candidate top-level modules; the first of each is canonical.
STACK: Tuple[Tuple[str, Tuple[str, ...], Tuple[str, ...]], ...] = (
    ("torch", ("torch",), ("torch",)),
    ("transformers", ("transformers",), ("transformers",)),
    ("accelerate", ("accelerate",), ("accelerate",)),
    ("trl", ("trl",), ("trl",)),
    ("peft", ("peft",), ("peft",)),
    ("datasets", ("datasets",), ("datasets",)),
    ("deepspeed", ("deepspeed",), ("deepspeed",)),
    ("bitsandbytes", ("bitsandbytes",), ("bitsandbytes",)),
    ("vllm", ("vllm",), ("vllm",)),
    ("liger-kernel", ("liger-kernel", "liger-kernel-nightly"), ("liger_kernel",)),
    ("kernels", ("kernels",), ("kernels",)),
    ("flash-attn", ("flash-attn",), ("flash_attn",)),
    ("flash-attn-3", ("flash-attn-3",), ("flash_attn_interface", "flash_attn_3")),
    ("unsloth", ("unsloth",), ("unsloth",)),
    ("unsloth-zoo", ("unsloth-zoo",), ("unsloth_zoo",)),
    ("triton", ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu"), ("triton",)),
    ("huggingface-hub", ("huggingface-hub",), ("huggingface_hub",)),
    ("safetensors", ("safetensors",), ("safetensors",)),
    ("requests", ("requests",), ("requests",)),
    ("aiohttp", ("aiohttp",), ("aiohttp",)),
)
STACK_IDS = tuple(entry[0] for entry in STACK)
DIST_TO_ID = {dist: pid for pid, dists, _ in STACK for dist in dists}
HEAVY_MODULES = (
    "torch",
    "vllm",
    "deepspeed",
    "bitsandbytes",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "liger_kernel",
    "flash_attn",
    "unsloth",
    "triton",
    "kernels",
)

BACKEND_IDS = (
    "ddp",
    "fsdp2",
    "deepspeed",
    "peft",
    "qlora",
    "liger",
    "hub-kernels",
    "flash-attn",
    "unsloth",
    "vllm-colocate",
    "vllm-server",
    "async-grpo-lora",
)
BACKEND_HELP = {
    "ddp": "data parallel over NCCL (accelerate launch / torchrun)",
    "fsdp2": "FSDP version 2 through Accelerate",
    "deepspeed": "DeepSpeed ZeRO through Accelerate",
    "peft": "LoRA adapters (trl[peft])",
    "qlora": "LoRA on a 4-bit bitsandbytes base model",
    "liger": "Liger Triton kernels (use_liger_kernel; deprecated in TRL 1.16)",
    "hub-kernels": 'Hub kernels (model_init_kwargs={"use_kernels": True})',
    "flash-attn": "flash-attn 2/3 attention",
    "unsloth": "Unsloth patched training",
    "vllm-colocate": "GRPO generation with vLLM inside the training processes",
    "vllm-server": "GRPO generation against a separate vLLM server",
    "async-grpo-lora": "AsyncGRPO with adapter-only LoRA sync to a vLLM server",
}

SECRET_NAME_RE = lazy(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|AUTH|CREDENTIAL", re.IGNORECASE)
# The scheme starts where a run of scheme characters starts: one scan per run, so a long value is read once.
URL_CREDENTIALS_RE = lazy(
    r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<cred>[^/@\s:]*(?::[^/@\s]*)?)@"
)
HF_TOKEN_RE = lazy(r"\bhf_[A-Za-z0-9]{20,}\b")
REDACTED = "<redacted>"


def new_finding(severity: str, code: str, message: str) -> Dict[str, str]:
    """A finding record: severity error|warning|info, a stable code, one sentence."""
    return {"severity": severity, "code": code, "message": message}


def first_line(text: str, limit: int = 240) -> str:
    """The first non-empty line of ``text``, scrubbed of secrets, escaped, then shortened to ``limit`` characters
    (common.output.one_line: scrubbing before the cut, so no head of a secret is left)."""
    return one_line(text or "", limit)


def redact_value(value: str) -> str:
    """Remove secrets from a value by their shape (tokens, URL userinfo, secret parameters): common.output.scrub."""
    return scrub(value)


def read_text(path: str, limit: int = 4_000_000) -> Optional[str]:
    """A regular file's text (UTF-8 with replacement), at most ``limit`` bytes of it, or ``None`` when it cannot be
    read; a FIFO, device or directory is refused without blocking (common.read.read_bytes)."""
    try:
        return read_bytes(path, limit).text()
    except InputError:
        return None


def version_tuple(text: Optional[str]) -> Tuple[int, ...]:
    """Leading numeric release parts of a version-like string ("550.54.15" -> (550, 54, 15))."""
    parts = []
    for piece in re.split(r"[.+-]", text or ""):
        if not (piece.isascii() and piece.isdigit()) or len(piece) > 18:
            break  # "²" is a digit to isdigit() and not to int(); 5,000 digits are past int()'s limit: no release
        parts.append(int(piece))
    return tuple(parts)


def display_specifier(spec: str) -> str:
    """A specifier with lower bounds first (``<=0.31.0,>=0.22.0`` -> ``>=0.22.0,<=0.31.0``)."""
    order = {">=": 0, ">": 1, "~=": 2, "==": 3, "===": 3, "!=": 4, "<=": 5, "<": 6}
    clauses = [c.strip() for c in (spec or "").split(",") if c.strip()]

    def rank(clause: str) -> Tuple[int, str]:
        match = re.match(r"(===|==|!=|~=|<=|>=|<|>)", clause)
        return (order.get(match.group(1), 9) if match else 9, clause)

    return ",".join(sorted(clauses, key=rank))


COMMAND_OUTPUT_LIMIT = 1_000_000  # bytes per stream: nvidia-smi/rocm-smi print a few kB
GPU_MEMORY_MAX_MIB = 2**31  # 2 PiB per GPU: a larger reading from nvidia-smi or rocm-smi is not a real one


def run_command(argv: Sequence[str], timeout: float) -> Dict[str, Any]:
    """Run a command with a hard timeout and an output cap; the whole process group is killed on overrun.

    Returns ``{"status": ok|failed|timeout|too-large|not_found, "returncode", "stdout", "stderr", "seconds",
    "truncated"}`` (common.read.run_capped).
    """
    return run_capped(argv, timeout, COMMAND_OUTPUT_LIMIT).as_dict()


def fmt_mib(mib: Optional[int]) -> str:
    """Memory in MiB as text: whole GiB from 10 GiB up, MiB below, ``?`` when unknown."""
    if mib is None:
        return "?"
    return f"{mib / 1024:.0f} GiB" if mib >= 10240 else f"{mib} MiB"


def sanitize(value: Any, home: Optional[str], secrets: Sequence[str]) -> Any:
    """Mask the home directory as ``~`` and scrub secret values from every string of the report."""
    if isinstance(value, dict):
        return {k: sanitize(v, home, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [sanitize(v, home, secrets) for v in value]
    if isinstance(value, str):  # token shapes: every string again in dumps_strict/clean_tree (scrub_tree)
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        if home and home in value:
            value = re.sub(re.escape(home) + r"(?=/|$)", "~", value)
        return value
    return value
