"""vLLM: ``vllm serve`` flags, environment variables, HTTP routes with their gates, config classes, messages."""

from __future__ import annotations

import ast
import contextlib
import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

from .archive import SourceArchive
from .argparse_static import FlagCollector
from .common import env_vars, module_names, package_exports, requires_dist
from .pysrc import (
    ModuleInfo,
    ModuleSet,
    add_base_closure,
    class_record,
    collect_identifiers,
    collect_literal_values,
    collect_messages,
    unparse,
)

PACKAGE = "vllm"
# Where the serving surface, its configuration and the errors users meet live.
MESSAGE_DIRS = (
    "vllm/config/",
    "vllm/engine/",
    "vllm/entrypoints/",
    "vllm/lora/",
    "vllm/v1/engine/",
    "vllm/v1/worker/",
    "vllm/v1/core/",
    "vllm/v1/executor/",
    "vllm/renderers/",
    "vllm/exceptions.py",
    "vllm/distributed/",
    "vllm/utils/",
    "vllm/platforms/",
    "vllm/envs.py",
    "vllm/version.py",
)
IDENTIFIER_DIRS = (
    "vllm/config/",
    "vllm/engine/",
    "vllm/entrypoints/openai/",
    "vllm/entrypoints/serve/",
    "vllm/entrypoints/cli/",
    "vllm/lora/",
    "vllm/v1/engine/",
    "vllm/distributed/weight_transfer/",
)
# Module paths are listed for these folders only; a dotted path elsewhere in vllm is not judged.
MODULE_DIRS = (
    "vllm/entrypoints/",
    "vllm/config/",
    "vllm/engine/",
    "vllm/lora/",
    "vllm/v1/engine/",
    "vllm/distributed/weight_transfer/",
)
# Disaggregated-serving connectors: many messages, none on the TRL path.
MESSAGE_EXCLUDE = (
    "vllm/distributed/kv_transfer/",
    "vllm/distributed/ec_transfer/",
    "vllm/distributed/eplb/",
    "vllm/distributed/aux_output_connector/",
)
CONFIG_CLASS_DIRS = ("vllm/config/", "vllm/engine/arg_utils.py")
_HTTP_METHODS = ("get", "post", "put", "delete", "patch", "api_route")
_ENV_ATTR = re.compile(r"\benvs\.([A-Z][A-Z0-9_]+)")
_ENV_LITERAL = re.compile(r"environ(?:\.get)?\s*[\[(]\s*['\"]([A-Z][A-Z0-9_]+)['\"]")
_FLAG_GETATTR = re.compile(r"getattr\(\s*[\w.]*args\s*,\s*['\"]([a-z_][a-z0-9_]*)['\"]")
_FLAG_ATTR = re.compile(r"\bargs\.([a-z_][a-z0-9_]*)")


# --------------------------------------------------------------------------------------------------------------------
# vllm serve flags
# --------------------------------------------------------------------------------------------------------------------


def serve_flags(modules: ModuleSet) -> Dict[str, Dict[str, object]]:
    """Option strings of ``vllm serve``, starting from ``ServeSubcommand.subparser_init``."""
    module = modules.get("vllm.entrypoints.cli.serve")
    if module is None:
        raise RuntimeError("vllm/entrypoints/cli/serve.py not found")
    collector = FlagCollector(modules)
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "subparser_init":
                    collector.collect(module, stmt, (module, node))
    if not collector.flags:
        raise RuntimeError("no vllm serve flags found: the parser layout changed")
    return dict(sorted(collector.flags.items()))


# --------------------------------------------------------------------------------------------------------------------
# Routes and their gates
# --------------------------------------------------------------------------------------------------------------------


def _parents(tree: ast.AST) -> Dict[int, ast.AST]:
    out: Dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            out[id(child)] = node
    return out


