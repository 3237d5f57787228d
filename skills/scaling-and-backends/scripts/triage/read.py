"""Reading logs: each source streamed in pieces through ``common.read`` (regular files only, never more than the
byte limit), decoded from UTF-16 or UTF-8 with a byte-order mark when it has one, searched in bulk for the scan
tokens, and only the lines holding one decoded. Memory stays at one piece plus a short tail, whatever the log's size
or line lengths; work stays in proportion to the bytes read, and a :class:`Budget` of time and judged lines stops
an endless input early (the source's stats say so)."""

from __future__ import annotations

import codecs
import os
import re
import time
from typing import Callable, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from common.output import scrub
from common.read import InputError, file_size, iter_chunks, iter_stdin_chunks

CHUNK = 1 << 20
TAIL = 16 * 1024  # bytes of the previous piece kept for the lines before a hit
MAX_LINE_CHARS = 2000  # the text kept of a line: a longer one keeps its head and the part around each token
HEAD_CHARS = 120  # of a longer line: its first characters (rank prefix, timestamp) ...
LEAD_CHARS = 100  # ... and, from this many characters before a token, the rest of MAX_LINE_CHARS
STEP = MAX_LINE_CHARS - HEAD_CHARS - LEAD_CHARS  # tokens this far apart in one line are judged apart
BLOCK = 64 * 1024  # a longer line is decoded and scrubbed in blocks of this many bytes, cut at whitespace
MAX_WINDOWS = 16  # texts judged of one line (or of one MAX_CARRY piece of a longer one); the rest is data
MAX_CARRY = 1 << 20  # a "line" without a newline for this long is cut into pieces
CONTEXT_LINES = 16
CONTEXT_BYTES = 4096  # of each context line, at most this many bytes are decoded ...
CONTEXT_CHARS = 400  # ... and this many characters kept
CONTEXT_SPAN = 16 * 1024  # bytes looked at for the lines before a hit
AFTER_LINES = 64  # a torchelastic failure table of 8 ranks
AFTER_SPAN = 32 * 1024
BEFORE, AFTER = "before", "after"
GAP = " … "
DEADLINE_S = 20.0  # default wall-clock budget of the reading, all sources together
MAX_HIT_LINES = 2_000_000  # lines judged, all sources together
STOP_BYTES, STOP_TIME, STOP_LINES = "bytes", "time", "lines"

_RANK_IN_NAME = re.compile(r"(?:rank|worker|proc|gpu)[-_ ]?([0-9]{1,6})(?![0-9])", re.I)
_SPACE = re.compile(rb"[ \t]")
Lines = Tuple[Tuple[int, str], ...]


class Source(NamedTuple):
    """One log: a file (``path``) or standard input (``path`` is None); ``rank`` when the file name says it."""

    label: str
    path: Optional[str]
    rank: Optional[int]


def _no_context() -> Lines:
    return ()


class Hit(NamedTuple):
    """A line holding a scan token: its source index, line number (1-based, counted in newlines like ``grep -n``)
    and text (decoded; a line over ``MAX_LINE_CHARS`` is scrubbed whole, then cut to its head and the part around the
    token, so one long line can give several hits). ``mode`` says which context the finder asked for and ``context``
    reads it (number, text) only when called, while the piece is at hand: the lines before or after the hit."""

    source: int
    line: int
    text: str
    mode: str = ""
    context: Callable[[], Lines] = _no_context

    @property
    def before(self) -> Lines:
        return self.context() if self.mode == BEFORE else ()

    @property
    def after(self) -> Lines:
        return self.context() if self.mode == AFTER else ()


class SourceStats(NamedTuple):
    label: str
    lines: int
    bytes: int
    truncated: bool
    stopped: str = ""  # why it was not read to the end: "bytes" (--max-mib), "time" (--deadline), "lines"
    encoding: str = "utf-8"


