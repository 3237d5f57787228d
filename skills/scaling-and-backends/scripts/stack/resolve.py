"""Resolve: the release sets that satisfy every declared range (Requires-Dist with the goal's extras,
Requires-Python) and every feature floor of the goal, searched by the number of installed packages that move.

The search fixes every installed package at its release, then lets one installed package move, then two, ...;
packages the goal adds are always chosen. Inside one set of movers a depth-first search tries releases nearest to
the installed one first (newest first for an added package), checking each pair of chosen releases both ways.
When TRL itself is added, it is the anchor: it is chosen first (newest first) and the other added packages follow
it in ``ORDER`` (vLLM, then transformers, torch, ...), each newest-compatible; "nearest" is for installed packages.
A requirement without an upper bound is capped at what the next release of the same package that bounds it declares
(``Matrix.open_cap``).
"""

from __future__ import annotations

import itertools
import re
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from common import versions

from stack.goals import BASE_PACKAGES, Goal, combined
from stack.matrix import Floor, Matrix, parse_lines

CAPPED_MARK = "no upper bound; capped"  # in a conflict's reason: the range was left open and read with a cap

ORDER = (
    "trl",
    "vllm",
    "transformers",
    "torch",
    "accelerate",
    "peft",
    "bitsandbytes",
    "deepspeed",
    "kernels",
    "liger-kernel",
    "datasets",
    "huggingface-hub",
)
ANCHORS = ("trl", "vllm", "transformers", "torch")  # pinned in the pip line whenever they are added
NODE_BUDGET = 120_000  # the 2026-12-06 matrix needs more than 60,000 for vllm + peft on a fresh environment
MAX_MOVERS = 4
ENFORCED_KINDS = ("requires", "warns")


class Need(NamedTuple):
    subject: str
    spec: str
    why: str  # "trl 1.16.0 [vllm] requires vllm>=0.22.0,<=0.31.0"
    cap: str = ""  # the dated cap's sentence when the planner added the upper bound


class Problem(NamedTuple):
    """Why no plan exists: the package whose releases all fail, and the constraint that removed them."""

    package: str
    reason: str
    constraint: str  # the flag or goal to drop: "--keep transformers==5.24.0", "--python 3.10", "--want qlora"


class Solution(NamedTuple):
    chosen: Dict[str, str]  # every package in scope -> release
    moved: Tuple[str, ...]  # installed packages that change release
    added: Tuple[str, ...]  # packages the plan installs
    free: Tuple[str, ...]  # added but left to pip (not pinned)
    distance: int


class Constraints(NamedTuple):
    python: str
    cuda: Optional[str]
    keeps: Dict[str, str]  # name -> specifier ("" keeps the installed release)
    keep_texts: Dict[str, str]  # name -> the --keep text as given
    python_given: bool


_RELEASE_RE = re.compile(r"^\d+(?:\.\d+)*$")
_CLAUSE_RE = re.compile(r"^(==|!=|<=|>=|<|>)(\d+(?:\.\d+)*)(\.\*)?$")


def _release(text: str) -> Tuple[int, ...]:
    parts = tuple(int(p) for p in text.split("."))
    while len(parts) > 1 and parts[-1] == 0:
        parts = parts[:-1]
    return parts


def _fast_clause(clause: str, version: str) -> Optional[bool]:
    """PEP 440 for a final release against a plain clause (the matrix's common case); None: not plain."""
    match = _CLAUSE_RE.match(clause)
    if not match or not _RELEASE_RE.match(version):
        return None
    op, target, star = match.groups()
    if star:
        if op not in ("==", "!="):
            return None
        width = len(target.split("."))
        head = tuple(int(p) for p in version.split("."))[:width]
        head = head + (0,) * (width - len(head))
        same = head == tuple(int(p) for p in target.split("."))
        return same if op == "==" else not same
    left, right = _release(version), _release(target)
    results = {"==": left == right, "!=": left != right, "<=": left <= right, ">=": left >= right}
    results.update({"<": left < right, ">": left > right})
    return results[op]