class _Graph:
    """Call sites and include sites across ``vllm/entrypoints``, for walking from a route up to the app."""

    def __init__(self, modules: ModuleSet, paths: List[str]) -> None:
        self.modules = modules
        self.infos: List[ModuleInfo] = [modules.by_path(p) for p in paths]
        self.parents = {m.name: _parents(m.tree) for m in self.infos}
        # qualified function name -> list of (module, call node)
        self.calls: Dict[str, List[Tuple[ModuleInfo, ast.Call]]] = {}
        # qualified router variable -> list of (module, include call node)
        self.includes: Dict[str, List[Tuple[ModuleInfo, ast.Call]]] = {}
        for info in self.infos:
            for node in ast.walk(info.tree):
                if not isinstance(node, ast.Call):
                    continue
                if isinstance(node.func, ast.Attribute) and node.func.attr == "include_router" and node.args:
                    target = self._qualify(info, unparse(node.args[0]))
                    self.includes.setdefault(target, []).append((info, node))
                elif isinstance(node.func, ast.Name):
                    target = self._qualify(info, node.func.id)
                    self.calls.setdefault(target, []).append((info, node))

    def _qualify(self, module: ModuleInfo, name: str) -> str:
        owner, resolved = self.modules.resolve(module, name)
        return f"{owner.name}.{resolved}" if owner is not None else resolved

    def enclosing_function(self, module: ModuleInfo, node: ast.AST) -> Optional[ast.FunctionDef]:
        parents = self.parents[module.name]
        current = parents.get(id(node))
        while current is not None:
            if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return current  # type: ignore[return-value]
            current = parents.get(id(current))
        return None

    def local_conditions(self, module: ModuleInfo, node: ast.AST, func: Optional[ast.AST]) -> List[str]:
        """``if`` tests around ``node`` inside ``func`` plus early ``return`` guards before it."""
        parents = self.parents[module.name]
        conditions: List[str] = []
        child: ast.AST = node
        current = parents.get(id(node))
        while current is not None and current is not func:
            if isinstance(current, ast.If):
                test = unparse(current.test)
                conditions.append(test if _contains(current.body, child) else f"not ({test})")
            child = current
            current = parents.get(id(current))
        if func is not None:
            for stmt in func.body:  # type: ignore[attr-defined]
                if stmt is child or _contains([stmt], node):
                    break
                if isinstance(stmt, ast.If) and any(isinstance(s, ast.Return) for s in stmt.body):
                    test = stmt.test
                    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                        conditions.append(unparse(test.operand))  # ``if not x: return`` gates on ``x``
                    else:
                        conditions.append(f"not ({unparse(test)})")
        return [self._inline_locals(c, func) for c in conditions]

    def _inline_locals(self, condition: str, func: Optional[ast.AST]) -> str:
        """Append the definitions of local names a condition uses (``enabled = a or b``), for gate extraction."""
        if func is None:
            return condition
        extra = []
        assigns = {}
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigns.setdefault(node.targets[0].id, unparse(node.value))
        names = set(re.findall(r"\b([a-z_][a-z0-9_]*)\b", condition))
        for _ in range(3):
            added = False
            for name in sorted(names):
                if name in assigns and assigns[name] not in extra:
                    extra.append(assigns[name])
                    names |= set(re.findall(r"\b([a-z_][a-z0-9_]*)\b", assigns[name]))
                    added = True
            if not added:
                break
        return condition if not extra else f"{condition}  # where {'; '.join(extra)}"

    def gates_of_function(self, qualified: str, seen: Set[str]) -> List[List[str]]:
        """Alternative condition lists under which ``qualified`` runs (an empty list = unconditional)."""
        if qualified in seen:
            return [[]]
        seen = seen | {qualified}
        sites = self.calls.get(qualified, [])
        if not sites:
            return [[]]
        out = []
        for module, call in sites:
            func = self.enclosing_function(module, call)
            local = self.local_conditions(module, call, func)
            if func is None:
                out.append(local)
                continue
            for upper in self.gates_of_function(f"{module.name}.{func.name}", seen):
                out.append(upper + local)
        return out

    def gates_of_router(self, qualified_router: str) -> List[List[str]]:
        out = []
        for module, call in self.includes.get(qualified_router, []):
            func = self.enclosing_function(module, call)
            local = self.local_conditions(module, call, func)
            if func is None:
                out.append(local)
                continue
            for upper in self.gates_of_function(f"{module.name}.{func.name}", set()):
                out.append(upper + local)
        return out or [[]]


def _contains(stmts: List[ast.stmt], node: ast.AST) -> bool:
    return any(node is sub for stmt in stmts for sub in ast.walk(stmt))


def _iter_route_decorators(module: ModuleInfo) -> Iterator[Tuple[ast.AST, str, str, str]]:
    """(node, router variable, method, path) for ``@router.post("/x")`` and ``router.add_api_route("/x", ...)``."""
    for node in ast.walk(module.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                if (
                    isinstance(deco, ast.Call)
                    and isinstance(deco.func, ast.Attribute)
                    and deco.func.attr in _HTTP_METHODS
                    and deco.args
                    and isinstance(deco.args[0], ast.Constant)
                    and isinstance(deco.args[0].value, str)
                    and deco.args[0].value.startswith("/")
                ):
                    yield node, unparse(deco.func.value), deco.func.attr.upper(), deco.args[0].value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("add_api_route", "add_route")
            and node.args
        ):
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("/"):
                methods = "GET"
                for kw in node.keywords:
                    if kw.arg == "methods":
                        with contextlib.suppress(ValueError, SyntaxError, TypeError):
                            methods = ",".join(ast.literal_eval(kw.value))
                yield node, unparse(node.func.value), methods, first.value


def _gate_summary(conditions: List[str]) -> Dict[str, List[str]]:
    joined = " ".join(conditions)
    env = sorted(set(_ENV_ATTR.findall(joined)) | set(_ENV_LITERAL.findall(joined)))
    flag_names = set(_FLAG_GETATTR.findall(joined)) | set(_FLAG_ATTR.findall(joined))
    flags = sorted(f"--{name.replace('_', '-')}" for name in flag_names)
    out: Dict[str, List[str]] = {}
    if conditions:
        out["conditions"] = [c.split("  # where ", 1)[0] for c in conditions]
    if env:
        out["env"] = env
    if flags:
        out["flags"] = flags
    return out


