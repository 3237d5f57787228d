"""nodes/groups.py: one fact across nodes, grouped by value in order of first appearance, and its text."""

from __future__ import annotations

from nodes.groups import differs, display, group_values, groups_text, new_finding, node_ranges


def test_node_ranges_compress_runs() -> None:
    assert node_ranges([0, 1, 2, 3, 5]) == "nodes 0-3, 5"
    assert node_ranges([4]) == "node 4"
    assert node_ranges([2, 0, 1]) == "nodes 0-2"
    assert node_ranges([1, 1]) == "node 1"


def test_values_are_grouped_in_order_of_first_appearance() -> None:
    nodes = [{"index": i, "value": v} for i, v in enumerate(["a", None, "a", True])]
    groups = group_values(nodes, lambda n: n["value"])
    assert groups == [
        {"value": "a", "nodes": [0, 2]},
        {"value": "not set", "nodes": [1]},
        {"value": "true", "nodes": [3]},
    ]
    assert groups_text(groups) == "nodes 0, 2: a; node 1: not set; node 3: true"
    assert differs(groups) and not differs(groups[:1])
    assert display(False) == "false" and display(3) == "3"


def test_a_finding_has_the_fields_of_the_json_schema() -> None:
    item = new_finding("warning", "code", "field", [], "message", "fix")
    assert list(item) == ["severity", "code", "field", "groups", "message", "fix"]
