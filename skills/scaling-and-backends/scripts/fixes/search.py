"""Search the fix index: the changes released after the user's release that match an error's words.

``search(index, text, releases)`` scores each change by the rarity (inverse frequency) of the query tokens found in
its title and touched modules. It keeps those with two tokens or one rare token, scoring MIN_SCORE and at least
RELATIVE of the best match in any release (when the user's release already ships the best match, weak ones after it
are not listed); drops those a package's given release already ships; and ranks the best match first (the newer
release first on ties). Per package it names the release to move to: the highest release among the listed fixes,
raised past any matching regression's fix so that no release between "broken from" and "fixed in" is advised.
"""

from __future__ import annotations

import math
import re
from typing import Dict, List, NamedTuple, Optional, Tuple

from fixes.load import Change, FixIndex, words

LIMIT = 5
RARE = 4  # a token held by at most this many changes matches on its own
MIN_SCORE = 12.0  # below it a match is a couple of common words (an OOM line scores about 9; corpus hits 17 up)
RELATIVE = 0.6  # listed only when scoring at least this share of the best match in any release
_RELEASE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)(.*)$")


class Fix(NamedTuple):
    package: str
    release: Optional[str]  # None: on the default branch after the last indexed release, in no tag of the snapshot
    pr: int
    title: str
    score: float
    matched: Tuple[str, ...]  # the query tokens it holds
    broken_from: Optional[str]  # the release that introduced what this change reverts or fixes
    broken_by: Optional[int]  # that change's pull request

    def line(self) -> str:
        """``package release: title (#N)``, with ``[broken from A, fixed in C]`` for a regression fix."""
        where = self.release or "untagged"
        text = f"{self.package} {where}: {self.title} (#{self.pr})"
        if self.broken_from:
            text += f" [broken from {self.broken_from} by #{self.broken_by}, fixed in {where}]"
        return text


class Move(NamedTuple):
    package: str
    current: Optional[str]
    release: str  # the first release holding every listed fix of the package
    command: str  # the install planner line that keeps at least that release
    skips: Tuple[str, ...]  # "A..B" ranges passed over because a matching regression lives there


class SearchResult(NamedTuple):
    fixes: Tuple[Fix, ...]
    moves: Tuple[Move, ...]
    notes: Tuple[str, ...]  # coverage: releases newer than the index, packages not indexed


def release_key(text: str) -> Optional[Tuple[Tuple[int, ...], int]]:
    """(release numbers padded to three, 0 for a pre-release else 1) of a version string, or None."""
    m = _RELEASE.match(text or "")
    if not m:
        return None
    numbers = tuple(int(p) for p in m.group(1).split("."))
    numbers = numbers + (0,) * max(0, 3 - len(numbers))
    rest = m.group(2).lower()
    pre = bool(re.match(r"^[.-]?(a|b|c|rc|alpha|beta|pre|preview|dev)\d*", rest))
    return numbers, 0 if pre else 1


def _after(change: Change, current: Tuple[Tuple[int, ...], int]) -> bool:
    if change.release is None:
        return True
    key = release_key(change.release)
    return key is not None and key > current


def _score(change: Change, query: List[str], index: FixIndex, total: int, rare: int) -> Tuple[float, Tuple[str, ...]]:
    matched = tuple(t for t in query if t in change.tokens)
    if not matched:
        return 0.0, ()
    if len(matched) < 2 and index.frequency.get(matched[0], 0) > rare:
        return 0.0, ()
    return sum(math.log(total / index.frequency.get(t, 1)) for t in matched), matched


def _newer_first(release: Optional[str]) -> Tuple[int, ...]:
    if release is None:
        return (-(10**9),)
    numbers, final = release_key(release) or ((0,), 0)
    return (*(-n for n in numbers), -final)


def _newest(releases: List[str]) -> str:
    return max(releases, key=lambda r: release_key(r) or ((0,), 0))


def search(
    index: FixIndex,
    text: str,
    releases: Optional[Dict[str, str]] = None,
    limit: int = LIMIT,
    packages: Optional[Tuple[str, ...]] = None,
    rare: int = RARE,
    min_score: float = MIN_SCORE,
) -> SearchResult:
    """The fixes matching ``text`` released after ``releases`` ({package: version}; a package without one: all).

    ``limit`` fixes at most, best match first; ``packages`` restricts the search; a single matching token counts
    only when at most ``rare`` changes hold it; a match needs ``min_score``."""
    releases = {k.lower().replace("_", "-"): v for k, v in (releases or {}).items()}
    query = words(text)
    total = max(1, len(index.changes))
    notes: List[str] = []
    current: Dict[str, Tuple[Tuple[int, ...], int]] = {}
    for name, version in sorted(releases.items()):
        package = index.packages.get(name)
        key = release_key(version)
        if package is None or key is None:
            continue
        last = package.releases[-1]
        if key > (release_key(last) or ((0,), 0)):
            notes.append(
                f"{name} {version} is newer than the index ({last}, snapshot {package.snapshot}): not searched"
            )
            continue
        current[name] = key
    scored: List[Fix] = []
    regressions: List[Fix] = []
    best = 0.0  # the best match in any release: a fix far below it, after the user's release, is noise
    for change in index.changes:
        if packages and change.package not in packages:
            continue
        if change.package in releases and change.package not in current:
            continue
        score, matched = _score(change, query, index, total, rare)
        if not score:
            continue
        broken = change.broke or (None, None)
        fix = Fix(
            change.package, change.release, change.pr, change.title, round(score, 2), matched, broken[1], broken[0]
        )
        best = max(best, fix.score)
        if change.broke:
            regressions.append(fix)
        if change.package in current and not _after(change, current[change.package]):
            continue
        scored.append(fix)
    scored = [f for f in scored if f.score >= max(min_score, RELATIVE * best)]
    scored.sort(key=lambda f: (-f.score, _newer_first(f.release), f.package, -f.pr))
    shown = tuple(scored[:limit])
    for name in dict.fromkeys(f.package for f in shown if f.package not in releases):
        notes.append(f"no {name} release given: its fixes from every release are listed; give yours to keep the later")
    return SearchResult(shown, _moves(shown, regressions, releases, current), tuple(notes))


def _moves(
    shown: Tuple[Fix, ...],
    regressions: List[Fix],
    releases: Dict[str, str],
    current: Dict[str, Tuple[Tuple[int, ...], int]],
) -> Tuple[Move, ...]:
    out: List[Move] = []
    for package in dict.fromkeys(f.package for f in shown):
        counted = []
        for fix in shown:
            if fix.package != package or fix.release is None:
                continue
            if (
                fix.broken_from
                and package in current
                and current[package] < (release_key(fix.broken_from) or current[package])
            ):
                continue  # the user's release predates the regression this change fixes
            counted.append(fix.release)
        if not counted:
            continue
        target = _newest(counted)
        skips = []
        for reg in regressions:
            if reg.package != package or reg.release is None or not reg.broken_from:
                continue
            low, high, at = release_key(reg.broken_from), release_key(reg.release), release_key(target)
            if low and high and at and low <= at < high:
                skips.append(f"{reg.broken_from}..{reg.release} (#{reg.broken_by}, fixed by #{reg.pr})")
                target = reg.release
        command = f"python3 scripts/plan_install.py --keep '{package}>={target}'"
        out.append(Move(package, releases.get(package), target, command, tuple(skips)))
    return tuple(out)
