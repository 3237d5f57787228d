"""Releases newer than the recorded matrix: one wording for every command.

The recorded matrix (``stack/matrix.json``, written by ``tools/stack_matrix.py``) lists every release the registry
served on its fetch date. A release past the newest one listed is one no table, floor or statement of the bundle
was checked against: each command says so with :func:`phrase` (``newer than the recorded matrix (<date>)``) and
never plans around it silently. Standard library only; the matrix is read once per process, bounded.
"""

from __future__ import annotations

import json
import os
from typing import Dict, NamedTuple, Optional

from common import versions
from common.read import read_text_or_none

MATRIX_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "stack", "matrix.json")
MATRIX_LIMIT = 2_000_000  # bytes, as stack/matrix.py bounds it
LABELS = {"trl": "TRL", "vllm": "vLLM", "transformers": "transformers", "torch": "torch"}


class Recorded(NamedTuple):
    """The matrix's fetch date and the newest release it lists per package (PEP 503 names)."""

    fetched: str
    newest: Dict[str, str]


def phrase(fetched: str) -> str:
    """The shared wording: ``newer than the recorded matrix (2026-12-06)``."""
    return f"newer than the recorded matrix ({fetched})"


def from_matrix(data: object) -> Optional[Recorded]:
    """The fetch date and newest listed releases of a parsed matrix (None when it has no such shape)."""
    if not isinstance(data, dict) or not isinstance(data.get("packages"), dict):
        return None
    newest = {}
    for name, package in data["packages"].items():
        index = package.get("index") if isinstance(package, dict) else None
        listed = [v for v in index if isinstance(v, str)] if isinstance(index, list) else []
        keyed = [(versions.version_key(v), v) for v in listed]
        keyed = [(k, v) for k, v in keyed if k is not None]
        if keyed:
            newest[str(name)] = max(keyed)[1]  # type: ignore[type-var]
    fetched = data.get("fetched")
    return Recorded(fetched if isinstance(fetched, str) and fetched else "date unknown", newest)


_LOADED: Dict[str, Optional[Recorded]] = {}


def load(path: str = MATRIX_PATH) -> Optional[Recorded]:
    """The recorded matrix's date and newest releases, or None when the file is missing or unreadable."""
    if path not in _LOADED:
        text = read_text_or_none(path, MATRIX_LIMIT)
        try:
            _LOADED[path] = from_matrix(json.loads(text)) if text is not None else None
        except ValueError:
            _LOADED[path] = None
    return _LOADED[path]


def newer_than(version: str, newest: Optional[str]) -> bool:
    """True when ``version`` (its local label ignored) sorts after ``newest``; False when either does not parse."""
    if not newest or not isinstance(version, str):
        return False
    base = versions.base_version_with_tags(version.strip().lstrip("v"))
    order = versions.compare_versions(base, newest) if base else None
    return order is not None and order > 0


def beyond(package: str, version: str, recorded: Optional[Recorded] = None) -> Optional[str]:
    """``<label> <version> is newer than the recorded matrix (<date>; newest recorded <newest>)`` when the matrix
    does not know ``version`` because it is past the newest release listed; None otherwise (or with no matrix)."""
    recorded = recorded if recorded is not None else load()
    newest = recorded.newest.get(versions.normalize_name(package)) if recorded else None
    if recorded is None or not newer_than(version, newest):
        return None
    label = LABELS.get(versions.normalize_name(package), package)
    return f"{label} {version} is {phrase(recorded.fetched)}; newest recorded {newest}"
