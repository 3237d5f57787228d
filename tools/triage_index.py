#!/usr/bin/env python3
"""Regenerate ``scripts/triage/index.json``, the messages the log triage (``scripts/triage_log.py``) recognises.

    python3 tools/triage_index.py           # write the index
    python3 tools/triage_index.py --check   # exit 1 when the committed index is stale

Two sources:

* the troubleshooting index (``troubleshooting/*.md``): every entry (``###`` heading, or a ``##`` section that
  quotes messages itself) with the messages it quotes (blockquoted, and backticked messages in its release
  variants), the release scope of each, its release variants (``- **TRL 1.11–1.15:** …``), cause, fix and the
  command of its Verify line;
* the upstream facts index (``tests/facts/upstream_facts.json``, not shipped): every message template of every
  package, with the releases it was read from.

Each message is stored as its literal fragments in order: text that varies (``…`` in a quote, ``{}`` or ``%s`` in a
template, and any word holding a digit: numbers, hosts, ports, sizes) splits it, so a log line matches when it holds
the fragments in that order. The script does no parsing of Markdown or facts at run time. A test checks the committed
file is current; regenerate after the troubleshooting text or the facts change.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

TOOLS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

if str(SKILL_DIR / "scripts") not in sys.path:
    sys.path.insert(0, str(SKILL_DIR / "scripts"))

from common.troubleshooting import index_fragments, message_anchors, search_words  # noqa: E402

import claim_scopes  # noqa: E402
from facts.delta import apply_delta  # noqa: E402

DEFAULT_OUTPUT = SKILL_DIR / "scripts" / "triage" / "index.json"
DEFAULT_FACTS = REPO_ROOT / "tests" / "facts" / "upstream_facts.json"
TROUBLESHOOTING = SKILL_DIR / "troubleshooting"
COMMAND = "python3 tools/triage_index.py"
SCHEMA_VERSION = 2
FIELDS = ("symptom", "when", "cause", "fix", "verify")
MAX_TERMS = 40
ROWS_FILE = "troubleshooting/release-history.md"
MIN_LITERAL = 12  # a message with less fixed text than this would match too much
TEXT_CHARS = 360

_HEADING_RE = re.compile(r"^(#{2,3})\s+(.*?)\s*#*\s*$")
_FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")
_QUOTE_RE = re.compile(r"^\s{0,3}>\s?(.*)$")
_ITEM_RE = re.compile(r"^- (.*)$")
_FIELD_RE = re.compile(r"^\*\*([^*]+?):?\*\*:?\s*(.*)$", re.S)
_SPAN_RE = re.compile(r"(`+)(.+?)\1")
_PLACEHOLDER_RE = re.compile(r"\{[^{}]*\}|%[-#0 +]*\d*(?:\.\d+)?[sdrfixg]|<[^<>]{1,40}>")
_VARIABLE_RE = re.compile(r"\S*\d\S*")
_COMMAND_START = re.compile(r"^(?:python3?|curl|pip|nvidia-smi|accelerate|vllm|trl|export|[A-Z_]+=|grep|ls|cat|ss)\b")
_RUNNABLE = re.compile(r"^(?:python3? |curl |nvidia-smi|ss |ls |grep )")
_UNIT_RE = re.compile(r"^(?:[KMGTP]i?B|bytes|ms|MB/s|GB/s)\.?$")  # the unit of a number that varies
_WORDS_RE = re.compile(r"[A-Za-z']+")


def fragments(text: str, wildcard: re.Pattern[str]) -> List[str]:
    """The literal pieces of a message, in order: ``wildcard`` and words holding a digit split it; whitespace is
    collapsed; pieces shorter than 3 characters are dropped."""
    pieces: List[str] = []
    for part in wildcard.split(text):
        for piece in _VARIABLE_RE.split(part):
            piece = " ".join(piece.split()).strip(" ,;:()[]'\"")
            if len(piece) >= 3 and not _UNIT_RE.match(piece):
                pieces.append(piece)
    return pieces


def values(text: str) -> List[str]:
    """The example values a quote shows (``300000ms``, ``51216``): a line holding them matches it more closely."""
    found = [token.strip(" ,;:()[]'\".") for token in _VARIABLE_RE.findall(text)]
    return sorted({token for token in found if len(token) >= 3})


def _literal_chars(pieces: Sequence[str]) -> int:
    return sum(len(piece) for piece in pieces)


def _scope_ranges(text: str) -> List[List[Optional[str]]]:
    """``[package, lowest minor, highest minor]`` for each release scope written in ``text`` (None = open)."""
    out: List[List[Optional[str]]] = []
    for scope in claim_scopes.parse_scopes(text):
        lo = f"{scope.lo[0]}.{scope.lo[1]}" if scope.lo else None
        hi = f"{scope.hi[0]}.{scope.hi[1]}" if scope.hi else None
        if scope.form == "removed" and scope.lo:
            lo, hi = None, f"{scope.lo[0]}.{scope.lo[1] - 1}"
        out.append([scope.package, lo, hi])
    return out


def _flat(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, limit: int = TEXT_CHARS) -> str:
    text = _flat(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _is_prose_message(span: str) -> bool:
    """A backticked span in a variant bullet that is a message the log prints, not a command or a name."""
    words = _WORDS_RE.findall(span)
    return (
        len(words) >= 3
        and span[:1].isalpha()
        and not re.match(r"^(?:GET|POST|PUT|DELETE) /", span)
        and span.count(" ") >= 2
        and len(span) >= 15
        and not _COMMAND_START.match(span)
        and "<" not in span
    )


class _Entry:
    def __init__(self, path: str, heading: str, line: int, level: int, window: List[List[Optional[str]]]) -> None:
        self.path, self.heading, self.line, self.level = path, heading, line, level
        self.window = window
        self.quotes: List[Dict[str, Any]] = []
        self.variants: List[Dict[str, Any]] = []
        self.fields: Dict[str, str] = {}
        self.prose: List[str] = []  # the section's other lines: list items and paragraphs that are not fields

    def kind(self) -> str:
        """``symptom`` (a failure without a message: troubleshooting/symptoms.md), ``message`` (quotes one) or
        ``prose`` (an entry that names its failure in words only)."""
        if "symptom" in self.fields:
            return "symptom"
        return "message" if self.quotes else "prose"

    def search(self) -> Dict[str, Any]:
        """What the lookup ranks on: the heading's words, the symptom's and when's words, every other word of the
        section (fields, variants, quotes, prose), and its backticked terms (config keys, flags, variables)."""
        texts = [self.fields.get(name, "") for name in ("cause", "fix", "verify")]
        texts += [v["text"] for v in self.variants] + [q["text"] for q in self.quotes] + self.prose
        symptom = " ".join(self.fields.get(name, "") for name in ("symptom", "when"))
        spans = [m.group(2).strip() for t in [symptom, *texts] for m in _SPAN_RE.finditer(t)]
        terms = sorted({t for t in spans if _is_term(t)})[:MAX_TERMS]
        return {
            "heading": sorted(set(search_words(_unticked(self.heading)))),
            "symptom": sorted(set(search_words(_unticked(symptom)))),
            "text": sorted(set(search_words(_unticked(" ".join(texts))))),
            "terms": terms,
        }

    def as_dict(self) -> Dict[str, Any]:
        verify = self.fields.get("verify", "")
        fix = self.fields.get("fix", "")
        commands = [m.group(2).strip() for m in _SPAN_RE.finditer(verify) if _RUNNABLE.match(m.group(2))] or [
            m.group(2).strip() for m in _SPAN_RE.finditer(fix) if m.group(2).startswith("python3 scripts/")
        ]
        return {
            "file": self.path,
            "heading": self.heading,
            "kind": self.kind(),
            "line": self.line,
            "scope": _scope_ranges(self.heading),
            "window": self.window,
            "quotes": self.quotes,
            "variants": self.variants,
            "cause": _clip(self.fields.get("cause", "")),
            "fix": _clip(fix),
            "verify": _clip(verify),
            "symptom": _clip(self.fields.get("symptom", "")),
            "when": _clip(self.fields.get("when", "")),
            "commands": commands,
            "search": self.search(),
        }


_TERM_RE = re.compile(
    r"^(?:--?[a-z][\w-]*(?:[= ].*)?|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?:=.*)?|[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?:=.*)?)$"
)


def _is_term(span: str) -> bool:
    """A backticked config key, flag or variable (``vllm_group_port``, ``--max-lora-rank``, ``NCCL_SOCKET_IFNAME``)."""
    return len(span) <= 60 and bool(_TERM_RE.match(span))


def _unticked(text: str) -> str:
    """Markdown emphasis and links reduced to their words."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return text.replace("**", " ").replace("`", " ")


def _items(lines: List[Tuple[int, str]]) -> List[Tuple[int, str]]:
    """List items of a section with their continuation lines joined (line number of the item's first line)."""
    items: List[Tuple[int, str]] = []
    for number, text in lines:
        match = _ITEM_RE.match(text)
        if match:
            items.append((number, match.group(1)))
        elif items and text.startswith("  ") and text.strip():
            items[-1] = (items[-1][0], items[-1][1] + " " + text.strip())
    return items


def _window(text: str) -> List[List[Optional[str]]]:
    for line in text.splitlines():
        match = claim_scopes.WINDOW_RE.match(line)
        if match:
            return _scope_ranges(match.group(1))
    return []


def parse_file(path: Path, root: Path) -> List[Dict[str, Any]]:
    """The entries of one troubleshooting file: sections that quote a message or carry a symptom, cause or fix."""
    rel = path.relative_to(root).as_posix()
    text = path.read_text(encoding="utf-8")
    window = _window(text)
    entries: List[_Entry] = []
    current: Optional[_Entry] = None
    body: List[Tuple[int, str]] = []
    pending_scope: List[List[Optional[str]]] = []
    in_fence = False

    def close() -> None:
        if current is None:
            return
        for number, item in _items(body):
            field = _FIELD_RE.match(item)
            if not field:
                current.prose.append(item)
                continue
            name, rest = field.group(1).strip(), field.group(2)
            if name.lower() in FIELDS:
                current.fields[name.lower()] = rest
                continue
            ranges = _scope_ranges(name)
            if not ranges:
                continue
            current.variants.append({"label": name, "scope": ranges, "text": _clip(rest), "line": number})
            for span in _SPAN_RE.finditer(rest):
                message = span.group(2).strip()
                pieces = fragments(message, re.compile("…"))
                if _is_prose_message(message) and _literal_chars(pieces) >= MIN_LITERAL:
                    current.quotes.append(
                        {"text": message, "fragments": pieces, "scope": ranges, "line": number, "prose": True}
                    )
        for number, row in body:
            if row.startswith("- ") and _FIELD_RE.match(row[2:]):
                continue  # fields and variants, read above
            if row.strip() and not row.startswith(("- ", "  ")):
                current.prose.append(row.strip())  # a paragraph or table row (list items were read above)
            for span in _SPAN_RE.finditer(row):
                message = span.group(2).strip()
                pieces = fragments(message, re.compile("…"))
                if not _is_prose_message(message) or _literal_chars(pieces) < MIN_LITERAL:
                    continue
                if any(q["text"] == message for q in current.quotes):
                    continue
                current.quotes.append(
                    {"text": message, "fragments": pieces, "scope": _scope_ranges(row), "line": number, "prose": True}
                )
        if "symptom" in current.fields:
            current.quotes = []  # a failure without a message: found by its words, never by a log line
        if current.quotes or any(name in current.fields for name in ("symptom", "cause", "fix")):
            entries.append(current)

    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE_RE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        heading = _HEADING_RE.match(line)
        if heading:
            close()
            body = []
            pending_scope = []
            level = len(heading.group(1))
            title = heading.group(2).strip()
            current = None if title.startswith("Versions") else _Entry(rel, title, number, level, window)
            continue
        if current is None:
            continue
        quote = _QUOTE_RE.match(line)
        if quote:
            content = quote.group(1).strip()
            spans = list(_SPAN_RE.finditer(content))
            if not spans and claim_scopes.is_scope_only(content):
                pending_scope = _scope_ranges(content)
                continue
            if spans and content.startswith("`"):
                message = spans[0].group(2)
                rest = content[spans[0].end() :].strip()
                scope = pending_scope or (_scope_ranges(rest) if claim_scopes.is_scope_only(rest) else [])
                pieces = fragments(message, re.compile("…"))
                if _literal_chars(pieces) >= MIN_LITERAL:
                    current.quotes.append(
                        {
                            "text": message,
                            "fragments": pieces,
                            "values": values(message),
                            "scope": scope,
                            "line": number,
                            "prose": False,
                        }
                    )
            pending_scope = []
            continue
        body.append((number, line))
    close()
    return [entry.as_dict() for entry in entries]


