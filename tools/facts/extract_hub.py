"""huggingface_hub: the ``hf jobs ...`` and ``hf buckets ...`` command trees with their options, env vars, messages.

The CLI is built by ``huggingface_hub/cli/_framework.py`` from annotated function signatures: an option's names are
the explicit ones given to ``Option("-x", "--name")``, otherwise ``--param-name`` (underscores to dashes), and a
``bool`` option without explicit names becomes ``--name/--no-name``. Command names are explicit or the function
name with dashes; a name may carry pipe aliases (``"list | ls"``).
"""

from __future__ import annotations

import ast
from typing import Dict, List, Optional

from .archive import SourceArchive
from .common import env_vars, module_names, package_exports, requires_dist
from .pysrc import ModuleInfo, ModuleSet, collect_messages, unparse

PACKAGE = "huggingface_hub"
GROUPS = {"jobs": "huggingface_hub.cli.jobs", "buckets": "huggingface_hub.cli.buckets"}


def _split_names(text: str) -> List[str]:
    return [part.strip() for part in text.split("|") if part.strip()]


def _resolve_annotated(modules: ModuleSet, module: ModuleInfo, annotation: Optional[ast.expr], depth: int = 0):
    """(base type text, marker call or None) for a parameter annotation, following ``XOpt = Annotated[...]``."""
    if annotation is None or depth > 5:
        return "", None
    if isinstance(annotation, ast.Subscript) and unparse(annotation.value).endswith("Annotated"):
        parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        marker = next((p for p in parts[1:] if isinstance(p, ast.Call)), None)
        return unparse(parts[0]), marker
    if isinstance(annotation, ast.Name):
        owner, resolved = modules.resolve(module, annotation.id)
        if owner is not None and resolved in owner.assigns:
            return _resolve_annotated(modules, owner, owner.assigns[resolved], depth + 1)
    return unparse(annotation), None


def _is_bool(type_text: str) -> bool:
    return type_text.replace(" ", "") in ("bool", "bool|None", "Optional[bool]")


def _command_options(modules: ModuleSet, module: ModuleInfo, func: ast.FunctionDef) -> Dict[str, Dict[str, object]]:
    options: Dict[str, Dict[str, object]] = {}
    args = func.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
    for arg, default in params:
        if arg.arg in ("self", "ctx"):
            continue
        base, marker = _resolve_annotated(modules, module, arg.annotation)
        kind = unparse(marker.func) if marker is not None else ("Argument" if default is None else "Option")
        if kind.endswith("Argument"):
            continue
        if unparse(arg.annotation).endswith("Context"):
            continue
        explicit = [a.value for a in (marker.args if marker is not None else []) if isinstance(a, ast.Constant)]
        is_flag = _is_bool(base)
        record: Dict[str, object] = {"param": arg.arg}
        if is_flag:
            record["takes_value"] = False
        if explicit:
            names: List[str] = []
            for decl in explicit:
                names.extend(d for d in decl.split("/") if d)
        else:
            kebab = arg.arg.lower().replace("_", "-")
            names = [f"--{kebab}"] + ([f"--no-{kebab}"] if is_flag else [])
        for name in names:
            options[name] = dict(record)
    return options


def _group_commands(modules: ModuleSet, module: ModuleInfo) -> Dict[str, Dict[str, Dict[str, object]]]:
    """``{"sub path": {option: record}}`` for one CLI module, subgroups included (``uv run``, ``scheduled ps``)."""
    group_names: Dict[str, str] = {}  # variable -> path prefix ("" for the module's root group)
    for node in module.tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and unparse(node.value.func).endswith("typer_factory")
            and isinstance(node.targets[0], ast.Name)
        ):
            group_names[node.targets[0].id] = ""
    # add_group(sub, name="uv") nests a group under another one.
    changed = True
    while changed:
        changed = False
        for node in ast.walk(module.tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_group"
                and node.args
            ):
                parent = unparse(node.func.value)
                child = unparse(node.args[0])
                name = next((kw.value.value for kw in node.keywords if kw.arg == "name"), None)
                if parent in group_names and child in group_names and name:
                    prefix = (group_names[parent] + " " + _split_names(name)[0]).strip()
                    if group_names[child] != prefix:
                        group_names[child] = prefix
                        changed = True
    commands: Dict[str, Dict[str, Dict[str, object]]] = {}

    def register(group_var: str, call: ast.Call, func: Optional[ast.FunctionDef]) -> None:
        if group_var not in group_names or func is None:
            return
        explicit = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        explicit += [kw.value.value for kw in call.keywords if kw.arg == "name" and isinstance(kw.value, ast.Constant)]
        names = _split_names(explicit[0]) if explicit else [func.name.lower().replace("_", "-")]
        options = _command_options(modules, module, func)
        for name in names:
            path = (group_names[group_var] + " " + name).strip()
            commands[path] = options

    for node in module.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "command":
                    register(unparse(deco.func.value), deco, node)  # type: ignore[arg-type]
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            outer = node.value  # group.command(name="cp", ...)(func)
            inner = outer.func
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "command":
                target = outer.args[0] if outer.args else None
                func = _find_function(modules, module, target)
                register(unparse(inner.func.value), inner, func)
    return commands


def _find_function(modules: ModuleSet, module: ModuleInfo, target: Optional[ast.expr]) -> Optional[ast.FunctionDef]:
    if target is None:
        return None
    owner, resolved = modules.resolve(module, unparse(target))
    if owner is not None and resolved in owner.functions:
        return owner.functions[resolved]
    return None


def cli_tree(modules: ModuleSet) -> Dict[str, Dict[str, object]]:
    clis: Dict[str, Dict[str, object]] = {}
    for group, module_path in GROUPS.items():
        module = modules.get(module_path)
        if module is None:
            raise RuntimeError(f"{module_path} not found")
        for path, options in _group_commands(modules, module).items():
            clis[f"hf {group} {path}"] = {"flags": dict(sorted(options.items())), "normalize": "exact"}
    return dict(sorted(clis.items()))


def extract(archive: SourceArchive) -> Dict[str, object]:
    modules = ModuleSet(archive)
    all_py = list(archive.python_files("huggingface_hub/"))
    message_paths = list(
        archive.python_files(
            "huggingface_hub/cli/",
            "huggingface_hub/_jobs_api.py",
            "huggingface_hub/hf_api.py",
            "huggingface_hub/errors.py",
        )
    )
    return {
        "clis": cli_tree(modules),
        "env_vars": env_vars(archive, all_py),
        "messages": collect_messages(modules, message_paths),
        "modules": module_names(archive, "huggingface_hub/"),
        "exports": package_exports(archive, "huggingface_hub/__init__.py"),
        "requires_dist": requires_dist(archive),
    }
