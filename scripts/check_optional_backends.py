#!/usr/bin/env python3
"""Read-only readiness report for the TRL scaling backends on this machine.

Gathers facts without importing torch or any backend (a default run reads package metadata, a few
source files as text, and asks ``nvidia-smi``/``rocm-smi`` with a short timeout), derives version
compatibility from the installed TRL's own metadata, and judges each backend path
(``ddp`` ... ``async-grpo-lora``) as ready, limited or unavailable with the smallest next step.

Facts are gathered by small functions, judged by separate rule functions, and printed by renderers
(text or ``--json``). Standard library only; ``packaging`` and PyYAML are used when present.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # a diagnostic must not leave __pycache__ behind

import argparse  # noqa: E402
import ast  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import versions  # noqa: E402

SCHEMA_VERSION = 1
TOOL = "check_optional_backends"
DEFAULT_SMI_TIMEOUT = 5.0
DEFAULT_PROBE_TIMEOUT = 60.0
PROBE_WORKERS = 4
PROBE_ENV = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1", "TRANSFORMERS_OFFLINE": "1"}
ALLOWED_COMMANDS = ("nvidia-smi", "rocm-smi")

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
# TRL extras that map to backends, in report order.
TRL_BACKEND_EXTRAS = ("vllm", "peft", "deepspeed", "quantization", "liger", "kernels")

# Minimum Linux driver for each CUDA major: NVIDIA "CUDA Compatibility", minor version compatibility table
# (11.x >= 450.80.02, 12.x >= 525.60.13, 13.x >= 580).
CUDA_MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580"}
# AMD architectures with bf16 and with flash-attn's ROCm (CK) backend.
AMD_BF16_ARCHS = ("gfx908", "gfx90a", "gfx94", "gfx95", "gfx11", "gfx12")
AMD_FA2_ARCHS = ("gfx90a", "gfx942", "gfx950")

# Fallback tables, used only when the installed file that states the fact cannot be read.
# accelerate-1.15.0: accelerate/utils/dataclasses.py (DistributedType, ComputeEnvironment, PrecisionType) and
# accelerate/commands/config/config_args.py (BaseConfig/ClusterConfig fields).
ACCELERATE_TABLE_VERSION = "1.15.0"
ACCELERATE_DISTRIBUTED_TYPES = (
    "NO",
    "MULTI_CPU",
    "MULTI_GPU",
    "MULTI_NPU",
    "MULTI_MLU",
    "MULTI_SDAA",
    "MULTI_MUSA",
    "MULTI_XPU",
    "DEEPSPEED",
    "FSDP",
    "XLA",
    "MEGATRON_LM",
    "MULTI_HPU",
    "MULTI_NEURON",
)
ACCELERATE_SAGEMAKER_TYPES = ("NO", "DATA_PARALLEL", "MODEL_PARALLEL")
ACCELERATE_COMPUTE_ENVIRONMENTS = ("LOCAL_MACHINE", "AMAZON_SAGEMAKER")
ACCELERATE_PRECISIONS = ("no", "fp8", "fp16", "bf16")
ACCELERATE_CLUSTER_FIELDS = (
    "compute_environment",
    "distributed_type",
    "mixed_precision",
    "use_cpu",
    "debug",
    "num_processes",
    "machine_rank",
    "num_machines",
    "gpu_ids",
    "main_process_ip",
    "main_process_port",
    "rdzv_backend",
    "same_network",
    "main_training_function",
    "enable_cpu_affinity",
    "fp8_config",
    "deepspeed_config",
    "fsdp_config",
    "parallelism_config",
    "megatron_lm_config",
    "mpirun_config",
    "downcast_bf16",
    "tpu_name",
    "tpu_zone",
    "tpu_use_cluster",
    "tpu_use_sudo",
    "command_file",
    "commands",
    "tpu_vm",
    "tpu_env",
    "dynamo_config",
)
ACCELERATE_SAGEMAKER_FIELDS = (
    "compute_environment",
    "distributed_type",
    "mixed_precision",
    "use_cpu",
    "debug",
    "ec2_instance_type",
    "iam_role_name",
    "image_uri",
    "profile",
    "region",
    "num_machines",
    "gpu_ids",
    "base_job_name",
    "pytorch_version",
    "transformers_version",
    "py_version",
    "sagemaker_inputs_file",
    "sagemaker_metrics_file",
    "additional_args",
    "dynamo_config",
    "enable_cpu_affinity",
)

ENV_PREFIXES = ("CUDA_", "NCCL_", "VLLM_", "ACCELERATE_", "TORCH_", "TORCHELASTIC_", "PYTORCH_", "HIP_", "ROCR_")
ENV_NAMES = (
    "HF_HUB_OFFLINE",
    "HF_HOME",
    "HF_TOKEN",
    "HF_HUB_DISABLE_UPDATE_CHECK",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "XDG_CACHE_HOME",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ROLE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMP_NUM_THREADS",
    "DS_ACCELERATOR",
    "DS_BUILD_OPS",
    "BNB_CUDA_VERSION",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NNODES",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_ON_NODE",
    "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS",
    "SLURM_CPUS_PER_TASK",
    "SLURM_JOB_NODELIST",
)
SECRET_NAME_RE = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|AUTH|CREDENTIAL", re.IGNORECASE)
URL_CREDENTIALS_RE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<cred>[^/@\s:]*(?::[^/@\s]*)?)@")
HF_TOKEN_RE = re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")
REDACTED = "<redacted>"


# --------------------------------------------------------------------------------------------------------------
# Small utilities
# --------------------------------------------------------------------------------------------------------------


def new_finding(severity: str, code: str, message: str) -> Dict[str, str]:
    """A finding record: severity error|warning|info, a stable code, one sentence."""
    return {"severity": severity, "code": code, "message": message}


def first_line(text: str, limit: int = 240) -> str:
    """The first non-empty line of ``text``, shortened to ``limit`` characters."""
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def redact_value(value: str) -> str:
    """Remove credentials inside URLs and Hugging Face tokens from a value."""
    value = URL_CREDENTIALS_RE.sub(lambda m: m.group("scheme") + REDACTED + "@", value)
    return HF_TOKEN_RE.sub(REDACTED, value)


def read_text(path: str, limit: int = 4_000_000) -> Optional[str]:
    """A file's text (UTF-8 with replacement), or ``None`` when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


def version_tuple(text: Optional[str]) -> Tuple[int, ...]:
    """Leading numeric release parts of a version-like string ("550.54.15" -> (550, 54, 15))."""
    parts = []
    for piece in re.split(r"[.+-]", text or ""):
        if not piece.isdigit():
            break
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


def run_command(argv: Sequence[str], timeout: float) -> Dict[str, Any]:
    """Run a command with a hard timeout; the whole process group is killed on expiry.

    Returns ``{"status": ok|failed|timeout|not_found, "returncode", "stdout", "stderr", "seconds"}``.
    """
    import signal
    import subprocess

    start = time.monotonic()
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,  # communicate() closes it; no /dev/null open
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as error:
        return {"status": "not_found", "returncode": None, "stdout": "", "stderr": str(error), "seconds": 0.0}
    try:
        out, err = process.communicate(timeout=timeout)
        status = "ok" if process.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (OSError, AttributeError):
            process.kill()
        try:
            out, err = process.communicate(timeout=2)
        except subprocess.TimeoutExpired:  # a grandchild outside the group still holds the pipes
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
            process.wait(timeout=2)
            out, err = b"", b""
        status = "timeout"
    return {
        "status": status,
        "returncode": process.returncode,
        "stdout": out.decode("utf-8", errors="replace"),
        "stderr": err.decode("utf-8", errors="replace"),
        "seconds": round(time.monotonic() - start, 3),
    }


# --------------------------------------------------------------------------------------------------------------
# Packages: the same lookup importlib.metadata performs, done with one directory listing per sys.path entry
# --------------------------------------------------------------------------------------------------------------


class DistRecord:
    """One ``*.dist-info`` / ``*.egg-info`` folder found on sys.path."""

    def __init__(self, key: str, site: str, folder: str, path_order: int) -> None:
        self.key = key  # PEP 503 name from the folder name
        self.site = site
        self.folder = folder
        self.path = os.path.join(site, folder)
        self.path_order = path_order
        self._headers: Optional[Dict[str, List[str]]] = None
        self.problems: List[Dict[str, str]] = []

    @property
    def folder_version(self) -> Optional[str]:
        stem = re.sub(r"\.(dist|egg)-info$", "", self.folder)
        parts = stem.split("-")
        return parts[1] if len(parts) > 1 and parts[1] else None

    def headers(self) -> Dict[str, List[str]]:
        """Parsed METADATA headers (lower-case keys); problems are recorded, never raised."""
        if self._headers is None:
            self._headers = self._read_headers()
        return self._headers

    def _read_headers(self) -> Dict[str, List[str]]:
        if os.path.isfile(self.path):  # a legacy single-file egg-info
            candidates = [self.path]
        else:
            name = "METADATA" if self.folder.endswith(".dist-info") else "PKG-INFO"
            candidates = [os.path.join(self.path, name)]
        try:
            with open(candidates[0], "rb") as handle:
                raw = handle.read(4_000_000)
            if len(raw) == 4_000_000:  # a huge description: keep whole lines so the cut is not a decode error
                raw = raw[: raw.rfind(b"\n") + 1]
        except OSError as error:
            self.problems.append(
                {
                    "code": "metadata_unreadable",
                    "message": f"{self.folder}: metadata file unreadable ({error.strerror})",
                }
            )
            return {}
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            self.problems.append(
                {
                    "code": "metadata_not_utf8",
                    "message": (
                        f"{self.folder}/METADATA is not UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start}); "
                        "importlib.metadata raises on it, so libraries that read this version can crash at import"
                    ),
                }
            )
            text = raw.decode("utf-8", errors="replace")
        headers = parse_metadata_headers(text)
        if not headers.get("version"):
            self.problems.append(
                {"code": "metadata_corrupt", "message": f"{self.folder}/METADATA has no Version field (corrupt file?)"}
            )
        return headers

    def version(self) -> Optional[str]:
        values = self.headers().get("version")
        return values[0].strip() if values else None

    def requires(self) -> List[str]:
        return self.headers().get("requires-dist", [])

    def parsed(self, line: str) -> Optional[versions.Requirement]:
        """``versions.parse_requirement`` with a per-record cache (transformers lists ~200 lines)."""
        cache = self.__dict__.setdefault("_parsed", {})
        if line not in cache:
            cache[line] = versions.parse_requirement(line)
        return cache[line]

    def provides_extras(self) -> List[str]:
        return [versions.normalize_name(e) for e in self.headers().get("provides-extra", [])]


def parse_metadata_headers(text: str) -> Dict[str, List[str]]:
    """RFC 822 style headers of a METADATA file, up to the first blank line (lower-case keys)."""
    headers: Dict[str, List[str]] = {}
    last_key = None
    for line in text.splitlines():
        if not line.strip():
            break
        if line[0] in " \t" and last_key:
            headers[last_key][-1] += "\n" + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        last_key = key.strip().lower()
        headers.setdefault(last_key, []).append(value.strip())
    return headers


def scan_distributions(path_entries: Sequence[str]) -> Dict[str, List[DistRecord]]:
    """Map PEP 503 names to every metadata folder on ``path_entries``, in sys.path order."""
    found: Dict[str, List[DistRecord]] = {}
    seen_dirs = set()
    for order, entry in enumerate(path_entries):
        site = entry or os.getcwd()
        try:
            real = os.path.realpath(site)
        except OSError:
            continue
        if real in seen_dirs:
            continue
        seen_dirs.add(real)
        try:
            names = sorted(os.listdir(site))  # sorted: stable output when one folder holds two versions
        except OSError:
            continue
        for folder in names:
            if not (folder.endswith(".dist-info") or folder.endswith(".egg-info")):
                continue
            stem = folder.rsplit(".", 1)[0]
            key = versions.normalize_name(stem.split("-", 1)[0])
            found.setdefault(key, []).append(DistRecord(key, site, folder, order))
    return found


def zip_path_distributions(path_entries: Sequence[str], keys: Sequence[str]) -> Dict[str, List[str]]:
    """Versions of our packages inside zip files on sys.path, through importlib.metadata (rarely needed)."""
    zips = [p for p in path_entries if p and os.path.isfile(p)]
    if not zips:
        return {}
    result: Dict[str, List[str]] = {}
    try:
        import importlib.metadata as metadata

        for dist in metadata.distributions(path=zips):
            key = versions.normalize_name(dist.metadata.get("Name") or "")
            if key in keys:
                result.setdefault(key, []).append(dist.version)
    except Exception:
        return result
    return result


def find_module(name: str) -> Dict[str, Any]:
    """``importlib.util.find_spec`` for a top-level module, without importing it."""
    import importlib.util

    info: Dict[str, Any] = {"found": False, "location": None, "namespace": False, "error": None}
    try:
        spec = importlib.util.find_spec(name)
    except Exception as error:
        info["error"] = f"{type(error).__name__}: {first_line(str(error))}"
        return info
    if spec is None:
        return info
    info["found"] = True
    origin = spec.origin
    locations = list(spec.submodule_search_locations or [])
    if origin in (None, "namespace") and locations:
        info["namespace"] = True
        info["location"] = locations[0]
    elif origin and origin not in ("built-in", "frozen"):
        base = os.path.basename(origin)
        info["location"] = os.path.dirname(origin) if base.startswith("__init__.") else origin
    return info


def module_root(location: str) -> str:
    """The sys.path directory a module location was found under."""
    return os.path.dirname(location.rstrip(os.sep))


def providers_in_site(site: str, module: str) -> List[str]:
    """Distributions in ``site`` whose top_level.txt or RECORD names ``module`` (only used for odd installs)."""
    found = []
    try:
        names = sorted(os.listdir(site))
    except OSError:
        return found
    for folder in names:
        if not folder.endswith(".dist-info"):
            continue
        top = read_text(os.path.join(site, folder, "top_level.txt"), limit=100_000)
        if top is not None:
            if module in [line.strip() for line in top.splitlines()]:
                found.append(folder)
            continue
        record = read_text(os.path.join(site, folder, "RECORD"), limit=20_000_000) or ""
        if ("\n" + record).find(f"\n{module}/") >= 0 or ("\n" + record).find(f"\n{module}.py,") >= 0:
            found.append(folder)
    return found


