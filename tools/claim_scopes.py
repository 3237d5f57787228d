"""Release scopes in the skill text, checked against the release history (``tests/facts/release_history.json``).

The grammar (agreed for the skill text; docs/verification.md "Release scopes"):

* a file window, one line in the file's Versions section (en dash or hyphen):
  ``**Unless marked:** TRL 1.14-1.16, vLLM 0.22-0.31.``
  Unmarked claims must hold in every indexed release of the window;
* inline scopes: ``TRL ≥ 1.14``, ``TRL >= 1.14``, ``TRL 1.14+``, ``since/from/added in TRL 1.14`` (to the newest),
  ``TRL ≤ 1.10``, ``TRL <= 1.10``, ``until TRL 1.10`` (from the oldest 1.x), ``TRL 1.11-1.13`` (en dash or hyphen),
  ``TRL 1.11 to 1.13``, ``TRL 1.16`` (one minor), ``removed in TRL 1.8`` (holds up to 1.7, absent from 1.8),
  ``deprecated in TRL 1.15`` (1.15 is the first release that warns); the same with ``vLLM``.
* an inline scope applies to the smallest unit holding it: a table row (its own cell first), a list item, a
  blockquote line (or the scope-only line just before it), a sentence; a heading's scope covers its section.

Checks (each failure names the file, the line and the releases where the fact really holds):

* a quoted message, flag, field, env var, route or name known to TRL or vLLM exists in every release of its scope;
* ``added in/since/from X``: some claim of the unit first appears in X; ``until X``: some claim last appears in X;
  ``removed in X``: some claim is present in the release before X and absent from X; ``deprecated in X``: X is the
  first release whose source warns about a name of the unit; a unit that calls a name deprecated needs the warning
  in every release of its scope;
* a ``vllm<=…,>=…`` range in a unit scoped to one TRL minor equals that release's ``vllm`` extra.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

PACKAGE_LABELS = {"trl": "TRL", "vllm": "vLLM"}
# The first release of the supported line: "until TRL 1.10" starts here, not at the indexed 0.x releases.
LINE_START = {"trl": (1, 0)}
_V = r"(\d+\.\d+)(?:\.\d+)?"
_PKG = r"(TRL|vLLM|vllm|trl)"
EN_DASH = "\u2013"
_DASH = r"\s*(?:\u2013|\u2014|-|\bto\b)\s*"
# Order matters: the prefixed forms before the bare ones.
SCOPE_PATTERNS: Tuple[Tuple[str, re.Pattern[str]], ...] = (
    ("added", re.compile(r"\badded\s+in\s+" + _PKG + r"\s+" + _V, re.I)),
    ("since", re.compile(r"\b(?:since|from)\s+" + _PKG + r"\s+" + _V + r"(?![\d.]*" + _DASH + r"\d)", re.I)),
    ("removed", re.compile(r"\bremoved\s+in\s+" + _PKG + r"\s+" + _V, re.I)),
    ("deprecated", re.compile(r"\bdeprecated\s+in\s+" + _PKG + r"\s+" + _V, re.I)),
    ("until", re.compile(r"\buntil\s+" + _PKG + r"\s+" + _V, re.I)),
    ("range", re.compile(_PKG + r"\s+" + _V + _DASH + _V + r"(?!\.?\d)")),
    ("atleast", re.compile(_PKG + r"\s*(?:≥|>=)\s*" + _V)),
    ("atmost", re.compile(_PKG + r"\s*(?:≤|<=)\s*" + _V)),
    ("plus", re.compile(_PKG + r"\s+" + _V + r"\+")),
    ("single", re.compile(_PKG + r"\s+" + _V + r"(?![\d+])")),
)
WINDOW_RE = re.compile(r"^\s*\*\*Unless marked:\*\*\s*(.+)$")
SCOPE_ONLY_STRIP = re.compile(r"[\s>*_:;,.()\[\]]+")
VLLM_RANGE_RE = re.compile(r"^vllm\s*((?:[<>=!~]=?\s*[\w.*]+\s*,?\s*)+)$", re.I)
DEPRECATED_WORD = re.compile(r"\bdeprecat", re.I)
_MINOR_RE = re.compile(r"^(\d+)\.(\d+)")


def minor_of(version: str) -> Tuple[int, int]:
    match = _MINOR_RE.match(version)
    if not match:
        raise ValueError(version)
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class Scope:
    package: str  # "trl" | "vllm"
    form: str  # added since removed deprecated until range atleast atmost plus single window
    lo: Optional[Tuple[int, int]]  # named minor (lower bound), None = open
    hi: Optional[Tuple[int, int]]
    text: str

    @property
    def named(self) -> Tuple[int, int]:
        return self.lo or self.hi  # type: ignore[return-value]


def parse_scopes(text: str) -> List[Scope]:
    """Every scope written in ``text``, in any of the accepted forms (overlapping matches resolved left to right,
    prefixed forms first)."""
    taken: List[Tuple[int, int]] = []
    found: List[Tuple[int, Scope]] = []
    for form, pattern in SCOPE_PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(start < e and s < end for s, e in taken):
                continue
            package = match.group(1).lower()
            a = minor_of(match.group(2))
            if form == "range":
                scope = Scope(package, form, a, minor_of(match.group(3)), match.group(0))
            elif form in ("until", "atmost"):
                scope = Scope(package, form, None, a, match.group(0))
            elif form == "single":
                scope = Scope(package, form, a, a, match.group(0))
            else:
                scope = Scope(package, form, a, None, match.group(0))
            taken.append((start, end))
            found.append((start, scope))
    return [scope for _, scope in sorted(found, key=lambda item: item[0])]


def is_scope_only(text: str) -> bool:
    """A line that says nothing but a scope (``TRL ≥ 1.14:``), so it scopes the quote after it."""
    rest = text
    for scope in parse_scopes(text):
        rest = rest.replace(scope.text, " ")
    return bool(parse_scopes(text)) and not SCOPE_ONLY_STRIP.sub("", rest)


# ====================================================================================================================
# Release history
# ====================================================================================================================


class History:
    """``tests/facts/release_history.json``: releases per package and, per kind, each key's release bitmask."""

    def __init__(self, data: Dict[str, object]) -> None:
        self.releases: Dict[str, List[str]] = {}
        self.facts: Dict[str, Dict[str, Dict[str, int]]] = {}
        self.messages: Dict[str, List[Tuple[str, int]]] = {}
        self._message_index: Dict[str, Dict[str, List[int]]] = {}
        self.requires: Dict[str, Dict[str, List[str]]] = {}
        self._mask_cache: Dict[Tuple[str, str], int] = {}
        self._share_cache: Dict[Tuple[str, str], float] = {}
        for package, entry in data.get("packages", {}).items():  # type: ignore[union-attr]
            versions = [r["version"] for r in entry["releases"]]
            self.releases[package] = versions
            kinds: Dict[str, Dict[str, int]] = {}
            for kind, groups in entry["facts"].items():
                table: Dict[str, int] = {}
                for bits, keys in groups.items():
                    mask = sum(1 << i for i, ch in enumerate(bits) if ch == "1")
                    for key in keys:
                        table[key] = mask
                kinds[kind] = table
            self.facts[package] = kinds
            self.messages[package] = sorted(kinds.get("message", {}).items())
            index: Dict[str, List[int]] = {}
            for i, (template, _) in enumerate(self.messages[package]):
                for word in set(_words(template)):
                    index.setdefault(word, []).append(i)
            self._message_index[package] = index
            for i, version in enumerate(versions):
                lines = [k for k, mask in kinds.get("requires", {}).items() if mask >> i & 1]
                self.requires.setdefault(package, {})[version] = sorted(lines)

    @classmethod
    def load(cls, path: Path) -> History:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")))

    # ---- releases ------------------------------------------------------------------------------------------------

    def minors(self, package: str) -> List[Tuple[int, int]]:
        return [minor_of(v) for v in self.releases.get(package, [])]

    def index_of(self, package: str, minor: Tuple[int, int]) -> Optional[int]:
        minors = self.minors(package)
        return minors.index(minor) if minor in minors else None

    def line_indices(self, package: str) -> List[int]:
        """The releases an open scope reaches: TRL from 1.0, vLLM up to the newest that some TRL release accepts."""
        minors = self.minors(package)
        out = [i for i, m in enumerate(minors) if m >= LINE_START.get(package, (0, 0))]
        if package == "vllm":
            newest = self.newest_accepted_vllm()
            if newest is not None:
                out = [i for i in out if minors[i] <= newest]
        return out

    def newest_accepted_vllm(self) -> Optional[Tuple[int, int]]:
        best: Optional[Tuple[int, int]] = None
        for lines in self.requires.get("trl", {}).values():
            for line in lines:
                spec = vllm_extra_spec([line])
                if spec is None:
                    continue
                for part in spec.split(","):
                    match = re.match(r"^(<=|<|==)\s*([\d.]+)$", part.strip())
                    if match:
                        bound = minor_of(match.group(2))
                        if match.group(1) == "<" and re.fullmatch(r"\d+\.\d+(\.0)?", match.group(2)):
                            bound = (bound[0], bound[1] - 1)
                        best = bound if best is None or bound > best else best
        return best

    def scope_indices(self, scope: Scope) -> Optional[List[int]]:
        """Release indices a scope covers; None when a bound names a release that is not indexed (a TRL 0.x minor
        the facts do not hold: such a claim is not checked)."""
        minors = self.minors(scope.package)
        if not minors:
            return None
        line = self.line_indices(scope.package)
        lo_i = hi_i = None
        if scope.lo is not None:
            lo_i = self.index_of(scope.package, scope.lo)
            if lo_i is None:
                return None
        if scope.hi is not None:
            hi_i = self.index_of(scope.package, scope.hi)
            if hi_i is None:
                return None
        if scope.form == "removed":
            return [i for i in line if i < lo_i] if lo_i is not None else None  # type: ignore[operator]
        if scope.form == "deprecated":
            return None  # the claim scope is the window; see the change checks
        start = lo_i if lo_i is not None else (line[0] if line else 0)
        end = hi_i if hi_i is not None else (line[-1] if line else len(minors) - 1)
        if lo_i is not None and hi_i is None and lo_i > end:
            end = lo_i
        if hi_i is not None and lo_i is None and hi_i < start:
            start = 0
        return list(range(start, end + 1))

    def label(self, package: str, indices: Iterable[int]) -> str:
        """``TRL 1.11-1.13, 1.16`` (en dash) for release indices (runs of consecutive indexed releases collapse)."""
        idx = sorted(set(indices))
        if not idx:
            return f"no indexed {PACKAGE_LABELS.get(package, package)} release"
        minors = [f"{m[0]}.{m[1]}" for m in self.minors(package)]
        runs: List[str] = []
        start = prev = idx[0]
        for i in [*idx[1:], None]:  # type: ignore[list-item]
            if i is not None and i == prev + 1:
                prev = i
                continue
            runs.append(minors[start] if start == prev else f"{minors[start]}{EN_DASH}{minors[prev]}")
            if i is not None:
                start = prev = i
        return f"{PACKAGE_LABELS.get(package, package)} " + ", ".join(runs)

    def mask_indices(self, package: str, mask: int) -> List[int]:
        return [i for i in range(len(self.releases.get(package, []))) if mask >> i & 1]

    # ---- facts ---------------------------------------------------------------------------------------------------

    def lookup(self, package: str, kind: str, key: str) -> int:
        return self.facts.get(package, {}).get(kind, {}).get(key, 0)

    def message_mask(self, package: str, quote: str, matcher: Callable[[str, str], bool]) -> int:
        """Releases holding a template that ``quote`` matches. Candidates share most of the quote's words (a field
        absorbs a short value only, so a real match keeps most words literal); an exact substring needs no matcher."""
        key = (package, quote)
        if key in self._mask_cache:
            return self._mask_cache[key]
        index = self._message_index.get(package, {})
        templates = self.messages.get(package, [])
        words = set(_words(quote))
        counts: Dict[int, int] = {}
        for word in words:
            for i in index.get(word, []):
                counts[i] = counts.get(i, 0) + 1
        needed = max(1, (len(words) * 3 + 4) // 5)
        flat = " ".join(quote.split())
        literal = flat.strip("…").strip()
        mask = 0
        best = 0
        for i in sorted(i for i, n in counts.items() if n >= needed):
            template, bits = templates[i]
            if not bits & ~mask and counts[i] <= best:
                continue
            if ("…" not in literal and literal in " ".join(template.split())) or matcher(quote, template):
                mask |= bits
                best = max(best, counts[i])
        self._mask_cache[key] = mask
        self._share_cache[key] = best / max(len(words), 1)
        return mask

    def message_share(self, package: str, quote: str) -> float:
        """The share of the quote's words that the best matching template of ``package`` holds (after
        :meth:`message_mask`): a generic template (``{} does not support {} with …``) matches with a low share."""
        return self._share_cache.get((package, quote), 0.0)


_WORD_RE = re.compile(r"[A-Za-z][A-Za-z_]{3,}")


def _words(text: str) -> List[str]:
    return [w.lower() for w in _WORD_RE.findall(text.replace("{}", " "))]


def vllm_extra_spec(requires: Sequence[str]) -> Optional[str]:
    """The normalised specifier of the ``vllm`` extra's vLLM requirement (``<=0.31.0,>=0.22.0``)."""
    for line in requires:
        requirement, _, marker = line.partition(";")
        if "extra" not in marker or '"vllm"' not in marker.replace("'", '"'):
            continue
        match = re.match(r"^\s*vllm\s*(?:\[[^\]]*\])?\s*(.*)$", requirement, re.I)
        if match and match.group(1).strip():
            return normalise_spec(match.group(1))
    return None


def normalise_spec(spec: str) -> str:
    return ",".join(sorted(part.replace(" ", "") for part in spec.strip().strip("()").split(",") if part.strip()))


# ====================================================================================================================
# Markdown units
# ====================================================================================================================


@dataclass
class Unit:
    kind: str  # row | item | quote | para | code | heading
    start: int
    end: int
    lines: List[str]
    scopes: List[Scope]
    section_scopes: List[Scope]
    cells: List[str] = field(default_factory=list)
    sentences: List[Tuple[int, int, str]] = field(default_factory=list)  # (first line, last line, text)
    in_versions: bool = False

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


_ITEM_RE = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+")
_FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(*_`\"])")


def _mask_code(text: str) -> str:
    return _CODE_SPAN_RE.sub(lambda m: m.group(1) + "x" * len(m.group(2)) + m.group(1), text)


def _scopes_outside_code(text: str) -> List[Scope]:
    return parse_scopes(_CODE_SPAN_RE.sub(" ", text))


def _sentences(lines: List[Tuple[int, str]]) -> List[Tuple[int, int, str]]:
    joined = ""
    starts: List[Tuple[int, int]] = []
    for number, text in lines:
        starts.append((len(joined), number))
        joined += text + "\n"
    masked = _mask_code(joined)
    out: List[Tuple[int, int, str]] = []
    pos = 0
    bounds = [m.start() for m in _SENTENCE_END_RE.finditer(masked)] + [len(joined)]
    for end in bounds:
        piece = joined[pos:end]
        if piece.strip():
            first = max(n for s, n in starts if s <= pos + (len(piece) - len(piece.lstrip())))
            last = max(n for s, n in starts if s <= max(pos, end - 1))
            out.append((first, last, piece.strip()))
        pos = end
    return out


def parse_units(text: str, versions_heading: str = "Versions (time-sensitive)") -> Tuple[List[Unit], List[Scope]]:
    """The scoped units of one Markdown file, and its window (the ``**Unless marked:**`` line)."""
    lines = text.splitlines()
    units: List[Unit] = []
    window: List[Scope] = []
    heading_stack: List[Tuple[int, List[Scope]]] = []
    in_versions = False
    paragraph: List[Tuple[int, str]] = []
    item: List[Tuple[int, str]] = []
    item_indent = 0
    previous_scope_only: Optional[List[Scope]] = None
    skip_marked: Set[int] = set()

    def section_scopes() -> List[Scope]:
        chosen: Dict[str, Scope] = {}
        for _level, scopes in heading_stack:
            for scope in scopes:
                chosen[scope.package] = scope
        return list(chosen.values())

    def flush_paragraph() -> None:
        if paragraph:
            sentences = _sentences(paragraph)
            units.append(
                Unit(
                    "para",
                    paragraph[0][0],
                    paragraph[-1][0],
                    [t for _, t in paragraph],
                    [],
                    section_scopes(),
                    sentences=sentences,
                    in_versions=in_versions,
                )
            )
            paragraph.clear()

    def flush_item() -> None:
        if item:
            body = "\n".join(t for _, t in item)
            units.append(
                Unit(
                    "item",
                    item[0][0],
                    item[-1][0],
                    [t for _, t in item],
                    _scopes_outside_code(body),
                    section_scopes(),
                    in_versions=in_versions,
                )
            )
            item.clear()

    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i]
        stripped = line.strip()
        fence = _FENCE_RE.match(line)
        if fence and not stripped.startswith(">"):
            flush_paragraph()
            flush_item()
            ticks = fence.group(1)
            j = i + 1
            while j < len(lines) and not (
                lines[j].strip().startswith(ticks[0] * len(ticks)) and not lines[j].strip().strip(ticks[0])
            ):
                j += 1
            scopes = list(previous_scope_only or [])
            block = lines[i : j + 1]
            units.append(Unit("code", number, j + 1, block, scopes, section_scopes(), in_versions=in_versions))
            previous_scope_only = None
            i = j + 1
            continue
        heading = _HEADING_RE.match(line)
        if heading:
            flush_paragraph()
            flush_item()
            level = len(heading.group(1))
            while heading_stack and heading_stack[-1][0] >= level:
                heading_stack.pop()
            if level <= 2:
                in_versions = heading.group(2).strip() == versions_heading
            heading_stack.append((level, _scopes_outside_code(heading.group(2))))
            units.append(Unit("heading", number, number, [line], [], section_scopes(), in_versions=in_versions))
            previous_scope_only = None
            i += 1
            continue
        if not stripped:
            flush_paragraph()
            if item and i + 1 < len(lines) and lines[i + 1].startswith(" " * (item_indent + 2)):
                i += 1
                continue
            flush_item()
            i += 1
            continue
        if stripped.startswith("<!--"):
            flush_paragraph()
            flush_item()
            marked = stripped.startswith("<!-- check:") or stripped.startswith("<!--check:")
            while "-->" not in lines[i] and i + 1 < len(lines):
                i += 1
            i += 1
            if marked:  # the next block or quote is checked against the release the marker names
                j = i
                while j < len(lines) and not lines[j].strip():
                    j += 1
                skip_marked.add(j + 1)
            continue
        window_match = WINDOW_RE.match(line)
        if window_match and in_versions:
            window = [Scope(s.package, "window", s.lo, s.hi, s.text) for s in parse_scopes(window_match.group(1))]
        if stripped.startswith("|"):
            flush_paragraph()
            flush_item()
            cells = [c for c in re.split(r"(?<!\\)\|", stripped)[1:-1]]
            units.append(
                Unit(
                    "row",
                    number,
                    number,
                    [line],
                    _scopes_outside_code(line),
                    section_scopes(),
                    cells=cells,
                    in_versions=in_versions,
                )
            )
            previous_scope_only = None
            i += 1
            continue
        quote = re.match(r"^\s{0,3}>\s?(.*)$", line)
        if quote:
            flush_paragraph()
            flush_item()
            content = quote.group(1)
            if is_scope_only(_CODE_SPAN_RE.sub(" ", content)) and "`" not in content:
                previous_scope_only = _scopes_outside_code(content)
                i += 1
                continue
            scopes = _scopes_outside_code(content) or list(previous_scope_only or [])
            units.append(Unit("quote", number, number, [line], scopes, section_scopes(), in_versions=in_versions))
            previous_scope_only = None
            i += 1
            continue
        item_match = _ITEM_RE.match(line)
        if item_match:
            flush_paragraph()
            flush_item()
            item_indent = len(item_match.group(1))
            item.append((number, line))
            previous_scope_only = None
            i += 1
            continue
        if item and (line.startswith(" ") or not paragraph):
            item.append((number, line))
            i += 1
            continue
        flush_item()
        if not paragraph and is_scope_only(line):
            previous_scope_only = parse_scopes(line)
            i += 1
            continue
        previous_scope_only = None
        paragraph.append((number, line))
        i += 1
    flush_paragraph()
    flush_item()
    for unit in units:
        if unit.start in skip_marked:
            unit.__dict__["marked"] = True
    return units, window


def unit_for_line(units: Sequence[Unit], line: int) -> Optional[Unit]:
    for unit in units:
        if unit.kind != "heading" and unit.start <= line <= unit.end:
            return unit
    for unit in units:
        if unit.start == line:
            return unit
    return None


def claim_scopes(unit: Unit, line: int, identifier: str) -> List[Scope]:
    """The inline scopes that apply to one claim of ``unit`` (the unit's own, narrowed to a table cell or a
    sentence), falling back to its section's."""
    if unit.kind == "row":
        for cell in unit.cells:
            if identifier and identifier in cell.replace("\\|", "|"):
                own = _scopes_outside_code(cell)
                if own:
                    return own
                break
        return unit.scopes or unit.section_scopes
    if unit.kind == "para":
        chosen: List[Scope] = []
        touching = [s for s in unit.sentences if s[0] <= line <= s[1]]
        holding = [s for s in touching if identifier and identifier in s[2]] or touching
        for _first, _last, sentence in holding[:1]:
            chosen = _scopes_outside_code(sentence)
        return chosen or unit.section_scopes
    if unit.kind == "item" and identifier:
        # A list item of several sentences: a sentence with its own scope scopes its claims, the rest take the
        # item's ("TRL ≥ 1.14: … . With TRL 1.11–1.13 the trainer stops with `…`").
        joined = " ".join(" ".join(unit.lines).split())
        flat = " ".join(identifier.split())
        for _first, _last, sentence in _sentences([(unit.start, joined)]):
            if flat in " ".join(sentence.split()):
                own = _scopes_outside_code(sentence)
                if own:
                    return own
                break
    return unit.scopes or unit.section_scopes


# ====================================================================================================================
# Checks
# ====================================================================================================================


@dataclass(frozen=True)
class ScopeFailure:
    line: int
    kind: str  # scope | scope-added | scope-until | scope-removed | scope-deprecated | scope-extra | scope-release
    identifier: str
    where: str
    note: str


@dataclass(frozen=True)
class Resolved:
    """One scope-checked claim: the releases its fact holds in (``mask``) and the releases it is stated for."""

    line: int
    kind: str  # the claim kind, or "deprecated" for a unit that calls the name deprecated
    identifier: str
    package: str
    mask: int
    scope: Tuple[int, ...]


_FLAG_KINDS = {"flag": "flag", "env": "env", "class": "class", "identifier": "name", "yaml-key": "name"}
_INLINE_SPAN_RE = re.compile(r"(`+)\s?(.+?)\s?\1")


def _route_mask(history: History, package: str, path: str) -> int:
    table = history.facts.get(package, {}).get("route", {})
    path = path.rstrip("/") or "/"
    if path in table:
        return table[path]
    parts = path.split("/")
    mask = 0
    for route, bits in table.items():
        rparts = route.split("/")
        if len(rparts) == len(parts) and all(a == b or _is_param(a) or _is_param(b) for a, b in zip(rparts, parts)):
            mask |= bits
    return mask


def _is_param(segment: str) -> bool:
    return (segment[:1], segment[-1:]) in (("{", "}"), ("<", ">"))


def fact_masks(history: History, kind: str, identifier: str, matcher: Callable[[str, str], bool]) -> Dict[str, int]:
    """``{package: release mask}`` for one recorded claim, for the packages whose history knows it."""
    out: Dict[str, int] = {}
    for package in history.releases:
        if kind == "message":
            mask = history.message_mask(package, identifier, matcher)
            stripped = re.sub(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning): ", "", identifier, count=1)
            if stripped != identifier:
                mask |= history.message_mask(package, stripped, matcher)
        elif kind == "route":
            mask = _route_mask(history, package, identifier)
        elif kind in ("field", "kwarg"):
            mask = history.lookup(package, "field", identifier)
        elif kind == "flag":
            base = identifier.split("=", 1)[0]
            mask = history.lookup(package, "flag", "--" + base[2:].replace("_", "-") if base.startswith("--") else base)
        elif kind in _FLAG_KINDS:
            mask = history.lookup(package, _FLAG_KINDS[kind], identifier.rsplit(".", 1)[-1])
        else:
            mask = 0
        if mask:
            out[package] = mask
    if kind == "message" and len(out) > 1:
        # A quote matched by one package's own message and another's generic template belongs to the first.
        shares = {p: history.message_share(p, identifier) for p in out}
        top = max(shares.values())
        out = {p: m for p, m in out.items() if shares[p] >= 0.8 * top}
    return out


def _full(mask: int, indices: Sequence[int]) -> bool:
    return all(mask >> i & 1 for i in indices)


def check_scopes(
    history: History,
    text: str,
    claims: Sequence[Tuple[int, str, str]],
    matcher: Callable[[str, str], bool],
    baseline: Dict[str, str],
    foreign: Callable[[str, str], bool] = lambda kind, identifier: False,
    resolved: Optional[List[Resolved]] = None,
) -> List[ScopeFailure]:
    """Scope failures of one Markdown file. ``claims``: (line, kind, identifier) the name checker recorded;
    ``baseline``: the version each package's text is written for, the window of a file without one; ``foreign``:
    names another pinned package also defines (a transformers field): their existence is not scope-checked, only
    what TRL or vLLM says about them (deprecations, changes). ``resolved``, when given, receives each checked
    claim with its releases and scope (the release-differences table is built from them)."""
    units, window = parse_units(text)
    window_by_package = {s.package: s for s in window}
    for package, version in baseline.items():
        if package not in window_by_package and package in history.releases:
            minor = minor_of(version)
            window_by_package[package] = Scope(package, "window", minor, minor, f"{package} {version} (no window)")
    failures: List[ScopeFailure] = []
    for scope in window:
        if history.scope_indices(scope) is None:
            failures.append(
                ScopeFailure(0, "scope-release", scope.text, "the file window", "names a release that is not indexed")
            )
    grouped: Dict[Tuple[int, Scope], List[Tuple[int, str, str, Dict[str, int]]]] = {}
    seen: Set[Tuple[int, str, str]] = set()
    claims = list(claims) + prose_quotes(history, units, matcher)
    for line, kind, identifier in claims:
        if (line, kind, identifier) in seen:
            continue
        seen.add((line, kind, identifier))
        unit = unit_for_line(units, line)
        if unit is None or unit.__dict__.get("marked"):
            continue
        masks = fact_masks(history, kind, identifier, matcher)
        if not masks:
            continue
        probe = identifier.split(".", 1)[-1] if kind in ("field", "kwarg") else identifier
        inline = claim_scopes(unit, line, probe[:60])
        for scope in inline:
            grouped.setdefault((id(unit), scope), []).append((line, kind, identifier, masks))
        explicit = [s for s in inline if s.package in masks and s.form != "deprecated"]
        candidates = explicit or [window_by_package[p] for p in masks if p in window_by_package]
        results = [(s, history.scope_indices(s)) for s in candidates]
        results = [(s, idx) for s, idx in results if idx]
        if resolved is not None and not foreign(kind, identifier):
            for scope, idx in results:
                if not _full(masks[scope.package], idx):
                    continue  # the package under which the claim holds is the one it is about
                resolved.append(Resolved(line, kind, identifier, scope.package, masks[scope.package], tuple(idx)))
        if foreign(kind, identifier) or not results or any(_full(masks[s.package], idx) for s, idx in results):
            pass
        else:
            scope, indices = results[0]
            holds = "; ".join(history.label(p, history.mask_indices(p, m)) for p, m in sorted(masks.items()))
            origin = "inline scope" if explicit else "file window"
            failures.append(
                ScopeFailure(
                    line,
                    "scope",
                    identifier if len(identifier) <= 100 else identifier[:99] + "…",
                    f"does not hold in every release of {history.label(scope.package, indices)} "
                    f"({origin} {scope.text!r})",
                    f"it holds in {holds}",
                )
            )
        if DEPRECATED_WORD.search(_claim_text(unit, line, probe)) and not any(s.form == "deprecated" for s in inline):
            scopes = [s for s in inline if s.package in masks] or [
                window_by_package[p] for p in masks if p in window_by_package
            ]
            failures += _deprecation_claim(history, line, identifier, kind, scopes)
            for scope in scopes if resolved is not None else []:
                dmask = history.lookup(scope.package, "deprecated", _deprecation_key(kind, identifier))
                indices = history.scope_indices(scope)
                if dmask and indices and _full(dmask, indices):
                    key = _deprecation_key(kind, identifier)
                    resolved.append(Resolved(line, "deprecated", key, scope.package, dmask, tuple(indices)))
        for scope in [s for s in inline if s.form == "deprecated"] if resolved is not None else []:
            # "deprecated in TRL 1.15": the statement that it warns covers 1.15 up to the newest release.
            dmask = history.lookup(scope.package, "deprecated", _deprecation_key(kind, identifier))
            x = history.index_of(scope.package, scope.named)
            line_idx = history.line_indices(scope.package)
            indices = [i for i in line_idx if x is not None and i >= x]
            if dmask and indices and _full(dmask, indices):
                key = _deprecation_key(kind, identifier)
                resolved.append(Resolved(line, "deprecated", key, scope.package, dmask, tuple(indices)))
    for (_unit_id, scope), members in grouped.items():
        failures += _change_checks(history, scope, members)
    failures += _extra_ranges(history, units)
    failures += _fallback_refusals(history, text, units, window_by_package)
    return sorted(set(failures), key=lambda f: (f.line, f.kind, f.identifier))


_PROSE_QUOTE_RE = re.compile(r"[\"\u201c]([^\"\u201c\u201d\n]*)[\"\u201d]")


_PLAIN_WORD_RE = re.compile(r"(?<![\w\-./=:])[A-Za-z][a-z]{2,}(?![\w\-/=(\[])")


def _looks_like_message(text: str) -> bool:
    """20+ characters, three space-separated tokens, two of them plain words: a sentence someone could have printed,
    not a flag, a name or a command line."""
    return (
        len(text) >= 20
        and len(text.split()) >= 3
        and len(_PLAIN_WORD_RE.findall(text)) >= 2
        and not text.lstrip().startswith("-")
    )


def prose_quotes(
    history: History, units: Sequence[Unit], matcher: Callable[[str, str], bool]
) -> List[Tuple[int, str, str]]:
    """Messages quoted in prose: a double-quoted text ("Attempting to use the same CUDA device (UUID: …) for …")
    or a code span (`Adapter-only vLLM sync enabled`) of 20+ characters and three words that matches a message of
    some indexed release is a message claim too, scoped like any claim of its sentence. Code spans of blockquotes
    are the name checker's own message claims already."""
    out: List[Tuple[int, str, str]] = []
    for unit in units:
        if unit.kind in ("code", "heading"):
            continue
        # A quote may wrap across the lines of a paragraph or list item: search the joined text.
        starts: List[Tuple[int, int]] = []
        joined = ""
        spans = ""
        for number, line in zip(range(unit.start, unit.end + 1), unit.lines):
            starts.append((len(joined), number))
            text = line.strip().lstrip(">").strip()
            joined += _CODE_SPAN_RE.sub(lambda m: " " * len(m.group(0)), text) + " "
            spans += text + " "
        found = [(m.start(), m.group(1)) for m in _PROSE_QUOTE_RE.finditer(joined)]
        if unit.kind != "quote":
            found += [(m.start(), m.group(2)) for m in _CODE_SPAN_RE.finditer(spans) if len(m.group(1)) == 1]
        for start, raw in found:
            quote = " ".join(raw.split())
            if not _looks_like_message(quote):
                continue
            quote = quote if quote.endswith("…") or not quote.endswith((".", ",")) else quote[:-1]
            number = max(n for offset, n in starts if offset <= start)
            if any(history.message_mask(p, quote, matcher) for p in history.releases):
                out.append((number, "message", quote))
    return out


def _claim_text(unit: Unit, line: int, identifier: str) -> str:
    if unit.kind == "para":
        touching = [s for s in unit.sentences if s[0] <= line <= s[1]]
        holding = [s for s in touching if identifier in s[2]] or touching
        return holding[0][2] if holding else ""
    if unit.kind == "row":
        for cell in unit.cells:
            if identifier in cell:
                return cell
    return unit.text


def _deprecation_key(kind: str, identifier: str) -> str:
    if kind == "flag":
        return identifier.split("=", 1)[0]
    return identifier.rsplit(".", 1)[-1].split("=", 1)[0]


def _deprecation_claim(
    history: History, line: int, identifier: str, kind: str, candidates: Sequence[Scope]
) -> List[ScopeFailure]:
    """A unit that calls a name deprecated: the source must warn about it in every release of the claim's scope."""
    key = _deprecation_key(kind, identifier)
    out: List[ScopeFailure] = []
    for scope in candidates:
        mask = history.lookup(scope.package, "deprecated", key)
        indices = history.scope_indices(scope)
        if not mask or not indices or _full(mask, indices):
            continue
        out.append(
            ScopeFailure(
                line,
                "scope-deprecated",
                key,
                f"is called deprecated for every release of {history.label(scope.package, indices)} ({scope.text!r})",
                f"the source warns in {history.label(scope.package, history.mask_indices(scope.package, mask))}: "
                "scope it (deprecated in …)",
            )
        )
    return out


def _change_checks(
    history: History, scope: Scope, members: Sequence[Tuple[int, str, str, Dict[str, int]]]
) -> List[ScopeFailure]:
    """``added in/since/from``, ``until``, ``removed in`` and ``deprecated in``: some claim of the unit must change
    exactly at the named release."""
    package = scope.package
    named = scope.named
    x = history.index_of(package, named) if named else None
    if x is None or scope.form not in ("added", "since", "until", "removed", "deprecated"):
        return []
    known = [(line, kind, ident, m[package]) for line, kind, ident, m in members if package in m]
    if not known:
        return []
    line = min(m[0] for m in known)
    line_idx = history.line_indices(package)

    def starts_at(mask: int) -> bool:  # present at X, absent from the release before it
        return bool(mask >> x & 1) and not mask >> (x - 1) & 1  # type: ignore[operator]

    label = PACKAGE_LABELS[package]
    minors = [f"{m[0]}.{m[1]}" for m in history.minors(package)]
    if scope.form in ("added", "since"):
        if x == 0 or any(starts_at(mask) for *_, mask in known):
            return []
        firsts = ", ".join(
            f"{ident[:60]!r} in {history.label(package, history.mask_indices(package, mask))}"
            for _, _, ident, mask in known
        )
        return [
            ScopeFailure(
                line,
                "scope-added",
                scope.text,
                f"no claim of this unit is new in {label} {minors[x]} (absent from {minors[x - 1]})",
                firsts,
            )
        ]
    if scope.form == "until":
        if not line_idx or x >= line_idx[-1]:
            return []
        if any(mask >> x & 1 and not mask >> (x + 1) & 1 for *_, mask in known):
            return []
        holds = ", ".join(
            f"{ident[:60]!r} in {history.label(package, history.mask_indices(package, mask))}"
            for _, _, ident, mask in known
        )
        return [
            ScopeFailure(
                line,
                "scope-until",
                scope.text,
                f"no claim of this unit is in {label} {minors[x]} and gone from {minors[x + 1]}",
                holds,
            )
        ]
    if scope.form == "removed":
        if x == 0:
            return []
        if any(mask >> (x - 1) & 1 and not mask >> x & 1 for *_, mask in known):
            return []
        holds = ", ".join(
            f"{ident[:60]!r} in {history.label(package, history.mask_indices(package, mask))}"
            for _, _, ident, mask in known
        )
        return [
            ScopeFailure(
                line,
                "scope-removed",
                scope.text,
                f"no claim of this unit is in {label} {minors[x - 1]} and gone from {minors[x]}",
                holds,
            )
        ]
    # deprecated
    found = []
    for _, kind, ident, _mask in known:
        dmask = history.lookup(package, "deprecated", _deprecation_key(kind, ident))
        if dmask:
            found.append((ident, dmask))
    if not found or x == 0 or any(starts_at(dmask) for _, dmask in found):
        return []
    warns = ", ".join(
        f"{_deprecation_key('', ident)!r} warned in {history.label(package, history.mask_indices(package, d))}"
        for ident, d in found
    )
    return [
        ScopeFailure(
            line,
            "scope-deprecated",
            scope.text,
            f"no name of this unit starts warning in {label} {minors[x]} (silent in {minors[x - 1]})",
            warns,
        )
    ]


def _extra_ranges(history: History, units: Sequence[Unit]) -> List[ScopeFailure]:
    """A ``vllm<=…,>=…`` range next to one TRL minor must be that release's ``vllm`` extra."""
    out: List[ScopeFailure] = []
    for unit in units:
        if unit.kind in ("code", "heading"):
            continue
        for number, line in zip(range(unit.start, unit.end + 1), unit.lines):
            for match in _INLINE_SPAN_RE.finditer(line):
                spec_match = VLLM_RANGE_RE.match(match.group(2).strip())
                if not spec_match:
                    continue
                scopes = [s for s in claim_scopes(unit, number, match.group(2)) if s.package == "trl"]
                minors = {s.lo for s in scopes if s.form == "single"}  # "TRL 1.16.0" and "TRL 1.16" are one
                if len(minors) != 1:
                    continue
                index = history.index_of("trl", minors.pop())  # type: ignore[arg-type]
                if index is None:
                    continue
                version = history.releases["trl"][index]
                actual = vllm_extra_spec(history.requires["trl"][version])
                written = normalise_spec(spec_match.group(1))
                if actual != written:
                    out.append(
                        ScopeFailure(
                            number,
                            "scope-extra",
                            match.group(2).strip(),
                            f"is not the vllm extra of TRL {version}",
                            f"its METADATA says vllm{actual}" if actual else "that release has no vllm extra",
                        )
                    )
    return out


_REFUSAL_RE = re.compile(r"does not support|not supported|is incompatible|cannot be used", re.I)
_FALLBACK_RE = re.compile(r"fall(?:s|ing)?\s+back|fallback", re.I)
_REFUSE_WORDS_RE = re.compile(r"\brefuse|\braise|\berror\b|\bstops?\b|not supported", re.I)
_TICKED_RE = re.compile(r"`([^`]+)`")


def refusals(history: History, package: str = "trl") -> Dict[Tuple[str, str], List[Tuple[str, int]]]:
    """``{(trainer, name): [(template, mask)]}``: what a trainer refuses, from its messages (``AsyncGRPOTrainer`
    does not support a PEFT adapter on `lm_head```: the name next to the refusal, not every name in the message)."""
    cached = history.__dict__.get("_refusals")
    if cached is not None:
        return cached
    out: Dict[Tuple[str, str], List[Tuple[str, int]]] = {}
    for template, mask in history.messages.get(package, []):
        match = _REFUSAL_RE.search(template)
        if not match:
            continue
        trainers = [n for n in _TICKED_RE.findall(template) if re.fullmatch(r"[A-Z]\w*Trainer", n)]
        after = _TICKED_RE.search(template[match.end() : match.end() + 60])
        before = _TICKED_RE.findall(template[max(0, match.start() - 60) : match.start()])
        subjects = [after.group(1)] if after else []
        if "does not support" not in match.group(0).lower() and before:
            subjects = [before[-1]]
        for trainer in trainers:
            for subject in subjects:
                name = subject.strip("'\"")
                if name != trainer and re.fullmatch(r"[\w.]+", name):
                    out.setdefault((trainer, name), []).append((template, mask))
    history.__dict__["_refusals"] = out
    return out


def _fallback_refusals(
    history: History, text: str, units: Sequence[Unit], window: Dict[str, Scope]
) -> List[ScopeFailure]:
    """A condition listed as a fallback (a warning, the run goes on) that a trainer named in the file refuses (an
    error when it is built) in some release of the statement's scope: ``lm_head`` among AsyncGRPO's merged-sync
    fallbacks."""
    table = refusals(history)
    if not table or "trl" not in history.releases:
        return []
    file_trainers = set(re.findall(r"`([A-Z]\w*Trainer)`", text))
    out: List[ScopeFailure] = []
    for unit in units:
        if unit.kind in ("code", "heading"):
            continue
        pieces = [(unit.start, unit.text)] if unit.kind != "para" else [(a, t) for a, _b, t in unit.sentences]
        for line, piece in pieces:
            if not _FALLBACK_RE.search(piece) or _REFUSE_WORDS_RE.search(piece):
                continue
            scopes = [s for s in _scopes_outside_code(piece) if s.package == "trl"] or [
                s for s in unit.section_scopes if s.package == "trl"
            ]
            scope = scopes[0] if scopes else window.get("trl")
            indices = history.scope_indices(scope) if scope is not None else None
            if not indices:
                continue
            for name in sorted(set(_TICKED_RE.findall(piece))):
                for trainer in sorted(file_trainers):
                    for template, mask in table.get((trainer, name), []):
                        hit = [i for i in indices if mask >> i & 1]
                        if not hit:
                            continue
                        out.append(
                            ScopeFailure(
                                line,
                                "scope-refused",
                                name,
                                f"is listed as a fallback, but {trainer} refuses it in {history.label('trl', hit)}",
                                f"{template[:100]!r}",
                            )
                        )
                        break
    return out
