"""The multi-node contract shared by the diagnostic (which writes each node's facts) and ``compare_nodes.py``
(which reads them): the collection commands both scripts' ``--help`` shows, which interface states count as up,
and how ``NCCL_SOCKET_IFNAME``/``GLOO_SOCKET_IFNAME`` select interfaces."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

# Copy-paste collection commands, shown in both scripts' --help (and in the skill text).
COLLECTION_TEMPLATES = """\
multi-node pre-flight: one report per node from the job's own environment (same interpreter, same exported
NCCL_*/MASTER_* variables, same accelerate config), then one comparison. Read-only on every node.
  Slurm, shared filesystem (one file per node, named by host):
    mkdir -p reports
    srun --nodes=$SLURM_JOB_NUM_NODES --ntasks-per-node=1 --output=reports/%N.json \\
      python3 scripts/check_optional_backends.py --json
    python3 scripts/compare_nodes.py reports/*.json
  Slurm, one command (no shared filesystem; --label prefixes each line with the task number):
    srun --nodes=$SLURM_JOB_NUM_NODES --ntasks-per-node=1 --label \\
      python3 scripts/check_optional_backends.py --json | python3 scripts/compare_nodes.py -
  ssh loop (the bundle and the environment at the same path on every host):
    mkdir -p reports
    for h in node1 node2 node3 node4; do
      ssh "$h" "cd $PWD && python3 scripts/check_optional_backends.py --json" > "reports/$h.json"
    done
    python3 scripts/compare_nodes.py reports/*.json
  pdsh (output prefixed with the host name):
    pdsh -w node[1-4] "cd $PWD && python3 scripts/check_optional_backends.py --json" \\
      | python3 scripts/compare_nodes.py -
  vLLM server nodes (GRPO server mode): collect them the same way and pass them as --vllm-server FILE.
  Reachability: add --probe-network HOST:PORT[,HOST:PORT] (rendezvous port, vLLM server port) to the collection.
"""
USABLE_OPERSTATES = ("up", "unknown")  # "unknown": loopback and some virtual links that still pass traffic


def ifname_selection(spec: str, names: List[str], exact_only: bool = False) -> Tuple[List[str], str]:
    """The interfaces a ``NCCL_SOCKET_IFNAME``-style value selects from ``names``, and how it was read.

    NCCL reads a comma list of prefixes; ``^`` in front excludes those prefixes, ``=`` in front asks for exact
    names. ``GLOO_SOCKET_IFNAME`` is read as exact names (``exact_only``).
    """
    text = spec.strip()
    exclude = text.startswith("^") and not exact_only
    if exclude:
        text = text[1:]
    exact = exact_only or text.startswith("=")
    if text.startswith("="):
        text = text[1:]
    wanted = [part.strip() for part in text.split(",") if part.strip()]

    wanted_set = set(wanted)
    lengths = sorted({len(w) for w in wanted_set})

    def hit(name: str) -> bool:
        """Set lookups only: linear in names plus prefixes, never names x prefixes."""
        if exact:
            return name in wanted_set
        ends = lengths if len(lengths) <= len(name) else range(1, len(name) + 1)
        return any(name[:end] in wanted_set for end in ends if end <= len(name))

    chosen = [n for n in names if hit(n) != exclude]
    shown = ", ".join(wanted[:10]) + (f", ... ({len(wanted):,} in all)" if len(wanted) > 10 else "")
    how = ("excluding " if exclude else "") + ("exact names " if exact else "prefixes ") + shown
    return chosen, how


def socket_ifname_problems(node: Dict[str, Any]) -> List[Dict[str, str]]:
    """Per variable: the interface selection of ``NCCL_SOCKET_IFNAME``/``GLOO_SOCKET_IFNAME`` when it selects no
    interface that is up on this node. Empty when the variables are unset or the interface list is unknown."""
    network = node.get("network") or {}
    if network.get("status") != "ok":
        return []
    interfaces = network.get("interfaces") or []
    names = [i["name"] for i in interfaces]
    usable = {i["name"] for i in interfaces if i.get("operstate") in USABLE_OPERSTATES}
    problems = []
    for variable, exact_only in (("NCCL_SOCKET_IFNAME", False), ("GLOO_SOCKET_IFNAME", True)):
        spec = (node.get("env") or {}).get(variable)
        if not spec:
            continue
        chosen, how = ifname_selection(spec, names, exact_only)
        up = [n for n in chosen if n in usable]
        if up:
            continue
        if chosen:
            picked = set(chosen)
            states = ", ".join([f"{i['name']} {i['operstate']}" for i in interfaces if i["name"] in picked][:20])
            detail = f"selects only interfaces that are not up ({states})"
        else:
            present = ", ".join(names[:20]) + (f", ... ({len(names):,} in all)" if len(names) > 20 else "")
            detail = f"selects no interface here ({how}; present: {present or 'none'})"
        problems.append({"variable": variable, "value": spec, "detail": detail})
    return problems
