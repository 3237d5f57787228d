"""Report of the vLLM pre-flight: judge every server, then all of them; render as text or JSON."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from common.output import one_line
from common.versions import base_version, specifier_contains

from preflight.data import (
    FAILURE_HEADLINES,
    ROUTES,
    SCHEMA_VERSION,
    SEVERITY_ORDER,
    SRC_THIS,
    TOOL,
    Finding,
    Intent,
    Outcome,
    Snapshot,
)
from preflight.fetch import proxy_for
from preflight.rules_replicas import check_replicas
from preflight.rules_server import global_notes, judge_server

# --------------------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------------------


def verdict_of(findings: Sequence[Finding]) -> str:
    if any(f.severity == "error" for f in findings):
        return "fail"
    if any(f.severity == "warning" for f in findings):
        return "warn"
    return "ok"


def _judge_one(
    snap: Snapshot, intent: Intent, trl_range: Dict[str, Any], local_vllm: Optional[str]
) -> Tuple[Outcome, List[Finding], Dict[str, Any]]:
    """One server's outcome, findings and report entry."""
    outcome, findings = judge_server(snap, intent, trl_range, local_vllm)
    parallel = snap.section("parallel_config") or {}
    lora = (snap.vllm_config or {}).get("lora_config")
    transfer = (snap.vllm_config or {}).get("weight_transfer_config")
    version = snap.version
    server = {
        "url": snap.url,
        "verdict": verdict_of(findings),
        "reachable": snap.reachable,
        "proxy": proxy_for(snap.url),
        "requests": [
            {
                "method": "GET",
                "path": r.path,
                "status": r.status,
                "error": r.error_kind,
                "detail": r.error_detail or None,
                "elapsed_s": r.elapsed_s,
            }
            for r in (snap.responses[route] for route in ROUTES if route in snap.responses)
        ],
        "vllm_version": version,
        "vllm_version_in_trl_range": (
            specifier_contains(trl_range["vllm_spec"], base_version(version) or version) if version else None
        ),
        "dev_mode": snap.dev_mode,
        "served_models": snap.base_models if snap.model_cards is not None else None,
        "adapters": snap.adapters if snap.model_cards is not None else None,
        "max_model_len": snap.max_model_len,
        "logprobs_mode": (snap.section("model_config") or {}).get("logprobs_mode"),
        "dtype": (snap.section("model_config") or {}).get("dtype"),
        "weight_transfer_config": transfer if snap.vllm_config is not None else None,
        "lora_config": (
            {k: lora.get(k) for k in ("max_lora_rank", "max_loras", "max_cpu_loras")}
            if isinstance(lora, dict)
            else None
        ),
        "lora_enabled": (lora is not None) if snap.vllm_config is not None else None,
        "parallel": {
            k: parallel.get(k)
            for k in (
                "tensor_parallel_size",
                "pipeline_parallel_size",
                "data_parallel_size",
                "data_parallel_size_local",
                "data_parallel_external_lb",
                "data_parallel_hybrid_lb",
            )
        }
        if parallel
        else None,
        "runtime_lora_updating": snap.vllm_env.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING"),
        "trl_outcome": outcome.as_dict(),
    }
    return outcome, findings, server


def _malformed(snap: Snapshot, error: Exception) -> Tuple[Outcome, List[Finding], Dict[str, Any]]:
    """A server whose answers broke a rule function: one finding for it; the other servers are still judged."""
    finding = Finding(
        "error",
        "malformed-answer",
        f"this server's answers could not be judged ({type(error).__name__}: {one_line(str(error), 120)}); "
        "vLLM never answers like this.",
        "point --vllm-url at the vLLM server itself (or through a proxy that passes JSON unchanged)",
        SRC_THIS,
        snap.url,
    )
    outcome = Outcome("unknown", None, SRC_THIS)
    server = {
        "url": snap.url,
        "verdict": "fail",
        "reachable": snap.reachable,
        "proxy": proxy_for(snap.url),
        "requests": [],
        "vllm_version": None,
        "vllm_version_in_trl_range": None,
        "dev_mode": None,
        "served_models": None,
        "adapters": None,
        "max_model_len": None,
        "logprobs_mode": None,
        "dtype": None,
        "weight_transfer_config": None,
        "lora_config": None,
        "lora_enabled": None,
        "parallel": None,
        "runtime_lora_updating": None,
        "trl_outcome": outcome.as_dict(),
    }
    return outcome, [finding], server