def _contains(spec: str, version: str, cache: Dict[Tuple[str, str], bool]) -> bool:
    """Whether ``version`` satisfies ``spec`` (``A or B`` for a range exclusion); undecidable counts as yes."""
    key = (spec, version)
    if key not in cache:
        if " or " in spec:
            cache[key] = any(_contains(part.strip(), version, cache) for part in spec.split(" or "))
            return cache[key]
        results = [_fast_clause(c.strip(), version) for c in spec.split(",") if c.strip()]
        if all(r is not None for r in results):
            cache[key] = all(results)
        else:
            cache[key] = versions.specifier_contains(spec, version) is not False
    return cache[key]


def _display(spec: str) -> str:
    order = {">=": 0, ">": 1, "~=": 2, "==": 3, "!=": 4, "<=": 5, "<": 6}
    clauses = [c for c in spec.split(",") if c]
    return ",".join(sorted(clauses, key=lambda c: order.get(c[:2], order.get(c[:1], 9))))


class Space:
    """The candidates and pairwise checks for one request."""

    def __init__(
        self, matrix: Matrix, goal: Goal, installed: Dict[str, str], constraints: Constraints, wants: Sequence[str]
    ) -> None:
        self.matrix = matrix
        self.goal = goal
        self.wants = tuple(wants)
        self.installed = {k: v for k, v in installed.items() if k in ORDER}
        self.constraints = constraints
        self._spec_cache: Dict[Tuple[str, str], bool] = {}
        self._needs: Dict[Tuple[str, str], Dict[str, List[Need]]] = {}
        self._pair: Dict[Tuple[str, str, str, str], bool] = {}
        wanted = set(BASE_PACKAGES) | set(goal.packages) | set(self.installed) | set(constraints.keeps)
        self.floors = [f for feature in goal.features for f in matrix.floors_for(feature)]
        wanted |= {f.subject for f in self.floors if f.kind in ENFORCED_KINDS}
        self.scope = [name for name in ORDER if name in wanted]
        self.extras = {"trl": goal.trl_extras, "transformers": self._transformers_extras()}
        self.domains, self.problems = self._domains()

    # -- requirements --

    def _transformers_extras(self) -> Tuple[str, ...]:
        found = set()
        for release in self.matrix.releases.get("trl", []):
            for req in parse_lines(release.requires):
                if req.key == "transformers" and req.extras and self._active(req.marker, self.goal.trl_extras):
                    found.update(req.extras)
        return tuple(sorted(found))

    def _active(self, marker: str, extras: Sequence[str]) -> bool:
        if not marker:
            return True
        named = versions.marker_extras(marker)
        python = ".".join(self.constraints.python.split(".")[:2])
        if named:
            return any(versions.evaluate_marker(marker, extra=e, python_version=python) for e in extras if e in named)
        return versions.evaluate_marker(marker, python_version=python) is not False

    def needs(self, name: str, version: str) -> Dict[str, List[Need]]:
        """What release ``version`` of ``name`` demands of the other packages in scope (ranges and floors)."""
        key = (name, version)
        if key in self._needs:
            return self._needs[key]
        out: Dict[str, List[Need]] = {}
        release = self.matrix.release(name, version)
        extras = self.extras.get(name, ())
        if release is not None:
            for req in parse_lines(release.requires):
                if req.key not in self.scope or req.key == name or not self._active(req.marker, extras):
                    continue
                cap = self.matrix.open_cap(name, version, req)
                if not req.specifier and cap is None:
                    continue
                named = [e for e in versions.marker_extras(req.marker) if e in extras]
                label = f"{name} {version}" + (f" [{named[0]}]" if named else "")
                spec = _display(req.specifier)
                if cap is None:
                    out.setdefault(req.key, []).append(Need(req.key, spec, f"{label} requires {req.key}{spec}"))
                    continue
                why = f"{label} requires {req.key}{spec or ' (any)'} ({CAPPED_MARK} {cap.spec})"
                out.setdefault(req.key, []).append(Need(req.key, _display(f"{spec},{cap.spec}"), why, cap.text))
        for floor in self.floors:
            if not self._floor_binds(floor, name, version, out):
                continue
            why = f"{floor.feature} on {name} {version} needs {floor.subject}{floor.spec} ({floor.file})"
            out.setdefault(floor.subject, []).append(Need(floor.subject, floor.spec, why))
        self._needs[key] = out
        return out

    def _floor_binds(self, floor: Floor, name: str, version: str, stated: Dict[str, List[Need]]) -> bool:
        """Whether ``floor`` constrains ``name==version`` beyond what its metadata already states."""
        if floor.owner != name or floor.kind not in ENFORCED_KINDS or floor.subject not in self.scope:
            return False
        if not floor.spec or not floor.applies_to(version):
            return False
        return not any(n.spec == floor.spec for n in stated.get(floor.subject, []))

    def violations(self, name: str, version: str, other: str, other_version: str) -> List[str]:
        """Why ``name==version`` and ``other==other_version`` cannot go together (empty: they can)."""
        found = []
        for need in self.needs(name, version).get(other, []):
            if not _contains(need.spec, other_version, self._spec_cache):
                found.append(f"{need.why}, not {other_version}")
        for need in self.needs(other, other_version).get(name, []):
            if not _contains(need.spec, version, self._spec_cache):
                found.append(f"{need.why}, not {version}")
        return found

    def compatible(self, name: str, version: str, other: str, other_version: str) -> bool:
        key = (name, version, other, other_version)
        if key not in self._pair:
            ok = not self.violations(name, version, other, other_version)
            self._pair[key] = ok
            self._pair[(other, other_version, name, version)] = ok
        return self._pair[key]

    # -- candidates --

    def _release_reason(self, name: str, version: str) -> Optional[Tuple[str, str]]:
        """(reason, constraint) when a recorded release is ruled out before any pairing, else None."""
        release = self.matrix.release(name, version)
        if release is None:
            return ("not in the recorded matrix", "")
        python = self.constraints.python
        if release.python and not _contains(release.python, python, self._spec_cache):
            flag = f"--python {python}" if self.constraints.python_given else f"Python {python} (this interpreter)"
            return (f"needs Python {release.python}", flag)
        keep = self.constraints.keeps.get(name)
        if keep is not None:
            spec = keep or f"=={self.installed.get(name, '')}"
            if not _contains(spec, version, self._spec_cache):
                return (
                    f"outside --keep {self.constraints.keep_texts[name]}",
                    f"--keep {self.constraints.keep_texts[name]}",
                )
        cuda = self.constraints.cuda
        if cuda and name in ("torch", "vllm"):
            built = self.cuda_of(name, version)
            if built and built.split(".")[0] != cuda.split(".")[0]:
                return (f"its PyPI wheel is built for CUDA {built}", f"--cuda {cuda}")
        for floor in self.floors:
            if (
                floor.owner == name
                and floor.kind == "present"
                and not any(
                    f.feature == floor.feature and f.applies_to(version) for f in self.floors if f.kind == "present"
                )
            ):
                return (f"has no {floor.feature} ({floor.file})", f"--want {self._want_of(floor.feature)}")
        return None

    def _want_of(self, feature: str) -> str:
        for want in self.wants:
            if feature in combined([want]).features:
                return want
        return feature

    def cuda_of(self, name: str, version: str) -> str:
        release = self.matrix.release(name, version)
        if release is None:
            return ""
        if name == "torch":
            return release.cuda
        for req in parse_lines(release.requires):
            if req.key == "torch" and req.specifier.startswith("==") and "," not in req.specifier:
                pinned = self.matrix.release("torch", req.specifier[2:])
                if pinned and pinned.cuda:
                    return pinned.cuda  # the PyPI vLLM wheel is built against its torch pin
        return release.cuda

    def _domains(self) -> Tuple[Dict[str, List[str]], List[Problem]]:
        domains: Dict[str, List[str]] = {}
        problems: List[Problem] = []
        for name in self.scope:
            releases = [r.version for r in self.matrix.releases.get(name, [])]
            installed = self.installed.get(name)
            keep = self.constraints.keeps.get(name)
            allowed, reasons = [], {}
            for version in releases:
                reason = self._release_reason(name, version)
                if reason is None:
                    allowed.append(version)
                else:
                    reasons.setdefault(reason[1], reason[0])
            if (
                installed
                and installed not in releases
                and (keep is None or not keep or _contains(keep, installed, self._spec_cache))
            ):
                allowed.append(installed)  # outside the matrix: its own requirements are unknown, others' are checked
            pinned = exact_keep(keep)
            if pinned and pinned not in releases and pinned not in allowed and self.newer_than_matrix(name, pinned):
                allowed.append(pinned)  # a kept release newer than the matrix: the same, and the plan says so
            if not allowed:
                # the keep removes most releases; what removed the kept ones is the constraint to name
                other = [(c, r) for c, r in reasons.items() if not c.startswith("--keep")]
                constraint, reason = (other or list(reasons.items()) or [("", "no recorded release")])[0]
                problems.append(Problem(name, f"no recorded {name} release fits: {reason}", constraint))
            domains[name] = self._ordered(name, allowed, installed)
        return domains, problems

    def newer_than_matrix(self, name: str, version: str) -> bool:
        newest = self.matrix.newest(name)
        return bool(newest) and (versions.compare_versions(version, newest or "") or 0) > 0

    def _ordered(self, name: str, allowed: List[str], installed: Optional[str]) -> List[str]:
        """Newest first for an added package; nearest to the installed release first (newer before older at the
        same distance) for an installed one, also when the installed release itself is ruled out."""
        keyed = sorted(allowed, key=_key)
        if not installed or versions.version_key(installed) is None:
            return list(reversed(keyed))
        if installed in keyed:
            at = keyed.index(installed)
            return sorted(keyed, key=lambda v: (abs(keyed.index(v) - at), keyed.index(v) < at))
        line = sorted([*keyed, installed], key=_key)
        at = line.index(installed)
        return sorted(keyed, key=lambda v: (abs(line.index(v) - at), line.index(v) < at))

    def distance(self, name: str, version: str) -> int:
        domain = self.domains.get(name, [])
        return domain.index(version) if version in domain else len(domain)


