"""Reading logs: each source streamed in pieces through ``common.read`` (regular files only, never more than the
byte limit), searched in bulk for the scan tokens, and only the lines holding one decoded. Memory stays at one piece
plus a short tail, whatever the log's size."""

from __future__ import annotations

import os
import re
from typing import Callable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from common.read import InputError, file_size, iter_chunks, iter_stdin_chunks

CHUNK = 1 << 20
TAIL = 16 * 1024  # bytes of the previous piece kept for the lines before a hit
MAX_LINE_CHARS = 2000  # a longer line is cut (a log line that long is data, not a message)
MAX_CARRY = 1 << 20  # a "line" without a newline for this long is cut into pieces
CONTEXT_LINES = 16
AFTER_LINES = 64  # a torchelastic failure table of 8 ranks
BEFORE, AFTER = "before", "after"

_RANK_IN_NAME = re.compile(r"(?:rank|worker|proc|gpu)[-_ ]?(\d{1,6})(?!\d)", re.I)


class Source(NamedTuple):
    """One log: a file (``path``) or standard input (``path`` is None); ``rank`` when the file name says it."""

    label: str
    path: Optional[str]
    rank: Optional[int]


class Hit(NamedTuple):
    """A line holding a scan token: its source index, line number (1-based, counted in newlines like ``grep -n``),
    text (decoded, cut at ``MAX_LINE_CHARS``) and, when asked for, the lines before or after it (number, text)."""

    source: int
    line: int
    text: str
    before: Tuple[Tuple[int, str], ...] = ()
    after: Tuple[Tuple[int, str], ...] = ()


class SourceStats(NamedTuple):
    label: str
    lines: int
    bytes: int
    truncated: bool


def make_sources(paths: Sequence[str]) -> List[Source]:
    """Sources for the given paths (``-`` is standard input); the rank comes from a file name like ``rank3.log``."""
    sources: List[Source] = []
    for path in paths:
        if path == "-":
            sources.append(Source("<stdin>", None, None))
            continue
        match = _RANK_IN_NAME.search(os.path.basename(path))
        sources.append(Source(path, path, int(match.group(1)) if match else None))
    return sources


def check_sources(sources: Sequence[Source]) -> None:
    """Open each file once before any reading, so a bad path is a usage error, not a half-read report."""
    for source in sources:
        if source.path is not None:
            file_size(source.path)


class Scanner:
    """Finds the lines that hold a token. Tokens that start with a capital letter or other rare byte go into one
    compiled alternation (its cost grows with how often a first byte occurs, not with the number of tokens); tokens
    that start with a common lower-case letter are searched one by one with ``bytes.find`` (a fast substring search
    whose cost does not depend on letter frequency)."""

    def __init__(self, tokens: Sequence[bytes]) -> None:
        unique = sorted(set(t for t in tokens if t), key=lambda t: (-len(t), t))
        self.bulk = [t for t in unique if not t[:1].islower()]
        self.single = [t for t in unique if t[:1].islower()]
        self.pattern = re.compile(_trie(self.bulk)) if self.bulk else None

    def positions(self, buffer: bytes, start: int, end: int) -> List[int]:
        """Sorted offsets of token matches in ``buffer[start:end]`` (at least one per line that holds a token)."""
        found: List[int] = []
        if self.pattern is not None:
            found = [m.start() for m in self.pattern.finditer(buffer, start, end)]
        for token in self.single:
            at = buffer.find(token, start, end)
            while at >= 0:
                found.append(at)
                at = buffer.find(b"\n", at, end)  # one per line is enough
                if at < 0:
                    break
                at = buffer.find(token, at, end)
        if self.single:
            found.sort()
        return found


def _trie(tokens: Sequence[bytes]) -> bytes:
    """One regular expression for the tokens, factored by common prefixes (``T(?:he adapter|raceback)``): at each
    position the engine tries one branch per byte instead of every token. A token that extends another is dropped
    (the shorter one already finds the line)."""
    root: dict = {}
    for token in tokens:
        node = root
        for byte in token:
            node = node.setdefault(bytes([byte]), {})
        node[b""] = {}

    def build(node: dict) -> bytes:
        if b"" in node:
            return b""
        branches = [re.escape(key) + build(child) for key, child in sorted(node.items())]
        return branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"

    return build(root)


def scanner(tokens: Sequence[bytes]) -> Scanner:
    return Scanner(tokens)


