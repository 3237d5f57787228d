"""The triage report: assembled once as a dict (the ``--json`` output), then printed as text within 100 columns."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence

from common import recorded
from common.output import WIDTH, clip, escape_controls, fit_width, scrub
from common.troubleshooting import RELEASE_HISTORY, Index, Match, Verdict, runnable, variant_for

from triage import patterns
from triage.find import Choice, Findings, Group
from triage.match import grep_command, next_command
from triage.read import Source, SourceStats

SCHEMA_VERSION = 1
TOOL = "triage_log.py"
EXCERPT_LINES = 8
MAX_LISTED = 5


def _where(group: Group, sources: Sequence[Source]) -> Dict[str, Any]:
    first = group.first
    return {
        "file": sources[first.source].label,
        "line": first.line,
        "rank": first.rank,
        "host": first.host,
    }


def _upstream(index: Index, matches: Sequence[Match]) -> List[Dict[str, Any]]:
    out = []
    for match in matches:
        if match.message.kind == "upstream":
            message = index.upstream[match.message.ref]
            out.append({"package": message["package"], "releases": message["releases"]})
    return out[:3]


def _entry_of(index: Index, matches: Sequence[Match]) -> Optional[Match]:
    return next((m for m in matches if m.message.kind == "entry"), None)


def excerpt(group: Group) -> List[Dict[str, Any]]:
    """The smallest excerpt worth reading: the traceback's last frames and the failure line."""
    before = list(group.before)
    start = 0
    for i, (_, text) in enumerate(before):
        if patterns.TRACEBACK_START in text:
            start = i
    lines = before[start:]
    if len(lines) > EXCERPT_LINES - 1:
        lines = lines[:1] + lines[-(EXCERPT_LINES - 2) :] if start < len(before) else lines[-(EXCERPT_LINES - 1) :]
    out = [{"line": number, "text": text} for number, text in lines]
    out.append({"line": group.first.line, "text": group.text})
    return out


def _group_summary(
    group: Group, sources: Sequence[Source], index: Index, matched: Dict[str, List[Match]]
) -> Dict[str, Any]:
    entry = _entry_of(index, matched.get(group.shape, []))
    summary = {
        "text": group.text,
        "kind": group.echo or group.kind,
        "count": group.count,
        "ranks": sorted(group.ranks),
        "first": _where(group, sources),
    }
    if entry is not None:
        data = index.entries[entry.message.ref]
        summary["entry"] = {"file": data["file"], "heading": data["heading"]}
    return summary


def build_report(
    findings: Findings,
    choice: Choice,
    index: Index,
    matched: Dict[str, List[Match]],
    sources: Sequence[Source],
    stats: Sequence[SourceStats],
    given: Dict[str, str],
    origin: Dict[str, str],
    elapsed: float,
) -> Dict[str, Any]:
    releases: Dict[str, Dict[str, Any]] = {}
    for package, (version, source, line) in sorted(findings.releases.items()):
        releases[package] = {"version": version, "from": f"{sources[source].label}:{line}"}
    for package, version in given.items():
        releases[package] = {"version": version, "from": origin.get(package, "flag")}
    for package, info in releases.items():  # a release the recorded matrix does not know yet: said, not assumed
        past = recorded.beyond(package, info["version"])
        if past:
            info["newer_than_recorded"] = past
    plain = {package: info["version"] for package, info in releases.items()}
    root = choice.root
    report: Dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": TOOL,
        "verdict": "no_failure",
        "root": None,
        "entry": None,
        "variant": None,
        "next": None,
        "order": choice.order,
        "releases": releases,
        "ranks": sorted(findings.ranks),
        "hosts": sorted(findings.hosts),
        "echoes": [],
        "other_failures": [],
        "notes": [],
        "torchelastic_root": None,
        "sources": [
            {
                "file": s.label,
                "lines": s.lines,
                "bytes": s.bytes,
                "truncated": s.truncated,
                "stopped": s.stopped or None,
                "encoding": s.encoding,
            }
            for s in stats
        ],
        "elapsed_seconds": round(elapsed, 3),
    }
    elastic = [r for r in findings.elastic if r.root]
    if elastic:
        record = elastic[0]
        report["torchelastic_root"] = {
            "rank": record.rank,
            "host": record.host,
            "exitcode": record.exitcode.split(" (")[0],
            "time": record.time,
            "file": sources[record.source].label,
            "line": record.line,
        }
    if root is not None:
        matches = matched.get(root.shape, [])
        best = _entry_of(index, matches)
        report["verdict"] = "known" if best is not None else "unknown"
        report["root"] = {
            "text": root.text,
            "kind": root.echo or root.kind,
            "first": _where(root, sources),
            "lines": [{"file": sources[o.source].label, "line": o.line, "rank": o.rank} for o in root.occurrences],
            "count": root.count,
            "ranks": sorted(root.ranks),
            "hosts": sorted(root.hosts),
            "oom": patterns.oom_figures(root.text) or None,
            "excerpt": excerpt(root),
            "upstream": _upstream(index, matches),
        }
        entry = index.entries[best.message.ref] if best is not None else None
        if entry is not None and best is not None:
            quote = entry["quotes"][best.message.quote]
            also = []
            for other in matches:
                if other.message.kind == "entry" and other.message.ref != best.message.ref:
                    data = index.entries[other.message.ref]
                    if other.score == best.score and {"file": data["file"], "heading": data["heading"]} not in also:
                        also.append({"file": data["file"], "heading": data["heading"]})
            verdict: Verdict = variant_for(entry, quote, plain)
            report["entry"] = {
                "file": entry["file"],
                "heading": entry["heading"],
                "line": entry["line"],
                "quote": quote["text"],
                "cause": entry["cause"],
                "fix": entry["fix"],
                "verify": entry["verify"],
                "commands": [runnable(str(c)) for c in entry.get("commands", [])],
                "also": also,
            }
            report["variant"] = {"status": verdict.status, "label": verdict.label, "text": verdict.text}
        report["next"] = next_command(entry, root.text)
    report["echoes"] = _by_kind([_group_summary(g, sources, index, matched) for g in choice.echoes])
    report["other_failures"] = [_group_summary(g, sources, index, matched) for g in choice.failures]
    report["notes"] = [_group_summary(g, sources, index, matched) for g in choice.notes]
    return report


