"""Feature floors of a path, for other tools (the memory planner states the floors of the path it recommends):
what each goal needs of the TRL release, read from the recorded matrix: the ranges TRL's extras declare, the
floors that exist only in source, and the ranges outside which TRL warns.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

from common import versions

from stack.goals import GOALS, PAIR_FEATURES, combined
from stack.matrix import Floor, Matrix, MatrixError, load, parse_lines

KINDS = ("extra", "requires", "warns")  # declared by an extra, enforced in source, warned about in source


class PathFloor(NamedTuple):
    goal: str  # the goal id (a diagnostic backend id), or "fsdp2+qlora" for a pair of goals
    subject: str  # the package the floor is on
    spec: str  # e.g. ">=0.22.0"
    source: str  # "trl-1.8.0: trl/experimental/async_grpo/weight_transfer.py ..."
    kind: str = "requires"  # one of KINDS

    def text(self) -> str:
        return f"{self.goal}: {self.subject}{self.spec} ({self.source})"


def path_floors(
    goal_ids: Sequence[str],
    trl_version: Optional[str] = None,
    matrix: Optional[Matrix] = None,
    with_extras: bool = False,
) -> List[PathFloor]:
    """The floors of ``goal_ids`` (unknown ids are skipped) for ``trl_version`` (default: the newest recorded TRL):
    the enforced source floors, and with ``with_extras`` also the ranges the goals' TRL extras declare and the
    ranges TRL warns outside. Empty when the matrix cannot be read."""
    try:
        matrix = matrix or load()
    except MatrixError:
        return []
    known = [g for g in goal_ids if g in GOALS]
    trl = trl_version or (matrix.releases["trl"][-1].version if matrix.releases.get("trl") else "")
    found: List[PathFloor] = []
    if with_extras:
        found += _extra_ranges(matrix, known, trl)
    kinds = ("requires", "warns") if with_extras else ("requires",)
    labelled = [(goal, combined([goal]).features) for goal in known]
    labelled += [
        (f"{first}+{second}", (feature,))
        for (first, second), feature in PAIR_FEATURES.items()
        if first in known and second in known
    ]
    for goal, features in labelled:
        for feature in features:
            for floor in matrix.floors_for(feature):
                if floor.kind not in kinds or not floor.spec:
                    continue
                owner_version = trl if floor.owner == "trl" else ""
                if floor.owner != "trl" and floor.releases:
                    where = _owner_span(matrix, floor)  # another package's releases, e.g. transformers 5.x
                    if not where:
                        continue
                elif owner_version and floor.releases:
                    if not floor.applies_to(owner_version):
                        continue
                    where = f"{floor.owner}-{owner_version}: "
                elif owner_version and not floor.applies_to(owner_version):
                    continue
                else:
                    where = "" if floor.owner == "trl" else f"{floor.owner}: "  # e.g. accelerate's FSDP2 torch floor
                item = PathFloor(goal, floor.subject, floor.spec, f"{where}{floor.file}", floor.kind)
                if item not in found:
                    found.append(item)
    return _ordered(_once(_highest(found)), [goal for goal, _ in labelled])


def _owner_span(matrix: Matrix, floor: Floor) -> str:
    """ "transformers 5.0.0-5.24.0: " when ``floor`` is the only spec its owner releases put on its subject for its
    feature (the one floor that binds whichever of them is installed); "" when the releases differ (the kernels
    range of each transformers release: the compatibility tables list them)."""
    rivals = {
        f.spec
        for f in matrix.floors_for(floor.feature)
        if f.owner == floor.owner and f.subject == floor.subject and f.kind == floor.kind and f.releases
    }
    if len(rivals) != 1:
        return ""
    return f"{floor.owner} {floor.releases[0]}-{floor.releases[-1]}: "


def _once(found: List[PathFloor]) -> List[PathFloor]:
    """Each floor once: under the first goal that needs it, and a warning range only where no extra declares the
    same range."""
    kept: List[PathFloor] = []
    for item in found:
        if any(
            (k.subject, k.spec, k.kind, k.source) == (item.subject, item.spec, item.kind, item.source) for k in kept
        ):
            continue
        if item.kind == "warns" and any(
            f.kind == "extra" and (f.subject, f.spec) == (item.subject, item.spec) for f in found
        ):
            continue
        kept.append(item)
    return kept


def _ordered(found: List[PathFloor], goals: Sequence[str]) -> List[PathFloor]:
    """By goal (in the order asked, pairs last), then declared ranges before source floors before warnings."""
    return sorted(found, key=lambda f: (list(goals).index(f.goal), KINDS.index(f.kind)))


def _extra_ranges(matrix: Matrix, goal_ids: Sequence[str], trl: str) -> List[PathFloor]:
    """The ranges each goal's TRL extras add in the ``trl`` release (its Requires-Dist as recorded)."""
    release = matrix.release("trl", trl)
    if release is None:
        return []
    found: List[PathFloor] = []
    for goal in goal_ids:
        for extra in GOALS[goal].trl_extras:
            for req in parse_lines(release.requires):
                if versions.marker_extras(req.marker) != (extra,) or not req.specifier or req.extras:
                    continue
                item = PathFloor(goal, req.key, req.specifier, f"trl-{trl} Requires-Dist, extra {extra}", "extra")
                if item not in found:
                    found.append(item)
    return found


def _highest(found: List[PathFloor]) -> List[PathFloor]:
    """Of several ``>=`` floors of one kind on one subject for one goal, keep the highest (the one that binds)."""
    kept: List[PathFloor] = []
    for item in found:
        rival = next(
            (k for k in kept if k.goal == item.goal and k.subject == item.subject and k.kind == item.kind), None
        )
        if rival is None or not (item.spec.startswith(">=") and rival.spec.startswith(">=")) or "," in item.spec:
            kept.append(item)
            continue
        if (versions.compare_versions(item.spec[2:], rival.spec[2:]) or 0) > 0:
            kept[kept.index(rival)] = item
    return kept
