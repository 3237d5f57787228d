"""From hits to failures: every line is judged once per message shape (the same message on every rank and step is one
group), failures are told from the echoes they cause on other ranks, and the root is the first failure in time.

Time: a line's own timestamp, else the last timestamp seen before it in the same source and rank. Without any
timestamp the order is the order within a source; across sources it is then unknown, and the report says so.
"""

from __future__ import annotations

import heapq
import re
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from triage import patterns
from triage.read import AFTER, BEFORE, Hit, Source

MAX_GROUPS = 5000  # distinct message shapes kept; past it a failure or echo takes the place of the least one
MAX_LINES_PER_GROUP = 8  # occurrences kept per group (first ones, for the report's line numbers)
MAX_SEEN = 100_000  # ranks and hosts kept, all groups together (a log can name a million)
MAX_CLOCKS = 65_536  # (source, rank) pairs whose last timestamp is kept
MAX_TABLES = 16  # torchelastic failure tables read
MAX_RECORDS = 1024  # rank records kept from them

# Kinds, in the order a root is looked for.
FATAL, ERROR, ECHO, WARNING, OTHER = "fatal", "error", "echo", "warning", "other"
_WORTH = {OTHER: 0, WARNING: 1, ECHO: 2, ERROR: 3, FATAL: 4}
_NUMBER = re.compile(r"[0-9]{1,9}")  # ASCII digits only: str.isdigit() also takes "²", which int() refuses
_GENERIC_ERROR = patterns.FAILURE_PATTERNS[3]  # an ERROR-level log line: a failure only when nothing else is
_SPECIFIC = tuple(p for p in patterns.FAILURE_PATTERNS if p is not _GENERIC_ERROR)


class Occurrence(NamedTuple):
    source: int
    line: int
    rank: Optional[int]
    host: Optional[str]
    time: Optional[float]
    stamped: bool  # the line carries its own timestamp


class Group:
    """One message shape: its first text, kind, echo kind, every rank and host it appeared on, and occurrences."""

    __slots__ = ("before", "count", "echo", "hosts", "kind", "occurrences", "ranks", "shape", "text")

    def __init__(self, shape: str, text: str, kind: str, echo: Optional[str]) -> None:
        self.shape, self.text, self.kind, self.echo = shape, text, kind, echo
        self.count = 0
        self.ranks: Set[int] = set()
        self.hosts: Set[str] = set()
        self.occurrences: List[Occurrence] = []
        self.before: Tuple[Tuple[int, str], ...] = ()

    @property
    def first(self) -> Occurrence:
        return self.occurrences[0]

    def first_time(self) -> Optional[float]:
        return min((o.time for o in self.occurrences if o.time is not None), default=None)


class ElasticRecord(NamedTuple):
    """A row set of torchelastic's failure table: ``root`` for its "Root Cause (first observed failure)"."""

    root: bool
    rank: Optional[int]
    host: str
    exitcode: str
    time: str
    source: int
    line: int


class Findings:
    """What the logs hold, before any message is recognised."""

    def __init__(self) -> None:
        self.groups: Dict[str, Group] = {}
        self.releases: Dict[str, Tuple[str, int, int]] = {}  # package -> (version, source, line)
        self.hosts: Set[str] = set()
        self.ranks: Set[int] = set()
        self.elastic: List[ElasticRecord] = []
        self.stamped = False  # some line carried a timestamp
        self.dropped = 0  # lines of shapes not kept (over MAX_GROUPS)
        self.hits = 0
        self.tables = 0  # torchelastic tables read
        self.seen = 0  # ranks and hosts held in the sets, all together
        self._order: List[Tuple[int, float, int, str]] = []  # a heap: the least group first
        self._arrivals = 0

    def note(self, values: Set, value: object) -> None:
        """Add a rank or host to a set while the bound on all of them allows."""
        if value not in values and self.seen < MAX_SEEN:
            values.add(value)
            self.seen += 1

    def add(self, group: Group, when: Optional[float]) -> bool:
        """Keep a new group. Past ``MAX_GROUPS`` it takes the place of the least kept one (the lowest kind, then the
        latest in time, then the last read) when it is worth more; False when it is not kept."""
        self._arrivals += 1
        key = (_WORTH[group.kind], -(when if when is not None else float("inf")), -self._arrivals, group.shape)
        if len(self.groups) >= MAX_GROUPS:
            if key <= self._order[0]:
                return False
            least = self.groups.pop(heapq.heappop(self._order)[3])
            self.dropped += least.count
            self.seen -= len(least.ranks) + len(least.hosts)
        heapq.heappush(self._order, key)
        self.groups[group.shape] = group
        return True


