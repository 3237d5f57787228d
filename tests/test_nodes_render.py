"""nodes/render.py: the text form of a comparison (verdict last, each finding with its groups and fix)."""

from __future__ import annotations

from nodes.render import render_text

RESULT = {
    "nodes": [
        {"index": 0, "role": "train", "hostname": "a", "source": "a.json", "machine_rank": 0},
        {"index": 1, "role": "train", "hostname": "b", "source": "b.json", "machine_rank": None},
        {"index": 2, "role": "vllm-server", "hostname": "v", "source": "v.json", "machine_rank": None},
    ],
    "findings": [
        {
            "severity": "blocking",
            "code": "nccl_mismatch",
            "field": "node.nccl.version",
            "groups": [{"value": "2.27.3", "nodes": [0, 2]}, {"value": "2.26.2", "nodes": [1]}],
            "message": "the NCCL library differs",
            "fix": "install the same wheel",
        }
    ],
    "counts": {"blocking": 1, "warning": 0, "info": 0},
    "verdict": "1 blocking difference(s): do not launch until they are fixed",
}


def test_text_lists_nodes_findings_and_the_verdict() -> None:
    assert render_text(RESULT).splitlines() == [
        "compare_nodes: 3 reports (2 training, 1 vLLM server)",
        "  node 0: a (a.json, machine_rank 0)",
        "  node 1: b (b.json)",
        "  node 2: v [vLLM server] (v.json)",
        "BLOCKING node.nccl.version: the NCCL library differs",
        "    nodes 0, 2: 2.27.3; node 1: 2.26.2",
        "    fix: install the same wheel",
        "verdict: 1 blocking difference(s): do not launch until they are fixed",
    ]
    training_only = {**RESULT, "nodes": RESULT["nodes"][:2], "findings": []}
    assert render_text(training_only).startswith("compare_nodes: 2 reports\n")
