"""nodes/compare.py: every rule over the loaded nodes, findings blocking first, counts and the verdict."""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest
from nodes import compare as nodes_compare
from nodes.groups import new_finding

from node_helpers import codes, collect_baseline, compared, planted, run_compare


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> List[Path]:
    return collect_baseline(tmp_path_factory.mktemp("baseline"))


def test_identical_nodes_give_no_findings(baseline: List[Path]) -> None:
    result = compared(baseline)
    assert result["findings"] == []
    assert result["counts"] == {"blocking": 0, "warning": 0, "info": 0}
    assert result["verdict"] == "consistent: the 3 nodes agree on every compared fact"
    assert [(n["index"], n["hostname"], n["machine_rank"]) for n in result["nodes"]] == [
        (0, "node0", 0),
        (1, "node1", 1),
        (2, "node2", 2),
    ]
    done = run_compare(["--require-consistent", *map(str, baseline)])
    assert done.returncode == 0, done.stderr
    assert run_compare([*map(str, baseline[:2]), str(baseline[1])]).returncode == 0  # blocking, but not required
    assert done.stdout.splitlines()[-1] == "verdict: consistent: the 3 nodes agree on every compared fact"


def test_other_interfaces_up_is_info_only(baseline: List[Path], tmp_path: Path) -> None:
    interfaces = {
        "eth0": ("up", "ether"),
        "eth1": ("up", "ether"),
        "ib0": ("up", "infiniband"),
        "lo": ("unknown", "loopback"),
    }
    result = compared(planted(baseline, tmp_path, interfaces=interfaces))
    assert codes(result) == ["interfaces_differ"]
    assert result["counts"] == {"blocking": 0, "warning": 0, "info": 1}
    assert result["verdict"].startswith("consistent")


def test_findings_are_ordered_blocking_first_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    def info_rule(nodes, train):
        return [new_finding("info", "i", "f.i", [], "m", "x")]

    def blocking_rule(nodes, train):
        return [new_finding("warning", "w", "f.w", [], "m", "x"), new_finding("blocking", "b", "f.b", [], "m", "x")]

    monkeypatch.setattr(nodes_compare, "RULES", (info_rule, blocking_rule))
    nodes = [
        {"index": i, "role": "train", "hostname": f"h{i}", "source": f"r{i}", "report": {"node": {}}} for i in (0, 1)
    ]
    result = nodes_compare.compare(nodes)
    assert [f["code"] for f in result["findings"]] == ["b", "w", "i"]
    assert result["counts"] == {"blocking": 1, "warning": 1, "info": 1}
    assert result["verdict"] == "1 blocking difference(s): do not launch until they are fixed"
    assert result["nodes"][1] == {"index": 1, "role": "train", "hostname": "h1", "source": "r1", "machine_rank": None}
    monkeypatch.setattr(nodes_compare, "RULES", (info_rule,))
    assert nodes_compare.compare(nodes)["verdict"] == "consistent: the 2 nodes agree on every compared fact"
