"""Delta encoding between two fact trees, so extra releases of a package cost only what changed.

A delta of two dicts is ``{"set": {key: new value}, "unset": [keys], "patch": {key: nested delta}}`` (empty parts
omitted). Two sorted lists of strings are diffed as sets: ``{"add": [...], "remove": [...]}``. Anything else that
differs is replaced whole through ``set``.
"""

from __future__ import annotations

from typing import Any, Dict


def _is_sorted_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value) and value == sorted(set(value))


def make_delta(base: Dict[str, Any], other: Dict[str, Any]) -> Dict[str, Any]:
    delta: Dict[str, Any] = {}
    set_part: Dict[str, Any] = {}
    patch: Dict[str, Any] = {}
    for key in sorted(other):
        new = other[key]
        if key not in base:
            set_part[key] = new
            continue
        old = base[key]
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            patch[key] = make_delta(old, new)
        elif _is_sorted_str_list(old) and _is_sorted_str_list(new):
            patch[key] = {"add": sorted(set(new) - set(old)), "remove": sorted(set(old) - set(new))}
        else:
            set_part[key] = new
    unset = sorted(key for key in base if key not in other)
    if set_part:
        delta["set"] = set_part
    if unset:
        delta["unset"] = unset
    if patch:
        delta["patch"] = patch
    return delta


def apply_delta(base: Any, delta: Dict[str, Any]) -> Any:
    """Inverse of :func:`make_delta`; ``base`` is not modified."""
    if "add" in delta or "remove" in delta:
        removed = set(delta.get("remove", []))
        return sorted((set(base) - removed) | set(delta.get("add", [])))
    out: Dict[str, Any] = dict(base)
    for key in delta.get("unset", []):
        out.pop(key, None)
    for key, value in delta.get("set", {}).items():
        out[key] = value
    for key, nested in delta.get("patch", {}).items():
        out[key] = apply_delta(out[key], nested)
    return out