def _key(version: str) -> object:
    return versions.version_key(version) or (0,)


def exact_keep(spec: Optional[str]) -> Optional[str]:
    """The release an ``==X`` keep names (None for any other specifier)."""
    if spec and spec.startswith("==") and not spec.startswith("===") and "," not in spec and "*" not in spec:
        return spec[2:] if versions.is_valid_version(spec[2:]) else None
    return None


def search_order(space: Space, movers: Sequence[str], sizes: Dict[str, int], free: Sequence[str]) -> List[str]:
    """The order the search fixes ``movers`` in: single candidates first, then installed packages that move (fewest
    candidates first), then added ones, free ones (left to pip) last. Added packages go smallest domain first
    while TRL is installed; when TRL is added it leads and the rest follow in ``ORDER`` (the anchor rule)."""
    anchored = "trl" in movers and "trl" not in space.installed

    def rank(name: str) -> Tuple[int, int, int]:
        group = 0 if sizes[name] == 1 else 3 if name in free else 1 if name in space.installed else 2
        size = 0 if anchored and group == 2 else sizes[name]
        return (group, size, ORDER.index(name))

    return sorted(movers, key=rank)


def _search(
    space: Space, movers: Sequence[str], fixed: Dict[str, str], budget: List[int], limit: int
) -> List[Dict[str, str]]:
    """Up to ``limit`` assignments of ``movers`` consistent with ``fixed`` and each other (nearest first); the free
    packages (left to pip) only need one fitting release, so each set of the others is found once."""
    candidates = {}
    for name in movers:
        domain = [v for v in space.domains[name] if v != space.installed.get(name) or name not in space.installed]
        domain = [v for v in domain if all(space.compatible(name, v, o, ov) for o, ov in fixed.items())]
        if not domain:
            return []
        candidates[name] = domain
    free = set(free_packages(space, movers))
    order = search_order(space, movers, {n: len(c) for n, c in candidates.items()}, free)
    found: List[Dict[str, str]] = []
    chosen: Dict[str, str] = {}

    def walk(depth: int) -> bool:
        if len(found) >= limit or budget[0] <= 0:
            return False
        if depth == len(order):
            found.append(dict(chosen))
            return True
        name = order[depth]
        any_found = False
        for version in candidates[name]:
            budget[0] -= 1
            if budget[0] <= 0:
                return any_found
            if all(space.compatible(name, version, o, ov) for o, ov in chosen.items()):
                chosen[name] = version
                any_found = walk(depth + 1) or any_found
                del chosen[name]
                if len(found) >= limit or (any_found and name in free):
                    return any_found
        return any_found

    walk(0)
    return found


