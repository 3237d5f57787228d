"""Accelerate: ``accelerate launch`` options, config-file keys (top level and nested sections), env vars, messages."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Set

from .archive import SourceArchive
from .argparse_static import FlagCollector
from .common import env_vars, module_names, package_exports, requires_dist
from .pysrc import (
    ModuleSet,
    add_base_closure,
    class_record,
    collect_identifiers,
    collect_literal_values,
    collect_messages,
    unparse,
)

PACKAGE = "accelerate"
SKIP_PREFIXES = ("accelerate/test_utils/",)
# ``accelerate launch`` copies each nested key of these sections onto the parsed args, adding this prefix when the
# key lacks it (``accelerate/commands/launch.py``, ``_validate_launch_command``).
SECTION_PREFIXES = {"fsdp_config": "fsdp_", "fp8_config": "fp8_", "dynamo_config": "dynamo_"}


def launch_flags(modules: ModuleSet) -> Dict[str, Dict[str, object]]:
    module = modules.get("accelerate.commands.launch")
    if module is None or "launch_command_parser" not in module.functions:
        raise RuntimeError("accelerate/commands/launch.py: launch_command_parser not found")
    collector = FlagCollector(modules)
    collector.collect(module, module.functions["launch_command_parser"])
    flags = {}
    for name, record in collector.flags.items():
        record.pop("field", None)
        flags[name] = record
    return dict(sorted(flags.items()))


def launch_dests(module_tree: ast.Module) -> List[str]:
    """The ``dest`` of every ``add_argument`` in ``launch_command_parser`` (what config keys are copied onto)."""
    dests: Set[str] = set()
    for node in ast.walk(module_tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            explicit = [
                kw.value.value for kw in node.keywords if kw.arg == "dest" and isinstance(kw.value, ast.Constant)
            ]
            if explicit:
                dests.add(explicit[0])
                continue
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            longs = [n for n in names if n.startswith("--")]
            if longs:
                dests.add(longs[0][2:].replace("-", "_"))
            elif names and not names[0].startswith("-"):
                dests.add(names[0])
    return sorted(dests)


def _key_text(node: ast.expr, local: Dict[str, str]) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return local.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _key_text(node.left, local), _key_text(node.right, local)
        if left is not None and right is not None:
            return left + right
    return None


def questionnaire_keys(modules: ModuleSet) -> Dict[str, List[str]]:
    """Keys ``accelerate config`` writes into each nested section (``fsdp_config["fsdp_version"] = ...``)."""
    out: Dict[str, Set[str]] = {}
    for name in ("accelerate.commands.config.cluster", "accelerate.commands.config.sagemaker"):
        module = modules.get(name)
        if module is None:
            continue
        for func in module.functions.values():
            local: Dict[str, str] = {}
            for node in ast.walk(func):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant):
                        if isinstance(node.value.value, str):
                            local[target.id] = node.value.value
                    elif (
                        isinstance(target, ast.Subscript)
                        and isinstance(target.value, ast.Name)
                        and target.value.id.endswith("_config")
                    ):
                        key = _key_text(target.slice, local)
                        if key:
                            out.setdefault(target.value.id, set()).add(key)
    return {section: sorted(keys) for section, keys in sorted(out.items())}


def config_file_facts(modules: ModuleSet) -> Dict[str, object]:
    config_args = modules.get("accelerate.commands.config.config_args")
    launch = modules.get("accelerate.commands.launch")
    if config_args is None or launch is None:
        raise RuntimeError("accelerate config modules not found")
    top: Dict[str, List[str]] = {}
    for cls_name in ("ClusterConfig", "SageMakerConfig"):
        fields: Set[str] = set()
        node = config_args.classes.get(cls_name)
        while node is not None:
            fields.update(
                s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            )
            base = unparse(node.bases[0]) if node.bases else ""
            node = config_args.classes.get(base)
        top[cls_name] = sorted(fields)
    return {
        "top_level": top,
        # ``process_config`` accepts and converts these legacy keys before the unknown-key check.
        "legacy_top_level": sorted(_legacy_keys(config_args)),
        "nested_written_by_questionnaire": questionnaire_keys(modules),
        "nested_prefixes": SECTION_PREFIXES,
        "launch_dests": launch_dests(launch.tree),
    }


def _legacy_keys(module) -> Set[str]:
    node = module.classes.get("BaseConfig")
    keys: Set[str] = set()
    if node is None:
        return keys
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "process_config":
            for sub in ast.walk(stmt):
                if isinstance(sub, ast.Delete) or (
                    isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "pop"
                ):
                    for const in ast.walk(sub):
                        if isinstance(const, ast.Constant) and isinstance(const.value, str):
                            keys.add(const.value)
    return keys


def extract(archive: SourceArchive) -> Dict[str, object]:
    modules = ModuleSet(archive)
    all_py = [p for p in archive.python_files("accelerate/") if not p.startswith(SKIP_PREFIXES)]
    classes: Dict[str, Dict[str, object]] = {}
    for path in (
        "accelerate/utils/dataclasses.py",
        "accelerate/commands/config/config_args.py",
        "accelerate/parallelism_config.py",
    ):
        if not archive.has(path):
            continue
        module = modules.by_path(path)
        for name, node in module.classes.items():
            if name.endswith(("Plugin", "Config", "Kwargs")) and not name.startswith("_"):
                classes[f"{module.name}.{name}"] = class_record(modules, module, node)
    add_base_closure(modules, classes)
    return {
        "classes": dict(sorted(classes.items())),
        "clis": {"accelerate launch": {"flags": launch_flags(modules), "normalize": "underscore_dash"}},
        "config_file": config_file_facts(modules),
        "env_vars": env_vars(archive, all_py),
        "messages": collect_messages(modules, all_py),
        "identifiers": collect_identifiers(modules, all_py, with_params=False, with_keys=True),
        "values": collect_literal_values(modules, ["accelerate/utils/dataclasses.py", "accelerate/utils/constants.py"]),
        "modules": module_names(archive, "accelerate/"),
        "exports": package_exports(archive, "accelerate/__init__.py"),
        "requires_dist": requires_dist(archive),
    }