_ROW_RE = re.compile(r"^\|(.*)\|\s*$")
_RULE_ROW_RE = re.compile(r"^\|[\s:|-]+\|\s*$")
ROW_CHARS = 700


def parse_rows(path: Path, root: Path) -> List[Dict[str, Any]]:
    """The table rows of the release history, each with its table's heading and column names, its cells, the
    release scope its first cell names and its words: the lookup ranks them beside the entries."""
    rel = path.relative_to(root).as_posix()
    rows: List[Dict[str, Any]] = []
    heading = ""
    columns: List[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        title = _HEADING_RE.match(line)
        if title:
            heading, columns = title.group(2).strip(), []
            continue
        row = _ROW_RE.match(line)
        if not row or heading.startswith("Versions"):
            if not line.strip():
                columns = []
            continue
        if _RULE_ROW_RE.match(line):
            continue
        cells = [cell.strip() for cell in row.group(1).split(" | ")]
        if not columns:
            columns = cells
            continue
        text = " ".join(cells)
        spans = [m.group(2).strip() for m in _SPAN_RE.finditer(text)]
        rows.append(
            {
                "file": rel,
                "heading": heading,
                "line": number,
                "columns": columns,
                "cells": [_clip(cell, ROW_CHARS) for cell in cells],
                "scope": _scope_ranges(cells[0]),
                "search": {
                    "heading": sorted(set(search_words(_unticked(cells[0])))),
                    "symptom": [],
                    "text": sorted(set(search_words(_unticked(text + " " + heading)))),
                    "terms": sorted({t for t in spans if _is_term(t)})[:MAX_TERMS],
                },
            }
        )
    return rows


def upstream_messages(facts_path: Path) -> List[Dict[str, Any]]:
    """Every message template of the facts index, once per text, with its package and the releases holding it."""
    facts = json.loads(facts_path.read_text(encoding="utf-8"))
    found: Dict[Tuple[str, str], List[str]] = {}
    for package, info in sorted(facts["packages"].items()):
        primary = info["primary"]
        for version, data in info["versions"].items():
            messages = data.get("messages")
            if messages is None and isinstance(data.get("delta"), dict):
                base = info["versions"][data.get("delta_from", primary)].get("messages", [])
                change = data["delta"].get("patch", {}).get("messages")
                messages = apply_delta(base, change) if change else base
            for message in messages or []:
                found.setdefault((package, message), []).append(version)
    out: List[Dict[str, Any]] = []
    for (package, message), versions in sorted(found.items()):
        pieces = fragments(message, _PLACEHOLDER_RE)
        if _literal_chars(pieces) < MIN_LITERAL:
            continue
        out.append({"package": package, "fragments": pieces, "releases": sorted(versions)})
    return out


def build_index(root: Path = SKILL_DIR, facts: Path = DEFAULT_FACTS) -> Dict[str, Any]:
    files = sorted(root.joinpath("troubleshooting").glob("*.md"))
    entries: List[Dict[str, Any]] = []
    for path in files:
        entries += parse_file(path, root)
    index: Dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "generated_by": COMMAND,
        "entries": entries,
        "rows": parse_rows(root / ROWS_FILE, root),
        "upstream": upstream_messages(facts),
    }
    index["anchors"] = message_anchors(index_fragments(index))  # read as they are: no run computes them again
    return index


def render(index: Dict[str, Any]) -> str:
    return json.dumps(index, ensure_ascii=False, separators=(",", ":"), sort_keys=False) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="triage_index.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="index to write")
    parser.add_argument("--facts", type=Path, default=DEFAULT_FACTS, help="upstream facts index to read")
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed index is stale")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    text = render(build_index(SKILL_DIR, args.facts))
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.is_file() else ""
        if current != text:
            print(f"{args.output}: stale; run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    index = json.loads(text)
    print(f"wrote {args.output}: {len(index['entries'])} entries, {len(index['upstream'])} upstream messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