def free_packages(space: Space, movers: Sequence[str]) -> Tuple[str, ...]:
    """Added packages the pip line leaves to pip (not an anchor, not a goal package, not kept)."""
    return tuple(
        n
        for n in movers
        if n not in space.installed
        and n not in ANCHORS
        and n not in space.goal.packages
        and n not in space.constraints.keeps
    )


def solve(space: Space, wanted: int) -> Tuple[List[Solution], bool]:
    """Solutions ranked by (installed packages moved, distance); the flag says the search budget ran out."""
    if space.problems:
        return [], False
    budget = [NODE_BUDGET]
    missing = [n for n in space.scope if n not in space.installed]
    present = [n for n in space.scope if n in space.installed]
    pinned = {n for n, spec in space.constraints.keeps.items() if not spec}
    forced = [n for n in present if space.installed[n] not in space.domains[n]]  # ruled out: must move
    movable = [n for n in present if n in forced or (n not in pinned and len(space.domains[n]) > 1)]
    solutions: List[Solution] = []
    seen = set()
    best_moves: Optional[int] = None
    for count in range(len(forced), min(len(movable), MAX_MOVERS) + 1):
        if best_moves is not None and count > best_moves + 1:
            break
        for subset in itertools.combinations([n for n in movable if n not in forced], count - len(forced)):
            movers = list(forced) + list(subset) + missing
            fixed = {n: space.installed[n] for n in present if n not in movers}
            if any(not space.compatible(a, fixed[a], b, fixed[b]) for a, b in itertools.combinations(fixed, 2)):
                continue
            for assignment in _search(space, movers, fixed, budget, 3):
                chosen = {**fixed, **assignment}
                key = tuple(sorted(chosen.items()))
                if key in seen:
                    continue
                seen.add(key)
                moved = tuple(n for n in space.scope if n in space.installed and chosen[n] != space.installed[n])
                added = tuple(n for n in missing)
                free = free_packages(space, added)
                distance = sum(space.distance(n, chosen[n]) for n in moved + tuple(a for a in added if a not in free))
                solutions.append(Solution(chosen, moved, added, free, distance))
                best_moves = len(moved) if best_moves is None else min(best_moves, len(moved))
            if budget[0] <= 0:
                break
        if budget[0] <= 0:
            break
    solutions.sort(key=lambda s: rank(space, s))
    return solutions[:wanted], budget[0] <= 0