def read_direct_url(record: DistRecord) -> Dict[str, Any]:
    """PEP 610 direct_url.json (editable flag, VCS commit), or {}."""
    text = read_text(os.path.join(record.path, "direct_url.json"), limit=100_000)
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def git_commit_near(location: Optional[str]) -> Optional[str]:
    """The commit of a git checkout that holds a package (what ``trl env`` prints), read from .git as text."""
    if not location:
        return None
    git_dir = os.path.join(os.path.dirname(location.rstrip(os.sep)), ".git")
    head = read_text(os.path.join(git_dir, "HEAD"), limit=1000)
    if not head:
        return None
    head = head.strip()
    if not head.startswith("ref:"):
        return head if re.fullmatch(r"[0-9a-f]{40}", head) else None
    ref = head[4:].strip()
    direct = read_text(os.path.join(git_dir, ref), limit=1000)
    if direct and re.fullmatch(r"[0-9a-f]{40}", direct.strip()):
        return direct.strip()
    for line in (read_text(os.path.join(git_dir, "packed-refs"), limit=5_000_000) or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == ref:
            return parts[0]
    return None


def gather_packages(
    path_entries: Sequence[str], dists: Dict[str, List[DistRecord]]
) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, DistRecord]]:
    """Facts per stack package, plus the metadata record chosen for each installed package."""
    zipped = zip_path_distributions(path_entries, [d for _, ds, _ in STACK for d in ds])
    packages: Dict[str, Dict[str, Any]] = {}
    chosen: Dict[str, DistRecord] = {}
    for pid, dist_names, modules in STACK:
        records = [r for name in dist_names for r in dists.get(name, [])]
        module_name, module = modules[0], find_module(modules[0])
        for candidate in modules[1:]:
            if module["found"]:
                break
            alternative = find_module(candidate)
            if alternative["found"]:
                module_name, module = candidate, alternative
        entry: Dict[str, Any] = {
            "dist": None,
            "version": None,
            "location": module["location"],
            "metadata_path": None,
            "module": module_name,
            "module_found": module["found"],
            "installed": False,
            "version_source": None,
            "editable": False,
            "git_commit": None,
            "other_distributions": [],
            "problems": [],
        }
        problems: List[Dict[str, str]] = entry["problems"]
        if module["error"]:
            problems.append(
                {"code": "find_spec_error", "message": f"find_spec({module_name!r}) raised {module['error']}"}
            )
        primary = None
        if records:
            # importlib.metadata semantics: candidate order first, then sys.path order.
            primary = records[0]
            chosen[pid] = primary
            entry["dist"] = primary.key
            entry["version"] = primary.version() or primary.folder_version
            entry["metadata_path"] = primary.path
            problems.extend(primary.problems)
            entry["version_source"] = "metadata" if primary.version() else "folder name" if entry["version"] else None
            direct = read_direct_url(primary)
            entry["editable"] = bool((direct.get("dir_info") or {}).get("editable"))
            commit = (direct.get("vcs_info") or {}).get("commit_id")
            if commit:
                entry["git_commit"] = commit
            if len(records) > 1:
                listing = ", ".join(f"{r.key} {r.version() or r.folder_version or '?'} ({r.folder})" for r in records)
                problems.append(
                    {
                        "code": "multiple_distributions",
                        "message": f"{len(records)} distributions provide {module_name}: {listing}; the "
                        "first is reported here, and which one importlib.metadata returns depends on path order",
                    }
                )
                entry["other_distributions"] = [
                    {"dist": r.key, "version": r.version() or r.folder_version, "metadata_path": r.path}
                    for r in records[1:]
                ]
        elif any(d in zipped for d in dist_names):
            for name in dist_names:
                if zipped.get(name):
                    entry["dist"], entry["version"] = name, zipped[name][0]
        entry["installed"] = bool(entry["dist"]) or module["found"]
        if module["namespace"] and not records:
            entry["installed"] = False
            problems.append(
                {
                    "code": "namespace_leftover",
                    "message": f"{module_name} resolves to a directory without __init__.py and no metadata "
                    "(leftover of an uninstall?)",
                }
            )
        elif module["found"] and not records and not entry["dist"]:
            providers = providers_in_site(module_root(module["location"]), module_name) if module["location"] else []
            detail = f" (files listed by {', '.join(providers)})" if providers else ""
            problems.append(
                {
                    "code": "module_without_metadata",
                    "message": f"{module_name} is importable but has no {dist_names[0]} metadata{detail}; "
                    "version checks that read metadata will not see it",
                }
            )
            entry["installed"] = True
        elif records and not module["found"]:
            problems.append(
                {
                    "code": "metadata_without_module",
                    "message": f"{entry['dist']} {entry['version'] or ''} metadata is present but module "
                    f"{module_name} is not importable (broken or partial install)".replace("  ", " "),
                }
            )
        elif records and module["found"] and module["location"] and not entry["editable"]:
            site_of_module = os.path.realpath(module_root(module["location"]))
            if site_of_module != os.path.realpath(primary.site):
                problems.append(
                    {
                        "code": "shadowed",
                        "message": f"{module_name} imports from {module['location']} but its metadata "
                        f"({entry['version']}) is in {primary.site}",
                    }
                )
        if pid == "trl" and module["location"] and not entry["git_commit"]:
            commit = git_commit_near(module["location"])
            if commit:
                entry["git_commit"] = commit
        packages[pid] = entry
    return packages, chosen


# --------------------------------------------------------------------------------------------------------------
# Builds read from installed files as text
# --------------------------------------------------------------------------------------------------------------


