"""Small helpers shared by the checks."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from .common import PLACEHOLDER_RE
from .upstream import Context


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _package_label(ctx: Context, package: str) -> str:
    versions = ctx.selection.get(package, [])
    return f"{package} {'/'.join(versions)}" if versions else package


def _vllm_label(ctx: Context) -> str:
    return _package_label(ctx, "vllm")


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not re.match(r"^-\d", token) and not token.startswith("-<")


def _vllm_option(name: str) -> str:
    """vLLM's FlexibleArgumentParser: ``--a.b`` sets a key of ``--a``; ``-O3`` means ``--optimization-level 3``."""
    if name.startswith("-O") and not name.startswith("--"):
        return "--optimization-level"
    return name.split(".", 1)[0]


def _json_key_line(lines: List[str], key: str) -> int:
    needle = json.dumps(key)
    for i, line in enumerate(lines):
        if needle + ":" in line.replace(" :", ":") or needle + " :" in line:
            return i
    return 0


def _parse_python(source: str) -> Optional[ast.Module]:
    for attempt in (source, PLACEHOLDER_RE.sub("...", source)):
        try:
            return ast.parse(attempt)
        except SyntaxError:
            continue
    return None


def _split_words(text: str) -> List[str]:
    try:
        return shlex.split(text, comments=False)
    except ValueError:
        return text.split()


def _parser_flags(path: Path) -> Optional[Dict[str, Dict[str, Any]]]:
    """Option strings of ``build_parser()`` in a bundle script (subparsers included); None when there is none."""
    module_name = f"_skill_claims_script_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    added = str(path.parent) not in sys.path
    if added:
        sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        build = getattr(module, "build_parser", None)
        if build is None:
            return None
        parser = build()
    except Exception:  # a half-written script must not crash the whole check
        return None
    finally:
        if added:
            sys.path.remove(str(path.parent))
    flags: Dict[str, Dict[str, Any]] = {}
    pending = [parser]
    while pending:
        current = pending.pop()
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending.extend(action.choices.values())
                continue
            for option in action.option_strings:
                flags[option] = {"takes_value": action.nargs != 0}
    return flags