def routes(modules: ModuleSet, archive: SourceArchive) -> Dict[str, Dict[str, object]]:
    paths = list(archive.python_files("vllm/entrypoints/"))
    graph = _Graph(modules, paths)
    found: Dict[str, Dict[str, object]] = {}
    for info in graph.infos:
        for node, router, method, path in _iter_route_decorators(info):
            func = graph.enclosing_function(info, node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and func is not None:
                # The decorated handler itself is found first; its definition site is inside ``func``.
                pass
            local = graph.local_conditions(info, node, func) if func is not None else []
            if func is not None:
                alternatives = [upper + local for upper in graph.gates_of_function(f"{info.name}.{func.name}", set())]
                if router != "app":
                    # A router defined inside the function is attached by an include in that same function.
                    alternatives = [
                        alt + graph.local_conditions(info, call, func)
                        for alt in alternatives
                        for (mod, call) in graph.includes.get(graph._qualify(info, router), [])[:1]
                        if mod is info and graph.enclosing_function(info, call) is func
                    ] or alternatives
            else:
                alternatives = graph.gates_of_router(f"{info.name}.{router}")
            best = min(alternatives, key=len)
            variant = {"methods": sorted(method.split(",")), "module": info.name}
            variant.update(_gate_summary(best))
            entry = found.setdefault(path, {"variants": []})
            if variant not in entry["variants"]:  # type: ignore[operator]
                entry["variants"].append(variant)  # type: ignore[union-attr]
    for entry in found.values():
        entry["variants"].sort(key=lambda v: (v["module"], v["methods"]))  # type: ignore[union-attr]
    return dict(sorted(found.items()))


# --------------------------------------------------------------------------------------------------------------------
# Env vars and classes
# --------------------------------------------------------------------------------------------------------------------


def declared_env_vars(modules: ModuleSet) -> Dict[str, Set[str]]:
    """Keys of ``environment_variables`` in ``vllm/envs.py`` (the variables vLLM reads)."""
    module = modules.get("vllm.envs")
    out: Dict[str, Set[str]] = {}
    if module is None:
        return out
    for node in ast.walk(module.tree):
        target_names = []
        if isinstance(node, ast.Assign):
            target_names = [unparse(t) for t in node.targets]
        elif isinstance(node, ast.AnnAssign):
            target_names = [unparse(node.target)]
        if "environment_variables" in target_names and isinstance(node.value, ast.Dict):
            for key in node.value.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    out.setdefault(key.value, set()).add("read")
    if not out:
        raise RuntimeError("vllm/envs.py: environment_variables not found")
    return out


def config_classes(modules: ModuleSet, archive: SourceArchive) -> Dict[str, Dict[str, object]]:
    classes: Dict[str, Dict[str, object]] = {}
    paths = [p for p in archive.python_files(*CONFIG_CLASS_DIRS)]
    for path in paths:
        module = modules.by_path(path)
        for name, node in module.classes.items():
            if name.endswith(("Config", "Args")) and not name.startswith("_"):
                classes[f"{module.name}.{name}"] = class_record(modules, module, node)
    for path in archive.python_files("vllm/entrypoints/"):
        if path.endswith("cli_args.py"):
            module = modules.by_path(path)
            for name, node in module.classes.items():
                if name.endswith("Args"):
                    classes[f"{module.name}.{name}"] = class_record(modules, module, node)
    add_base_closure(modules, classes)
    for record in classes.values():
        record.pop("init_params", None)
    return dict(sorted(classes.items()))


def extract(archive: SourceArchive) -> Dict[str, object]:
    modules = ModuleSet(archive)
    message_paths = [p for p in archive.python_files(*MESSAGE_DIRS) if not p.startswith(MESSAGE_EXCLUDE)]
    return {
        "classes": config_classes(modules, archive),
        "clis": {"vllm serve": {"flags": serve_flags(modules), "normalize": "underscore_dash"}},
        "routes": routes(modules, archive),
        "env_vars": env_vars(archive, archive.python_files("vllm/"), extra=declared_env_vars(modules)),
        "messages": collect_messages(modules, message_paths),
        "identifiers": collect_identifiers(
            modules, archive.python_files(*IDENTIFIER_DIRS), with_params=False, with_keys=True
        ),
        "values": collect_literal_values(modules, [p for p in archive.python_files("vllm/config/")]),
        "modules": module_names(archive, *MODULE_DIRS),
        "modules_cover": sorted(d.rstrip("/").replace("/", ".") for d in MODULE_DIRS),
        "exports": package_exports(archive, "vllm/__init__.py"),
        "requires_dist": requires_dist(archive),
    }