def _decode(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " …"


def _segment(buffer: bytes, start: int, end: int, at: int) -> bytes:
    """The part of a line around offset ``at``: carriage returns (progress bars) split a line into screens."""
    if buffer.find(b"\r", start, end) < 0:
        return buffer[start:end]
    left = buffer.rfind(b"\r", start, at) + 1 or start
    right = buffer.find(b"\r", at, end)
    return buffer[max(left, start) : end if right < 0 else right]


def _before(buffer: bytes, line_start: int, number: int, floor: int) -> Tuple[Tuple[int, str], ...]:
    lines: List[Tuple[int, str]] = []
    end = line_start - 1
    while len(lines) < CONTEXT_LINES and end > floor:
        start = buffer.rfind(b"\n", floor, end) + 1
        number -= 1
        text = _decode(buffer[start:end].rstrip(b"\r"))
        lines.append((number, text))
        end = start - 1
    return tuple(reversed(lines))


def _after(buffer: bytes, line_end: int, end: int, number: int) -> Tuple[Tuple[int, str], ...]:
    lines: List[Tuple[int, str]] = []
    start = line_end + 1
    while len(lines) < AFTER_LINES and start < end:
        stop = buffer.find(b"\n", start, end)
        stop = end if stop < 0 else stop
        number += 1
        lines.append((number, _decode(buffer[start:stop].rstrip(b"\r"))))
        start = stop + 1
    return tuple(lines)


def scan(
    index: int,
    source: Source,
    pattern: Scanner,
    context: Callable[[str], str],
    limit: int,
    stats: List[SourceStats],
) -> Iterator[Hit]:
    """The hits of one source, in order; appends the source's :class:`SourceStats` when it is read to the end."""
    chunks = iter_stdin_chunks(CHUNK, limit) if source.path is None else iter_chunks(source.path, CHUNK, limit)
    tail = b""  # the end of the previous buffer, for context only
    carry = b""  # a line begun in the previous piece
    newlines = 0  # newlines before the start of ``carry``
    total = 0
    for chunk in chunks:
        total += len(chunk)
        buffer = tail + carry + chunk
        scan_from = len(tail)
        end = buffer.rfind(b"\n") + 1
        if end <= scan_from:
            if len(buffer) - scan_from < MAX_CARRY:
                carry = buffer[scan_from:]
                tail = buffer[:scan_from]
                continue
            end = len(buffer)  # a very long line: judge what there is
        yield from _hits(index, buffer, scan_from, end, newlines, pattern, context)
        newlines += buffer.count(b"\n", scan_from, end)
        carry = buffer[end:]
        tail = buffer[max(scan_from, end - TAIL) : end]
    if carry:
        buffer = tail + carry
        yield from _hits(index, buffer, len(tail), len(buffer), newlines, pattern, context)
        newlines += 1
    stats.append(SourceStats(source.label, newlines, total, total >= limit))


def _hits(
    index: int,
    buffer: bytes,
    start: int,
    end: int,
    newlines: int,
    pattern: Scanner,
    context: Callable[[str], str],
) -> Iterator[Hit]:
    counted_to = start
    number = newlines + 1
    last_line_start = -1
    for at in pattern.positions(buffer, start, end):
        line_start = buffer.rfind(b"\n", start, at) + 1 or start
        if line_start == last_line_start:
            continue
        last_line_start = line_start
        line_end = buffer.find(b"\n", at, end)
        if line_end < 0:
            line_end = end
        number += buffer.count(b"\n", counted_to, line_start)
        counted_to = line_start
        text = _decode(_segment(buffer, line_start, line_end, at).rstrip(b"\r"))
        mode = context(text)
        if mode == BEFORE:
            yield Hit(index, number, text, _before(buffer, line_start, number, 0))
        elif mode == AFTER:
            yield Hit(index, number, text, (), _after(buffer, line_end, end, number))
        else:
            yield Hit(index, number, text)


def iter_hits(
    sources: Sequence[Source],
    pattern: Scanner,
    context: Callable[[str], str],
    limit: int,
    stats: List[SourceStats],
) -> Iterator[Hit]:
    """Every hit of every source, source by source, as a stream (nothing is kept here); ``stats`` gains one entry
    per source read. Raises :class:`common.read.InputError` for an unreadable one."""
    for index, source in enumerate(sources):
        yield from scan(index, source, pattern, context, limit, stats)


__all__ = [
    "Hit",
    "InputError",
    "Source",
    "SourceStats",
    "check_sources",
    "iter_hits",
    "make_sources",
    "scan",
    "scanner",
]
