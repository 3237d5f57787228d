"""Grouping one fact across nodes: the value on each node, grouped ("nodes 0-3: X; node 4: Y"), and the finding
record every rule returns."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence


def node_ranges(indices: Sequence[int]) -> str:
    """[0, 1, 2, 3, 5] -> "nodes 0-3, 5"; [4] -> "node 4"."""
    ordered = sorted(set(indices))
    spans: List[str] = []
    start = previous = None
    for index in [*ordered, None]:
        if start is not None and (index is None or index != previous + 1):
            spans.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        if index is not None and start is None:
            start = index
        previous = index
    return ("node " if len(ordered) == 1 else "nodes ") + ", ".join(spans)


def display(value: Any) -> str:
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def group_values(nodes: List[Dict[str, Any]], getter: Callable[[Dict[str, Any]], Any]) -> List[Dict[str, Any]]:
    """[{"value": text, "nodes": [indices]}] in order of first appearance."""
    groups: Dict[str, List[int]] = {}
    for node in nodes:
        groups.setdefault(display(getter(node)), []).append(node["index"])
    return [{"value": value, "nodes": indices} for value, indices in groups.items()]


def groups_text(groups: List[Dict[str, Any]]) -> str:
    return "; ".join(f"{node_ranges(g['nodes'])}: {g['value']}" for g in groups)


def new_finding(
    severity: str, code: str, field: str, groups: List[Dict[str, Any]], message: str, fix: str
) -> Dict[str, Any]:
    return {"severity": severity, "code": code, "field": field, "groups": groups, "message": message, "fix": fix}


def differs(groups: List[Dict[str, Any]]) -> bool:
    return len(groups) > 1
