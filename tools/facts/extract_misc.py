"""PEFT, Transformers, DeepSpeed, bitsandbytes, liger-kernel and kernels."""

from __future__ import annotations

import ast
import re
from typing import Callable, Dict, List, Set

from .archive import SourceArchive
from .common import env_vars, module_names, package_exports, requires_dist, string_constants
from .pysrc import (
    ModuleSet,
    add_base_closure,
    class_fields,
    class_record,
    collect_identifiers,
    collect_literal_values,
    collect_messages,
    unparse,
)


def _classes(modules: ModuleSet, paths: List[str], keep: Callable[[str], bool]) -> Dict[str, Dict[str, object]]:
    classes: Dict[str, Dict[str, object]] = {}
    for path in paths:
        module = modules.by_path(path)
        for name, node in module.classes.items():
            if keep(name):
                classes[f"{module.name}.{name}"] = class_record(modules, module, node)
    add_base_closure(modules, classes)
    return dict(sorted(classes.items()))


def _existing(archive: SourceArchive, paths: List[str]) -> List[str]:
    """Expand ``dir/`` entries and drop files this release does not have."""
    out: List[str] = []
    for path in paths:
        if path.endswith("/"):
            out.extend(archive.python_files(path))
        elif archive.has(path):
            out.append(path)
    return sorted(set(out))


# --------------------------------------------------------------------------------------------------------------------


def extract_peft(archive: SourceArchive) -> Dict[str, object]:
    modules = ModuleSet(archive)
    all_py = list(archive.python_files("peft/"))
    core = _existing(
        archive,
        [
            "peft/config.py",
            "peft/peft_model.py",
            "peft/mapping.py",
            "peft/mapping_func.py",
            "peft/tuners/lora/",
            "peft/tuners/tuners_utils.py",
            "peft/utils/",
        ],
    )
    return {
        "classes": _classes(
            modules,
            _existing(archive, ["peft/tuners/lora/config.py", "peft/config.py"]),
            lambda n: n.endswith("Config") or n == "PeftConfigMixin",
        ),
        "env_vars": env_vars(archive, all_py),
        "messages": collect_messages(modules, core),
        "identifiers": collect_identifiers(modules, core, with_params=False, with_keys=True),
        "values": collect_literal_values(modules, core),
        "modules": module_names(archive, "peft/"),
        "exports": package_exports(archive, "peft/__init__.py"),
        "requires_dist": requires_dist(archive),
    }


TRANSFORMERS_CORE = [
    "transformers/training_args.py",
    "transformers/trainer.py",
    "transformers/trainer_utils.py",
    "transformers/modeling_utils.py",
    "transformers/integrations/",
    "transformers/modeling_flash_attention_utils.py",
    "transformers/utils/import_utils.py",
    "transformers/utils/quantization_config.py",
    "transformers/quantizers/quantizer_bnb_4bit.py",
    "transformers/quantizers/quantizer_bnb_8bit.py",
    "transformers/quantizers/auto.py",
]


def extract_transformers(archive: SourceArchive) -> Dict[str, object]:
    modules = ModuleSet(archive)
    core = _existing(archive, [*TRANSFORMERS_CORE, "transformers/configuration_utils.py"])
    non_model = [p for p in archive.python_files("transformers/") if not p.startswith("transformers/models/")]
    classes = _classes(
        modules,
        _existing(archive, ["transformers/training_args.py", "transformers/utils/quantization_config.py"]),
        lambda n: n in ("TrainingArguments", "BitsAndBytesConfig", "QuantizationConfigMixin"),
    )
    return {
        "classes": classes,
        "env_vars": env_vars(archive, non_model),
        "messages": collect_messages(modules, core),
        "identifiers": collect_identifiers(modules, core, with_params=False, with_keys=True),
        "values": collect_literal_values(
            modules, _existing(archive, ["transformers/training_args.py", "transformers/trainer_utils.py"])
        ),
        # Every module outside ``transformers/models/`` (the checker accepts any path under that folder).
        "modules": [m for m in module_names(archive, "transformers/") if not m.startswith("transformers.models.")],
        "exports": package_exports(archive, "transformers/__init__.py"),
        "requires_dist": requires_dist(archive),
    }


_CONFIG_KEY_RE = re.compile(r"^[a-z_][a-z0-9_]*$")


