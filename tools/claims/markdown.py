"""The Markdown walk: code blocks, inline code spans, check markers and blockquoted messages."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import claim_scopes

from .common import CITATION_RE, FENCE_RE, HEADING_RE, MARKER_RE, SKILL_DIRS


@dataclass
class CodeBlock:
    lang: str
    info: str
    start_line: int  # line number of the first content line
    lines: List[str]
    marker: Optional[str]
    section: str
    marker_line: int = 0


@dataclass
class InlineSpan:
    text: str
    line: int
    section: str
    blockquote_role: str = ""  # "" | "message" | "cited" | "uncited"
    marker: Optional[str] = None
    marker_line: int = 0


@dataclass
class MarkdownDoc:
    path: str
    blocks: List[CodeBlock] = field(default_factory=list)
    spans: List[InlineSpan] = field(default_factory=list)


def iter_code_spans(text: str) -> Iterator[Tuple[int, str]]:
    """(offset, content) of CommonMark inline code spans in ``text`` (backslash-escaped backticks are literal)."""
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            i += 2
            continue
        if ch != "`":
            i += 1
            continue
        j = i
        while j < n and text[j] == "`":
            j += 1
        run = j - i
        k = j
        close = -1
        while k < n:
            if text[k] == "`":
                m = k
                while m < n and text[m] == "`":
                    m += 1
                if m - k == run:
                    close = k
                    break
                k = m
            else:
                k += 1
        if close < 0:
            i = j
            continue
        content = text[j:close].replace("\n", " ")
        if len(content) >= 2 and content[0] == " " and content[-1] == " " and content.strip():
            content = content[1:-1]
        yield i, content
        i = close + run


def parse_markdown(path: str, text: str) -> MarkdownDoc:
    doc = MarkdownDoc(path)
    lines = text.splitlines()
    section = ""
    i = 0
    pending_marker: Optional[str] = None
    marker_line = 0
    paragraph: List[Tuple[int, str]] = []
    in_comment = False

    def flush() -> None:
        if paragraph:
            _paragraph_spans(doc, paragraph, section)
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        if in_comment:
            if "-->" in line:
                in_comment = False
            i += 1
            continue
        marker = MARKER_RE.match(line)
        if marker:
            flush()
            pending_marker = marker.group(1)
            marker_line = i + 1
            i += 1
            continue
        if line.lstrip().startswith("<!--"):
            flush()
            if "-->" not in line:
                in_comment = True
            i += 1
            continue
        fence = FENCE_RE.match(line)
        if fence and not line.lstrip().startswith(">"):
            flush()
            indent, ticks, info = fence.group(1), fence.group(2), fence.group(3).strip()
            if ticks[0] == "`" and "`" in info:
                paragraph.append((i + 1, line))
                i += 1
                continue
            body: List[str] = []
            j = i + 1
            while j < len(lines):
                close = FENCE_RE.match(lines[j])
                if (
                    close
                    and close.group(2)[0] == ticks[0]
                    and len(close.group(2)) >= len(ticks)
                    and not close.group(3).strip()
                ):
                    break
                body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
                j += 1
            lang = info.split()[0].lower() if info else ""
            doc.blocks.append(CodeBlock(lang, info, i + 2, body, pending_marker, section, marker_line))
            pending_marker = None
            i = j + 1
            continue
        heading = HEADING_RE.match(line)
        if heading:
            flush()
            if len(heading.group(1)) <= 2:
                section = heading.group(2).strip()
            for _offset, content in iter_code_spans(heading.group(2)):
                doc.spans.append(InlineSpan(content, i + 1, section))
            pending_marker = None
            i += 1
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        quote = re.match(r"^\s{0,3}>\s?(.*)$", line)
        if quote:
            flush()
            _blockquote_line(doc, quote.group(1), i + 1, section, pending_marker, marker_line)
            pending_marker = None
            i += 1
            continue
        if pending_marker is not None and not paragraph:
            pending_marker = None
        paragraph.append((i + 1, line))
        i += 1
    flush()
    return doc


def _paragraph_spans(doc: MarkdownDoc, paragraph: List[Tuple[int, str]], section: str) -> None:
    is_table = all(text.lstrip().startswith("|") for _, text in paragraph)
    joined = ""
    starts: List[Tuple[int, int]] = []
    for number, text in paragraph:
        starts.append((len(joined), number))
        joined += text + "\n"
    for offset, content in iter_code_spans(joined):
        if is_table:
            content = content.replace("\\|", "|")
        number = max(n for start, n in starts if start <= offset)
        doc.spans.append(InlineSpan(content, number, section))


def _blockquote_line(
    doc: MarkdownDoc, content: str, number: int, section: str, marker: Optional[str], marker_line: int
) -> None:
    spans = list(iter_code_spans(content))
    stripped = content.strip()
    if len(spans) == 1 and stripped.startswith("`"):
        _offset, text = spans[0]
        run = len(stripped) - len(stripped.lstrip("`"))
        end = content.find("`" * run, content.find("`" * run) + run + len(text)) + run
        rest = content[end:].strip() if end > run else ""
        if not rest:
            doc.spans.append(InlineSpan(text, number, section, "message", marker, marker_line))
            return
        if claim_scopes.is_scope_only(rest):  # ``> `message` (TRL ≥ 1.14)``: a scoped upstream message
            doc.spans.append(InlineSpan(text, number, section, "message", marker, marker_line))
            return
        if rest.startswith("(") and rest.endswith(")"):
            role = "cited" if CITATION_RE.search(rest) else "uncited"
            doc.spans.append(InlineSpan(text, number, section, role, marker, marker_line))
            return
    for _, text in spans:
        doc.spans.append(InlineSpan(text, number, section))


def skill_files(root: Path) -> List[Path]:
    """Root ``SKILL.md`` plus every Markdown file inside the sub-skill folders."""
    files = [root / "SKILL.md"] if (root / "SKILL.md").is_file() else []
    for name in SKILL_DIRS:
        folder = root / name
        if folder.is_dir():
            files.extend(sorted(folder.rglob("*.md")))
    return files
