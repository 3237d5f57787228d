"""Render stage: the comparison as text (the ``--json`` form is the result itself)."""

from __future__ import annotations

from typing import Any, Dict

from nodes.compare import TOOL
from nodes.groups import groups_text


def render_text(result: Dict[str, Any]) -> str:
    nodes = result["nodes"]
    servers = sum(1 for n in nodes if n["role"] == "vllm-server")
    head = f"{TOOL}: {len(nodes)} reports" + (
        f" ({len(nodes) - servers} training, {servers} vLLM server)" if servers else ""
    )
    lines = [head]
    for node in nodes:
        rank = f", machine_rank {node['machine_rank']}" if node.get("machine_rank") is not None else ""
        role = " [vLLM server]" if node["role"] == "vllm-server" else ""
        lines.append(f"  node {node['index']}: {node['hostname']}{role} ({node['source']}{rank})")
    for finding in result["findings"]:
        lines.append(f"{finding['severity'].upper()} {finding['field']}: {finding['message']}")
        lines.append(f"    {groups_text(finding['groups'])}")
        lines.append(f"    fix: {finding['fix']}")
    lines.append(f"verdict: {result['verdict']}")
    return "\n".join(lines) + "\n"