def build_report(
    snaps: Sequence[Snapshot], intent: Intent, trl_range: Dict[str, Any], local_vllm: Optional[str]
) -> Dict[str, Any]:
    """Judge every server, then all of them together; return the JSON-ready report."""
    servers = []
    outcomes: List[Outcome] = []
    all_findings: List[Finding] = []
    judged: List[Snapshot] = []
    for snap in snaps:
        try:
            outcome, findings, server = _judge_one(snap, intent, trl_range, local_vllm)
            judged.append(snap)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as error:
            outcome, findings, server = _malformed(snap, error)
        outcomes.append(outcome)
        all_findings += findings
        servers.append(server)
    kept = [o for snap, o in zip(snaps, outcomes) if snap in judged]
    try:
        all_findings += check_replicas(judged, kept, intent)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as error:
        all_findings.append(
            Finding(
                "error",
                "replicas-uncomparable",
                f"the replicas' answers could not be compared ({type(error).__name__}: {one_line(str(error), 120)})",
                None,
                SRC_THIS,
            )
        )
    all_findings += global_notes(judged, intent, kept)
    for server in servers:
        server["verdict"] = verdict_of([f for f in all_findings if f.server == server["url"]])
    order = {snap.url: index for index, snap in enumerate(snaps)}
    all_findings.sort(key=lambda f: (order.get(f.server or "", len(order)), SEVERITY_ORDER[f.severity]))
    modes = {o.mode for o in outcomes}
    fixes: List[Dict[str, Any]] = []
    for finding in all_findings:
        if finding.fix and finding.severity != "info":
            entry = {"fix": finding.fix, "servers": [finding.server] if finding.server else [], "ids": [finding.id]}
            existing = next((e for e in fixes if e["fix"] == finding.fix), None)
            if existing is None:
                fixes.append(entry)
            else:
                if finding.server and finding.server not in existing["servers"]:
                    existing["servers"].append(finding.server)
                if finding.id not in existing["ids"]:
                    existing["ids"].append(finding.id)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": TOOL,
        "verdict": verdict_of(all_findings),
        "intent": {
            "trainer": intent.trainer,
            "lora_rank": intent.lora_rank,
            "full_finetuning": intent.lora_rank is None,
            "max_staleness": intent.max_staleness,
            "min_max_loras": intent.max_staleness + 2 if intent.lora_rank is not None else None,
            "max_length": intent.max_length,
            "model": intent.model,
            "adapters": list(intent.adapters),
            "importance_sampling_correction": intent.importance_sampling_correction,
            "auth_env": intent.auth_env,
        },
        "trl": trl_range,
        "trainer_side_vllm": local_vllm,
        "trl_outcome": modes.pop() if len(modes) == 1 else "inconsistent",
        "servers": servers,
        "findings": [f.as_dict() for f in all_findings],
        "fixes": fixes,
        "counts": {sev: sum(1 for f in all_findings if f.severity == sev) for sev in ("error", "warning", "info")},
    }


def verdict_block(report: Dict[str, Any], require: Optional[bool] = None) -> List[str]:
    """The report's last lines, always in this order: the verdict, the named errors and warnings, TRL's outcome,
    and the --require result when it was asked for."""
    index = {server["url"]: number for number, server in enumerate(report["servers"], 1)}

    def named(severity: str) -> str:
        names: Dict[str, List[str]] = {}
        for finding in report["findings"]:
            if finding["severity"] == severity:
                where = f"[{index[finding['server']]}]" if finding["server"] in index else "all"
                names.setdefault(finding["id"], [])
                if where not in names[finding["id"]]:
                    names[finding["id"]].append(where)
        return ", ".join(f"{name} {' '.join(wheres)}" for name, wheres in names.items()) or "none"

    lines = [
        f"Verdict: {report['verdict'].upper()}",
        f"  errors: {named('error')}",
        f"  warnings: {named('warning')}",
        f"  TRL outcome: {report['trl_outcome']}",
    ]
    if require is not None:
        met = report["verdict"] == "ok"
        lines.append(f"Require: {'met' if met else 'FAILED'} (--require needs verdict OK; it is {report['verdict']})")
    return lines