class Budget:
    """The reading's bound in time and in judged lines, shared by every source; ``stopped`` names the one spent."""

    def __init__(self, seconds: float = DEADLINE_S, lines: int = MAX_HIT_LINES) -> None:
        self.deadline = time.monotonic() + seconds
        self.lines = lines
        self.used = 0
        self.stopped = ""

    def spent(self) -> bool:
        if not self.stopped and time.monotonic() > self.deadline:
            self.stopped = STOP_TIME
        return bool(self.stopped)

    def spend(self) -> bool:
        """Count one judged line; True once the budget is spent (the clock is read every 256 lines)."""
        self.used += 1
        if self.used >= self.lines:
            self.stopped = self.stopped or STOP_LINES
        elif self.used % 256 == 0:
            self.spent()
        return bool(self.stopped)


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
    whose cost does not depend on letter frequency). Each search resumes at the next line, or ``STEP`` bytes on in a
    long line, so the work is linear in the bytes whatever a line holds."""

    def __init__(self, tokens: Sequence[bytes]) -> None:
        unique = sorted(set(t for t in tokens if t), key=lambda t: (-len(t), t))
        self.bulk = [t for t in unique if not t[:1].islower()]
        self.single = [t for t in unique if t[:1].islower()]
        self.pattern = re.compile(_trie(self.bulk)) if self.bulk else None

    def positions(self, buffer: bytes, start: int, end: int) -> List[int]:
        """Sorted offsets of token matches in ``buffer[start:end]``: the first of each line, and of a long line
        one at least every ``STEP`` bytes."""
        found: List[int] = []
        if self.pattern is not None:
            search = self.pattern.search
            at = start
            while at < end:
                match = search(buffer, at, end)
                if match is None:
                    break
                found.append(match.start())
                at = _resume(buffer, match.start(), end)
        for token in self.single:
            at = buffer.find(token, start, end)
            while at >= 0:
                found.append(at)
                at = buffer.find(token, _resume(buffer, at, end), end)
        if self.single:
            found.sort()
        return found


def _resume(buffer: bytes, at: int, end: int) -> int:
    """Where the search goes on after a match at ``at``: the next line, or ``STEP`` bytes on in a long one."""
    stop = min(end, at + STEP)
    newline = buffer.find(b"\n", at, stop)
    return newline + 1 if newline >= 0 else stop


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
    return data.decode("utf-8", errors="replace")


def _cut(text: str, limit: int) -> str:
    """A context line within ``limit`` characters: a longer one is scrubbed whole first, so a cut never leaves the
    head of a secret that the output's scrubber would no longer recognise."""
    if len(text) <= limit:
        return text
    return scrub(text)[:limit] + " …"


def _context_line(buffer: bytes, start: int, end: int) -> str:
    return _cut(_decode(buffer[start : min(end, start + CONTEXT_BYTES)].rstrip(b"\r")), CONTEXT_CHARS)


def _before(buffer: bytes, line_start: int, number: int, floor: int) -> Lines:
    lines: List[Tuple[int, str]] = []
    end = line_start - 1
    floor = max(floor, line_start - CONTEXT_SPAN)
    while len(lines) < CONTEXT_LINES and end > floor:
        start = buffer.rfind(b"\n", floor, end) + 1
        if start == 0 and floor > 0:
            break  # the line begins before the span: not shown rather than shown from its middle
        number -= 1
        lines.append((number, _context_line(buffer, start, end)))
        end = start - 1
    return tuple(reversed(lines))


def _after(buffer: bytes, line_end: int, end: int, number: int) -> Lines:
    lines: List[Tuple[int, str]] = []
    start = line_end + 1
    end = min(end, start + AFTER_SPAN)
    while len(lines) < AFTER_LINES and start < end:
        stop = buffer.find(b"\n", start, end)
        stop = end if stop < 0 else stop
        number += 1
        lines.append((number, _context_line(buffer, start, stop)))
        start = stop + 1
    return tuple(lines)


def _blocks(buffer: bytes, start: int, end: int) -> Iterator[Tuple[int, int]]:
    """A long segment in blocks of at most ``BLOCK`` bytes, each ending after a space where one is near (a token or
    key never contains one, so none is split between blocks)."""
    while start < end:
        stop = min(end, start + BLOCK)
        if stop < end:
            space = buffer.rfind(b" ", stop - 4096, stop)
            if space > start:
                stop = space + 1
        yield start, stop
        start = stop


