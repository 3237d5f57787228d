"""Rendering: the compact text report and the one-line verdict (imported for the text report only)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from diagnostic.base import STACK_IDS, TOOL, fmt_mib
from diagnostic.node import node_text
from diagnostic.release_diff import has_differences


def render_text(report: Dict[str, Any], verbose: bool = False, required: Sequence[str] = ()) -> str:
    """Compact plain-text report ending in the verdict block (see verdict_block)."""
    lines: List[str] = []
    py, plat = report["python"], report["platform"]
    lines.append(
        f"{TOOL} (schema {report['schema_version']}) | Python {py['version']} {py['kind']} {py['executable']} | "
        f"{plat['platform']} | {report['elapsed_seconds']:.2f} s"
    )
    if (report.get("interpreter") or {}).get("message"):
        lines.append(f"Interpreter: {report['interpreter']['message']}")
    packages = report["packages"]
    installed = [pid for pid in STACK_IDS if packages[pid]["installed"]]
    missing = [pid for pid in STACK_IDS if not packages[pid]["installed"]]
    if not installed:
        lines.append(
            "packages: none of the training stack is installed in this interpreter (" + ", ".join(STACK_IDS) + ")"
        )
    else:
        cells = []
        build = report["torch_build"]
        for pid in installed:
            entry = packages[pid]
            text = f"{pid} {entry['version'] or '(no metadata)'}"
            if pid == "torch" and build["kind"] != "unknown":
                detail = {
                    "cuda": f"CUDA {build['cuda']}",
                    "rocm": f"ROCm {build['hip']}",
                    "xpu": f"XPU {build['xpu']}",
                }.get(build["kind"], "CPU-only")
                text += f" [{detail}]"
            if entry.get("git_commit"):
                text += f"+{entry['git_commit'][:7]}"
            if entry.get("editable"):
                text += " (editable)"
            if entry["problems"]:
                text += " (!)"
            cells.append(text)
        lines.append("packages:")
        lines.extend(_wrap(cells, "  "))
        if missing:
            lines.extend(_wrap(["not installed: " + ", ".join(missing)], "  "))
        sites = sorted({os.path.dirname(e["metadata_path"]) for e in packages.values() if e.get("metadata_path")})
        if sites and (verbose or len(sites) > 1):
            lines.append("  metadata in: " + "; ".join(sites))
        if verbose:
            for pid in installed:
                lines.append(f"  {pid}: module {packages[pid]['module']} at {packages[pid]['location']}")
    rows = report["compatibility"]
    counts: Dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    if rows:
        lines.append("compatibility (from installed metadata and code gates):")
        for status in ("outside", "missing", "unknown"):
            subjects = sorted({str(row["subject"]) for row in rows if row["status"] == status})
            if subjects:
                lines.extend(_wrap_joined(f"  {status}: ", subjects, indent="    "))
        if counts.get("ok"):
            lines.append(f"  ok: {counts['ok']} requirement(s) met" + ("" if verbose else " (--verbose lists them)"))
        shown = set()
        kind_order = {"extra": 0, "dependency": 1, "gate": 2}
        for row in sorted(rows, key=lambda r: kind_order.get(r["kind"], 9)):  # stable: keeps the status order
            if not verbose and row["status"] in ("ok", "missing"):
                continue
            key = (row["subject"], row["requirement"], row["required_by"].split(" ")[0], row["status"])
            if not verbose and key in shown:  # a code gate that repeats the metadata range
                continue
            shown.add(key)
            lines.append("  " + _compat_text(row))
    if has_differences(report.get("release_differences")):
        from diagnostic.release_lines import render_lines  # only a report with differences to show compiles it

        lines.extend(render_lines(report["release_differences"], verbose))
    accel = report["accelerators"]
    lines.append(
        f"accelerators: nvidia-smi {accel['nvidia_smi']['status']}"
        + (f" ({accel['nvidia_smi']['detail']})" if accel["nvidia_smi"]["status"] not in ("ok", "not_found") else "")
        + f"; rocm-smi {accel['rocm_smi']['status']}"
        + (f" ({accel['rocm_smi']['detail']})" if accel["rocm_smi"]["status"] not in ("ok", "not_found") else "")
    )
    lines.extend(_gpu_lines(accel["gpus"]))
    vis = accel["visible_devices"]
    if vis.get("raw") is not None or accel["gpus"]:
        resolved = vis.get("resolved")
        if vis.get("raw") is None:
            setting = vis["variable"].split(",")[0] + " unset"
        elif ";" in str(vis["raw"]) or "=" in str(vis["raw"]):
            setting = str(vis["raw"])
        else:
            setting = f"{vis['variable']}={vis['raw']!r}"
        shown = ", ".join(map(str, resolved)) if resolved else "none" if resolved == [] else "unknown"
        notes = f" ({'; '.join(vis['notes'])})" if vis.get("notes") and vis.get("raw") is not None else ""
        lines.append(f"  {setting} -> visible GPUs: {shown}{notes}")
    summary = accel["summary"]
    if summary["visible_count"]:
        lines.append(
            f"  visible total {fmt_mib(summary['memory_total_mib'])}, free {fmt_mib(summary['memory_free_mib'])}"
        )
    toolkit = report["torch_build"].get("cuda_toolkit") or {}
    if verbose or (toolkit.get("nvcc") and report["torch_build"]["kind"] == "cuda"):
        lines.append(
            f"  nvcc: {toolkit.get('nvcc') or 'not found'}"
            + (f" (CUDA {toolkit['version']})" if toolkit.get("version") else "")
        )
    launch = report["launch"]
    config = launch["accelerate_config"]
    text = f"accelerate config: {config['path']}: {config['status'].replace('_', ' ')}"
    if config.get("parser"):
        text += f" (parser: {config['parser']})"
    settings = config["settings"]
    if not verbose:
        settings = {k: v for k, v in settings.items() if k in TEXT_CONFIG_KEYS or (k == "use_cpu" and v)}
    lines.append(text)
    items = [f"{k}={v}" for k, v in settings.items()]
    if items:
        lines.extend(_wrap_joined("  ", items, indent="  "))
    env = launch["env"]
    if env:
        lines.extend(_wrap([f"{k}={v}" for k, v in env.items()], "env: ", "     "))
    if report.get("node"):
        lines.append(node_text(report["node"]))
    probes = report.get("probes")
    if probes:
        torch_probe = probes.get("torch")
        if torch_probe:
            from diagnostic.probes import torch_probe_text  # probes ran, so the probe code is loaded already

            lines.append("probe torch: " + torch_probe_text(torch_probe))
        if probes.get("network"):
            from diagnostic.network import network_text

            lines.extend(network_text(probes["network"]))
        for result in probes.get("imports") or []:
            if result.get("status") == "ok":
                continue
            error = f"{result.get('error_type') or ''} {result.get('error') or ''}".strip()
            lines.append(f"probe import {result['module']}: {result['status']}: {error}")
        ok = [r["module"] for r in probes.get("imports") or [] if r.get("status") == "ok"]
        if ok:
            lines.extend(_wrap(["probe import ok: " + ", ".join(ok)], ""))
    lines.append("backends:")
    seen: Dict[Tuple[str, str, Optional[str]], str] = {}
    for verdict in report["backends"]:
        evidence = "; ".join(verdict["evidence"])
        key = (verdict["status"], evidence, verdict["next_step"])
        if key in seen and verdict["evidence"] and not verbose:
            lines.append(f"  {verdict['id']:<16}{verdict['status']:<12}(same evidence and next step as {seen[key]})")
            continue
        seen[key] = verdict["id"]
        lines.append(f"  {verdict['id']:<16}{verdict['status']:<12}{evidence}")
        if verdict["next_step"] and verdict["status"] != "ready":
            lines.append(f"  {'':<28}next: {verdict['next_step']}")
    # pin_outside repeats a compatibility line printed above
    findings = [f for f in report["findings"] if verbose or (f["severity"] != "info" and f["code"] != "pin_outside")]
    if findings:
        lines.append("findings:")
        for finding in findings:
            lines.append(f"  {finding['severity']}: {finding['message']}")
    lines.append("")
    lines.extend(verdict_block(report["backends"], required, bool(probes and probes.get("imports"))))
    return "\n".join(lines) + "\n"


def verdict_block(backends: List[Dict[str, Any]], required: Sequence[str], probed: bool) -> List[str]:
    """The report's last lines, always in this order: the verdict with each status's backends on its own line,
    then the --require result when it was asked for."""
    groups: Dict[str, List[str]] = {"ready": [], "limited": [], "unavailable": []}
    for verdict in backends:
        groups.setdefault(verdict["status"], []).append(verdict["id"])
    lines = ["Verdict" + ("" if probed else " (static checks; imports not probed: add --probe-imports)") + ":"]
    for status, ids in groups.items():
        lines.extend(_wrap_joined(f"  {status}: ", ids or ["none"], indent="    "))
    if required:
        failing = [b["id"] for b in backends if b["id"] in required and b["status"] != "ready"]
        outcome = "FAILED (" + ", ".join(failing) + " not ready)" if failing else "met"
        lines.append(f"Require {','.join(required)}: {outcome}")
    return lines


TEXT_CONFIG_KEYS = (
    "distributed_type",
    "mixed_precision",
    "num_processes",
    "num_machines",
    "machine_rank",
    "gpu_ids",
    "main_process_ip",
    "main_process_port",
    "fsdp_version",
    "fsdp_offload_params",
    "fsdp_reshard_after_forward",
    "fsdp_sharding_strategy",
    "deepspeed.zero_stage",
    "deepspeed.offload_optimizer_device",
    "deepspeed.offload_param_device",
    "deepspeed.deepspeed_config_file",
    "dynamo_backend",
)


def _gpu_flags(gpu: Dict[str, Any]) -> str:
    flags = []
    if gpu.get("compute_capability"):
        flags.append(f"cc {gpu['compute_capability']}")
    if gpu.get("arch"):
        flags.append(gpu["arch"])
    bf16, fa2 = gpu.get("bf16"), gpu.get("flash_attn2_eligible")
    flags.append("bf16" if bf16 else "no bf16" if bf16 is False else "bf16 ?")
    flags.append("FA2 ok" if fa2 else "no FA2" if fa2 is False else "FA2 ?")
    flags.append(f"driver {gpu.get('driver') or '?'}")
    return ", ".join(flags)


def _gpu_lines(gpus: List[Dict[str, Any]]) -> List[str]:
    """One line per group of identical GPUs (same model, memory, capability, driver), with free memory per GPU."""
    groups: Dict[Tuple[Any, ...], List[Dict[str, Any]]] = {}
    for gpu in gpus:
        key = (gpu["vendor"], gpu["name"], gpu["memory_total_mib"], _gpu_flags(gpu))
        groups.setdefault(key, []).append(gpu)
    lines = []
    for (_, name, total, flags), members in groups.items():
        indices = ",".join(str(g["index"]) for g in members)
        free_values = {fmt_mib(g["memory_free_mib"]) for g in members}
        if len(free_values) == 1 and len(members) > 1:
            free = f"{free_values.pop()} each"
        else:
            free = " ".join(f"{g['index']}:{fmt_mib(g['memory_free_mib'])}" for g in members)
        hidden = [str(g["index"]) for g in members if not g.get("visible")]
        head = f"GPU {indices}" + (f" ({len(members)}x {name})" if len(members) > 1 else f" {name}")
        each = " each" if len(members) > 1 else ""
        line = f"  {head}: {fmt_mib(total)}{each}, {flags}; free {free}"
        if hidden:
            line += f"; hidden: {','.join(hidden)}"
        lines.append(line)
    return lines


def _compat_text(row: Dict[str, Any]) -> str:
    owner = row["required_by"].split(" ")[0]
    subject = f"{row['subject']} {row['installed']}"
    if row["status"] == "outside":
        if row["kind"] == "extra" and owner == "trl":
            what = f"is outside trl's supported range {row['requirement']}"
        elif row["kind"] == "gate":
            what = f"is outside {owner}'s code gate {row['requirement']} ({row['note']})"
        elif row["requirement"].startswith("=="):
            what = f"does not match {owner}'s pin {row['requirement']}"
        else:
            what = f"is outside {owner}'s requirement {row['requirement']}"
        return f"! {subject} {what} [{row['required_by']}]"
    if row["status"] == "missing":
        return f"- {row['subject']} not installed, wanted {row['requirement'] or '(any)'} by {row['required_by']}"
    if row["status"] == "unknown":
        return f"? {subject} vs {row['requirement']}: undecidable [{row['required_by']}]"
    return f"ok {subject} {row['requirement'] or '(any)'} [{row['required_by']}]"


def _wrap_joined(head: str, items: List[str], indent: str = "    ", width: int = 100) -> List[str]:
    """``head`` followed by ``items`` joined with ", ", continued on indented lines at ``width``."""
    lines, current = [], head
    for position, item in enumerate(items):
        piece = item + ("," if position < len(items) - 1 else "")
        if len(current) + len(piece) + 1 > width and current not in (head, indent):
            lines.append(current.rstrip())
            current = indent
        current += ("" if current in (head, indent) else " ") + piece
    lines.append(current.rstrip())
    return lines


def _wrap(cells: List[str], first_prefix: str, next_prefix: Optional[str] = None, width: int = 100) -> List[str]:
    """Join cells with two spaces into lines of at most ``width`` characters."""
    next_prefix = first_prefix if next_prefix is None else next_prefix
    lines, current = [], first_prefix
    for cell in cells:
        candidate = cell if current in (first_prefix, next_prefix) else current + "  " + cell
        if current not in (first_prefix, next_prefix) and len(candidate) > width:
            lines.append(current)
            current = next_prefix + cell
        else:
            current = (current + cell) if current in (first_prefix, next_prefix) else candidate
    if current.strip():
        lines.append(current)
    return lines