def rank(space: Space, solution: Solution) -> Tuple[int, int, int, List[int]]:
    """Fewest (weighted) installed packages moved; then, when TRL is added, the newest TRL (the anchor); then the
    smallest distance (nearest to installed, newest for added)."""
    anchor = space.distance("trl", solution.chosen["trl"]) if "trl" in solution.added else 0
    return (weight(solution.moved), anchor, solution.distance, [ORDER.index(n) for n in solution.moved])


def weight(moved: Sequence[str]) -> int:
    """Ranking cost of moving installed packages: the packages that define the stack (TRL, vLLM, transformers,
    torch) count twice, so a plan that moves one library ranks before one that moves TRL."""
    return sum(2 if name in ANCHORS else 1 for name in moved)


def keep_conflicts(space: Space) -> List[str]:
    """For an impossible goal: packages none of whose candidates fits the kept releases, with the nearest
    candidate's conflict (e.g. every kernels release against transformers 5.24.0's kernels range)."""
    kept = {n: space.domains[n][0] for n in space.scope if len(space.domains.get(n, [])) == 1}
    lines = []
    for name in space.scope:
        if name in kept or not space.domains.get(name):
            continue
        fits = [v for v in space.domains[name] if all(space.compatible(name, v, k, kv) for k, kv in kept.items())]
        if fits:
            continue
        nearest = space.domains[name][0]
        found = [m for k, kv in kept.items() for m in space.violations(name, nearest, k, kv)]
        newest = max(space.domains[name], key=lambda v: versions.version_key(v) or (0,))  # type: ignore[arg-type,return-value]
        lines.append(f"no {name} release fits (newest recorded {newest}): " + "; ".join(found[:2]))
        capped = _ruled_out_by_caps_only(space, name, kept)
        if capped is not None:
            lines.append(
                f"{name} {capped[0]} is ruled out only by a cap on a range it left open ({capped[1]}): pip would "
                f"accept it, but no later {name} release accepts that combination"
            )
    return lines


