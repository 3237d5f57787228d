"""Pieces shared by the per-package extractors: metadata, env vars, module lists, YAML presets."""

from __future__ import annotations

import ast
import re
from typing import Dict, Iterable, List, Optional, Set

from .archive import SourceArchive, module_name
from .pysrc import env_table, iter_env_vars, merge_env

# Requirements on these distributions are kept in the facts (the bundle's version statements depend on them).
TRACKED_REQUIREMENTS = (
    "accelerate",
    "bitsandbytes",
    "deepspeed",
    "huggingface-hub",
    "kernels",
    "liger-kernel",
    "peft",
    "torch",
    "transformers",
    "trl",
    "vllm",
)
_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requires_dist(archive: SourceArchive) -> List[str]:
    """``Requires-Dist`` lines (from wheel METADATA or sdist requirements files) that name a tracked package."""
    lines: List[str] = []
    for path in archive.names(suffix="METADATA") + archive.names(suffix="PKG-INFO"):
        if path.count("/") > 1:
            continue
        for line in archive.read_text(path).splitlines():
            if line.startswith("Requires-Dist:"):
                lines.append(line.split(":", 1)[1].strip())
            elif not line.strip():
                break  # the body (long description) starts after the first blank line
    for path in archive.names(prefix="requirements/", suffix=".txt"):
        for line in archive.read_text(path).splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                lines.append(f"{line}; file == {path.split('/')[-1]!r}")
    keep = []
    for line in lines:
        match = _REQ_NAME.match(line)
        if match and _normalise(match.group(1)) in TRACKED_REQUIREMENTS:
            keep.append(line)
    return sorted(set(keep))


_ENV_HINT = re.compile(r"environ|getenv|putenv|_env\b|env\[|env\.|_env\(|from_env|ENV")


def env_vars(
    archive: SourceArchive, paths: Iterable[str], extra: Optional[Dict[str, Set[str]]] = None
) -> Dict[str, str]:
    """Environment variables read or set in ``paths`` (files that never mention the environment are skipped)."""
    found: Dict[str, Set[str]] = {}
    for path in paths:
        if _ENV_HINT.search(archive.read_text(path)):
            merge_env(found, iter_env_vars(archive.parse(path)))
    for name, kinds in (extra or {}).items():
        found.setdefault(name, set()).update(kinds)
    return env_table(found)


def module_names(archive: SourceArchive, *prefixes: str) -> List[str]:
    return sorted({module_name(p) for p in archive.python_files(*prefixes)})


def load_yaml_text(text: str) -> object:
    import yaml  # PyYAML is a maintainer/test dependency, never a runtime one

    return yaml.safe_load(text)


def string_constants(tree: ast.Module, name_pattern: str = r"^[A-Z][A-Z0-9_]*$") -> Dict[str, object]:
    """Module-level ``NAME = "literal"`` / ``NAME = ["a", "b"]`` constants."""
    pattern = re.compile(name_pattern)
    out: Dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if not pattern.match(name):
                continue
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, (str, list, tuple)):
                out[name] = list(value) if isinstance(value, tuple) else value
    return out


_EXPORT_CONTAINERS = ("_import_structure", "__all__", "MODULE_ATTRS", "_LAZY_IMPORTS")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def package_exports(archive: SourceArchive, init_path: str) -> List[str]:
    """Names a package's ``__init__.py`` makes importable: ``__all__``, lazy-import tables such as
    ``_import_structure`` or vLLM's ``MODULE_ATTRS``, and names it imports itself (also under ``TYPE_CHECKING``)."""
    if not archive.has(init_path):
        return []
    tree = archive.parse(init_path)
    names = set()
    for node in ast.walk(tree):
        target_text = ""
        value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target_text, value = ast.unparse(node.targets[0]), node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            target_text, value = ast.unparse(node.target), node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr
            in (
                "extend",
                "append",
                "update",
            )
        ):
            target_text, value = ast.unparse(node.func.value), node
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names if alias.name != "*")
            continue
        if value is None or not any(target_text.startswith(c) for c in _EXPORT_CONTAINERS):
            continue
        for sub in ast.walk(value):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and _NAME.match(sub.value):
                names.add(sub.value)
    return sorted(names)
