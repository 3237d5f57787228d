"""Launch context: the accelerate default config and the selected environment variables (secrets redacted)."""

from __future__ import annotations

import ast
import os
import re
from typing import Any, Dict, List, Tuple

from common.lazy_re import lazy
from common.output import looks_like_secret
from common.read import InputError, read_whole
from common.values import load_json

from diagnostic.base import (
    HF_TOKEN_RE,
    REDACTED,
    SECRET_NAME_RE,
    URL_CREDENTIALS_RE,
    first_line,
    read_text,
    redact_value,
)

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


CONFIG_LIMIT = 1_000_000
PLAIN_VALUES = ("0", "1", "true", "false", "yes", "no", "on", "off", "none")
STRONG_SECRET_NAME_RE = lazy(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def read_accelerate_config(path: str, packages: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """Load and check an accelerate config the way ``load_config_from_file`` would, without raising."""
    info: Dict[str, Any] = {"path": path, "status": "not_found", "parser": None, "settings": {}, "problems": []}
    try:
        read = read_whole(path, limit=CONFIG_LIMIT)  # over the limit raises: a truncated prefix is never parsed
    except InputError as error:
        info["status"] = error.status  # not_found | not_regular | too_large | unreadable, each its own status
        if error.status == "too_large":
            info["problems"].append(f"too large: over {CONFIG_LIMIT:,} bytes, not read (a config is a few kB)")
        elif error.status != "not_found":
            info["problems"].append(f"cannot be read: {error.reason}")
        return info
    text = read.text()
    data: Any = None
    try:
        if path.endswith(".json"):
            info["parser"] = "json"
            data = load_json(text, "the file", max_bytes=CONFIG_LIMIT)
        else:
            from common import simple_yaml  # sibling module, imported only when there is a YAML config to read

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


def shown_env_value(name: str, value: str) -> str:
    """How a launch variable is shown. A name that says secret (TOKEN, SECRET, PASSWORD, ...) hides a non-trivial
    value; one that only contains KEY or AUTH hides only a value that looks like a secret (``CACHE_KEY=3.11`` and
    ``SSH_AUTH_SOCK=/root`` stay); every shown value is scrubbed of token shapes and URL credentials."""
    if not value:
        return ""
    if SECRET_NAME_RE.search(name):
        hide = looks_like_secret(value) or (
            STRONG_SECRET_NAME_RE.search(name) is not None and value.strip().lower() not in PLAIN_VALUES
        )
        if hide:
            return REDACTED
    return redact_value(value)


def gather_env(env: Dict[str, str]) -> Tuple[Dict[str, str], List[str]]:
    """Relevant environment variables, secrets redacted; also returns the secret values to scrub from output.

    A variable whose name says secret (TOKEN, SECRET, PASSWORD, ...) is shown redacted; one whose name only
    contains KEY or AUTH keeps a short common value (``CACHE_KEY=3.11``, ``SSH_AUTH_SOCK=/root``). Only values
    that look like secrets are scrubbed from the rest of the report, so "3.11" is never hidden elsewhere."""
    selected: Dict[str, str] = {}
    secrets: List[str] = []
    for name in sorted(env):
        value = env[name]
        relevant = name.startswith(ENV_PREFIXES) or name in ENV_NAMES
        if SECRET_NAME_RE.search(name):
            if looks_like_secret(value):
                secrets.append(value)
            if relevant or name.startswith(("HF_", "HUGGING")):
                selected[name] = shown_env_value(name, value)
            continue
        if relevant:
            selected[name] = shown_env_value(name, value)
    for value in env.values():
        for match in URL_CREDENTIALS_RE.finditer(value):
            secrets.extend(
                part for part in (match.group("cred"), match.group("cred").partition(":")[2]) if looks_like_secret(part)
            )
        secrets.extend(HF_TOKEN_RE.findall(value))
    return selected, sorted(set(secrets), key=len, reverse=True)