def _windows(clean: bytes, head: bytes, first: bool, scan: Scanner) -> Iterator[str]:
    """The texts of the tokens of one scrubbed block: the block's start when the token is near it, else the line's
    head, a gap and the part from ``LEAD_CHARS`` before the token."""
    shown = 0  # the block's start is shown up to here
    for at in scan.positions(clean, 0, len(clean)):
        if first and at + LEAD_CHARS <= MAX_LINE_CHARS:
            if not shown:
                shown = MAX_LINE_CHARS
                yield _decode(clean[:MAX_LINE_CHARS]) + (" …" if len(clean) > MAX_LINE_CHARS else "")
            continue
        start = max(0, at - LEAD_CHARS)
        stop = start + MAX_LINE_CHARS - HEAD_CHARS
        yield _decode(head) + GAP + _decode(clean[start:stop]) + (" …" if stop < len(clean) else "")


def _texts(buffer: bytes, start: int, end: int, at: int, scan: Scanner) -> Tuple[List[str], int]:
    """The texts to judge of the segment ``buffer[start:end]`` that holds a token at ``at``, and where the reading
    goes on. A short one is its whole text (the output scrubs it); a longer one is scrubbed block by block before
    anything is cut from it."""
    if end - start <= MAX_LINE_CHARS:
        return [_decode(buffer[start:end])], end
    head = b""
    for block_start, block_end in _blocks(buffer, start, end):
        if not head:
            head_text = scrub(_decode(buffer[block_start : min(block_end, block_start + 4 * HEAD_CHARS)]))
            head = head_text.encode("utf-8")[:HEAD_CHARS]
        if block_end <= at:
            continue
        clean = scrub(_decode(buffer[block_start:block_end])).encode("utf-8")
        return list(_windows(clean, head, block_start == start, scan)), block_end
    return [], end


def _segment(buffer: bytes, start: int, end: int, at: int) -> Tuple[int, int]:
    """The part of a line around offset ``at``: carriage returns (progress bars) split a line into screens."""
    left = buffer.rfind(b"\r", start, at) + 1 or start
    right = buffer.find(b"\r", at, end)
    return max(left, start), end if right < 0 else right


def _transcoded(chunks: Iterable[bytes], seen: List[int], encoding: List[str]) -> Iterator[bytes]:
    """The pieces as UTF-8: a UTF-16 log (a byte-order mark, or NUL bytes at every other offset of its start, as
    PowerShell's ``>`` writes) is decoded on the fly; a UTF-8 byte-order mark is dropped. ``seen`` counts the bytes
    read, ``encoding`` gets the one found."""
    iterator = iter(chunks)
    first = b""
    for chunk in iterator:
        seen[0] += len(chunk)
        first += chunk
        if len(first) >= 512:
            break
    codec = _encoding_of(first[:512])
    encoding.append(codec)
    if codec == "utf-8":
        if first.startswith(codecs.BOM_UTF8):
            first = first[3:]
        if first:
            yield first
        for chunk in iterator:
            seen[0] += len(chunk)
            yield chunk
        return
    decoder = codecs.getincrementaldecoder(codec)(errors="replace")
    text = decoder.decode(first)
    if text:
        yield text.encode("utf-8")
    for chunk in iterator:
        seen[0] += len(chunk)
        text = decoder.decode(chunk)
        if text:
            yield text.encode("utf-8")
    text = decoder.decode(b"", final=True)
    if text:
        yield text.encode("utf-8")


def _encoding_of(start: bytes) -> str:
    if start.startswith(codecs.BOM_UTF8):
        return "utf-8"
    if start.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"  # the codec reads the mark and drops it
    pairs = len(start) // 2
    if pairs >= 4:
        even, odd = start[0 : 2 * pairs : 2], start[1 : 2 * pairs : 2]
        if odd.count(0) * 10 >= pairs * 9 and even.count(0) * 10 <= pairs:
            return "utf-16-le"
        if even.count(0) * 10 >= pairs * 9 and odd.count(0) * 10 <= pairs:
            return "utf-16-be"
    return "utf-8"