def literal_assignments(source: str, names: Sequence[str]) -> Dict[str, Any]:
    """Top-level ``NAME = <literal>`` assignments of a Python source, read with ``ast`` (no import)."""
    result: Dict[str, Any] = {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return result
    for node in tree.body:
        targets: List[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in names:
                try:
                    result[target.id] = ast.literal_eval(value)
                except (ValueError, SyntaxError, TypeError):
                    continue
    return result


def torch_build(packages: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """CUDA / ROCm / XPU / CPU build of the installed torch, from ``torch/version.py`` parsed with ``ast``."""
    entry = packages["torch"]
    build: Dict[str, Any] = {
        "version": entry["version"],
        "cuda": None,
        "hip": None,
        "xpu": None,
        "kind": "unknown",
        "git_version": None,
        "source": "not installed",
    }
    location = entry["location"]
    if not entry["installed"]:
        return build
    if not location or not os.path.isdir(location):
        build["source"] = "torch module not found"
        return build
    path = os.path.join(location, "version.py")
    text = read_text(path)
    if text is None:
        build["source"] = "torch/version.py unreadable"
        return build
    values = literal_assignments(text, ("__version__", "cuda", "hip", "xpu", "git_version"))
    if "__version__" not in values:
        build["source"] = "torch/version.py unparsable"
        return build
    build["source"] = "torch/version.py (ast)"
    build["version"] = values.get("__version__") or entry["version"]
    for key in ("cuda", "hip", "xpu", "git_version"):
        value = values.get(key)
        build[key] = str(value) if value else None
    if build["hip"]:
        build["kind"] = "rocm"
    elif build["cuda"]:
        build["kind"] = "cuda"
    elif build["xpu"]:
        build["kind"] = "xpu"
    else:
        build["kind"] = "cpu"
    return build


def nccl_wheels(dists: Dict[str, List[DistRecord]]) -> Dict[str, Optional[str]]:
    """Versions of the nvidia-nccl-cu* / rccl wheels that torch loads NCCL from."""
    return {key: records[0].version() for key, records in sorted(dists.items()) if key.startswith("nvidia-nccl-cu")}


def cuda_toolkit() -> Dict[str, Any]:
    """Where ``nvcc`` is and which toolkit version it belongs to (``version.json``; nvcc is not run)."""
    nvcc = shutil.which("nvcc")
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else home
    version = None
    if root:
        text = read_text(os.path.join(root, "version.json"), limit=200_000)
        if text:
            try:
                version = json.loads(text).get("cuda", {}).get("version")
            except (ValueError, AttributeError):
                version = None
    return {"nvcc": nvcc, "cuda_home": home, "version": version}


def deepspeed_build(packages: Dict[str, Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Prebuilt ops and build-time torch of DeepSpeed, from ``git_version_info_installed.py`` (ast)."""
    location = packages["deepspeed"]["location"]
    if not location:
        return None
    text = read_text(os.path.join(location, "git_version_info_installed.py"), limit=200_000)
    if text is None:
        return {"source": "git_version_info_installed.py missing", "installed_ops": None}
    values = literal_assignments(text, ("installed_ops", "accelerator_name", "torch_info", "git_hash"))
    ops = values.get("installed_ops") if isinstance(values.get("installed_ops"), dict) else None
    return {
        "source": "deepspeed/git_version_info_installed.py (ast)",
        "installed_ops": sorted(k for k, v in ops.items() if v) if ops is not None else None,
        "accelerator_name": values.get("accelerator_name"),
        "torch_info": values.get("torch_info"),
    }


def bnb_native_libraries(packages: Dict[str, Dict[str, Any]]) -> List[str]:
    """Native library names shipped in the bitsandbytes folder (``libbitsandbytes_cuda128.so`` ...)."""
    location = packages["bitsandbytes"]["location"]
    try:
        return sorted(n for n in os.listdir(location) if n.startswith("libbitsandbytes_")) if location else []
    except OSError:
        return []


# --------------------------------------------------------------------------------------------------------------
# Compatibility derived from installed metadata and from gates TRL and its dependencies state in code
# --------------------------------------------------------------------------------------------------------------


def _unversioned(packages: Dict[str, Dict[str, Any]], dist_key: str) -> bool:
    pid = DIST_TO_ID.get(dist_key)
    return bool(pid and packages[pid]["installed"] and not packages[pid]["version"])


def _installed_version(packages: Dict[str, Dict[str, Any]], dist_key: str) -> Optional[str]:
    pid = DIST_TO_ID.get(dist_key)
    return packages[pid]["version"] if pid and packages[pid]["dist"] else None


def _compat_row(
    subject: str,
    specifier: str,
    required_by: str,
    installed: Optional[str],
    source: str,
    kind: str,
    extra: Optional[str] = None,
    status: Optional[str] = None,
    note: str = "",
    unversioned: bool = False,
) -> Dict[str, Any]:
    """One compatibility row; ``unversioned`` marks a subject that is importable but has no metadata."""
    if status is None:
        if installed is None:
            status = "missing"
        else:
            verdict = versions.specifier_contains(specifier, installed)
            status = "unknown" if verdict is None else ("ok" if verdict else "outside")
    if installed is None and unversioned:
        status, note = "unknown", note or "importable, but there is no metadata to read its version from"
    return {
        "subject": subject,
        "requirement": display_specifier(specifier),
        "required_by": required_by,
        "installed": installed,
        "status": status,
        "source": source,
        "kind": kind,
        "extra": extra,
        "note": note,
    }


def extra_requirements(record: DistRecord, extra: str) -> List[versions.Requirement]:
    """Requires-Dist lines active for ``extra`` but not for the base install."""
    wanted = versions.normalize_name(extra)
    result = []
    spellings = {extra, wanted, wanted.replace("-", "_")}
    for line in record.requires():
        marker = line.partition(";")[2]
        if not any(f'"{name}"' in marker or f"'{name}'" in marker for name in spellings):
            continue
        req = record.parsed(line)
        if req is None or wanted not in versions.marker_extras(req.marker):
            continue
        if req.applies(extra=wanted) and not req.applies(extra=None):
            result.append(req)
    return result


def compatibility(
    packages: Dict[str, Dict[str, Any]], chosen: Dict[str, DistRecord], findings: List[Dict[str, str]]
) -> List[Dict[str, Any]]:
    """Rows for TRL's backend extras (nested extras resolved), base pins of installed packages, and code gates."""
    rows: List[Dict[str, Any]] = []
    trl = chosen.get("trl")
    if trl is not None:
        trl_label = f"trl {packages['trl']['version']}"
        for extra in TRL_BACKEND_EXTRAS:
            if extra not in trl.provides_extras():
                findings.append(
                    new_finding("info", "extra_absent", f"{trl_label} declares no extra [{extra}] in its metadata")
                )
                continue
            _expand_extra(trl, trl_label, extra, extra, packages, chosen, rows, findings, depth=0)
    for pid, record in chosen.items():
        label = f"{pid} {packages[pid]['version']}"
        for line in record.requires():
            head = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
            if not head or versions.normalize_name(head.group(1)) not in DIST_TO_ID:
                continue
            req = record.parsed(line)
            if req is None or req.key not in DIST_TO_ID or req.applies(extra=None) is not True:
                continue
            rows.append(
                _compat_row(
                    req.key,
                    req.specifier,
                    label,
                    _installed_version(packages, req.key),
                    f"{record.folder}/METADATA Requires-Dist",
                    "dependency",
                    unversioned=_unversioned(packages, req.key),
                )
            )
    rows.extend(code_gates(packages))
    order = {"outside": 0, "missing": 1, "unknown": 2, "ok": 3}
    rows.sort(key=lambda r: (order.get(r["status"], 9), r["subject"], r["required_by"], r["requirement"]))
    return rows


def _expand_extra(
    record: DistRecord,
    owner_label: str,
    extra: str,
    trl_extra: str,
    packages: Dict[str, Dict[str, Any]],
    chosen: Dict[str, DistRecord],
    rows: List[Dict[str, Any]],
    findings: List[Dict[str, str]],
    depth: int,
) -> None:
    for req in extra_requirements(record, extra):
        installed = _installed_version(packages, req.key)
        rows.append(
            _compat_row(
                req.key,
                req.specifier,
                f"{owner_label} [{extra}]",
                installed,
                f"{record.folder}/METADATA Requires-Dist",
                "extra",
                extra=trl_extra,
                unversioned=_unversioned(packages, req.key),
            )
        )
        if not req.extras or depth > 2:
            continue
        nested = chosen.get(DIST_TO_ID.get(req.key, ""))
        if nested is None:
            continue
        nested_label = f"{DIST_TO_ID[req.key]} {installed}"
        for sub_extra in req.extras:
            if versions.normalize_name(sub_extra) not in nested.provides_extras():
                findings.append(
                    new_finding(
                        "info",
                        "nested_extra_absent",
                        f"{owner_label} [{extra}] asks for {req.key}[{sub_extra}], but {nested_label} declares no "
                        f"such extra; pip ignores it",
                    )
                )
                continue
            _expand_extra(nested, nested_label, sub_extra, trl_extra, packages, chosen, rows, findings, depth + 1)


# Gates stated in code, read from the installed file when possible. Each has the upstream file and the version
# the regular expression was written against; the fallback applies only to exactly that owner version.
CODE_GATES: Tuple[Dict[str, Any], ...] = (
    {
        "owner": "trl",
        "file": "import_utils.py",
        "pattern": r'Version\("([^"]+)"\)\s*<=\s*_vllm_base_version\s*<=\s*Version\("([^"]+)"\)',
        "subject": "vllm",
        "build": lambda g: f">={g[0]},<={g[1]}",
        "compare_base": True,
        "purpose": "runtime range check (warns outside it)",
        "fallback": {
            "1.16.0": (">=0.22.0,<=0.31.0",),
            "1.14.0": (">=0.20.0,<=0.30.0",),
            "1.10.0": (">=0.17.0,<=0.26.0",),
        },
        "checked": "trl-1.16.0 trl/import_utils.py is_vllm_available",
    },
    {
        "owner": "trl",
        "file": "import_utils.py",
        "pattern": r'^LIGER_KERNEL_MIN_VERSION\s*=\s*"([^"]+)"',
        "subject": "liger-kernel",
        "build": lambda g: f">={g[0]}",
        "purpose": "is_liger_kernel_available(): older liger-kernel counts as not available",
        "fallback": {"1.16.0": (">=0.8.2",), "1.14.0": (">=0.8.2",), "1.10.0": (">=0.8.0",)},
        "checked": "trl-1.16.0 trl/import_utils.py LIGER_KERNEL_MIN_VERSION",
    },
    {
        "owner": "trl",
        "file": "trainer/utils.py",
        "pattern": r'use_kernels"\)\s*and\s*Version\("([^"]+)"\)\s*<=\s*Version\(transformers\.__version__\)\s*<\s*'
        r'Version\("([^"]+)"\)',
        "subject": "transformers",
        "build": lambda g: f"<{g[0]} or >={g[1]}",
        "purpose": "use_kernels=True raises ValueError inside this range",
        "fallback": {"1.16.0": ("<5.2.0 or >=5.4.0",)},
        "checked": "trl-1.16.0 trl/trainer/utils.py create_model_from_path",
    },
    {
        "owner": "transformers",
        "file": "utils/import_utils.py",
        "pattern": r'^BITSANDBYTES_MIN_VERSION\s*=\s*"([^"]+)"',
        "subject": "bitsandbytes",
        "build": lambda g: f">={g[0]}",
        "purpose": "is_bitsandbytes_available(): older bitsandbytes counts as not available",
        "fallback": {"5.24.0": (">=0.46.1",)},
        "checked": "transformers-5.24.0 transformers/utils/import_utils.py BITSANDBYTES_MIN_VERSION",
    },
    {
        "owner": "transformers",
        "file": "utils/import_utils.py",
        "pattern": r'^KERNELS_MIN_VERSION\s*=\s*"([^"]+)"\s*\n\s*KERNELS_MAX_VERSION\s*=\s*"([^"]+)"',
        "subject": "kernels",
        "build": lambda g: f">={g[0]},<{g[1]}",
        "purpose": "is_kernels_available(): Hub kernels are used only inside this range",
        "fallback": {"5.24.0": (">=0.18.2,<0.19.0",)},
        "checked": "transformers-5.24.0 transformers/utils/import_utils.py KERNELS_MIN_VERSION/KERNELS_MAX_VERSION",
    },
    {
        "owner": "transformers",
        "file": "utils/import_utils.py",
        "pattern": r"def is_flash_attn_2_available[\s\S]{0,1200}?version\.parse\(flash_attn_version\)\s*>=\s*"
        r'version\.parse\("([^"]+)"\)',
        "subject": "flash-attn",
        "build": lambda g: f">={g[0]}",
        "purpose": "is_flash_attn_2_available(): older flash-attn counts as not available",
        "fallback": {"5.24.0": (">=2.3.3",)},
        "checked": "transformers-5.24.0 transformers/utils/import_utils.py is_flash_attn_2_available",
    },
    {
        "owner": "accelerate",
        "file": "utils/constants.py",
        "pattern": r'^FSDP2_PYTORCH_VERSION\s*=\s*"([^"]+)"',
        "subject": "torch",
        "build": lambda g: f">={g[0]}",
        "purpose": "FSDP2 (fsdp_version: 2) raises ImportError on older torch",
        "fallback": {"1.15.0": (">=2.6.0",)},
        "checked": "accelerate-1.15.0 accelerate/utils/constants.py FSDP2_PYTORCH_VERSION",
    },
)


def _range_exclusion_check(spec: str, installed: str) -> Optional[bool]:
    """Evaluate ``<A or >=B`` (a range exclusion that one PEP 440 specifier cannot state)."""
    results = [versions.specifier_contains(part.strip(), installed) for part in spec.split(" or ")]
    if any(r is True for r in results):
        return True
    return None if any(r is None for r in results) else False


def code_gates(packages: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Rows for version gates that upstream states only in code (see CODE_GATES)."""
    rows = []
    sources: Dict[str, Optional[str]] = {}
    for gate in CODE_GATES:
        owner = packages[gate["owner"]]
        if not owner["installed"] or not owner["location"]:
            continue
        path = os.path.join(owner["location"], gate["file"])
        if path not in sources:
            sources[path] = read_text(path)
        text = sources[path]
        match = re.search(gate["pattern"], text or "", re.MULTILINE)
        owner_version = owner["version"] or "?"
        if match:
            spec = gate["build"](match.groups())
            source = f"{gate['owner']}/{gate['file']} (installed source; written against {gate['checked']})"
        elif versions.base_version(owner_version or "") in gate["fallback"]:
            spec = gate["fallback"][versions.base_version(owner_version)][0]
            source = f"table: {gate['checked']}"
        else:
            continue
        subject_pid = DIST_TO_ID[gate["subject"]]
        installed = packages[subject_pid]["version"] if packages[subject_pid]["installed"] else None
        compared = installed
        if installed and gate.get("compare_base"):
            compared = versions.base_version(installed) or installed
        status = None
        if installed is not None and " or " in spec:
            verdict = _range_exclusion_check(spec, compared or "")
            status = "unknown" if verdict is None else ("ok" if verdict else "outside")
        elif installed is not None:
            verdict = versions.specifier_contains(spec, compared or "")
            status = "unknown" if verdict is None else ("ok" if verdict else "outside")
        row = _compat_row(
            gate["subject"],
            spec,
            f"{gate['owner']} {owner_version} (code)",
            installed,
            source,
            "gate",
            status=status,
            note=gate["purpose"],
            unversioned=_unversioned(packages, gate["subject"]),
        )
        if " or " in spec:
            row["requirement"] = spec
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------------------------
# Accelerators (nvidia-smi / rocm-smi; no CUDA context) and *_VISIBLE_DEVICES
# --------------------------------------------------------------------------------------------------------------

NVIDIA_FIELDS = ("index", "uuid", "name", "memory.total", "memory.used", "memory.free", "driver_version", "compute_cap")


def _na(value: str) -> Optional[str]:
    value = value.strip()
    return None if not value or value.startswith("[") or value.upper() in ("N/A", "NA") else value


def parse_nvidia_csv(text: str, fields: Sequence[str]) -> Tuple[Optional[List[Dict[str, Any]]], str]:
    """Parse ``--format=csv,noheader,nounits`` output; ``(None, reason)`` when it does not fit."""
    import csv

    gpus = []
    for row in csv.reader([line for line in text.splitlines() if line.strip()], skipinitialspace=True):
        if len(row) != len(fields):
            return None, f"expected {len(fields)} fields, got {len(row)}: {first_line(','.join(row), 120)!r}"
        values = dict(zip(fields, (cell.strip() for cell in row)))
        try:
            index = int(values["index"])
            total = int(float(_na(values["memory.total"]) or "nan")) if _na(values["memory.total"]) else None
            used = int(float(values["memory.used"])) if _na(values["memory.used"]) else None
            free = int(float(values["memory.free"])) if _na(values["memory.free"]) else None
        except ValueError:
            return None, f"non-numeric field in: {first_line(','.join(row), 120)!r}"
        capability = _na(values.get("compute_cap", "")) if "compute_cap" in values else None
        if capability is not None and not re.fullmatch(r"\d+\.\d+", capability):
            return None, f"unexpected compute capability {capability!r}"
        if free is None and total is not None and used is not None:
            free = total - used
        gpus.append(
            {
                "index": index,
                "uuid": _na(values["uuid"]),
                "vendor": "nvidia",
                "name": values["name"],
                "memory_total_mib": total,
                "memory_used_mib": used,
                "memory_free_mib": free,
                "compute_capability": capability,
                "driver": _na(values["driver_version"]),
            }
        )
    return gpus, ""


def query_nvidia(timeout: float) -> Tuple[Dict[str, str], List[Dict[str, Any]]]:
    """GPU list from ``nvidia-smi --query-gpu``; the tool's own error text is kept."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {"status": "not_found", "detail": "nvidia-smi is not on PATH"}, []
    fields = list(NVIDIA_FIELDS)
    result: Dict[str, Any] = {}
    for _attempt in range(2):
        argv = [exe, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
        result = run_command(argv, timeout)
        combined = (result["stdout"] + "\n" + result["stderr"]).strip()
        if result["status"] == "failed" and "compute_cap" in fields and "not a valid field" in combined:
            fields.remove("compute_cap")  # drivers older than the compute_cap field
            continue
        break
    if result["status"] == "timeout":
        return {"status": "timeout", "detail": f"nvidia-smi did not answer within {timeout:g} s (wedged driver?)"}, []
    if result["status"] == "not_found":
        return {"status": "not_found", "detail": first_line(result["stderr"])}, []
    if result["status"] == "failed":
        message = first_line(result["stdout"]) or first_line(result["stderr"]) or "no message"
        return {"status": "failed", "detail": f"exit {result['returncode']}: {message}"}, []
    gpus, reason = parse_nvidia_csv(result["stdout"], fields)
    if gpus is None:
        return {"status": "unparsable", "detail": reason}, []
    detail = f"{len(gpus)} GPU(s)"
    if "compute_cap" not in fields:
        detail += "; driver does not report compute_cap"
    return {"status": "ok", "detail": detail}, gpus


def list_mig_devices(timeout: float) -> Dict[str, int]:
    """MIG UUID -> parent GPU index, from ``nvidia-smi -L`` (run only when a MIG UUID is selected)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {}
    result = run_command([exe, "-L"], timeout)
    mapping: Dict[str, int] = {}
    parent = None
    for line in result["stdout"].splitlines():
        gpu = re.match(r"\s*GPU (\d+):", line)
        if gpu:
            parent = int(gpu.group(1))
            continue
        mig = re.search(r"\(UUID:\s*(MIG-[^)\s]+)\)", line)
        if mig and parent is not None:
            mapping[mig.group(1)] = parent
    return mapping


def query_rocm(timeout: float) -> Tuple[Dict[str, str], List[Dict[str, Any]]]:
    """GPU list from ``rocm-smi --json`` (product name, VRAM, unique id, driver)."""
    exe = shutil.which("rocm-smi")
    if not exe:
        return {"status": "not_found", "detail": "rocm-smi is not on PATH"}, []
    argv = [exe, "--showproductname", "--showmeminfo", "vram", "--showuniqueid", "--showdriverversion", "--json"]
    result = run_command(argv, timeout)
    if result["status"] == "timeout":
        return {"status": "timeout", "detail": f"rocm-smi did not answer within {timeout:g} s"}, []
    if result["status"] != "ok":
        message = first_line(result["stderr"]) or first_line(result["stdout"]) or "no message"
        return {"status": "failed", "detail": f"exit {result['returncode']}: {message}"}, []
    gpus, reason = parse_rocm_json(result["stdout"])
    if gpus is None:
        return {"status": "unparsable", "detail": reason}, []
    return {"status": "ok", "detail": f"{len(gpus)} GPU(s)"}, gpus


def parse_rocm_json(text: str) -> Tuple[Optional[List[Dict[str, Any]]], str]:
    """Parse ``rocm-smi ... --json`` (keys differ between ROCm releases, so they are matched loosely)."""
    start = text.find("{")
    try:
        data = json.loads(text[start:]) if start >= 0 else None
    except ValueError as error:
        return None, f"not JSON ({error})"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    driver = None
    for key, value in data.items():
        if key.lower() == "system" and isinstance(value, dict):
            driver = next((str(v) for k, v in value.items() if "driver version" in k.lower()), None)
    gpus = []
    for key in sorted(data, key=lambda k: int(re.sub(r"\D", "", k) or 0)):
        match = re.fullmatch(r"card(\d+)", key)
        value = data[key]
        if not match or not isinstance(value, dict):
            continue
        fields = {k.lower(): str(v) for k, v in value.items()}

        def pick(*names: str, _fields: Dict[str, str] = fields) -> Optional[str]:
            for name in names:
                for field, content in _fields.items():
                    if name in field and content and content.upper() != "N/A":
                        return content
            return None

        def mib(text_value: Optional[str]) -> Optional[int]:
            try:
                return int(int(text_value) / 1048576) if text_value is not None else None
            except ValueError:
                return None

        total = mib(pick("vram total memory (b)"))
        used = mib(pick("vram total used memory (b)"))
        unique = pick("unique id")
        arch = pick("gfx version")
        gpus.append(
            {
                "index": int(match.group(1)),
                "uuid": unique,
                "vendor": "amd",
                "name": pick("card series", "device name", "card model", "card sku") or "AMD GPU",
                "memory_total_mib": total,
                "memory_used_mib": used,
                "memory_free_mib": (total - used) if total is not None and used is not None else None,
                "compute_capability": None,
                "arch": arch.lower() if arch else None,
                "driver": driver or pick("driver version"),
            }
        )
    if not gpus:
        return None, "no cardN entries"
    return gpus, ""


def _strtoul(text: str) -> int:
    """torch's reading of one CUDA_VISIBLE_DEVICES entry: leading digits, or -1."""
    match = re.match(r"[+-]?\d+", text)
    return int(match.group(0)) if match else -1


def resolve_visible(
    raw: Optional[str],
    count: Optional[int],
    uuids: Sequence[Optional[str]],
    mig_parents: Optional[Dict[str, int]] = None,
) -> Tuple[Optional[List[int]], List[str]]:
    """Which physical GPU indices a ``CUDA_VISIBLE_DEVICES``-style value selects, with notes.

    Mirrors torch 2.13.0 ``torch/cuda/__init__.py`` (``_parse_visible_devices``, ``_transform_uuid_to_ordinals``,
    ``_device_count_nvml``): entries are read up to the first invalid one; a repeated entry selects nothing; an
    ordinal beyond the device count ends the list; UUIDs match by unique prefix.
    """
    notes: List[str] = []
    if raw is None:
        return (list(range(count)) if count is not None else None), ["unset: every GPU is visible"]
    if raw.strip() == "":
        return [], ["set but empty: no GPU is visible"]
    entries = raw.split(",")
    if raw.startswith(("GPU-", "MIG-")):
        prefix = raw[:4]
        selected: List[str] = []
        for entry in entries:
            if entry in selected:
                return [], [f"{entry} is listed twice: CUDA then sees no GPU"]
            if not entry.startswith(prefix):
                notes.append(f"stops at {entry!r}: every entry must start with {prefix}")
                break
            selected.append(entry)
        indices: List[int] = []
        for entry in selected:
            if prefix == "MIG-":
                parents = mig_parents or {}
                hits = sorted({p for uuid, p in parents.items() if uuid.startswith(entry)})
                if len(hits) != 1:
                    notes.append(f"stops at {entry[:16]}...: no unique MIG device with that UUID")
                    break
                if hits[0] not in indices:
                    indices.append(hits[0])
                notes.append(f"{entry[:16]}... is a MIG slice of GPU {hits[0]} (its memory is a fraction of the GPU)")
                continue
            matches = [i for i, uuid in enumerate(uuids) if uuid and uuid.startswith(entry)]
            if len(matches) != 1:
                reason = "matches several GPUs" if matches else "matches no GPU"
                notes.append(f"stops at {entry[:20]}: UUID prefix {reason}")
                break
            if matches[0] in indices:
                return [], [f"{entry[:20]} names GPU {matches[0]} twice: CUDA then sees no GPU"]
            indices.append(matches[0])
        return indices, notes
    ordinals: List[int] = []
    for entry in entries:
        value = _strtoul(entry.strip())
        if value in ordinals:
            return [], [f"ordinal {value} is listed twice: CUDA then sees no GPU"]
        if value < 0:
            notes.append(
                "-1 hides every GPU" if entry.strip() == "-1" and not ordinals else f"stops at invalid entry {entry!r}"
            )
            break
        ordinals.append(value)
    if count is not None:
        for position, value in enumerate(ordinals):
            if value >= count:
                notes.append(f"stops at {value}: only {count} GPU(s) exist, so later entries are ignored")
                ordinals = ordinals[:position]
                break
    return ordinals, notes


def resolve_amd_visible(env: Dict[str, str], gpus: List[Dict[str, Any]]) -> Tuple[Dict[str, Any], List[int]]:
    """ROCR_VISIBLE_DEVICES first, then HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES) on what ROCR left."""
    notes: List[str] = []
    pool = [g["index"] for g in gpus]
    uuids = [("GPU-" + g["uuid"].replace("0x", "")) if g.get("uuid") else None for g in gpus]
    names = []
    for variable in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        raw = env.get(variable)
        if raw is None:
            continue
        if variable == "CUDA_VISIBLE_DEVICES" and "HIP_VISIBLE_DEVICES" in env:
            notes.append("CUDA_VISIBLE_DEVICES ignored: HIP_VISIBLE_DEVICES takes precedence")
            continue
        names.append(f"{variable}={raw}")
        picked, step_notes = resolve_visible(raw, len(pool), [uuids[i] if i < len(uuids) else None for i in pool])
        notes.extend(f"{variable}: {n}" for n in step_notes)
        pool = [pool[i] for i in (picked or [])]
    if not names:
        notes.append("no ROCR/HIP/CUDA_VISIBLE_DEVICES: every GPU is visible")
    return {
        "variable": "ROCR_VISIBLE_DEVICES,HIP_VISIBLE_DEVICES,CUDA_VISIBLE_DEVICES",
        "raw": "; ".join(names) if names else None,
        "resolved": pool,
        "notes": notes,
    }, pool


def gpu_capabilities(gpu: Dict[str, Any]) -> None:
    """Add bf16 and FlashAttention-2 eligibility (NVIDIA: compute capability >= 8.0)."""
    if gpu["vendor"] == "nvidia":
        cc = version_tuple(gpu.get("compute_capability"))
        gpu["bf16"] = (cc >= (8, 0)) if cc else None
        gpu["flash_attn2_eligible"] = (cc >= (8, 0)) if cc else None
    else:
        arch = gpu.get("arch") or ""
        gpu["bf16"] = arch.startswith(AMD_BF16_ARCHS) if arch else None
        gpu["flash_attn2_eligible"] = arch.startswith(AMD_FA2_ARCHS) if arch else None


def gather_accelerators(env: Dict[str, str], timeout: float) -> Dict[str, Any]:
    """nvidia-smi and rocm-smi facts, the visible subset and totals."""
    nvidia_status, nvidia = query_nvidia(timeout)
    rocm_status, amd = query_rocm(timeout)
    gpus = nvidia + amd
    for gpu in gpus:
        gpu_capabilities(gpu)
    if nvidia or not amd:
        raw = env.get("CUDA_VISIBLE_DEVICES")
        mig = list_mig_devices(timeout) if raw and raw.startswith("MIG-") else None
        resolved, notes = resolve_visible(
            raw, len(nvidia) if nvidia_status["status"] == "ok" else None, [g["uuid"] for g in nvidia], mig
        )
        if nvidia_status["status"] != "ok" and raw is not None:
            notes.append("GPU list unavailable: entries are read, not checked against real devices")
        names = {g["name"] for g in nvidia}
        if len(names) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and raw:
            notes.append(
                "mixed GPU models: CUDA orders devices fastest first, nvidia-smi by PCI bus; set "
                "CUDA_DEVICE_ORDER=PCI_BUS_ID so ordinals match nvidia-smi indices"
            )
        visible_info = {"variable": "CUDA_VISIBLE_DEVICES", "raw": raw, "resolved": resolved, "notes": notes}
        visible_set = set(resolved or []) if resolved is not None else {g["index"] for g in nvidia}
        for gpu in nvidia:
            gpu["visible"] = gpu["index"] in visible_set
        for gpu in amd:
            gpu["visible"] = False
    else:
        visible_info, pool = resolve_amd_visible(env, amd)
        for gpu in amd:
            gpu["visible"] = gpu["index"] in pool
    visible = [g for g in gpus if g.get("visible")]
    return {
        "nvidia_smi": nvidia_status,
        "rocm_smi": rocm_status,
        "gpus": gpus,
        "visible_devices": visible_info,
        "summary": summarize_gpus(visible, len(gpus)),
    }


def summarize_gpus(visible: List[Dict[str, Any]], total_count: int) -> Dict[str, Any]:
    """Totals over the visible GPUs (memory in MiB, lowest compute capability)."""
    caps = [g["compute_capability"] for g in visible if g.get("compute_capability")]
    return {
        "gpu_count": total_count,
        "visible_count": len(visible),
        "vendor": visible[0]["vendor"] if visible else None,
        "memory_total_mib": sum(g["memory_total_mib"] or 0 for g in visible) if visible else 0,
        "memory_free_mib": sum(g["memory_free_mib"] or 0 for g in visible) if visible else 0,
        "min_compute_capability": min(caps, key=version_tuple) if caps else None,
        "all_bf16": all(g.get("bf16") for g in visible) if visible else False,
        "all_flash_attn2_eligible": all(g.get("flash_attn2_eligible") for g in visible) if visible else False,
    }


# --------------------------------------------------------------------------------------------------------------
# Launch context: accelerate default config and environment variables
# --------------------------------------------------------------------------------------------------------------


def accelerate_config_path(env: Dict[str, str]) -> str:
    """Where accelerate looks for its default config.

    accelerate-1.15.0 ``accelerate/commands/config/config_args.py``: ``$HF_HOME`` (default
    ``$XDG_CACHE_HOME/huggingface``, ``XDG_CACHE_HOME`` defaulting to ``~/.cache``) +
    ``accelerate/default_config.yaml``.
    In that release the JSON fallback name is also ``default_config.yaml``, and no environment variable names the
    file directly; ``accelerate launch --config_file`` does.
    """
    hf_home = env.get("HF_HOME", os.path.join(env.get("XDG_CACHE_HOME", "~/.cache"), "huggingface"))
    return os.path.join(os.path.expanduser(hf_home), "accelerate", "default_config.yaml")


def _accelerate_schema(packages: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """Valid distributed types and config fields, read from the installed accelerate when possible."""
    schema = {
        "distributed_types": ACCELERATE_DISTRIBUTED_TYPES,
        "cluster_fields": tuple(ACCELERATE_CLUSTER_FIELDS),
        "sagemaker_fields": tuple(ACCELERATE_SAGEMAKER_FIELDS),
        "source": f"table (accelerate {ACCELERATE_TABLE_VERSION})",
    }
    location = packages["accelerate"]["location"]
    if not location:
        return schema
    dataclasses_text = read_text(os.path.join(location, "utils", "dataclasses.py")) or ""
    block = re.search(r"class DistributedType\(str, enum\.Enum\):([\s\S]*?)\n(?:class |@)", dataclasses_text)
    config_text = read_text(os.path.join(location, "commands", "config", "config_args.py")) or ""
    fields = _dataclass_fields(config_text)
    if block and fields.get("ClusterConfig"):
        values = tuple(re.findall(r'^\s+[A-Z_0-9]+\s*=\s*"([A-Z_0-9]+)"', block.group(1), re.MULTILINE))
        if values:
            schema["distributed_types"] = values
            base = fields.get("BaseConfig", [])
            schema["cluster_fields"] = tuple(base + fields["ClusterConfig"])
            schema["sagemaker_fields"] = tuple(base + fields.get("SageMakerConfig", []))
            schema["source"] = f"installed accelerate {packages['accelerate']['version']}"
    return schema


def _dataclass_fields(source: str) -> Dict[str, List[str]]:
    fields: Dict[str, List[str]] = {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return fields
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            fields[node.name] = [
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            ]
    return fields


def read_accelerate_config(path: str, packages: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """Load and check an accelerate config the way ``load_config_from_file`` would, without raising."""
    info: Dict[str, Any] = {"path": path, "status": "not_found", "parser": None, "settings": {}, "problems": []}
    if not os.path.isfile(path):
        return info
    text = read_text(path, limit=1_000_000)
    if text is None:
        info["status"] = "malformed"
        info["problems"].append("file exists but cannot be read")
        return info
    data: Any = None
    try:
        if path.endswith(".json"):
            info["parser"] = "json"
            data = json.loads(text)
        else:
            import simple_yaml  # sibling module, imported only when there is a YAML config to read

            info["parser"] = "pyyaml" if simple_yaml.pyyaml_available() else "builtin (PyYAML not installed)"
            data, _parser = simple_yaml.load(text)
    except Exception as error:
        shown = error.__cause__ or error  # a YamlError from PyYAML: name PyYAML's own exception
        info["status"] = "malformed"
        info["problems"].append(f"{info['parser']} cannot parse it: {type(shown).__name__}: {first_line(str(shown))}")
        return info
    info["status"] = "found"
    if not isinstance(data, dict):
        info["status"] = "malformed"
        info["problems"].append(f"top level is {type(data).__name__}, not a mapping (accelerate calls .get on it)")
        return info
    schema = _accelerate_schema(packages)
    info["schema_source"] = schema["source"]
    environment = data.get("compute_environment", "LOCAL_MACHINE")
    dtype = data.get("distributed_type")
    fatal = []
    if environment not in ACCELERATE_COMPUTE_ENVIRONMENTS:
        fatal.append(f"compute_environment {environment!r} is not one of {', '.join(ACCELERATE_COMPUTE_ENVIRONMENTS)}")
    if "distributed_type" not in data:
        fatal.append("distributed_type is missing (accelerate requires it)")
    else:
        allowed = ACCELERATE_SAGEMAKER_TYPES if environment == "AMAZON_SAGEMAKER" else schema["distributed_types"]
        if isinstance(dtype, bool):
            fatal.append(
                f"distributed_type parsed as boolean {dtype} (YAML reads bare NO/yes as booleans); write it quoted, "
                "e.g. distributed_type: 'NO'"
            )
        elif dtype not in allowed:
            fatal.append(f"distributed_type {dtype!r} is not a valid value ({', '.join(allowed)})")
    known = schema["sagemaker_fields"] if environment == "AMAZON_SAGEMAKER" else schema["cluster_fields"]
    unknown = sorted(set(data) - set(known) - {"fp16", "dynamo_backend"}, key=str)  # YAML keys may be 1, true, null
    if unknown:
        fatal.append(f"unknown keys {unknown}: accelerate raises ValueError for them")
    precision = data.get("mixed_precision")
    if precision is not None and precision not in ACCELERATE_PRECISIONS:
        info["problems"].append(f"mixed_precision {precision!r} is not one of {', '.join(ACCELERATE_PRECISIONS)}")
    if fatal:
        info["status"] = "malformed"
        info["problems"] = fatal + info["problems"]
    info["settings"] = accelerate_key_settings(data)
    return info


def accelerate_key_settings(data: Dict[str, Any]) -> Dict[str, Any]:
    """The settings that decide topology and precision (nested FSDP/DeepSpeed keys flattened)."""
    keys = (
        "compute_environment",
        "distributed_type",
        "mixed_precision",
        "num_processes",
        "num_machines",
        "machine_rank",
        "gpu_ids",
        "use_cpu",
        "main_process_ip",
        "main_process_port",
        "rdzv_backend",
        "downcast_bf16",
    )
    settings = {k: data[k] for k in keys if k in data}
    fsdp = data.get("fsdp_config") or {}
    if isinstance(fsdp, dict):
        for key in (
            "fsdp_version",
            "fsdp_sharding_strategy",
            "fsdp_reshard_after_forward",
            "fsdp_offload_params",
            "fsdp_state_dict_type",
            "fsdp_activation_checkpointing",
            "fsdp_cpu_ram_efficient_loading",
        ):
            if key in fsdp:
                settings[key] = fsdp[key]
    deepspeed = data.get("deepspeed_config") or {}
    if isinstance(deepspeed, dict):
        for key in (
            "zero_stage",
            "offload_optimizer_device",
            "offload_param_device",
            "zero3_init_flag",
            "deepspeed_config_file",
        ):
            if key in deepspeed:
                settings["deepspeed." + key] = deepspeed[key]
    dynamo = data.get("dynamo_config") or {}
    if isinstance(dynamo, dict) and dynamo.get("dynamo_backend"):
        settings["dynamo_backend"] = dynamo["dynamo_backend"]
    return settings


def gather_env(env: Dict[str, str]) -> Tuple[Dict[str, str], List[str]]:
    """Relevant environment variables, secrets redacted; also returns the secret values to scrub from output."""
    selected: Dict[str, str] = {}
    secrets: List[str] = []
    for name in sorted(env):
        value = env[name]
        relevant = name.startswith(ENV_PREFIXES) or name in ENV_NAMES
        if SECRET_NAME_RE.search(name):
            if len(value) >= 4:
                secrets.append(value)
            if relevant or name.startswith(("HF_", "HUGGING")):
                selected[name] = REDACTED if value else ""
            continue
        if relevant:
            selected[name] = redact_value(value)
    for value in env.values():
        for match in URL_CREDENTIALS_RE.finditer(value):
            secrets.extend(
                part for part in (match.group("cred"), match.group("cred").partition(":")[2]) if len(part) >= 4
            )
        secrets.extend(HF_TOKEN_RE.findall(value))
    return selected, sorted(set(secrets), key=len, reverse=True)


# --------------------------------------------------------------------------------------------------------------
# Python interpreter and platform
# --------------------------------------------------------------------------------------------------------------


def python_facts() -> Dict[str, Any]:
    """Interpreter version, executable and environment kind (venv, uv, conda or system)."""
    kind = "system"
    cfg = read_text(os.path.join(sys.prefix, "pyvenv.cfg"), limit=100_000)
    if cfg is not None:
        kind = "uv" if re.search(r"^\s*uv\s*=", cfg, re.MULTILINE) else "venv"
    elif os.path.isdir(os.path.join(sys.prefix, "conda-meta")):
        kind = "conda"
    import importlib.util

    return {
        "version": ".".join(str(p) for p in sys.version_info[:3]),
        "implementation": sys.implementation.name,
        "executable": sys.executable,
        "prefix": sys.prefix,
        "kind": kind,
        "pip": importlib.util.find_spec("pip") is not None,
        "packaging": versions.HAVE_PACKAGING,
    }


def platform_facts() -> Dict[str, Any]:
    """OS, kernel release, machine and libc, without ``platform.uname().processor`` (it runs ``uname -p``)."""
    try:
        uname = os.uname()
        system, release, machine = uname.sysname, uname.release, uname.machine
    except AttributeError:  # Windows
        import platform

        system, release, machine = platform.system(), platform.release(), platform.machine()
    libc = ""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        libc = ""
    text = f"{system}-{release}-{machine}" + (f"-with-{libc.replace(' ', '')}" if libc else "")
    return {"system": system, "release": release, "machine": machine, "libc": libc or None, "platform": text}


# --------------------------------------------------------------------------------------------------------------
# Opt-in probes: each import in its own subprocess with a timeout
# --------------------------------------------------------------------------------------------------------------

PROBE_MARKER = "@@CHECK_OPTIONAL_BACKENDS@@"

IMPORT_PROBE_CODE = (
    r"""
import json, sys, time
sys.path[:] = json.loads(sys.argv[2])
name = sys.argv[1]
start = time.perf_counter()
result = {"importable": False, "error_type": None, "error": None, "version": None, "file": None}
try:
    module = __import__(name)
    result["importable"] = True
    result["version"] = str(getattr(module, "__version__", "") or "") or None
    result["file"] = getattr(module, "__file__", None)
except BaseException as error:
    result["error_type"] = type(error).__name__
    text = str(error).strip().splitlines()
    result["error"] = text[0][:300] if text else ""
result["seconds"] = round(time.perf_counter() - start, 3)
sys.stdout.write("\n"""
    + PROBE_MARKER
    + r"""" + json.dumps(result) + "\n")
sys.stdout.flush()
"""
)

TORCH_PROBE_CODE = (
    r"""
import json, sys, time
sys.path[:] = json.loads(sys.argv[1])
start = time.perf_counter()
result = {"importable": False}
try:
    import torch
    result["importable"] = True
    result["version"] = torch.__version__
    result["cuda_build"] = torch.version.cuda
    result["hip_build"] = getattr(torch.version, "hip", None)
    result["import_seconds"] = round(time.perf_counter() - start, 3)
    available = bool(torch.cuda.is_available())
    result["cuda_available"] = available
    result["device_count"] = torch.cuda.device_count() if available else 0
    devices = []
    for index in range(result["device_count"]):
        props = torch.cuda.get_device_properties(index)
        devices.append({
            "index": index,
            "name": props.name,
            "total_memory_mib": int(props.total_memory // 1048576),
            "compute_capability": "%d.%d" % (props.major, props.minor),
            "multi_processor_count": getattr(props, "multi_processor_count", None),
        })
    result["devices"] = devices
    dist = getattr(torch, "distributed", None)
    result["distributed_available"] = bool(dist is not None and dist.is_available())
    result["nccl_available"] = bool(result["distributed_available"] and dist.is_nccl_available())
    try:
        version = torch.cuda.nccl.version() if available else None
        result["nccl_version"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else version
    except Exception as error:
        result["nccl_version"] = None
        result["nccl_error"] = type(error).__name__ + ": " + str(error).splitlines()[0][:200]
    try:
        result["mps_available"] = bool(torch.backends.mps.is_available())
    except Exception:
        result["mps_available"] = False
    try:
        result["xpu_available"] = bool(hasattr(torch, "xpu") and torch.xpu.is_available())
    except Exception:
        result["xpu_available"] = False
except BaseException as error:
    result["error_type"] = type(error).__name__
    text = str(error).strip().splitlines()
    result["error"] = text[0][:300] if text else ""
result["seconds"] = round(time.perf_counter() - start, 3)
sys.stdout.write("\n"""
    + PROBE_MARKER
    + r"""" + json.dumps(result, default=str) + "\n")
sys.stdout.flush()
"""
)


def _interpreter_flags() -> List[str]:
    flags = []
    if sys.flags.isolated:
        flags.append("-I")
    else:
        if sys.flags.ignore_environment:
            flags.append("-E")
        if sys.flags.no_user_site:
            flags.append("-s")
    if sys.flags.no_site:
        flags.append("-S")
    return flags


def _probe_env() -> Dict[str, str]:
    env = dict(os.environ)
    env.update(PROBE_ENV)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _signal_name(code: int) -> str:
    import signal

    try:
        return signal.Signals(-code).name
    except (ValueError, AttributeError):
        return f"signal {-code}"


def run_probe(code: str, args: Sequence[str], timeout: float) -> Dict[str, Any]:
    """Run probe code in a fresh interpreter (same flags and sys.path); crashes and hangs become results."""
    import subprocess

    argv = [sys.executable, *_interpreter_flags(), "-c", code, *args]
    start = time.monotonic()
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,  # communicate() closes it; no /dev/null open
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_probe_env(),
            start_new_session=True,
        )
    except OSError as error:
        return {"status": "failed", "error": str(error), "wall_seconds": 0.0}
    import signal

    try:
        out, err = process.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (OSError, AttributeError):
            process.kill()
        try:
            out, err = process.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
    wall = round(time.monotonic() - start, 3)
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    tail = [line for line in stderr.strip().splitlines() if line.strip()][-3:]
    result: Dict[str, Any] = {"wall_seconds": wall, "stderr_tail": [t[:300] for t in tail]}
    payload = None
    for line in stdout.splitlines():
        if line.startswith(PROBE_MARKER):
            try:
                payload = json.loads(line[len(PROBE_MARKER) :])
            except ValueError:
                payload = None
    if timed_out:
        result.update({"status": "timeout", "error": f"no answer within {timeout:g} s (hang?)"})
    elif process.returncode is not None and process.returncode < 0:
        result.update(
            {"status": "crashed", "error": f"interpreter killed by {_signal_name(process.returncode)} during import"}
        )
    elif payload is None:
        result.update({"status": "failed", "error": f"exit {process.returncode} without a result"})
    else:
        result.update(payload)
        result["status"] = "ok" if payload.get("importable") else "import_error"
    return result


def probe_imports(targets: List[Tuple[str, str]], timeout: float, path_entries: Sequence[str]) -> List[Dict[str, Any]]:
    """Import each (package id, module) in its own subprocess, a few at a time."""
    from concurrent.futures import ThreadPoolExecutor

    path_json = json.dumps(list(path_entries))

    def one(target: Tuple[str, str]) -> Dict[str, Any]:
        pid, module = target
        result = run_probe(IMPORT_PROBE_CODE, [module, path_json], timeout)
        result.update({"package": pid, "module": module})
        result.setdefault("importable", False)
        return result

    workers = max(1, min(PROBE_WORKERS, len(targets), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, targets))


def probe_torch(timeout: float, path_entries: Sequence[str]) -> Dict[str, Any]:
    """Import torch in a subprocess and read torch.cuda device properties and NCCL (allocates nothing)."""
    return run_probe(TORCH_PROBE_CODE, [json.dumps(list(path_entries))], timeout)


# --------------------------------------------------------------------------------------------------------------
# Rules: readiness verdicts per backend
# --------------------------------------------------------------------------------------------------------------


class Context:
    """Facts the rules read, with small helpers."""

    def __init__(self, report: Dict[str, Any], chosen: Dict[str, DistRecord]) -> None:
        self.report = report
        self.packages: Dict[str, Dict[str, Any]] = report["packages"]
        self.rows: List[Dict[str, Any]] = report["compatibility"]
        self.build: Dict[str, Any] = report["torch_build"]
        self.accel: Dict[str, Any] = report["accelerators"]
        self.chosen = chosen
        self.probes = report.get("probes") or {}
        imports = self.probes.get("imports") or []
        self.import_results = {r["package"]: r for r in imports}
        self.installer = "pip install"
        python = report["python"]
        if python["kind"] == "uv" and not python["pip"]:
            self.installer = "uv pip install"
        config = report["launch"]["accelerate_config"]
        self.distributed_type = config["settings"].get("distributed_type") if config["status"] == "found" else None

    def pkg(self, pid: str) -> Dict[str, Any]:
        return self.packages[pid]

    def installed(self, pid: str) -> bool:
        return bool(self.packages[pid]["installed"])

    def label(self, pid: str) -> str:
        entry = self.packages[pid]
        return f"{pid} {entry['version']}" if entry["version"] else f"{pid} (no metadata)"

    def rows_for(self, subject: str, **match: Any) -> List[Dict[str, Any]]:
        return [r for r in self.rows if r["subject"] == subject and all(r.get(k) == v for k, v in match.items())]

    def gate(self, subject: str, owner: str) -> Optional[Dict[str, Any]]:
        for row in self.rows:
            if row["subject"] == subject and row["kind"] == "gate" and row["required_by"].startswith(owner + " "):
                return row
        return None

    def visible_gpus(self) -> List[Dict[str, Any]]:
        return [g for g in self.accel["gpus"] if g.get("visible")]

    def gpu_runtime(self) -> Tuple[Optional[str], List[Dict[str, Any]], str]:
        """(``cuda``/``rocm``/None, usable GPUs, explanation) for the installed torch build and visible GPUs."""
        kind = self.build["kind"]
        visible = self.visible_gpus()
        torch_probe = self.probes.get("torch") or {}
        if torch_probe.get("status") == "ok" and "cuda_available" in torch_probe:
            count = torch_probe.get("device_count") or 0
            if torch_probe.get("cuda_available") and count:
                runtime = "rocm" if torch_probe.get("hip_build") else "cuda"
                devices = torch_probe.get("devices") or []
                gpus = visible or [
                    {"index": d["index"], "name": d["name"], "compute_capability": d["compute_capability"]}
                    for d in devices
                ]
                return runtime, gpus, f"torch sees {count} GPU(s) (probed)"
            return None, [], "torch sees no GPU (probed: torch.cuda.is_available() is False)"
        if not self.installed("torch"):
            return None, [], "torch is not installed"
        vendor_gpus = {
            "cuda": [g for g in visible if g["vendor"] == "nvidia"],
            "rocm": [g for g in visible if g["vendor"] == "amd"],
        }
        if kind in ("cuda", "rocm"):
            gpus = vendor_gpus[kind]
            if gpus:
                build = f"CUDA {self.build['cuda']}" if kind == "cuda" else f"ROCm {self.build['hip']}"
                return kind, gpus, f"torch {self.build['version']} ({build})"
            listed = [g for g in self.accel["gpus"] if g["vendor"] == ("nvidia" if kind == "cuda" else "amd")]
            if listed:
                return None, [], f"{len(listed)} GPU(s) present but none visible ({self._visible_raw()})"
            smi = self.accel["nvidia_smi" if kind == "cuda" else "rocm_smi"]
            if smi["status"] == "not_found":
                return None, [], f"no GPU found ({'nvidia-smi' if kind == 'cuda' else 'rocm-smi'} not on PATH)"
            return None, [], f"no GPU found ({smi['status']}: {smi['detail']})"
        if kind == "cpu":
            if visible:
                return None, [], f"torch is a CPU-only build although {len(visible)} GPU(s) are visible"
            if sys.platform == "darwin":
                return None, [], "macOS: no CUDA or ROCm GPU (MPS only); these backends need CUDA or ROCm"
            return None, [], "no GPU found; torch is a CPU-only build"
        if kind == "xpu":
            return None, [], f"torch is an XPU build ({self.build['xpu']}); these verdicts assume CUDA or ROCm GPUs"
        return None, [], f"torch build unknown ({self.build['source']})"

    def _visible_raw(self) -> str:
        info = self.accel["visible_devices"]
        return f"{info['variable'].split(',')[0]}={info['raw']!r}" if info.get("raw") is not None else "visible devices"

    def import_state(self, pid: str) -> Tuple[Optional[bool], str]:
        """(True/False/None, text): the probe result, or None when not probed."""
        result = self.import_results.get(pid)
        if result is None:
            return None, "import not probed"
        if result.get("status") == "ok":
            return True, f"import {pid} ok ({result.get('seconds', result.get('wall_seconds'))} s)"
        reason = result.get("error") or result.get("status")
        if result.get("error_type"):
            reason = f"{result['error_type']}: {reason}"
        return False, f"import {result.get('module', pid)} failed: {reason}"

    def install(self, *specs: str) -> str:
        return self.installer + " " + " ".join(f'"{s}"' if any(c in s for c in "[]<>=!,") else s for s in specs)

    def trl_extra_install(self, extra: str, fallback: str) -> str:
        record = self.chosen.get("trl")
        if record is not None and extra in record.provides_extras():
            return self.install(f"trl[{extra}]")
        return self.install(fallback)


def _verdict(backend: str, status: str, evidence: List[str], next_step: Optional[str]) -> Dict[str, Any]:
    return {"id": backend, "status": status, "evidence": [e for e in evidence if e], "next_step": next_step}


def _package_state(
    ctx: Context, pid: str, extra: Optional[str], gates: Sequence[Tuple[str, str]] = ()
) -> Dict[str, Any]:
    """Whether a package is missing, broken, too old/new for TRL or a gate, or fine (plus evidence)."""
    entry = ctx.pkg(pid)
    state: Dict[str, Any] = {"ok": False, "blocking": None, "soft": [], "evidence": [], "next": None}
    leftover = [p for p in entry["problems"] if p["code"] == "namespace_leftover"]
    if leftover:
        state["blocking"] = leftover[0]["message"]
        install = ctx.trl_extra_install(extra, pid) if extra else ctx.install(pid)
        state["next"] = f"remove the folder {entry['location']}, then {install}"
        return state
    if not entry["installed"]:
        state["blocking"] = f"{pid} not installed"
        state["next"] = ctx.trl_extra_install(extra, pid) if extra else ctx.install(pid)
        return state
    hard_codes = {"metadata_without_module", "namespace_leftover", "find_spec_error"}
    for problem in entry["problems"]:
        if problem["code"] in hard_codes:
            state["blocking"] = problem["message"]
            state["next"] = (
                ctx.install("--force-reinstall", f"{entry['dist'] or pid}=={entry['version']}")
                if entry["version"]
                else ctx.install("--force-reinstall", pid)
            )
            return state
        state["soft"].append(problem["message"])
    state["evidence"].append(ctx.label(pid) if entry["version"] else f"{pid} importable without metadata")
    subject = entry["dist"] or DIST_TO_ID.get(pid, pid)
    if extra:
        for row in ctx.rows_for(subject, kind="extra", extra=extra):  # trl's own line, or a nested extra's
            if row["status"] == "outside":
                owner = "trl" if row["required_by"].startswith("trl ") else row["required_by"]
                state["soft"].append(
                    f"{pid} {row['installed']} is outside {owner}'s supported range {row['requirement']} "
                    f"({row['required_by']})"
                )
                state["next"] = ctx.trl_extra_install(extra, f"{subject}{row['requirement']}")
    extra_outside = bool(state["next"])
    for owner, severity in gates:
        row = ctx.gate(subject, owner)
        if row and row["status"] == "outside":
            owner_label = row["required_by"].replace(" (code)", "")
            text = f"{pid} {row['installed']} is outside {owner_label}'s gate {row['requirement']} ({row['note']})"
            if severity == "hard":
                state["blocking"] = text
                # trl[extra] fixes it only when the extra's own range is violated too; else name the gate's range.
                if extra and extra_outside:
                    state["next"] = ctx.trl_extra_install(extra, f"{subject}{row['requirement']}")
                elif " or " not in row["requirement"]:
                    state["next"] = ctx.install(f"{subject}{row['requirement']}")
                return state
            state["soft"].append(text)
    imported, text = ctx.import_state(pid)
    if imported is False:
        state["blocking"] = text
        spec = f"{entry['dist'] or pid}=={entry['version']}" if entry["version"] else (entry["dist"] or pid)
        state["next"] = f"read the import error; a reinstall often fixes it: {ctx.install('--force-reinstall', spec)}"
        return state
    state["evidence"].append(text)
    state["ok"] = True
    return state


def _pin_text(pid: str, row: Dict[str, Any]) -> str:
    if row["status"] == "missing":
        return f"{pid} requires {row['subject']}{row['requirement']}, which is not installed"
    return f"{pid} requires {row['subject']}{row['requirement']}, installed {row['installed']}"


def _pin_problems(ctx: Context, pid: str) -> List[Dict[str, Any]]:
    """Outside/missing rows for the base pins that an installed package declares on other stack packages."""
    label = f"{pid} {ctx.pkg(pid)['version']}"
    return [
        r
        for r in ctx.rows
        if r["kind"] == "dependency" and r["required_by"] == label and r["status"] in ("outside", "missing")
    ]


def _summarize_gpus(gpus: List[Dict[str, Any]]) -> str:
    if not gpus:
        return "no GPU"
    names: Dict[str, int] = {}
    for gpu in gpus:
        names[gpu.get("name") or "GPU"] = names.get(gpu.get("name") or "GPU", 0) + 1
    parts = [f"{count}x {name}" for name, count in names.items()]
    caps = sorted({g.get("compute_capability") for g in gpus if g.get("compute_capability")}, key=version_tuple)
    return ", ".join(parts) + (f" (cc {'/'.join(caps)})" if caps else "")


def judge_backends(ctx: Context) -> List[Dict[str, Any]]:
    """One verdict per backend id, in BACKEND_IDS order."""
    rules: Dict[str, Callable[[Context], Dict[str, Any]]] = {
        "ddp": rule_ddp,
        "fsdp2": rule_fsdp2,
        "deepspeed": rule_deepspeed,
        "peft": rule_peft,
        "qlora": rule_qlora,
        "liger": rule_liger,
        "hub-kernels": rule_hub_kernels,
        "flash-attn": rule_flash_attn,
        "unsloth": rule_unsloth,
        "vllm-colocate": rule_vllm_colocate,
        "vllm-server": rule_vllm_server,
        "async-grpo-lora": rule_async_grpo_lora,
    }
    verdicts = []
    for backend in BACKEND_IDS:
        try:
            verdicts.append(rules[backend](ctx))
        except Exception as error:
            verdicts.append(
                _verdict(backend, "limited", [f"rule failed: {type(error).__name__}: {first_line(str(error))}"], None)
            )
    return verdicts


def _blocked(ctx: Context, backend: str, evidence: List[str], next_step: Optional[str]) -> Dict[str, Any]:
    """An 'unavailable' verdict for a GPU-only backend; a missing GPU is named too, and joins the next step."""
    runtime, _, why = ctx.gpu_runtime()
    if runtime is None:
        evidence = [*evidence, why]
        next_step = f"{next_step}; then run where a CUDA or ROCm GPU is visible" if next_step else _torch_gpu_step(ctx)
    return _verdict(backend, "unavailable", evidence, next_step)


def _torch_first(ctx: Context, backend: str) -> Optional[Dict[str, Any]]:
    if not ctx.installed("torch"):
        return _verdict(backend, "unavailable", ["torch is not installed"], ctx.install("torch"))
    return None


def _torch_gpu_step(ctx: Context) -> str:
    if ctx.build["kind"] == "cpu" and ctx.visible_gpus():
        return "install a CUDA (or ROCm) build of torch that matches your driver (see pytorch.org/get-started)"
    return "run on a machine with a CUDA or ROCm GPU (or check CUDA_VISIBLE_DEVICES)"


def rule_ddp(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "ddp")
    if early:
        return early
    runtime, gpus, why = ctx.gpu_runtime()
    evidence = [why if runtime else ctx.label("torch"), "" if runtime else why]
    torch_probe = ctx.probes.get("torch") or {}
    if torch_probe.get("status") == "ok":
        evidence.append("NCCL available" if torch_probe.get("nccl_available") else "NCCL not available (probed)")
    if not ctx.installed("accelerate"):
        return _verdict(
            "ddp",
            "limited",
            [*evidence, "accelerate not installed (TRL launches through it)"],
            ctx.install("accelerate"),
        )
    evidence.append(ctx.label("accelerate"))
    if runtime is None:
        return _verdict("ddp", "limited", [*evidence, "CPU only: gloo backend, no NCCL"], _torch_gpu_step(ctx))
    if torch_probe.get("status") == "ok" and not torch_probe.get("nccl_available") and runtime == "cuda":
        return _verdict("ddp", "limited", evidence, "torch reports no NCCL: reinstall a CUDA build of torch")
    if len(gpus) < 2:
        return _verdict(
            "ddp",
            "limited",
            [*evidence, f"{_summarize_gpus(gpus)}: one process per GPU gives a single rank here"],
            "use 2+ GPUs (or several nodes) for data parallelism",
        )
    return _verdict(
        "ddp", "ready", [*evidence, _summarize_gpus(gpus), "torch import not probed" if not torch_probe else ""], None
    )


def rule_fsdp2(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "fsdp2")
    if early:
        return early
    if not ctx.installed("accelerate"):
        return _verdict("fsdp2", "unavailable", ["accelerate not installed"], ctx.install("accelerate"))
    evidence = [ctx.label("accelerate")]
    gate = ctx.gate("torch", "accelerate")
    if gate is None:
        return _verdict(
            "fsdp2",
            "unavailable",
            [*evidence, "this accelerate states no FSDP2 torch requirement (FSDP2 support missing?)"],
            ctx.install("-U", "accelerate"),
        )
    if gate["status"] == "outside":
        return _verdict(
            "fsdp2",
            "unavailable",
            [*evidence, f"FSDP2 needs torch {gate['requirement']} ({gate['source'].split(' (')[0]})"],
            ctx.install(f"torch{gate['requirement']}"),
        )
    evidence.append(f"torch {gate['installed']} meets FSDP2's {gate['requirement']}")
    runtime, gpus, why = ctx.gpu_runtime()
    evidence.append(why)
    if runtime is None:
        return _verdict("fsdp2", "unavailable", evidence, _torch_gpu_step(ctx))
    if ctx.distributed_type == "DEEPSPEED":
        evidence.append("accelerate default config selects DEEPSPEED; pass an FSDP config to accelerate launch")
    if len(gpus) < 2:
        return _verdict(
            "fsdp2", "limited", [*evidence, "1 GPU: nothing to shard across (CPU offload only)"], "use 2+ GPUs"
        )
    return _verdict("fsdp2", "ready", [*evidence, _summarize_gpus(gpus)], None)


def rule_deepspeed(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "deepspeed")
    if early:
        return early
    state = _package_state(ctx, "deepspeed", "deepspeed")
    if state["blocking"]:
        return _blocked(ctx, "deepspeed", [state["blocking"]], state["next"])
    evidence = list(state["evidence"])
    soft = list(state["soft"])
    for row in ctx.rows_for("transformers", kind="extra", extra="deepspeed"):
        if row["status"] == "outside":
            soft.append(f"transformers {row['installed']} is excluded by {row['required_by']} ({row['requirement']})")
    if not ctx.installed("accelerate"):
        return _verdict("deepspeed", "unavailable", [*evidence, "accelerate not installed"], ctx.install("accelerate"))
    build = ctx.report.get("deepspeed_build") or {}
    ops = build.get("installed_ops")
    if ops is not None:
        if ops:
            evidence.append(f"prebuilt ops: {', '.join(ops)}")
        else:
            tools = []
            toolkit = ctx.report["torch_build"].get("cuda_toolkit") or {}
            tools.append("nvcc found" if toolkit.get("nvcc") else "no nvcc")
            import importlib.util

            has_ninja = bool(shutil.which("ninja") or importlib.util.find_spec("ninja"))
            tools.append("ninja found" if has_ninja else "no ninja")
            evidence.append(f"no prebuilt ops: fused/CPU-offload optimizers compile on first use ({', '.join(tools)})")
            if not has_ninja:
                soft.append("ninja missing: DeepSpeed cannot JIT-compile ops (ZeRO-Offload's CPU Adam)")
    runtime, gpus, why = ctx.gpu_runtime()
    evidence.append(why)
    if runtime is None:
        return _verdict("deepspeed", "unavailable", evidence + soft, _torch_gpu_step(ctx))
    if soft:
        return _verdict("deepspeed", "limited", evidence + soft, state["next"] or ctx.install("ninja"))
    return _verdict("deepspeed", "ready", [*evidence, _summarize_gpus(gpus)], None)


def rule_peft(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "peft")
    if early:
        return early
    state = _package_state(ctx, "peft", "peft")
    if state["blocking"]:
        return _verdict("peft", "unavailable", [state["blocking"]], state["next"])
    evidence = list(state["evidence"])
    pins = _pin_problems(ctx, "peft")
    soft = state["soft"] + [_pin_text("peft", r) for r in pins]
    runtime, gpus, why = ctx.gpu_runtime()
    if soft:
        return _verdict("peft", "limited", evidence + soft, state["next"])
    if runtime is None:
        return _verdict("peft", "limited", [*evidence, why, "CPU-only training is slow"], _torch_gpu_step(ctx))
    return _verdict("peft", "ready", [*evidence, _summarize_gpus(gpus)], None)


def rule_qlora(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "qlora")
    if early:
        return early
    peft_state = _package_state(ctx, "peft", "peft")
    if peft_state["blocking"]:
        return _blocked(ctx, "qlora", [peft_state["blocking"]], peft_state["next"])
    bnb = _package_state(ctx, "bitsandbytes", "quantization", gates=(("transformers", "hard"),))
    if bnb["blocking"]:
        return _blocked(ctx, "qlora", [*peft_state["evidence"][:1], bnb["blocking"]], bnb["next"])
    evidence = peft_state["evidence"][:1] + bnb["evidence"]
    soft = peft_state["soft"] + bnb["soft"]
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict(
            "qlora", "unavailable", [*evidence, why, "4-bit training needs a CUDA or ROCm GPU"], _torch_gpu_step(ctx)
        )
    libraries = ctx.report.get("bitsandbytes_libraries") or []
    if libraries and runtime == "cuda" and ctx.build.get("cuda"):
        major = str(version_tuple(ctx.build["cuda"])[0]) if version_tuple(ctx.build["cuda"]) else ""
        if not any(name.startswith(f"libbitsandbytes_cuda{major}") for name in libraries):
            soft.append(f"bitsandbytes ships no library for CUDA {ctx.build['cuda']}")
    caps = [version_tuple(g.get("compute_capability")) for g in gpus if g.get("compute_capability")]
    if caps and min(caps) < (7, 5):
        soft.append("a GPU below compute capability 7.5: bitsandbytes int8 matmul is unavailable there")
    evidence.append(_summarize_gpus(gpus))
    if soft:
        return _verdict("qlora", "limited", evidence + soft, bnb["next"] or peft_state["next"])
    return _verdict("qlora", "ready", evidence, None)


def _deprecation_of_liger(ctx: Context) -> Optional[str]:
    location = ctx.pkg("trl")["location"]
    if not location:
        return None
    text = read_text(os.path.join(location, "trainer", "base_config.py")) or ""
    if re.search(r"use_liger_kernel[\s\S]{0,600}?Deprecated", text):
        return (
            f"trl {ctx.pkg('trl')['version']} deprecates use_liger_kernel (trl/trainer/base_config.py); use Hub kernels"
        )
    return None


def rule_liger(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "liger")
    if early:
        return early
    state = _package_state(ctx, "liger-kernel", "liger", gates=(("trl", "hard"),))
    if state["blocking"]:
        return _blocked(ctx, "liger", [state["blocking"]], state["next"])
    evidence = list(state["evidence"])
    soft = list(state["soft"])
    if not ctx.installed("triton"):
        return _blocked(
            ctx, "liger", [*evidence, "triton not installed (Liger kernels are Triton)"], ctx.install("triton")
        )
    evidence.append(ctx.label("triton"))
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict(
            "liger", "unavailable", [*evidence, why, "Triton kernels need a CUDA or ROCm GPU"], _torch_gpu_step(ctx)
        )
    evidence.append(_summarize_gpus(gpus))
    deprecated = _deprecation_of_liger(ctx)
    if deprecated:
        return _verdict(
            "liger",
            "limited",
            evidence + soft + [deprecated],
            'model_init_kwargs={"use_kernels": True} (see hub-kernels)',
        )
    if soft:
        return _verdict("liger", "limited", evidence + soft, state["next"])
    return _verdict("liger", "ready", evidence, None)


def rule_hub_kernels(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "hub-kernels")
    if early:
        return early
    if not ctx.installed("transformers"):
        return _verdict("hub-kernels", "unavailable", ["transformers not installed"], ctx.install("transformers"))
    state = _package_state(ctx, "kernels", "kernels", gates=(("transformers", "hard"),))
    if state["blocking"]:
        return _blocked(ctx, "hub-kernels", [ctx.label("transformers"), state["blocking"]], state["next"])
    evidence = [ctx.label("transformers"), *state["evidence"]]
    soft = list(state["soft"])
    gate = ctx.gate("transformers", "trl")
    if gate and gate["status"] == "outside":
        return _verdict(
            "hub-kernels",
            "unavailable",
            [*evidence, f"transformers {gate['installed']}: {gate['note']} ({gate['required_by']})"],
            ctx.install("transformers>=5.4.0"),
        )
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict("hub-kernels", "unavailable", [*evidence, why], _torch_gpu_step(ctx))
    evidence.append(_summarize_gpus(gpus))
    env = ctx.report["launch"]["env"]
    if env.get("HF_HUB_OFFLINE") in ("1", "true", "True", "ON", "YES"):
        soft.append("HF_HUB_OFFLINE is set: kernels must already be in the local Hub cache")
    else:
        evidence.append("kernels are downloaded from the Hub on first use")
    if soft:
        return _verdict("hub-kernels", "limited", evidence + soft, state["next"])
    return _verdict("hub-kernels", "ready", evidence, None)


def rule_flash_attn(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "flash-attn")
    if early:
        return early
    fa2 = _package_state(ctx, "flash-attn", None, gates=(("transformers", "hard"),))
    fa3 = _package_state(ctx, "flash-attn-3", None)
    runtime, gpus, why = ctx.gpu_runtime()
    if not fa2["ok"] and not fa3["ok"]:
        evidence = [fa2["blocking"]]
        if ctx.installed("flash-attn-3"):
            evidence.append(fa3["blocking"])
        step = fa2["next"] if ctx.installed("flash-attn") else ctx.install("flash-attn", "--no-build-isolation")
        return _blocked(ctx, "flash-attn", evidence, step)
    evidence = (fa2["evidence"] if fa2["ok"] else []) + (fa3["evidence"] if fa3["ok"] else [])
    soft = fa2["soft"] + fa3["soft"]
    if runtime is None:
        return _verdict(
            "flash-attn", "unavailable", [*evidence, why, "flash-attn needs a CUDA (or ROCm) GPU"], _torch_gpu_step(ctx)
        )
    eligible = [g for g in gpus if g.get("flash_attn2_eligible")]
    evidence.append(_summarize_gpus(gpus))
    if not eligible:
        return _verdict(
            "flash-attn",
            "unavailable",
            [*evidence, "no visible GPU has compute capability >= 8.0"],
            'use attn_implementation="sdpa"',
        )
    if fa3["ok"] and not fa2["ok"]:
        hopper = [g for g in gpus if version_tuple(g.get("compute_capability")) >= (9, 0)]
        if not hopper:
            soft.append("only flash-attn-3 is installed, and it targets Hopper (cc 9.0)")
    if len(eligible) < len(gpus):
        soft.append(f"{len(gpus) - len(eligible)} visible GPU(s) below compute capability 8.0")
    if soft:
        return _verdict("flash-attn", "limited", evidence + soft, fa2["next"])
    return _verdict("flash-attn", "ready", evidence, None)


def rule_unsloth(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "unsloth")
    if early:
        return early
    state = _package_state(ctx, "unsloth", None)
    if state["blocking"]:
        return _blocked(ctx, "unsloth", [state["blocking"]], state["next"])
    zoo = _package_state(ctx, "unsloth-zoo", None)
    if zoo["blocking"]:
        return _blocked(ctx, "unsloth", [*state["evidence"], zoo["blocking"]], zoo["next"])
    evidence = state["evidence"] + zoo["evidence"]
    soft = state["soft"] + zoo["soft"]
    for pid in ("unsloth", "unsloth-zoo"):
        soft.extend(_pin_text(pid, r) for r in _pin_problems(ctx, pid))
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict("unsloth", "unavailable", [*evidence, why, "Unsloth needs a GPU"], _torch_gpu_step(ctx))
    evidence.append(_summarize_gpus(gpus))
    if runtime != "cuda":
        soft.append("Unsloth is built for NVIDIA GPUs first; ROCm support depends on the Unsloth release")
    evidence.append("unsloth patches trl/transformers at import; import it before them")
    if soft:
        return _verdict("unsloth", "limited", evidence + soft, None)
    return _verdict("unsloth", "ready", evidence, None)


def _vllm_common(ctx: Context, backend: str) -> Tuple[Optional[Dict[str, Any]], List[str], List[str], Optional[str]]:
    """Shared vLLM checks (trl, vllm, trl's range, vllm's own pins): (early verdict, evidence, soft, step)."""
    if not ctx.installed("trl"):
        return _blocked(ctx, backend, ["trl not installed"], ctx.install("trl[vllm]")), [], [], None
    state = _package_state(ctx, "vllm", "vllm")
    if state["blocking"]:
        return _blocked(ctx, backend, [ctx.label("trl"), state["blocking"]], state["next"]), [], [], None
    evidence = [ctx.label("trl"), *state["evidence"]]
    soft = list(state["soft"])
    gate = ctx.gate("vllm", "trl")
    if gate and gate["status"] == "outside" and not any("outside trl's supported range" in s for s in soft):
        soft.append(f"vllm {gate['installed']} is outside trl's runtime range {gate['requirement']}")
    pins = _pin_problems(ctx, "vllm")
    others = [_pin_text("vllm", row) for row in pins if row["subject"] != "torch"]
    torch_pin = next((row for row in pins if row["subject"] == "torch"), None)
    if torch_pin is not None:  # vLLM's compiled ops are built against one exact torch
        reason = (
            f"vllm {ctx.pkg('vllm')['version']} is built for torch {torch_pin['requirement']}, installed "
            f"{torch_pin['installed'] or 'none'}"
        )
        step = state["next"] or ctx.install(f"torch{torch_pin['requirement']}")
        return _verdict(backend, "unavailable", [reason, *soft, *others], step), [], [], None
    for row in pins:
        state["next"] = state["next"] or ctx.install(f"{row['subject']}{row['requirement']}")
    return None, evidence, soft + others, state["next"]


def rule_vllm_colocate(ctx: Context) -> Dict[str, Any]:
    early, evidence, soft, step = _vllm_common(ctx, "vllm-colocate")
    if early:
        return early
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict(
            "vllm-colocate", "unavailable", [*evidence, why, "vLLM needs a CUDA or ROCm GPU"], _torch_gpu_step(ctx)
        )
    free = sum(g.get("memory_free_mib") or 0 for g in gpus)
    evidence.append(_summarize_gpus(gpus) + (f", {_fmt_mib(free)} free" if free else ""))
    evidence.append("vLLM shares the training GPUs (vllm_gpu_memory_utilization, default 0.3)")
    if soft:
        return _verdict("vllm-colocate", "limited", evidence + soft, step)
    return _verdict("vllm-colocate", "ready", evidence, None)


def rule_vllm_server(ctx: Context) -> Dict[str, Any]:
    early, evidence, soft, step = _vllm_common(ctx, "vllm-server")
    if early:
        return early
    if not ctx.installed("requests"):
        return _blocked(
            ctx, "vllm-server", [*evidence, "requests not installed (VLLMClient uses it)"], ctx.install("trl[vllm]")
        )
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict(
            "vllm-server",
            "unavailable",
            [*evidence, why, "the NCCL weight sync needs a GPU on the trainer"],
            _torch_gpu_step(ctx),
        )
    evidence.append(_summarize_gpus(gpus))
    evidence.append("server itself not checked here: run scripts/check_vllm_server.py")
    if len(gpus) < 2:
        soft.append("1 GPU visible: the server needs GPUs of its own (another node, or use vllm-colocate)")
    if soft:
        return _verdict("vllm-server", "limited", evidence + soft, step)
    return _verdict("vllm-server", "ready", evidence, None)


def rule_async_grpo_lora(ctx: Context) -> Dict[str, Any]:
    early, evidence, soft, step = _vllm_common(ctx, "async-grpo-lora")
    if early:
        return early
    location = ctx.pkg("trl")["location"] or ""
    source = (
        read_text(os.path.join(location, "experimental", "async_grpo", "async_grpo_trainer.py")) if location else None
    )
    if not source or "select_adapter_sync" not in source:
        return _verdict(
            "async-grpo-lora",
            "unavailable",
            [*evidence, f"{ctx.label('trl')} has no adapter-only LoRA sync (select_adapter_sync)"],
            ctx.install("-U", "trl"),
        )
    evidence.append("adapter-only LoRA sync present (trl/experimental/async_grpo)")
    for pid, extra in (("peft", "peft"), ("kernels", "kernels"), ("aiohttp", "vllm"), ("requests", "vllm")):
        state = _package_state(ctx, pid, extra, gates=(("transformers", "hard"),) if pid == "kernels" else ())
        if state["blocking"]:
            why = {"kernels": " (tree attention loads the flash-attn3 Hub kernel)", "aiohttp": " (rollout worker)"}.get(
                pid, ""
            )
            return _blocked(ctx, "async-grpo-lora", [*evidence, state["blocking"] + why], state["next"])
        soft.extend(state["soft"])
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict("async-grpo-lora", "unavailable", [*evidence, why], _torch_gpu_step(ctx))
    evidence.append(_summarize_gpus(gpus))
    if ctx.distributed_type == "DEEPSPEED":
        soft.append("accelerate default config selects DEEPSPEED; AsyncGRPO is FSDP2-only (async_grpo_trainer.py)")
    if len(gpus) < 2:
        soft.append("1 GPU visible: the vLLM server needs its own GPU (or another node)")
    evidence.append(
        "server side not checked: needs --enable-lora, VLLM_ALLOW_RUNTIME_LORA_UPDATING=1, DP=1 "
        "(scripts/check_vllm_server.py)"
    )
    if soft:
        return _verdict("async-grpo-lora", "limited", evidence + soft, step)
    return _verdict("async-grpo-lora", "ready", evidence, None)


# --------------------------------------------------------------------------------------------------------------
# Cross-checks that become findings
# --------------------------------------------------------------------------------------------------------------


def environment_findings(report: Dict[str, Any]) -> List[Dict[str, str]]:
    """Findings from packages, torch build vs GPUs/driver, visibility and the accelerate config."""
    findings: List[Dict[str, str]] = []
    for pid, entry in report["packages"].items():
        for problem in entry["problems"]:
            severity = "error" if problem["code"] in ("metadata_not_utf8", "metadata_without_module") else "warning"
            findings.append(new_finding(severity, problem["code"], f"{pid}: {problem['message']}"))
    for row in report["compatibility"]:
        if row["status"] == "outside" and row["kind"] == "dependency":
            findings.append(
                new_finding(
                    "warning",
                    "pin_outside",
                    f"{row['subject']} {row['installed']} does not satisfy {row['required_by']}'s requirement "
                    f"{row['requirement']}",
                )
            )
        elif row["status"] == "missing" and row["kind"] == "dependency":
            findings.append(
                new_finding(
                    "warning", "pin_missing", f"{row['required_by']} requires {row['subject']}, which is not installed"
                )
            )
    build, accel = report["torch_build"], report["accelerators"]
    nvidia = [g for g in accel["gpus"] if g["vendor"] == "nvidia"]
    amd = [g for g in accel["gpus"] if g["vendor"] == "amd"]
    if build["kind"] == "cpu" and (nvidia or amd):
        findings.append(
            new_finding(
                "error",
                "torch_cpu_build_with_gpu",
                f"torch {build['version']} is a CPU-only build, but {len(nvidia) + len(amd)} GPU(s) are present",
            )
        )
    if build["kind"] == "rocm" and nvidia and not amd:
        findings.append(
            new_finding("error", "torch_build_mismatch", "torch is a ROCm build on a machine with NVIDIA GPUs")
        )
    if build["kind"] == "cuda" and amd and not nvidia:
        findings.append(
            new_finding("error", "torch_build_mismatch", "torch is a CUDA build on a machine with AMD GPUs")
        )
    if build["kind"] == "cuda" and nvidia and build.get("cuda"):
        needed = CUDA_MIN_DRIVER.get((version_tuple(build["cuda"]) or (0,))[0])
        driver = next((g["driver"] for g in nvidia if g.get("driver")), None)
        if needed and driver and version_tuple(driver) < version_tuple(needed):
            findings.append(
                new_finding(
                    "error",
                    "driver_too_old",
                    f"torch is built with CUDA {build['cuda']}, which needs NVIDIA driver >= {needed}; "
                    f"installed {driver} (unless the CUDA forward-compatibility package is set up)",
                )
            )
    for tool in ("nvidia_smi", "rocm_smi"):
        status = accel[tool]
        if status["status"] in ("failed", "timeout", "unparsable"):
            findings.append(
                new_finding("warning", f"{tool}_{status['status']}", f"{tool.replace('_', '-')}: {status['detail']}")
            )
    visible_info = accel["visible_devices"]
    if accel["gpus"] and visible_info.get("resolved") == []:
        findings.append(
            new_finding(
                "warning",
                "no_visible_gpu",
                f"{len(accel['gpus'])} GPU(s) present, but {visible_info['variable'].split(',')[0]}="
                f"{visible_info['raw']!r} hides all of them",
            )
        )
    for note in visible_info.get("notes", []):
        if note.startswith("stops at") or "twice" in note or "mixed GPU" in note or ": stops at" in note:
            findings.append(new_finding("warning", "visible_devices", note))
    config = report["launch"]["accelerate_config"]
    if config["status"] == "malformed":
        findings.append(
            new_finding(
                "error",
                "accelerate_config_malformed",
                f"accelerate config {config['path']}: {'; '.join(config['problems'])} "
                "(accelerate launch/env will fail)",
            )
        )
    elif config["status"] == "found":
        for problem in config["problems"]:
            findings.append(new_finding("warning", "accelerate_config", f"accelerate config: {problem}"))
        settings = config["settings"]
        visible = [g for g in accel["gpus"] if g.get("visible")]
        processes = settings.get("num_processes")
        dtype = settings.get("distributed_type")
        if (
            isinstance(processes, int)
            and accel["gpus"]
            and dtype in ("MULTI_GPU", "FSDP", "DEEPSPEED")
            and settings.get("num_machines", 1) in (1, None)
            and processes > len(visible)
        ):
            findings.append(
                new_finding(
                    "warning",
                    "accelerate_num_processes",
                    f"accelerate config asks for num_processes={processes} but {len(visible)} GPU(s) are visible",
                )
            )
        if settings.get("mixed_precision") == "bf16" and visible and not all(g.get("bf16") for g in visible):
            findings.append(
                new_finding(
                    "warning",
                    "bf16_unsupported",
                    "accelerate config uses bf16, but a visible GPU lacks bf16 (cc < 8.0)",
                )
            )
        if dtype == "DEEPSPEED" and not report["packages"]["deepspeed"]["installed"]:
            findings.append(
                new_finding(
                    "warning",
                    "accelerate_deepspeed_missing",
                    "accelerate config selects DEEPSPEED, but deepspeed is not installed",
                )
            )
    return findings


# --------------------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------------------


def sanitize(value: Any, home: Optional[str], secrets: Sequence[str]) -> Any:
    """Mask the home directory as ``~`` and scrub secret values from every string of the report."""
    if isinstance(value, dict):
        return {k: sanitize(v, home, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [sanitize(v, home, secrets) for v in value]
    if isinstance(value, str):
        value = redact_value(value)
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        if home:
            value = re.sub(re.escape(home) + r"(?=/|$)", "~", value)
        return value
    return value


def _fmt_mib(mib: Optional[int]) -> str:
    if mib is None:
        return "?"
    return f"{mib / 1024:.0f} GiB" if mib >= 10240 else f"{mib} MiB"


def render_text(report: Dict[str, Any], verbose: bool = False) -> str:
    """Compact plain-text report ending in a one-line verdict."""
    lines: List[str] = []
    py, plat = report["python"], report["platform"]
    lines.append(
        f"{TOOL} (schema {report['schema_version']}) | Python {py['version']} {py['kind']} {py['executable']} | "
        f"{plat['platform']} | {report['elapsed_seconds']:.2f} s"
    )
    packages = report["packages"]
    installed = [pid for pid in STACK_IDS if packages[pid]["installed"]]
    missing = [pid for pid in STACK_IDS if not packages[pid]["installed"]]
    if not installed:
        lines.append(
            "packages: none of the training stack is installed in this interpreter (" + ", ".join(STACK_IDS) + ")"
        )
    else:
        cells = []
        build = report["torch_build"]
        for pid in installed:
            entry = packages[pid]
            text = f"{pid} {entry['version'] or '(no metadata)'}"
            if pid == "torch" and build["kind"] != "unknown":
                detail = {
                    "cuda": f"CUDA {build['cuda']}",
                    "rocm": f"ROCm {build['hip']}",
                    "xpu": f"XPU {build['xpu']}",
                }.get(build["kind"], "CPU-only")
                text += f" [{detail}]"
            if entry.get("git_commit"):
                text += f"+{entry['git_commit'][:7]}"
            if entry.get("editable"):
                text += " (editable)"
            if entry["problems"]:
                text += " (!)"
            cells.append(text)
        lines.append("packages:")
        lines.extend(_wrap(cells, "  "))
        if missing:
            lines.extend(_wrap(["not installed: " + ", ".join(missing)], "  "))
        sites = sorted({os.path.dirname(e["metadata_path"]) for e in packages.values() if e.get("metadata_path")})
        if sites and (verbose or len(sites) > 1):
            lines.append("  metadata in: " + "; ".join(sites))
        if verbose:
            for pid in installed:
                lines.append(f"  {pid}: module {packages[pid]['module']} at {packages[pid]['location']}")
    rows = report["compatibility"]
    counts: Dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    if rows:
        summary = ", ".join(f"{counts[s]} {s}" for s in ("outside", "missing", "unknown", "ok") if counts.get(s))
        lines.append(f"compatibility (from installed metadata and code gates): {summary}")
        shown = set()
        kind_order = {"extra": 0, "dependency": 1, "gate": 2}
        for row in sorted(rows, key=lambda r: kind_order.get(r["kind"], 9)):  # stable: keeps the status order
            if not verbose and row["status"] in ("ok", "missing"):
                continue
            key = (row["subject"], row["requirement"], row["required_by"].split(" ")[0], row["status"])
            if not verbose and key in shown:  # a code gate that repeats the metadata range
                continue
            shown.add(key)
            lines.append("  " + _compat_text(row))
    accel = report["accelerators"]
    lines.append(
        f"accelerators: nvidia-smi {accel['nvidia_smi']['status']}"
        + (f" ({accel['nvidia_smi']['detail']})" if accel["nvidia_smi"]["status"] not in ("ok", "not_found") else "")
        + f"; rocm-smi {accel['rocm_smi']['status']}"
        + (f" ({accel['rocm_smi']['detail']})" if accel["rocm_smi"]["status"] not in ("ok", "not_found") else "")
    )
    lines.extend(_gpu_lines(accel["gpus"]))
    vis = accel["visible_devices"]
    if vis.get("raw") is not None or accel["gpus"]:
        resolved = vis.get("resolved")
        if vis.get("raw") is None:
            setting = vis["variable"].split(",")[0] + " unset"
        elif ";" in str(vis["raw"]) or "=" in str(vis["raw"]):
            setting = str(vis["raw"])
        else:
            setting = f"{vis['variable']}={vis['raw']!r}"
        shown = ", ".join(map(str, resolved)) if resolved else "none" if resolved == [] else "unknown"
        notes = f" ({'; '.join(vis['notes'])})" if vis.get("notes") and vis.get("raw") is not None else ""
        lines.append(f"  {setting} -> visible GPUs: {shown}{notes}")
    summary = accel["summary"]
    if summary["visible_count"]:
        lines.append(
            f"  visible total {_fmt_mib(summary['memory_total_mib'])}, free {_fmt_mib(summary['memory_free_mib'])}"
        )
    toolkit = report["torch_build"].get("cuda_toolkit") or {}
    if verbose or (toolkit.get("nvcc") and report["torch_build"]["kind"] == "cuda"):
        lines.append(
            f"  nvcc: {toolkit.get('nvcc') or 'not found'}"
            + (f" (CUDA {toolkit['version']})" if toolkit.get("version") else "")
        )
    launch = report["launch"]
    config = launch["accelerate_config"]
    text = f"accelerate config: {config['path']}: {config['status'].replace('_', ' ')}"
    if config.get("parser"):
        text += f" (parser: {config['parser']})"
    settings = config["settings"]
    if not verbose:
        settings = {k: v for k, v in settings.items() if k in TEXT_CONFIG_KEYS or (k == "use_cpu" and v)}
    lines.append(text)
    items = [f"{k}={v}" for k, v in settings.items()]
    if items:
        lines.extend(_wrap_joined("  ", items, indent="  "))
    env = launch["env"]
    if env:
        lines.extend(_wrap([f"{k}={v}" for k, v in env.items()], "env: ", "     "))
    probes = report.get("probes")
    if probes:
        torch_probe = probes.get("torch")
        if torch_probe:
            lines.append("probe torch: " + _torch_probe_text(torch_probe))
        for result in probes.get("imports") or []:
            if result.get("status") == "ok":
                continue
            error = f"{result.get('error_type') or ''} {result.get('error') or ''}".strip()
            lines.append(f"probe import {result['module']}: {result['status']}: {error}")
        ok = [r["module"] for r in probes.get("imports") or [] if r.get("status") == "ok"]
        if ok:
            lines.extend(_wrap(["probe import ok: " + ", ".join(ok)], ""))
    lines.append("backends:")
    seen: Dict[Tuple[str, str, Optional[str]], str] = {}
    for verdict in report["backends"]:
        evidence = "; ".join(verdict["evidence"])
        key = (verdict["status"], evidence, verdict["next_step"])
        if key in seen and verdict["evidence"] and not verbose:
            lines.append(f"  {verdict['id']:<16}{verdict['status']:<12}(same evidence and next step as {seen[key]})")
            continue
        seen[key] = verdict["id"]
        lines.append(f"  {verdict['id']:<16}{verdict['status']:<12}{evidence}")
        if verdict["next_step"] and verdict["status"] != "ready":
            lines.append(f"  {'':<28}next: {verdict['next_step']}")
    # pin_outside repeats a compatibility line printed above
    findings = [f for f in report["findings"] if verbose or (f["severity"] != "info" and f["code"] != "pin_outside")]
    if findings:
        lines.append("findings:")
        for finding in findings:
            lines.append(f"  {finding['severity']}: {finding['message']}")
    lines.append(report["verdict"])
    return "\n".join(lines) + "\n"


TEXT_CONFIG_KEYS = (
    "distributed_type",
    "mixed_precision",
    "num_processes",
    "num_machines",
    "machine_rank",
    "gpu_ids",
    "main_process_ip",
    "main_process_port",
    "fsdp_version",
    "fsdp_offload_params",
    "fsdp_reshard_after_forward",
    "fsdp_sharding_strategy",
    "deepspeed.zero_stage",
    "deepspeed.offload_optimizer_device",
    "deepspeed.offload_param_device",
    "deepspeed.deepspeed_config_file",
    "dynamo_backend",
)


def _gpu_flags(gpu: Dict[str, Any]) -> str:
    flags = []
    if gpu.get("compute_capability"):
        flags.append(f"cc {gpu['compute_capability']}")
    if gpu.get("arch"):
        flags.append(gpu["arch"])
    bf16, fa2 = gpu.get("bf16"), gpu.get("flash_attn2_eligible")
    flags.append("bf16" if bf16 else "no bf16" if bf16 is False else "bf16 ?")
    flags.append("FA2 ok" if fa2 else "no FA2" if fa2 is False else "FA2 ?")
    flags.append(f"driver {gpu.get('driver') or '?'}")
    return ", ".join(flags)


def _gpu_lines(gpus: List[Dict[str, Any]]) -> List[str]:
    """One line per group of identical GPUs (same model, memory, capability, driver), with free memory per GPU."""
    groups: Dict[Tuple[Any, ...], List[Dict[str, Any]]] = {}
    for gpu in gpus:
        key = (gpu["vendor"], gpu["name"], gpu["memory_total_mib"], _gpu_flags(gpu))
        groups.setdefault(key, []).append(gpu)
    lines = []
    for (_, name, total, flags), members in groups.items():
        indices = ",".join(str(g["index"]) for g in members)
        free_values = {_fmt_mib(g["memory_free_mib"]) for g in members}
        if len(free_values) == 1 and len(members) > 1:
            free = f"{free_values.pop()} each"
        else:
            free = " ".join(f"{g['index']}:{_fmt_mib(g['memory_free_mib'])}" for g in members)
        hidden = [str(g["index"]) for g in members if not g.get("visible")]
        head = f"GPU {indices}" + (f" ({len(members)}x {name})" if len(members) > 1 else f" {name}")
        each = " each" if len(members) > 1 else ""
        line = f"  {head}: {_fmt_mib(total)}{each}, {flags}; free {free}"
        if hidden:
            line += f"; hidden: {','.join(hidden)}"
        lines.append(line)
    return lines


def _torch_probe_text(result: Dict[str, Any]) -> str:
    if result.get("status") != "ok":
        return f"{result.get('status')}: {result.get('error_type') or ''} {result.get('error') or ''}".strip()
    parts = [f"torch {result.get('version')} imported in {result.get('import_seconds')} s"]
    parts.append(f"cuda available: {result.get('cuda_available')}, devices: {result.get('device_count')}")
    if result.get("devices"):
        parts.append(", ".join(f"{d['name']} cc {d['compute_capability']}" for d in result["devices"]))
    parts.append(f"NCCL: {result.get('nccl_version') or ('available' if result.get('nccl_available') else 'no')}")
    return "; ".join(parts)


def _compat_text(row: Dict[str, Any]) -> str:
    owner = row["required_by"].split(" ")[0]
    subject = f"{row['subject']} {row['installed']}"
    if row["status"] == "outside":
        if row["kind"] == "extra" and owner == "trl":
            what = f"is outside trl's supported range {row['requirement']}"
        elif row["kind"] == "gate":
            what = f"is outside {owner}'s code gate {row['requirement']} ({row['note']})"
        elif row["requirement"].startswith("=="):
            what = f"does not match {owner}'s pin {row['requirement']}"
        else:
            what = f"is outside {owner}'s requirement {row['requirement']}"
        return f"! {subject} {what} [{row['required_by']}]"
    if row["status"] == "missing":
        return f"- {row['subject']} not installed, wanted {row['requirement'] or '(any)'} by {row['required_by']}"
    if row["status"] == "unknown":
        return f"? {subject} vs {row['requirement']}: undecidable [{row['required_by']}]"
    return f"ok {subject} {row['requirement'] or '(any)'} [{row['required_by']}]"


def _wrap_joined(head: str, items: List[str], indent: str = "    ", width: int = 118) -> List[str]:
    """``head`` followed by ``items`` joined with ", ", continued on indented lines at ``width``."""
    lines, current = [], head
    for position, item in enumerate(items):
        piece = item + ("," if position < len(items) - 1 else "")
        if len(current) + len(piece) + 1 > width and current not in (head, indent):
            lines.append(current.rstrip())
            current = indent
        current += ("" if current in (head, indent) else " ") + piece
    lines.append(current.rstrip())
    return lines


def _wrap(cells: List[str], first_prefix: str, next_prefix: Optional[str] = None, width: int = 118) -> List[str]:
    """Join cells with two spaces into lines of at most ``width`` characters."""
    next_prefix = first_prefix if next_prefix is None else next_prefix
    lines, current = [], first_prefix
    for cell in cells:
        candidate = cell if current in (first_prefix, next_prefix) else current + "  " + cell
        if current not in (first_prefix, next_prefix) and len(candidate) > width:
            lines.append(current)
            current = next_prefix + cell
        else:
            current = (current + cell) if current in (first_prefix, next_prefix) else candidate
    if current.strip():
        lines.append(current)
    return lines


def verdict_line(backends: List[Dict[str, Any]], required: Sequence[str], probed: bool) -> str:
    """The last line: what is ready, limited and unavailable, and the --require outcome."""
    groups: Dict[str, List[str]] = {"ready": [], "limited": [], "unavailable": []}
    for verdict in backends:
        groups.setdefault(verdict["status"], []).append(verdict["id"])
    parts = [f"{status}: {', '.join(ids) if ids else 'none'}" for status, ids in groups.items()]
    text = "verdict: " + "; ".join(parts)
    if not probed:
        text += " (static checks; imports not probed: add --probe-imports)"
    if required:
        failing = [b["id"] for b in backends if b["id"] in required and b["status"] != "ready"]
        text += f"; --require {','.join(required)}: " + (
            "FAILED (" + ", ".join(failing) + " not ready)" if failing else "met"
        )
    return text


# --------------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------------

_PACKAGE_LINES = "\n".join(["  " + ", ".join(STACK_IDS[:10]) + ",", "  " + ", ".join(STACK_IDS[10:])])
_BACKEND_LINES = "\n".join(f"  {bid:<16}{BACKEND_HELP[bid]}" for bid in BACKEND_IDS)
EPILOG = f"""\
backend ids (for --require):
{_BACKEND_LINES}

verdicts: ready (every static check passes; add --probe-imports for import evidence), limited (usable with a
caveat shown as evidence), unavailable (missing, too old/new, broken, or no suitable GPU). Each verdict that
is not ready names the smallest next step: a command for you to consider; this script never runs it.

package ids (for --probe-imports; module names work too):
{_PACKAGE_LINES}

what a default run does: reads package metadata (*.dist-info on sys.path) and a few installed source files as
text (torch/version.py with ast, TRL/transformers/accelerate version gates), asks nvidia-smi and rocm-smi
(each with a {DEFAULT_SMI_TIMEOUT:g} s timeout), reads the accelerate default config
($HF_HOME/accelerate/default_config.yaml; HF_HOME defaults to $XDG_CACHE_HOME/huggingface, that to ~/.cache)
and selected environment variables (secrets redacted). It imports no backend, opens no socket, writes no file
and creates no CUDA context.

probes (opt-in, each in its own subprocess with HF_HUB_OFFLINE=1, HF_HUB_DISABLE_UPDATE_CHECK=1,
TRANSFORMERS_OFFLINE=1 and a timeout, {PROBE_WORKERS} at a time): --probe-imports imports the stack packages
(a crash, hang or ImportError is reported, not raised); --probe-torch imports torch and reads torch.cuda device
properties and NCCL availability without allocating GPU memory. Importing a backend can take seconds.

output: compact text ending in a one-line verdict (home shown as ~ unless --verbose), or --json
(schema: scripts/check_optional_backends.schema.json).

exit codes: 0 report produced; 1 a --require backend is not ready; 2 usage error (unknown flag or backend id,
missing --accelerate-config file).
"""


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (every flag is documented in --help)."""
    parser = argparse.ArgumentParser(
        prog="check_optional_backends.py",
        description=(
            "Report which TRL scaling backends this Python environment can use: package versions, install "
            "consistency, compatibility derived from the installed TRL metadata, GPUs and *_VISIBLE_DEVICES, "
            "the accelerate config, and a ready/limited/unavailable verdict per backend. Read-only."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON (stable keys, schema_version 1)")
    parser.add_argument(
        "--require",
        metavar="IDS",
        default="",
        help="comma-separated backend ids that must be 'ready'; exit 1 otherwise (ids listed below)",
    )
    parser.add_argument(
        "--probe-torch",
        action="store_true",
        help="import torch in a subprocess; read torch.cuda device properties and NCCL availability "
        "(allocates no GPU memory)",
    )
    parser.add_argument(
        "--probe-imports",
        nargs="?",
        const="all",
        default=None,
        metavar="PKGS",
        help="import each installed stack package in its own subprocess with a timeout; optionally only "
        "PKGS, a comma list of package ids or module names (--probe-imports=vllm,deepspeed)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"timeout for each subprocess (default {DEFAULT_SMI_TIMEOUT:g} s for nvidia-smi/rocm-smi, "
        f"{DEFAULT_PROBE_TIMEOUT:g} s per probe)",
    )
    parser.add_argument(
        "--accelerate-config",
        metavar="PATH",
        default=None,
        help="check this accelerate config file instead of the default one",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show full paths (home not masked), every compatibility row, package locations and info findings",
    )
    return parser


def _parse_ids(
    text: str, allowed: Sequence[str], aliases: Optional[Dict[str, str]] = None
) -> Tuple[List[str], List[str]]:
    chosen, unknown = [], []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name = (aliases or {}).get(part, part)
        (chosen if name in allowed else unknown).append(name if name in allowed else part)
    return list(dict.fromkeys(chosen)), unknown


def collect(args: argparse.Namespace, env: Optional[Dict[str, str]] = None) -> Tuple[Dict[str, Any], List[str]]:
    """Gather every fact, judge the backends, and return (report, secrets to scrub)."""
    start = time.perf_counter()
    env = dict(os.environ if env is None else env)
    smi_timeout = args.timeout if args.timeout is not None else DEFAULT_SMI_TIMEOUT
    probe_timeout = args.timeout if args.timeout is not None else DEFAULT_PROBE_TIMEOUT
    path_entries = list(sys.path)
    findings: List[Dict[str, str]] = []
    dists = scan_distributions(path_entries)
    packages, chosen = gather_packages(path_entries, dists)
    build = torch_build(packages)
    build["cuda_toolkit"] = cuda_toolkit()
    build["nccl_wheels"] = nccl_wheels(dists)
    report: Dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": TOOL,
        "elapsed_seconds": 0.0,
        "python": python_facts(),
        "platform": platform_facts(),
        "packages": packages,
        "torch_build": build,
    }
    report["compatibility"] = compatibility(packages, chosen, findings)
    report["accelerators"] = gather_accelerators(env, smi_timeout)
    config_path = args.accelerate_config or accelerate_config_path(env)
    env_selected, secrets = gather_env(env)
    report["launch"] = {
        "accelerate_config": read_accelerate_config(config_path, packages),
        "env": env_selected,
    }
    report["deepspeed_build"] = deepspeed_build(packages) if packages["deepspeed"]["installed"] else None
    report["bitsandbytes_libraries"] = bnb_native_libraries(packages) if packages["bitsandbytes"]["installed"] else []
    probes: Dict[str, Any] = {}
    if args.probe_torch:
        probes["torch"] = probe_torch(probe_timeout, path_entries)
    if args.probe_imports:
        targets = []
        wanted = args.probe_import_ids
        for pid, _, _ in STACK:
            if (wanted is None and packages[pid]["installed"]) or (wanted is not None and pid in wanted):
                targets.append((pid, packages[pid]["module"]))
        probes["imports"] = probe_imports(targets, probe_timeout, path_entries)
    if probes:
        report["probes"] = probes
    ctx = Context(report, chosen)
    report["backends"] = judge_backends(ctx)
    report["findings"] = environment_findings(report) + findings + probe_findings(probes)
    if packages["torch"]["installed"] and not packages["trl"]["installed"]:
        report["findings"].append(
            new_finding("warning", "trl_missing", "trl is not installed here; the verdicts judge the backends alone")
        )
    if not any(packages[pid]["installed"] for pid in STACK_IDS):
        report["findings"].insert(
            0,
            new_finding(
                "info",
                "nothing_installed",
                f"none of the training stack is installed for {sys.executable}; install with: pip install trl",
            ),
        )
    report["verdict"] = verdict_line(report["backends"], args.required_ids, bool(probes.get("imports")))
    report["elapsed_seconds"] = round(time.perf_counter() - start, 3)
    return report, secrets


def probe_findings(probes: Dict[str, Any]) -> List[Dict[str, str]]:
    """Findings for failed probes (crash, hang, import error)."""
    findings = []
    for result in probes.get("imports") or []:
        if result.get("status") != "ok":
            detail = f"{result.get('error_type') + ': ' if result.get('error_type') else ''}{result.get('error') or ''}"
            findings.append(new_finding("error", f"import_{result['status']}", f"import {result['module']}: {detail}"))
    torch_probe = probes.get("torch")
    if torch_probe and torch_probe.get("status") != "ok":
        findings.append(
            new_finding(
                "error", f"torch_probe_{torch_probe.get('status')}", "torch probe: " + _torch_probe_text(torch_probe)
            )
        )
    return findings


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point: 0 report, 1 --require not met, 2 usage error."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    required, unknown = _parse_ids(args.require, BACKEND_IDS)
    if unknown:
        parser.print_usage(sys.stderr)
        sys.stderr.write(
            f"{parser.prog}: error: unknown backend id(s) {', '.join(unknown)}; valid: {', '.join(BACKEND_IDS)}\n"
        )
        return 2
    args.required_ids = required
    args.probe_import_ids = None
    if args.probe_imports is not None and args.probe_imports != "all":
        aliases = {modules[0]: pid for pid, _, modules in STACK}
        aliases.update({m: pid for pid, _, modules in STACK for m in modules})
        ids, unknown = _parse_ids(args.probe_imports, STACK_IDS, aliases)
        if unknown or not ids:
            parser.print_usage(sys.stderr)
            sys.stderr.write(
                f"{parser.prog}: error: unknown package(s) for --probe-imports: {', '.join(unknown) or '(empty)'}; "
                f"valid: {', '.join(STACK_IDS)}\n"
            )
            return 2
        args.probe_import_ids = ids
    if args.timeout is not None and not args.timeout > 0:
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"{parser.prog}: error: --timeout must be a positive number of seconds\n")
        return 2
    if args.accelerate_config is not None and not os.path.isfile(args.accelerate_config):
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"{parser.prog}: error: --accelerate-config {args.accelerate_config}: no such file\n")
        return 2
    report, secrets = collect(args)
    home = None if args.verbose else os.path.expanduser("~")
    if home in ("", "/", "~"):
        home = None
    report = sanitize(report, home, secrets)
    output = json.dumps(report, indent=2, default=str) + "\n" if args.json else render_text(report, args.verbose)
    try:
        sys.stdout.write(output)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into `head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    failing = [b for b in report["backends"] if b["id"] in required and b["status"] != "ready"]
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