def _by_kind(summaries: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Echoes merged by kind (all watchdog timeouts together): counts added, ranks joined, the first one's text."""
    merged: Dict[str, Dict[str, Any]] = {}
    for summary in summaries:
        kind = summary["kind"]
        if kind not in merged:
            merged[kind] = dict(summary, ranks=list(summary["ranks"]), messages=1)
            continue
        target = merged[kind]
        target["count"] += summary["count"]
        target["ranks"] = sorted(set(target["ranks"]) | set(summary["ranks"]))
        target["messages"] += 1
    return list(merged.values())


# ---- text ---------------------------------------------------------------------------------------------------------


def _place(where: Dict[str, Any]) -> str:
    parts = [f"{where['file']}:{where['line']}"]
    if where.get("rank") is not None:
        parts.append(f"rank {where['rank']}")
    if where.get("host"):
        parts.append(str(where["host"]))
    return ", ".join(parts)


def _ranks(ranks: Sequence[int]) -> str:
    return f"ranks {patterns.ranks_text(ranks)}" if len(ranks) > 1 else (f"rank {ranks[0]}" if ranks else "")


_ORDER = {
    "time": "first in time across the logs",
    "line": "first in the log",
    "unknown": "no timestamps: order across files unknown, first failure of the first file shown",
}
_OOM_LABELS = (
    ("tried_to_allocate", "tried to allocate"),
    ("total", "total"),
    ("free", "free"),
    ("in_use", "in use by the process"),
    ("allocated", "allocated by PyTorch"),
    ("reserved", "reserved, unallocated"),
)


def render_text(report: Dict[str, Any], verbose: bool = False) -> str:
    lines: List[str] = []
    root = report["root"]
    entry = report["entry"]
    if root is None:
        lines.append("triage: no failure found in the logs (no exception, OOM, kill, NCCL error or known message)")
    else:
        state = "known" if entry else "unknown: no entry of the troubleshooting index quotes it"
        lines.append(f"triage: root failure ({state})")
        lines.append(f"  {clip(root['text'], 200)}")
        where = f"  at {_place(root['first'])}; {_ORDER[report['order']]}"
        if root["count"] > 1 or len(root["ranks"]) > 1:
            where += f"; {root['count']} lines" + (f" on {_ranks(root['ranks'])}" if len(root["ranks"]) > 1 else "")
        lines.append(where)
        if root["oom"]:
            figures = [f"{label} {root['oom'][key]}" for key, label in _OOM_LABELS if key in root["oom"]]
            gpu = f"GPU {root['oom']['gpu']}: " if "gpu" in root["oom"] else ""
            lines.append(f"  OOM figures: {gpu}" + "; ".join(figures))
        for item in root["upstream"][:1]:
            releases = ", ".join(item["releases"])
            lines.append(f"  upstream: a message of {item['package']} {releases} (facts index)")
    elastic = report["torchelastic_root"]
    if elastic:
        lines.append(
            f"  torchelastic's first observed failure: rank {elastic['rank']} on {elastic['host'] or '?'}, "
            f"exitcode {elastic['exitcode'] or '?'} ({elastic['file']}:{elastic['line']})"
        )
    if entry:
        lines.append(f'entry: {entry["file"]} "{entry["heading"]}" (line {entry["line"]})')
        if entry["cause"]:
            lines.append(f"  cause: {clip(entry['cause'], 280)}")
        if entry["fix"]:
            lines.append(f"  fix: {clip(entry['fix'], 280)}")
        variant = report["variant"]
        if variant["status"] == "variant":
            lines.append(f"  on your release ({variant['label']}): {clip(variant['text'], 280)}")
        elif variant["status"] == "outside":
            lines.append(f"  on your release: {variant['text']}")
        elif variant["status"] == "holds":
            lines.append(f"  on your release: holds as written ({variant['label'] or 'no release scope'})")
        else:
            lines.append("  releases: none in the log; pass --trl/--vllm or --report for the variant of your release")
        for other in entry["also"][:2]:
            lines.append(f'  also: {other["file"]} "{other["heading"]}"')
    elif root is not None:
        lines.append("excerpt:")
        for item in root["excerpt"]:
            lines.append(f"  {item['line']:>7}  {clip(item['text'], 88)}")
    if report["next"]:
        template = "<" in report["next"] or "…" in report["next"]
        lines.append(f"next{' (a template: fill in the <…> and … parts)' if template else ''}:")
        lines.extend(command_lines(report["next"]))
    if entry and entry["verify"] and not entry.get("commands"):
        lines.append(f"  verify: {clip(entry['verify'], 200)}")
    if root is not None and not entry:
        grep = grep_command(scrub(root["text"]))
        lines.append("  (it reads the installed releases), then " + ("search the index:" if grep else RELEASE_HISTORY))
        if grep:
            lines.extend(command_lines(grep))
    fixes = report.get("upstream_fixes")
    if fixes:
        lines.append("upstream fixes after your release (recorded fix index; the failure line's words):")
        for line in fixes["lines"][:8]:
            lines.extend(command_lines(line.strip()) if line.startswith("    python3 ") else [line])
    _listed(lines, "echoes (caused by the failure, not its cause)", report["echoes"], verbose)
    _listed(lines, "later failures", report["other_failures"], verbose)
    _listed(lines, "known messages before or around it", report["notes"], verbose)
    if report["releases"]:
        lines.append(
            "releases: "
            + "; ".join(f"{name} {info['version']} ({info['from']})" for name, info in report["releases"].items())
        )
        for info in report["releases"].values():
            if info.get("newer_than_recorded"):
                lines.append(f"  {info['newer_than_recorded']}")
    if report["ranks"] or report["hosts"]:
        seen = []
        if report["ranks"]:
            seen.append(_ranks(report["ranks"]))
        if report["hosts"]:
            seen.append("hosts " + ", ".join(report["hosts"][:8]) + (" …" if len(report["hosts"]) > 8 else ""))
        lines.append("seen: " + "; ".join(seen))
    total_lines = sum(s["lines"] for s in report["sources"])
    total_bytes = sum(s["bytes"] for s in report["sources"])
    read = f"read: {len(report['sources'])} log(s), {total_lines:,} lines, {total_bytes / 1e6:.1f} MB"
    lines.append(read + f" in {report['elapsed_seconds']:.1f} s")
    for source in report["sources"]:
        if source["truncated"]:
            why = _STOPPED.get(source.get("stopped") or "bytes", _STOPPED["bytes"])
            lines.append(f"  {source['file']}: stopped early, {source['bytes']:,} bytes read: {why}")
        if source.get("encoding", "utf-8") != "utf-8":
            lines.append(f"  {source['file']}: decoded as {source['encoding'].upper()}")
    # Every line is escaped here, at the boundary: a log file named "x\nVerdict: ..." stays on its own line.
    shown = (line if isinstance(line, CommandLine) else fit_width(escape_controls(line)) for line in lines)
    return "\n".join(shown) + "\n"


_STOPPED = {
    "bytes": "the --max-mib limit (raise it to read more)",
    "time": "the --deadline ran out (raise it to read more)",
    "lines": "the limit on judged lines of one run (split the log to read more)",
}
COMMAND_INDENT = "    "


class CommandLine(str):
    """A line of a command: never re-wrapped (it is already cut at word boundaries with continuations)."""


_WORDS = re.compile(r"(?:<[^<>]*>|[^\s<]+)+")


def command_lines(command: str, width: int = WIDTH) -> List[str]:
    """A command on lines of its own, never wrapped inside a word: continued with `` \\`` so it pastes."""
    words = _WORDS.findall(command)
    lines: List[str] = []
    current = COMMAND_INDENT
    for word in words:
        if current.strip() and len(current) + 1 + len(word) + 2 > width:
            lines.append(CommandLine(current + " \\"))
            current = COMMAND_INDENT + "    " + word
        else:
            current = current + ("" if current == COMMAND_INDENT else " ") + word
    lines.append(CommandLine(current))
    return lines


def _listed(lines: List[str], title: str, groups: List[Dict[str, Any]], verbose: bool) -> None:
    if not groups:
        return
    shown = groups if verbose else groups[:MAX_LISTED]
    lines.append(f"{title}:")
    for group in shown:
        ranks = f", {_ranks(group['ranks'])}" if group["ranks"] else ""
        entry = f' -> {group["entry"]["file"]} "{group["entry"]["heading"]}"' if group.get("entry") else ""
        head = f"  [{group['kind']}] {group['count']}x{ranks}, first {group['first']['file']}:{group['first']['line']}"
        lines.append(f"{head}{entry}")
        lines.append(f"    {clip(group['text'], 180)}")
    if len(groups) > len(shown):
        lines.append(f"  … {len(groups) - len(shown)} more (--verbose)")