def scan(
    index: int,
    source: Source,
    pattern: Scanner,
    context: Callable[[str], str],
    limit: int,
    stats: List[SourceStats],
    budget: Optional[Budget] = None,
) -> Iterator[Hit]:
    """The hits of one source, in order; appends the source's :class:`SourceStats` once it is read to the end, its
    byte limit or the end of the budget."""
    budget = budget or Budget()
    raw = iter_stdin_chunks(CHUNK, limit) if source.path is None else iter_chunks(source.path, CHUNK, limit)
    seen = [0]
    encoding: List[str] = []
    tail = b""  # the end of the previous buffer, for context only
    carry = b""  # a line begun in the previous piece
    newlines = 0  # newlines before the start of ``carry``
    for chunk in _transcoded(raw, seen, encoding):
        if budget.spent():
            break
        buffer = tail + carry + chunk
        scan_from = len(tail)
        end = buffer.rfind(b"\n") + 1
        if end <= scan_from:
            if len(buffer) - scan_from < MAX_CARRY:
                carry = buffer[scan_from:]
                tail = buffer[:scan_from]
                continue
            end = len(buffer)  # a very long line: judge what there is
        yield from _hits(index, buffer, scan_from, end, newlines, pattern, context, budget)
        if budget.stopped:
            break
        newlines += buffer.count(b"\n", scan_from, end)
        carry = buffer[end:]
        tail = buffer[max(scan_from, end - TAIL) : end]
    else:
        if carry:
            buffer = tail + carry
            yield from _hits(index, buffer, len(tail), len(buffer), newlines, pattern, context, budget)
            newlines += 1
    stopped = budget.stopped or (STOP_BYTES if seen[0] >= limit else "")
    stats.append(SourceStats(source.label, newlines, seen[0], bool(stopped), stopped, (encoding or ["utf-8"])[0]))


def _hits(
    index: int,
    buffer: bytes,
    start: int,
    end: int,
    newlines: int,
    pattern: Scanner,
    context: Callable[[str], str],
    budget: Budget,
) -> Iterator[Hit]:
    counted_to = start
    number = newlines + 1
    line_start = line_end = done = -1
    carriage = False
    room = MAX_WINDOWS
    for at in pattern.positions(buffer, start, end):
        if at < done:
            continue
        if at >= line_end:
            line_start = buffer.rfind(b"\n", start, at) + 1 or start
            line_end = buffer.find(b"\n", at, end)
            line_end = end if line_end < 0 else line_end
            carriage = buffer.find(b"\r", line_start, line_end) >= 0
            number += buffer.count(b"\n", counted_to, line_start)
            counted_to = line_start
            room = MAX_WINDOWS
        seg_start, seg_end = _segment(buffer, line_start, line_end, at) if carriage else (line_start, line_end)
        texts, done = _texts(buffer, seg_start, seg_end, at, pattern)
        texts = texts[:room]
        room -= len(texts)
        if room <= 0:
            done = line_end
        for text in texts:
            mode = context(text)
            if mode == BEFORE:
                yield Hit(index, number, text, mode, _reader(_before, buffer, line_start, number, 0))
            elif mode == AFTER:
                yield Hit(index, number, text, mode, _reader(_after, buffer, line_end, end, number))
            else:
                yield Hit(index, number, text)
            if budget.spend():
                return


def _reader(function: Callable[..., Lines], *args: object) -> Callable[[], Lines]:
    return lambda: function(*args)


def iter_hits(
    sources: Sequence[Source],
    pattern: Scanner,
    context: Callable[[str], str],
    limit: int,
    stats: List[SourceStats],
    budget: Optional[Budget] = None,
) -> Iterator[Hit]:
    """Every hit of every source, source by source, as a stream (nothing is kept here); ``stats`` gains one entry
    per source (a source not reached once the budget is spent is listed as stopped, 0 bytes). Raises
    :class:`common.read.InputError` for an unreadable one."""
    budget = budget or Budget()
    for index, source in enumerate(sources):
        if budget.stopped:
            stats.append(SourceStats(source.label, 0, 0, True, budget.stopped))
            continue
        yield from scan(index, source, pattern, context, limit, stats, budget)


__all__ = [
    "Budget",
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
