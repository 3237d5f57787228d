"""The lookup's report: assembled once as a dict (the ``--json`` output), then printed as text within 100 columns
and about 3,000 characters: the best entry in full (cause, fix, the variant for the user's releases, verify, where
to read next), then one line for each other candidate."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from common.output import WIDTH, clip, fit_width
from common.troubleshooting import LABELS, RELEASE_HISTORY, Index, runnable, scope_holds, scope_text, variant_for

from lookup.rank import Hit, Ranked

SCHEMA_VERSION = 1
TOOL = "find_fix.py"
MAX_CHARS = 3000
README = "troubleshooting/README.md"
TRIAGE = "python3 scripts/triage_log.py <log>"


def _entry_result(index: Index, hit: Hit, releases: Dict[str, str]) -> Dict[str, Any]:
    entry = index.entries[hit.ref]
    quote = entry["quotes"][hit.quote] if hit.quote >= 0 else (entry["quotes"][0] if entry["quotes"] else None)
    verdict = variant_for(entry, quote, releases)
    return {
        "kind": "symptom" if entry.get("kind") == "symptom" else "entry",
        "file": entry["file"],
        "heading": entry["heading"],
        "line": entry["line"],
        "how": hit.how,
        "score": hit.score,
        "matched": list(hit.matched[:8]),
        "message": quote["text"] if quote and hit.how == "message" else None,
        "symptom": entry.get("symptom", ""),
        "cause": entry.get("cause", ""),
        "fix": entry.get("fix", ""),
        "verify": entry.get("verify", ""),
        "commands": [runnable(str(c)) for c in entry.get("commands", [])],
        "variant": {"status": verdict.status, "label": verdict.label, "text": verdict.text},
    }


def _row_result(index: Index, hit: Hit, releases: Dict[str, str]) -> Dict[str, Any]:
    row = index.rows[hit.ref]
    held = scope_holds(row["scope"], releases) if row["scope"] and releases else None
    return {
        "kind": "release-row",
        "file": row["file"],
        "heading": row["heading"],
        "line": row["line"],
        "how": hit.how,
        "score": hit.score,
        "matched": list(hit.matched[:8]),
        "cells": dict(zip(row["columns"], row["cells"])),
        "scope": scope_text(row["scope"]),
        "your_release": held,
    }


def build_report(
    ranked: Ranked,
    index: Index,
    releases: Dict[str, str],
    origin: Dict[str, str],
    fixes: Optional[Dict[str, Any]],
    elapsed: float,
) -> Dict[str, Any]:
    results = [
        _entry_result(index, h, releases) if h.kind == "entry" else _row_result(index, h, releases) for h in ranked.hits
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": TOOL,
        "verdict": "found" if ranked.found else "no_match",
        "results": results if ranked.found else [],
        "suggestions": [] if ranked.found else results,
        "releases": {p: {"version": v, "from": origin.get(p, "flag")} for p, v in sorted(releases.items())},
        "upstream_messages": ranked.upstream,
        "upstream_fixes": fixes,  # fixes released after the user's releases (scripts/fixes/), or None
        "elapsed_seconds": round(elapsed, 3),
    }


def _wrap(text: str) -> List[str]:
    """``text`` as lines within 100 columns (continuation lines indented)."""
    return fit_width(text, WIDTH).splitlines()


def _where(result: Dict[str, Any]) -> str:
    return f'{result["file"]}:{result["line"]} "{result["heading"]}"'


def _how(result: Dict[str, Any]) -> str:
    if result["how"] == "message":
        return "the quoted message is in your text (the triage's matcher)"
    return "words in common: " + ", ".join(result["matched"][:6])


def _field(lines: List[str], label: str, text: str, limit: int = 420) -> None:
    if text:
        lines.extend(_wrap(f"{label}{clip(text, limit)}"))


def _best(result: Dict[str, Any], releases: Dict[str, str]) -> List[str]:
    lines: List[str] = []
    if result["kind"] == "release-row":
        mine = " (your release)" if result["your_release"] else ""
        lines += _wrap(f"release history, {result['heading']}{mine}")
        for column, cell in result["cells"].items():
            _field(lines, f"  {column}: ", cell, 600)
    else:
        _field(lines, "  Symptom: ", result["symptom"])
        _field(lines, "  Cause: ", result["cause"])
        _field(lines, "  Fix: ", result["fix"])
        variant = result["variant"]
        if variant["status"] in ("variant", "outside"):
            _field(lines, f"  Your releases ({variant['label']}): ", variant["text"])
        elif variant["status"] == "holds" and releases:
            lines.append(f"  Your releases: as written ({variant['label']})")
        elif variant["status"] == "unknown":
            written = f" (written for {variant['label']})" if variant["label"] else ""
            lines += _wrap(f"  Releases not given{written}: add --trl X --vllm Y for the variant")
        _field(lines, "  Verify: ", result["verify"])
        if result["commands"]:
            lines += _wrap(f"  Run: {result['commands'][0]}")
    lines += _wrap(f"  Read next: {_where(result)}")
    lines += _wrap(f"  How it knows: {_how(result)}")
    return lines


def _mine(releases: Dict[str, str]) -> str:
    return ", ".join(f"{LABELS.get(p, p)} {v}" for p, v in sorted(releases.items())) or "none given"


def render_text(report: Dict[str, Any]) -> str:
    releases = {p: info["version"] for p, info in report["releases"].items()}
    lines: List[str] = []
    if report["verdict"] == "found":
        results = report["results"]
        best = results[0]
        lines += _wrap(f"find_fix: best match: {_where(best)}")
        lines += _best(best, releases)
        if len(results) > 1:
            lines.append("Also close:")
            for other in results[1:]:
                lines += _wrap(f"  - {_where(other)}; {_how(other)}")
    else:
        lines += _wrap("find_fix: no entry matches these words well enough. Nearest entries, to check by hand:")
        for other in report["suggestions"]:
            lines += _wrap(f"  - {_where(other)}; {_how(other)}")
        lines += _wrap(
            f"Then: give the exact error line, run {TRIAGE} on the whole log, or route by symptom in {README}.",
        )
    for message in report["upstream_messages"][:1]:
        lines += _wrap(
            f"The text holds a message of {message['package']} (read in {', '.join(message['releases'][-3:])}).",
        )
    if report["upstream_fixes"]:
        lines.append("Upstream fixes after your release (index of merged changes by release):")
        lines += report["upstream_fixes"]["lines"]
    lines += _wrap(f"Releases: {_mine(releases)}. Older release: read {RELEASE_HISTORY}, the rows for yours.")
    text = "\n".join(lines)
    if len(text) > MAX_CHARS:  # the bound holds whatever the entries say
        text = text[: MAX_CHARS - 40].rsplit("\n", 1)[0] + "\n(cut; --json has the rest)"
    return text + "\n"