def kind_of(text: str) -> Tuple[str, Optional[str]]:
    """(kind, echo kind) of a line without its rank prefix."""
    echo = patterns.echo_kind(text)
    if echo is not None:
        return ECHO, echo
    if patterns.EXCEPTION_LINE.match(text) or any(p.search(text) for p in _SPECIFIC):
        return FATAL, None
    if _GENERIC_ERROR.search(text):
        return ERROR, None
    if patterns.WARNING_PATTERN.search(text):
        return WARNING, None
    return OTHER, None


def wants_context(text: str) -> str:
    """What the reader keeps around a line: the lines before an exception or OOM line (its traceback is the excerpt
    worth reading), the lines after the heading of torchelastic's failure table (its rows)."""
    body = patterns.split_rank(text)[1]
    if patterns.EXCEPTION_LINE.match(body) or "out of memory" in body:
        return BEFORE
    if patterns.ELASTIC_ROOT in body or body.strip() == "Failures:":
        return AFTER
    return ""


_RULE = re.compile(r"^\s*(?:={10,}|-{10,})\s*$")


def elastic_records(hit: Hit, root: bool) -> List[ElasticRecord]:
    """The rank records of one part of torchelastic's failure table (the rows after its heading)."""
    records: List[ElasticRecord] = []
    rows: Dict[str, str] = {}
    start = hit.line

    def flush() -> None:
        if rows:
            rank_text = rows.get("rank", "").split(" ")[0]
            records.append(
                ElasticRecord(
                    root,
                    int(rank_text) if _NUMBER.fullmatch(rank_text) else None,
                    rows.get("host", ""),
                    rows.get("exitcode", ""),
                    rows.get("time", ""),
                    hit.source,
                    start,
                )
            )

    for number, text in hit.after:
        body = patterns.split_rank(text)[1]
        if _RULE.match(body):
            break
        row = patterns.ELASTIC_ROW.match(body)
        if not row:
            continue
        name, value = row.groups()
        if name == "time" and rows:
            flush()
            rows = {}
        if not rows:
            start = number
        rows[name] = value
    flush()
    return records


def collect(hits: Iterable[Hit], sources: Sequence[Source]) -> Findings:
    """Group the hits by message shape, with ranks, hosts, times, releases and torchelastic's table."""
    findings = Findings()
    last_time: Dict[Tuple[int, Optional[int]], float] = {}
    for hit in hits:
        findings.hits += 1
        rank, body = patterns.split_rank(hit.text)
        if rank is None:
            rank = sources[hit.source].rank
        host = None
        nccl = patterns.NCCL_PREFIX.match(body)
        if nccl:
            host = nccl.group(1)
            if rank is None:
                rank = int(nccl.group(3))
        stamp = patterns.timestamp(body)
        key = (hit.source, rank)
        if stamp is not None:
            if key in last_time or len(last_time) < MAX_CLOCKS:
                last_time[key] = stamp
            findings.stamped = True
        when = stamp if stamp is not None else last_time.get(key)
        for package, version in patterns.releases_in(body):
            findings.releases.setdefault(package, (version, hit.source, hit.line))
        if hit.mode == AFTER:
            if findings.tables < MAX_TABLES:
                findings.tables += 1
                records = elastic_records(hit, patterns.ELASTIC_ROOT in body)
                findings.elastic.extend(records[: MAX_RECORDS - len(findings.elastic)])
            continue
        if rank is not None:
            findings.note(findings.ranks, rank)
        if host:
            findings.note(findings.hosts, host)
        shape = patterns.shape(body)
        group = findings.groups.get(shape)
        if group is None:
            kind, echo = kind_of(body)
            group = Group(shape, body.strip(), kind, echo)
            if (len(findings.groups) >= MAX_GROUPS and kind in (WARNING, OTHER)) or not findings.add(group, when):
                findings.dropped += 1
                continue
        group.count += 1
        if rank is not None:
            findings.note(group.ranks, rank)
        if host:
            findings.note(group.hosts, host)
        if len(group.occurrences) < MAX_LINES_PER_GROUP:
            group.occurrences.append(Occurrence(hit.source, hit.line, rank, host, when, stamp is not None))
            if not group.before and hit.mode == BEFORE:
                group.before = _same_rank(hit.before, rank)
    for record in findings.elastic:
        if record.host:
            findings.note(findings.hosts, record.host)
    return findings


