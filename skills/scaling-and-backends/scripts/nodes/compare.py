"""Judge stage, whole report: every rule over the loaded nodes, findings ordered blocking first, counts and the
verdict line. The result is the ``--json`` document (schema_version 1)."""

from __future__ import annotations

from typing import Any, Dict, List

from nodes.facts import config_fields
from nodes.rules import RULES

SCHEMA_VERSION = 1
TOOL = "compare_nodes"
SEVERITIES = ("blocking", "warning", "info")


def compare(nodes: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The comparison report: nodes, findings (blocking first) and counts."""
    train = [n for n in nodes if n["role"] == "train"]
    findings = [f for rule in RULES for f in rule(nodes, train)]
    findings.sort(key=lambda f: SEVERITIES.index(f["severity"]))
    counts = {s: sum(1 for f in findings if f["severity"] == s) for s in SEVERITIES}
    if counts["blocking"]:
        verdict = f"{counts['blocking']} blocking difference(s): do not launch until they are fixed"
    elif counts["warning"]:
        verdict = f"no blocking difference; {counts['warning']} warning(s) to read before launching"
    else:
        verdict = f"consistent: the {len(nodes)} nodes agree on every compared fact"
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": TOOL,
        "nodes": [
            {
                "index": n["index"],
                "role": n["role"],
                "hostname": n["hostname"],
                "source": n["source"],
                "machine_rank": config_fields(n).get("machine_rank"),
            }
            for n in nodes
        ],
        "findings": findings,
        "counts": counts,
        "verdict": verdict,
    }
