"""Every real failure report in ``tests/fixtures/failure_reports/`` is answered by the troubleshooting text.

Per case (format: the folder's README): the error text, cut at what varies between users, greps to the named
entry; the entry names the confirmed cause's and fix's terms; its release scope covers the reporter's releases.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parent.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
TOOLS_DIR = REPO_ROOT / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import claim_scopes as cs  # noqa: E402

CORPUS = REPO_ROOT / "tests" / "fixtures" / "failure_reports"
TEXT = SKILL_DIR / "troubleshooting"
REQUIRED = ("thread", "title", "releases", "error_text", "cause", "fix", "confirmed_by", "applies", "entry")
THREAD_RE = re.compile(r"^([\w.-]+)/([\w.-]+)#(\d+)$")
CONFIRMED_RE = re.compile(r"^(maintainer comment: \S+ in [\w.-]+/[\w.-]+#\d+|merged PR [\w.-]+/[\w.-]+#\d+)")
# What varies between users: log prefixes ([rank3]:, [c10d]), URLs, paths, hosts and ports, hex ids, numbers, elisions
# and placeholders.
VARIABLE_RE = re.compile(
    r"\[[^\]\s]*\]:?|https?://\S+|(?:[\w.-]*/)+[\w.-]+|\b[\w-]+(?:\.[\w-]+)+:\d+\b|\b\d{1,3}(?:\.\d{1,3}){3}\b|0x[0-9a-fA-F]+|"
    r"\d+(?:\.\d+)*|…|\.\.\.|<[^>\s]+>"
)
# The exception's class name, which the text's quotes leave out: ``RuntimeError: `` at a line's start.
EXCEPTION_RE = re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Warning|Exit)\b:?\s*", re.M)
TICKED_RE = re.compile(r"`([^`]+)`")
MIN_FRAGMENT = 12
# Pins of packages other than TRL and vLLM live in this section of each file (the bundle's time-sensitivity rule).
VERSIONS_HEADING = "Versions (time-sensitive)"


def load_cases() -> List[Tuple[str, Dict[str, object]]]:
    return [(p.name, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(CORPUS.glob("*.json"))]


CASES = load_cases()


def fragments(error_text: str) -> List[str]:
    """Fixed strings of the error text: the pieces between the parts that vary, longest first."""
    text = EXCEPTION_RE.sub("", error_text)
    pieces = [p.strip(" \t\n:;,.'\"()[]{}=") for p in VARIABLE_RE.split(text)]
    flat = [" ".join(p.split()) for p in pieces]
    return sorted({p for p in flat if len(p) >= MIN_FRAGMENT}, key=len, reverse=True)


@dataclass
class Section:
    path: Path
    heading: str
    start: int  # line number of the heading
    end: int  # last line of the section
    lines: List[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines[self.start - 1 : self.end])


_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


def find_section(path: Path, heading: str) -> Optional[Section]:
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        match = _HEADING_RE.match(line)
        if match and match.group(2) == heading:
            level = len(match.group(1))
            end = len(lines)
            for later in range(number, len(lines)):
                other = _HEADING_RE.match(lines[later])
                if other and len(other.group(1)) <= level:
                    end = later
                    break
            return Section(path, heading, number, end, lines)
    return None


def _flat(text: str) -> str:
    return " ".join(text.replace("> ", " ").split())


def grep_line(section: Section, fragment: str) -> Optional[int]:
    """The line of the section where the fragment starts (a match may wrap across lines of one paragraph)."""
    offsets: List[Tuple[int, int]] = []
    joined = ""
    for number in range(section.start, section.end + 1):
        offsets.append((len(joined), number))
        joined += _flat(section.lines[number - 1]) + " "
    at = joined.find(fragment)
    if at < 0:
        return None
    return max(n for offset, n in offsets if offset <= at)


def _covers(scope: cs.Scope, minor: Tuple[int, int]) -> bool:
    start = cs.LINE_START.get(scope.package, (0, 0))
    if scope.form == "removed":
        return start <= minor < scope.lo  # type: ignore[operator]
    lo = scope.lo
    if lo is None:
        lo = start if scope.hi is not None and scope.hi >= start else (0, 0)
    return lo <= minor and (scope.hi is None or minor <= scope.hi)


def scopes_at(path: Path, line: int, fragment: str) -> List[cs.Scope]:
    units, window = cs.parse_units(path.read_text(encoding="utf-8"))
    unit = cs.unit_for_line(units, line)
    own = cs.claim_scopes(unit, line, fragment) if unit is not None else []
    return own, window  # type: ignore[return-value]


def scope_problems(case: Dict[str, object], section: Section, line: int, fragment: str) -> List[str]:
    own, window = scopes_at(section.path, line, fragment)
    problems: List[str] = []
    applies = dict(case["applies"])  # type: ignore[arg-type]
    for package, version in dict(case["releases"]).items():  # type: ignore[arg-type]
        if package not in cs.PACKAGE_LABELS or package not in applies:
            continue  # the failure does not depend on this package's release
        minor = cs.minor_of(str(version))
        chosen = [s for s in own if s.package == package] or [s for s in window if s.package == package]
        if not chosen:
            continue  # no scope for this package: the entry does not depend on its release
        if not any(_covers(s, minor) for s in chosen):
            written = ", ".join(s.text for s in chosen)
            problems.append(f"{package} {version} is outside the scope of line {line} ({written})")
    return problems


def _version(text: str) -> Version:
    match = re.match(r"^\d+(?:\.\d+)*", text)
    return Version(match.group(0) if match else "0")


# ---- the corpus itself ----------------------------------------------------------------------------------------------


TARGET_CASES = 60  # issue #18: coverage is measured on at least this many resolved reports


def test_corpus_is_large_enough_to_measure_coverage():
    assert len(CASES) >= TARGET_CASES, f"{len(CASES)} cases; the issue asks for at least {TARGET_CASES}"


@pytest.mark.parametrize("name,case", CASES, ids=[n for n, _ in CASES])
def test_case_is_well_formed(name: str, case: Dict[str, object]):
    missing = [key for key in REQUIRED if key not in case or (not case[key] and key != "releases")]
    assert not missing, f"{name}: missing {missing}"
    match = THREAD_RE.match(str(case["thread"]))
    assert match, f"{name}: thread {case['thread']!r} is not owner/repo#N"
    assert name == f"{match.group(1)}__{match.group(2)}__{match.group(3)}.json"
    assert CONFIRMED_RE.match(str(case["confirmed_by"])), f"{name}: confirmed_by {case['confirmed_by']!r}"
    assert TICKED_RE.search(str(case["fix"])), f"{name}: the fix names no `term` the entry must carry"
    assert fragments(str(case["error_text"])), f"{name}: no fixed fragment of {MIN_FRAGMENT}+ characters"
    assert "/home/" not in str(case.get("log_excerpt", "")) + str(case["error_text"]), f"{name}: personal path"
    entry = dict(case["entry"])  # type: ignore[arg-type]
    assert set(entry) == {"file", "heading"} and str(entry["file"]).startswith("troubleshooting/")


@pytest.mark.parametrize("name,case", CASES, ids=[n for n, _ in CASES])
def test_reporter_releases_are_inside_the_applies_range(name: str, case: Dict[str, object]):
    applies = dict(case["applies"])  # type: ignore[arg-type]
    releases = dict(case["releases"])  # type: ignore[arg-type]
    outside = []
    for package, spec in applies.items():
        if package in releases:
            version = _version(str(releases[package]))
            if not SpecifierSet(str(spec)).contains(version, prereleases=True):
                outside.append(f"{package} {releases[package]} not in {spec}")
    assert not outside, f"{name}: {outside}"


# ---- every case is answered by the text -----------------------------------------------------------------------------


@pytest.mark.parametrize("name,case", CASES, ids=[n for n, _ in CASES])
def test_case_greps_to_its_entry_with_cause_fix_and_scope(name: str, case: Dict[str, object]):
    entry = dict(case["entry"])  # type: ignore[arg-type]
    path = SKILL_DIR / str(entry["file"])
    section = find_section(path, str(entry["heading"])) if path.is_file() else None
    assert section is not None, f"{name}: no heading {entry['heading']!r} in {entry['file']}"
    fragment = fragments(str(case["error_text"]))[0]
    line = grep_line(section, fragment)
    assert line is not None, f"{name}: {fragment!r} is not in {entry['file']} § {entry['heading']}"
    flat = _flat(section.text)
    terms = TICKED_RE.findall(str(case["cause"])) + TICKED_RE.findall(str(case["fix"]))
    absent = [t for t in terms if " ".join(t.split()) not in flat]
    assert not absent, f"{name}: § {entry['heading']} does not name {absent}"
    problems = scope_problems(case, section, line, fragment)
    others = {p: s for p, s in dict(case["applies"]).items() if p not in cs.PACKAGE_LABELS}  # type: ignore[arg-type]
    versions_section = find_section(path, VERSIONS_HEADING)
    versions = _flat(versions_section.text) if versions_section else ""
    for package, spec in others.items():
        bounds = re.findall(r"\d+(?:\.\d+)+", str(spec))
        unnamed = [b for b in bounds if b not in flat and b not in versions]
        if unnamed:
            problems.append(f"{package} {spec}: the section does not name {unnamed}")
    assert not problems, f"{name}: " + "; ".join(problems)


# ---- the checks have teeth ------------------------------------------------------------------------------------------


def test_fragments_drop_what_varies():
    text = "The client socket has timed out after 300000ms while trying to connect to (10.0.0.5, 51216)."
    assert fragments(text)[0] == "The client socket has timed out after"
    assert fragments("ValueError: bad thing happened at /opt/x/y.py line 3")[0] == "bad thing happened at"
    assert fragments("[rank0]: [c10d] The client socket has timed out after 300000ms")[0] == (
        "The client socket has timed out after"
    )


def test_scope_check_rejects_a_release_outside_the_entry(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(
        "# T\n\n### Entry (TRL ≥ 1.14)\n\n> `Something failed badly here`\n\n- **Fix:** `pip install x`.\n\n"
        "## Versions (time-sensitive)\n\n**Unless marked:** TRL 1.11–1.16.\n",
        encoding="utf-8",
    )
    section = find_section(page, "Entry (TRL ≥ 1.14)")
    assert section is not None
    line = grep_line(section, "Something failed badly here")
    assert line == 5
    inside = {"releases": {"trl": "1.15.0"}, "applies": {"trl": ">=1.14"}}
    outside = {"releases": {"trl": "1.12.0"}, "applies": {"trl": ">=1.11"}}
    assert scope_problems(inside, section, line, "Something failed badly here") == []
    assert scope_problems(outside, section, line, "Something failed badly here")