def _ruled_out_by_caps_only(space: Space, name: str, kept: Dict[str, str]) -> Optional[Tuple[str, str]]:
    """The newest candidate of ``name`` whose every conflict with the kept releases comes from a cap on an open
    range (``Matrix.open_cap``), with its first such conflict; None when there is none."""
    for version in space.domains[name]:
        found = [m for k, kv in kept.items() for m in space.violations(name, version, k, kv)]
        if found and all(CAPPED_MARK in m for m in found):
            return version, found[0]
    return None


def blockers(space: Space, chosen: Dict[str, str]) -> List[str]:
    """Why each moved package cannot stay at its installed release, given the rest of ``chosen``."""
    lines = []
    for name in space.scope:
        installed = space.installed.get(name)
        if not installed or chosen.get(name) == installed:
            continue
        reason = space._release_reason(name, installed) if space.matrix.release(name, installed) else None
        if reason is not None:
            lines.append(f"{name} {installed} cannot stay: {reason[0]}")
            continue
        found = []
        for other, version in chosen.items():
            if other != name:
                found += space.violations(name, installed, other, version)
        lines.append(f"{name} {installed} cannot stay: " + ("; ".join(found[:2]) if found else "a nearer set fails"))
    return lines


def as_installed(space: Space) -> List[str]:
    """What the installed set lacks for the goal (empty: it already satisfies it)."""
    lines = [f"{n} is not installed" for n in space.scope if n not in space.installed]
    present = [n for n in space.scope if n in space.installed]
    for name in present:
        if space.installed[name] not in space.domains[name]:
            reason = space._release_reason(name, space.installed[name])
            lines.append(f"{name} {space.installed[name]}: {reason[0] if reason else 'ruled out'}")
    for a, b in itertools.combinations(present, 2):
        lines += space.violations(a, space.installed[a], b, space.installed[b])
    return lines


def relaxations(
    matrix: Matrix, goal_ids: Sequence[str], installed: Dict[str, str], constraints: Constraints
) -> List[str]:
    """The single constraints whose removal makes the goal possible."""
    found = []
    for name in list(constraints.keeps):
        keeps = {k: v for k, v in constraints.keeps.items() if k != name}
        texts = {k: v for k, v in constraints.keep_texts.items() if k != name}
        trial = constraints._replace(keeps=keeps, keep_texts=texts)
        if solve(Space(matrix, combined(goal_ids), installed, trial, goal_ids), 1)[0]:
            found.append(f"--keep {constraints.keep_texts[name]}")
    if constraints.python_given:
        for minor in ("3.12", "3.11", "3.13", "3.10"):
            trial = constraints._replace(python=minor)
            if (
                minor != constraints.python
                and solve(Space(matrix, combined(goal_ids), installed, trial, goal_ids), 1)[0]
            ):
                found.append(f"--python {constraints.python} (Python {minor} works)")
                break
    if constraints.cuda:
        trial = constraints._replace(cuda=None)
        if solve(Space(matrix, combined(goal_ids), installed, trial, goal_ids), 1)[0]:
            found.append(f"--cuda {constraints.cuda}")
    if len(goal_ids) > 1:
        for gid in goal_ids:
            rest = [g for g in goal_ids if g != gid]
            if solve(Space(matrix, combined(rest), installed, constraints, rest), 1)[0]:
                found.append(f"--want {gid}")
    return found


def floors_of(space: Space, chosen: Dict[str, str]) -> List[Floor]:
    """The goal's feature floors that apply to the chosen owner releases (for the report)."""
    return [f for f in space.floors if f.owner in chosen and f.applies_to(chosen[f.owner])]