def render_text(report: Dict[str, Any], require: Optional[bool] = None) -> str:
    intent = report["intent"]
    rank = "full fine-tuning" if intent["full_finetuning"] else f"LoRA r={intent['lora_rank']}"
    what = f"{intent['trainer']}, {rank}"
    if intent["trainer"] == "async-grpo" and not intent["full_finetuning"]:
        what += f", max_staleness {intent['max_staleness']}"
    if intent["max_length"]:
        what += f", max length {intent['max_length']}"
    lines = [f"vLLM server pre-flight: {report['verdict'].upper()}  ({what})"]
    trl = report["trl"]
    lines.append(f"TRL vLLM range: {trl['vllm_spec']}  [{trl['source']}]")
    by_server: Dict[Optional[str], List[Dict[str, Any]]] = {}
    for finding in report["findings"]:
        by_server.setdefault(finding["server"], []).append(finding)
    for index, server in enumerate(report["servers"], 1):
        lines.append("")
        if server["reachable"]:
            facts = [f"vLLM {server['vllm_version'] or '?'}"]
            if server["vllm_version_in_trl_range"] is False:
                facts[-1] += " (outside TRL range)"
            if server["served_models"]:
                facts.append(f"model {server['served_models'][0]}")
            if server["max_model_len"] is not None:
                facts.append(f"max_model_len {server['max_model_len']}")
            facts.append({True: "dev mode on", False: "dev mode off", None: "dev mode ?"}[server["dev_mode"]])
            if server["lora_config"]:
                lc = server["lora_config"]
                facts.append(f"LoRA rank<={lc['max_lora_rank']} slots {lc['max_loras']}")
            elif server["lora_enabled"] is False:
                facts.append("LoRA off")
            if server["parallel"] and (server["parallel"].get("data_parallel_size") or 1) > 1:
                facts.append(f"DP {server['parallel']['data_parallel_size']}")
            if server["adapters"]:
                facts.append(
                    f"adapters {', '.join(server['adapters'][:4])}" + (" …" if len(server["adapters"]) > 4 else "")
                )
            lines.append(f"[{index}] {server['url']}  {server['verdict'].upper()}: " + "; ".join(facts))
        else:
            via = f" (via proxy {server['proxy']})" if server["proxy"] else ""
            failed = [r["error"] for r in server["requests"] if r["error"]]
            headline = FAILURE_HEADLINES.get(failed[-1] if failed else "", "unreachable")
            lines.append(f"[{index}] {server['url']}  {server['verdict'].upper()}: {headline}{via}")
        outcome = server["trl_outcome"]
        if outcome["mode"] != "unknown":
            line = f"    TRL outcome: {outcome['mode']}"
            if outcome["trl_says"]:
                line += f" -- TRL says: {outcome['trl_says']}"
            lines.append(line)
        for finding in by_server.get(server["url"], []):
            lines.extend(_render_finding(finding))
    if None in by_server:
        lines.append("")
        lines.append("Across servers:")
        for finding in by_server[None]:
            lines.extend(_render_finding(finding))
    if report["fixes"]:
        lines.append("")
        lines.append("Change on the server(s):")
        for entry in report["fixes"]:
            where = ", ".join(entry["servers"]) if entry["servers"] else "all servers"
            lines.append(f"  {entry['fix']}")
            lines.append(f"      ({where}: {', '.join(entry['ids'])})")
    lines.append("")
    lines.extend(verdict_block(report, require))
    return "\n".join(lines) + "\n"


def _render_finding(finding: Dict[str, Any]) -> List[str]:
    out = [f"    {finding['severity'].upper():7} {finding['id']}: {finding['message']}"]
    if finding["fix"]:
        out.append(f"            fix: {finding['fix']}")
    out.append(f"            source: {finding['source']}")
    return out
