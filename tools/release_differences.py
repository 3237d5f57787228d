#!/usr/bin/env python3
"""Regenerate ``scripts/diagnostic/release_differences.json``: for each indexed TRL and vLLM release, the skill
statements that do not hold there.

    python3 tools/release_differences.py           # write the table
    python3 tools/release_differences.py --check   # exit 1 when the committed table is stale

A statement is a claim the scope checker verified (a quoted message, flag, field, env var, route or name of TRL or
vLLM, or a name the text calls deprecated) whose scope includes the release the text is written for (TRL 1.16.0,
vLLM 0.31.0): what the text asserts for a user of that release. For every other indexed release, the table lists
the statements whose fact is absent there, each as ``file#section``, the claim, and the releases where it holds.
No line numbers are stored, so edits elsewhere in a file leave the table current.
The diagnostic (``scripts/diagnostic/release_diff.py``) reads the table to tell a user on another release which
statements to read with care. Regenerate after the skill text or the release history changes (a test checks).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

TOOLS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import skill_claims as sc  # noqa: E402

if str(SKILL_DIR / "scripts") not in sys.path:
    sys.path.insert(0, str(SKILL_DIR / "scripts"))
from common import recorded  # noqa: E402

DEFAULT_OUTPUT = SKILL_DIR / "scripts" / "diagnostic" / "release_differences.json"
COMMAND = "python3 tools/release_differences.py"
SCHEMA_VERSION = 1
CLAIM_CHARS = 90
RECHECK_COUNT = 8
_HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text, flags=re.UNICODE)
    return text.replace(" ", "-")


def section_of(lines: Sequence[str], line: int) -> str:
    in_fence = False
    current = ""
    for number, text in enumerate(lines[:line], 1):
        if re.match(r"^\s*(`{3,}|~{3,})", text):
            in_fence = not in_fence
            continue
        match = _HEADING_RE.match(text)
        if match and not in_fence and number <= line:
            current = slug(match.group(2))
    return current


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= CLAIM_CHARS else text[: CLAIM_CHARS - 1] + "…"


def build_table(root: Path = SKILL_DIR) -> Dict[str, object]:
    files = sc.skill_files(root)
    _failures, checker = sc.check_paths(files, root=root, allowlist_path=sc.DEFAULT_ALLOWLIST)
    history = checker.history
    if history is None:
        raise RuntimeError("tests/facts/release_history.json is missing: run python3 tools/refresh_upstream_facts.py")
    baseline = {p: checker.facts.primary(p) for p in ("trl", "vllm")}
    base_index = {p: history.index_of(p, sc.claim_scopes.minor_of(v)) for p, v in baseline.items()}
    texts: Dict[str, List[str]] = {}
    statements: Dict[Tuple[str, str, str, str], Dict[str, object]] = {}
    cli_flags = {p: _cli_flags(checker.facts, p, baseline[p]) for p in ("trl", "vllm")}
    for rel, item in checker.resolved:
        other = cli_flags[_other(item.package)]
        if item.kind == "flag" and item.identifier in other and item.identifier not in cli_flags[item.package]:
            continue  # the other package's flag (a `vllm serve` flag is judged by the installed vLLM)
        if base_index[item.package] is None or base_index[item.package] not in item.scope:
            continue  # stated for other releases only (an inline scope that excludes the baseline)
        if not item.mask >> base_index[item.package] & 1:
            continue  # a checker failure, reported there
        mask = item.mask
        if item.kind == "message":
            # A quote with "…" can match a generic template of another release ("… is deprecated and will be
            # removed in …" matched the vllm-serve wrapper's warning of TRL 1.11 for the Liger warning of 1.15):
            # keep only the releases whose messages hold every literal piece of the quote as written.
            for piece in (p.strip(" .,:;") for p in item.identifier.split("…")):
                strict = history.message_mask(item.package, piece, lambda quote, template: quote in template)
                if len(piece) >= 16 and strict:
                    mask &= strict
        lines = texts.setdefault(rel, (root / rel).read_text(encoding="utf-8").splitlines())
        where = f"{rel}#{section_of(lines, item.line)}"
        kind = "deprecation" if item.kind == "deprecated" else item.kind
        key = (item.package, where, kind, item.identifier)
        statements.setdefault(
            key,
            {
                "package": item.package,
                "where": where,
                "kind": kind,
                "claim": _short(item.identifier),
                "holds": history.label(item.package, history.mask_indices(item.package, mask)),
                "mask": mask,
            },
        )
    # Only statements that fail somewhere in the reach (the supported line and the indexed releases after it) ship.
    kept = [
        e
        for e in statements.values()
        if any(not int(e["mask"]) >> i & 1 for i in reach(history, str(e["package"])))  # type: ignore[call-overload]
    ]
    ordered = sorted(kept, key=lambda e: (e["package"], e["where"], e["kind"], e["claim"]))
    matrix = recorded.from_matrix(json.loads((root / "scripts" / "stack" / "matrix.json").read_text(encoding="utf-8")))
    if matrix is None:
        raise RuntimeError("scripts/stack/matrix.json has no package listing: run python3 tools/stack_matrix.py")
    releases: Dict[str, object] = {}
    for package in ("trl", "vllm"):
        versions = history.releases[package]
        line_idx = reach(history, package)
        per_release: Dict[str, List[int]] = {}
        for i in line_idx:
            missing = [n for n, e in enumerate(ordered) if e["package"] == package and not int(e["mask"]) >> i & 1]
            per_release[versions[i]] = missing
        # What a release newer than the index most likely changes: the statements that changed in the last two.
        recent_idx = line_idx[-3:]
        recheck = [
            n
            for n, e in enumerate(ordered)
            if e["package"] == package and len({int(e["mask"]) >> i & 1 for i in recent_idx}) > 1
        ]
        releases[package] = {
            "baseline": baseline[package],
            "indexed": [versions[i] for i in line_idx],
            "missing": per_release,
            "recheck_first": recheck[:RECHECK_COUNT],
            "recorded_newest": matrix.newest.get(package),
        }
    rows, instead = history_rows(root / "troubleshooting" / "release-history.md")
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_by": COMMAND,
        "recorded": matrix.fetched,
        "packages": releases,
        "rows": rows,
        "instead": instead,
        "statements": [{k: v for k, v in e.items() if k != "mask"} for e in ordered],
    }


def reach(history: object, package: str) -> List[int]:
    """The indexed releases a user may have: the supported line (vLLM up to the newest some TRL extra accepts) and
    every indexed release after it (vLLM 0.33.0 and 0.34.0: on PyPI, outside every extra, indexed all the same)."""
    line = history.line_indices(package)  # type: ignore[attr-defined]
    later = range(line[-1] + 1, len(history.releases[package])) if line else range(0)  # type: ignore[attr-defined]
    return [*line, *later]


def _other(package: str) -> str:
    return "vllm" if package == "trl" else "trl"


def _cli_flags(facts: object, package: str, version: str) -> set:
    """Every flag of the package's command lines (``vllm serve``, ``trl grpo``, …) in the baseline release."""
    clis = facts.version_facts(package, version).get("clis", {})  # type: ignore[attr-defined]
    return {flag for cli in clis.values() for flag in cli.get("flags", {})}


