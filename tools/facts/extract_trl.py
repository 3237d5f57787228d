"""TRL: trainer configs, script dataclasses, the ``trl`` CLI, accelerate presets, env vars, messages."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional

from .archive import SourceArchive
from .common import env_vars, load_yaml_text, module_names, package_exports, requires_dist
from .pysrc import (
    ModuleInfo,
    ModuleSet,
    add_base_closure,
    class_record,
    collect_identifiers,
    collect_literal_values,
    collect_messages,
)

PACKAGE = "trl"


def _is_fact_class(name: str) -> bool:
    return name.endswith(("Config", "Arguments", "Trainer"))


def _command_names(modules: ModuleSet) -> List[Dict[str, str]]:
    """The registered ``trl`` subcommands, in registration order, from ``trl/cli/commands/__init__.py``."""
    module = modules.get("trl.cli.commands")
    if module is None:
        return []
    func = module.functions.get("get_commands")
    commands = []
    if func is None:
        return commands
    for node in ast.walk(func):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        cls_name = node.func.id
        if cls_name == "TrainingCommand" and node.args and isinstance(node.args[0], ast.Constant):
            commands.append({"name": node.args[0].value, "kind": "training"})
            continue
        _owner, cls_node, _ = modules.find_class(module, cls_name)
        if cls_node is None:
            continue
        for sub in ast.walk(cls_node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "__init__":
                for kw in sub.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        commands.append({"name": kw.value.value, "kind": cls_name})
    return commands


def _parser_dataclasses(modules: ModuleSet, script: ModuleInfo) -> List[str]:
    """Qualified names of the dataclasses ``make_parser`` hands to ``TrlParser`` in one ``trl/scripts`` module."""
    func = script.functions.get("make_parser")
    if func is None:
        return []
    names: List[str] = []
    for node in ast.walk(func):
        value: Optional[ast.expr] = None
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "dataclass_types" for t in node.targets
        ):
            value = node.value
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("TrlParser") and node.args:
            value = node.args[0]
        elif isinstance(node, ast.keyword) and node.arg == "dataclass_types":
            value = node.value
        if value is None or (isinstance(value, ast.Name) and value.id == "dataclass_types"):
            continue
        elts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        for elt in elts:
            _, cls_node, qualified = modules.find_class(script, ast.unparse(elt))
            if cls_node is not None and qualified not in names:
                names.append(qualified)
        if names:
            break
    return names


def _reserved_parser_flags(modules: ModuleSet) -> List[str]:
    """Flags that TRL's own launcher code consumes before the dataclass parser sees them."""
    flags = set()
    for name in ("trl.scripts.utils", "trl.cli.accelerate_config"):
        module = modules.get(name)
        if module is None:
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
                value = node.left.value
                if isinstance(value, str) and value.startswith("--"):
                    flags.add(value)
    return sorted(flags)


def extract(archive: SourceArchive) -> Dict[str, object]:
    modules = ModuleSet(archive)
    all_py = list(archive.python_files("trl/"))

    classes: Dict[str, Dict[str, object]] = {}
    for path in archive.python_files("trl/trainer/", "trl/experimental/", "trl/scripts/"):
        module = modules.by_path(path)
        for name, node in module.classes.items():
            if _is_fact_class(name):
                classes[f"{module.name}.{name}"] = class_record(modules, module, node)
    add_base_closure(modules, classes)
    # Trainers keep only their constructor parameters: their bodies are not configuration.
    for qualified, record in classes.items():
        if qualified.endswith("Trainer"):
            record["fields"] = {}

    clis: Dict[str, Dict[str, object]] = {}
    reserved = _reserved_parser_flags(modules)
    for command in _command_names(modules):
        name = command["name"]
        script = modules.get(f"trl.scripts.{name.replace('-', '_')}")
        entry: Dict[str, object] = {"kind": command["kind"], "normalize": "underscore_dash"}
        if script is not None:
            entry["dataclasses"] = _parser_dataclasses(modules, script)
            for qualified in entry["dataclasses"]:  # type: ignore[union-attr]
                if qualified not in classes:
                    module_part, _, cls_name = qualified.rpartition(".")
                    owner = modules.get(module_part)
                    if owner is not None and cls_name in owner.classes:
                        classes[qualified] = class_record(modules, owner, owner.classes[cls_name])
        if command["kind"] == "training":
            entry["launcher_flags"] = reserved
            entry["forwards_unknown_to"] = "accelerate launch"
        elif name == "vllm-serve":
            entry["forwards_unknown_to"] = "vllm serve"
            entry["launcher_flags"] = ["--config"]
        clis[f"trl {name}"] = entry

    presets = {}
    for path in archive.names(prefix="trl/accelerate_configs/", suffix=".yaml"):
        presets[path.rsplit("/", 1)[-1][: -len(".yaml")]] = load_yaml_text(archive.read_text(path))

    return {
        "classes": dict(sorted(classes.items())),
        "clis": clis,
        "accelerate_presets": presets,
        "env_vars": env_vars(archive, all_py),
        "messages": collect_messages(modules, all_py),
        "identifiers": collect_identifiers(modules, all_py, with_keys=True),
        "values": collect_literal_values(modules, all_py),
        "modules": module_names(archive, "trl/"),
        "exports": package_exports(archive, "trl/__init__.py"),
        "requires_dist": requires_dist(archive),
    }
