"""Feature floors of a path, for other tools (the memory planner states the floors of the path it recommends):
which releases each goal needs beyond TRL's declared extras, read from the recorded matrix.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

from common import versions

from stack.goals import GOALS, combined
from stack.matrix import Matrix, MatrixError, load


class PathFloor(NamedTuple):
    goal: str  # the goal id (a diagnostic backend id)
    subject: str  # the package the floor is on
    spec: str  # e.g. ">=0.22.0"
    source: str  # "trl-1.8.0 trl/experimental/async_grpo/weight_transfer.py ..."

    def text(self) -> str:
        return f"{self.goal}: {self.subject}{self.spec} ({self.source})"


def path_floors(
    goal_ids: Sequence[str], trl_version: Optional[str] = None, matrix: Optional[Matrix] = None
) -> List[PathFloor]:
    """The enforced floors of ``goal_ids`` (unknown ids are skipped) for ``trl_version`` (default: the newest
    recorded TRL); TRL's extra ranges themselves are not repeated. Empty when the matrix cannot be read."""
    try:
        matrix = matrix or load()
    except MatrixError:
        return []
    known = [g for g in goal_ids if g in GOALS]
    trl = trl_version or (matrix.releases["trl"][-1].version if matrix.releases.get("trl") else "")
    owners = {"trl": trl}
    found: List[PathFloor] = []
    for goal in known:
        for feature in combined([goal]).features:
            for floor in matrix.floors_for(feature):
                if floor.kind != "requires" or not floor.spec:
                    continue
                owner_version = owners.get(floor.owner)
                applies = floor.applies_to(owner_version) if owner_version else not floor.releases
                if not applies:
                    continue
                where = f"{floor.owner}-{owner_version}" if owner_version and floor.releases else floor.owner
                item = PathFloor(goal, floor.subject, floor.spec, f"{where}: {floor.file}")
                if item not in found:
                    found.append(item)
    return _highest(found)


def _highest(found: List[PathFloor]) -> List[PathFloor]:
    """Of several ``>=`` floors on one subject for one goal, keep the highest (the one that binds)."""
    kept: List[PathFloor] = []
    for item in found:
        rival = next((k for k in kept if k.goal == item.goal and k.subject == item.subject), None)
        if rival is None or not (item.spec.startswith(">=") and rival.spec.startswith(">=")) or "," in item.spec:
            kept.append(item)
            continue
        if (versions.compare_versions(item.spec[2:], rival.spec[2:]) or 0) > 0:
            kept[kept.index(rival)] = item
    return kept