_ROW_RE = re.compile(r"^\|\s*(TRL|vLLM) (\d+\.\d+)\s*\|")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
INSTEAD_HEADING = "Messages on older releases instead of the quoted ones"


def _cells(line: str) -> List[str]:
    return [cell.strip() for cell in _CELL_SPLIT.split(line.strip().strip("|"))]


def _plain(text: str, limit: int = 160) -> str:
    text = " ".join(text.replace("`", "").split())
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def history_rows(path: Path) -> Tuple[Dict[str, Dict[str, str]], List[Dict[str, str]]]:
    """From troubleshooting/release-history.md: what each release's row says changed (``{"trl": {"1.11": …}}``)
    and the rows of its "Messages on older releases" table (quoted fragment, older scope, what they show)."""
    rows: Dict[str, Dict[str, str]] = {"trl": {}, "vllm": {}}
    instead: List[Dict[str, str]] = []
    section = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = _HEADING_RE.match(line)
        if heading:
            section = heading.group(2).strip()
            continue
        match = _ROW_RE.match(line)
        if match and len(_cells(line)) >= 3:
            rows["trl" if match.group(1) == "TRL" else "vllm"][match.group(2)] = _plain(_cells(line)[2])
            continue
        if section == INSTEAD_HEADING and line.startswith("|") and not line.startswith("|---"):
            cells = _cells(line)
            quoted = re.findall(r"\"([^\"]+)\"|`([^`]+)`", cells[0]) if cells else []
            fragments = [a or b for a, b in quoted]
            if len(cells) >= 3 and fragments and cells[0] != "Quoted in this bundle":
                instead.append({"quoted": fragments[0].split(" … ")[0], "older": cells[1], "shows": _plain(cells[2])})
    return rows, instead


def render(table: Dict[str, object]) -> str:
    # One statement per line: readable diffs when the text changes.
    head = {k: v for k, v in table.items() if k != "statements"}
    lines = ["{"]
    body = json.dumps(head, sort_keys=True, ensure_ascii=False, separators=(",", ":"))[1:-1]
    lines.append(body + ',"statements":[')
    statements = table["statements"]
    for n, entry in enumerate(statements):  # type: ignore[arg-type]
        comma = "," if n + 1 < len(statements) else ""  # type: ignore[arg-type]
        lines.append(json.dumps(entry, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + comma)
    lines.append("]}")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="table to write")
    parser.add_argument(
        "--root",
        type=Path,
        default=SKILL_DIR,
        help="bundle root (default: this repository's skills/scaling-and-backends)",
    )
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if the table is stale")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        text = render(build_table(args.root))
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.is_file() else ""
        if current != text:
            print(f"{args.output} is stale: run {COMMAND}", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date", file=sys.stderr)
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(text.encode('utf-8'))} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