def _deepspeed_config_keys(archive: SourceArchive, modules: ModuleSet) -> Dict[str, List[str]]:
    """Keys a DeepSpeed JSON config may hold: pydantic config-model fields with aliases, plus the string constants
    of DeepSpeed's ``constants.py`` / ``config.py`` / ``*_config.py`` modules (the top-level and section key names)."""
    model_keys: Set[str] = set()
    zero_keys: Set[str] = set()
    for path in archive.python_files("deepspeed/"):
        text = archive.read_text(path)
        if "DeepSpeedConfigModel" not in text and "BaseModel" not in text:
            continue
        module = modules.by_path(path)
        for node in module.classes.values():
            bases = [unparse(b) for b in node.bases]
            if not any(b.endswith(("DeepSpeedConfigModel", "BaseModel")) for b in bases):
                continue
            fields = class_fields(node)
            names = set(fields) | {str(f["alias"]) for f in fields.values() if "alias" in f}
            model_keys |= names
            if path.startswith("deepspeed/runtime/zero/"):
                zero_keys |= names
    constants: Set[str] = set()
    key_files = [
        p
        for p in archive.python_files("deepspeed/")
        if p.rsplit("/", 1)[-1] in ("constants.py", "config.py") or p.endswith("_config.py")
    ]
    for path in key_files:
        for _name, value in string_constants(archive.parse(path)).items():
            # Only identifier-shaped values can be config keys (skips paths, ports and regexes in these modules).
            if isinstance(value, str) and _CONFIG_KEY_RE.match(value):
                constants.add(value)
    return {"any_level": sorted(model_keys | constants), "zero_optimization": sorted(zero_keys)}


def extract_deepspeed(archive: SourceArchive) -> Dict[str, object]:
    modules = ModuleSet(archive)
    all_py = list(archive.python_files("deepspeed/", "op_builder/", "setup.py", "accelerator/"))
    core = _existing(
        archive,
        [
            "deepspeed/runtime/zero/",
            "deepspeed/runtime/engine.py",
            "deepspeed/runtime/config.py",
            "deepspeed/runtime/config_utils.py",
            "deepspeed/__init__.py",
            "deepspeed/utils/",
            "op_builder/builder.py",
            "deepspeed/ops/op_builder/builder.py",
        ],
    )
    build_vars: Dict[str, Set[str]] = {}
    op_names: Set[str] = set()
    for path in archive.python_files("op_builder/", "deepspeed/ops/op_builder/"):
        for node in ast.walk(archive.parse(path)):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)):
                continue
            if not isinstance(node.value.value, str):
                continue
            targets = [unparse(t) for t in node.targets]
            if "BUILD_VAR" in targets:
                build_vars.setdefault(node.value.value, set()).add("read")
            elif "NAME" in targets:
                op_names.add(node.value.value)  # op names such as ``fused_adam`` (what JIT builds are called)
    classes = _classes(
        modules,
        _existing(archive, ["deepspeed/runtime/zero/config.py", "deepspeed/runtime/zero/offload_config.py"]),
        lambda n: n.startswith("DeepSpeedZero"),
    )
    return {
        "classes": classes,
        "deepspeed_config_keys": _deepspeed_config_keys(archive, modules),
        "env_vars": env_vars(archive, all_py, extra=build_vars),
        "messages": collect_messages(modules, core),
        "identifiers": sorted(
            set(collect_identifiers(modules, core, with_params=False, top_level_only=True)) | op_names
        ),
        "modules": module_names(archive, "deepspeed/"),
        "exports": package_exports(archive, "deepspeed/__init__.py"),
        "requires_dist": requires_dist(archive),
    }


def extract_small(package_dir: str) -> Callable[[SourceArchive], Dict[str, object]]:
    """bitsandbytes, liger-kernel, kernels: identifiers, env vars, messages of the whole (small) package."""

    def extract(archive: SourceArchive) -> Dict[str, object]:
        modules = ModuleSet(archive)
        all_py = [p for p in archive.python_files(f"{package_dir}/") if "/test" not in p]
        return {
            "env_vars": env_vars(archive, all_py),
            "messages": collect_messages(modules, all_py),
            "identifiers": collect_identifiers(modules, all_py, with_params=False, top_level_only=True),
            "modules": module_names(archive, f"{package_dir}/"),
            "exports": package_exports(archive, f"{package_dir}/__init__.py"),
            "requires_dist": requires_dist(archive),
        }

    return extract