def _same_rank(lines: Tuple[Tuple[int, str], ...], rank: Optional[int]) -> Tuple[Tuple[int, str], ...]:
    """The context lines of the same rank (interleaved logs mix ranks), prefixes removed."""
    out = []
    for number, text in lines:
        line_rank, body = patterns.split_rank(text)
        if line_rank is None or rank is None or line_rank == rank:
            out.append((number, body))
    return tuple(out)


def order_key(group: Group, source_order: Sequence[int]) -> Tuple[float, int, int]:
    """Sort key of a group's first occurrence: time when known, then source and line."""
    first = min(group.occurrences, key=lambda o: (o.time if o.time is not None else float("inf"), o.source, o.line))
    time = first.time if first.time is not None else float("inf")
    return time, source_order[first.source], first.line


class Choice(NamedTuple):
    """The root failure, the other failures after it, the echoes, and how the order was decided."""

    root: Optional[Group]
    failures: List[Group]
    echoes: List[Group]
    notes: List[Group]
    order: str  # "time" | "line" (one source) | "unknown" (several sources without timestamps)


def choose_root(findings: Findings, known: Set[str], n_sources: int) -> Choice:
    """The first failure in time. A fatal failure (an exception, OOM, a kill, or an ERROR line an entry quotes) comes
    first; a generic ERROR line only when there is none; then a warning an entry quotes; an echo only when nothing
    else failed.
    ``known`` holds the shapes that an entry recognised."""
    source_order = list(range(n_sources))
    groups = list(findings.groups.values())
    stamped = any(o.stamped for g in groups for o in g.occurrences)
    order = "time" if stamped else ("line" if n_sources == 1 else "unknown")

    def key(group: Group) -> Tuple[float, int, int]:
        return order_key(group, source_order)

    fatal = sorted((g for g in groups if g.kind == FATAL or (g.shape in known and g.kind == ERROR)), key=key)
    errors = sorted((g for g in groups if g.kind == ERROR and g.shape not in known), key=key)
    echoes = sorted((g for g in groups if g.kind == ECHO), key=key)
    notes = sorted((g for g in groups if g.kind in (WARNING, OTHER) and g.shape in known), key=key)
    tiers = [t for t in (_prefer_elastic(fatal, findings), errors, notes, echoes) if t]
    root = tiers[0][0] if tiers else None
    failures = [g for g in fatal + errors if g is not root]
    return Choice(root, failures, [g for g in echoes if g is not root], [g for g in notes if g is not root], order)


def _prefer_elastic(fatal: List[Group], findings: Findings) -> List[Group]:
    """When torchelastic names the first failed rank and nothing orders the failures by time, a failure of that
    rank goes first."""
    roots = [r for r in findings.elastic if r.root and r.rank is not None]
    if not roots or not fatal or any(o.stamped for g in fatal for o in g.occurrences):
        return fatal
    rank = roots[0].rank
    of_rank = [g for g in fatal if rank in g.ranks]
    return of_rank + [g for g in fatal if g not in of_rank] if of_rank else fatal
