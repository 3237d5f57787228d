"""scripts/common/trl_extras.py: every TRL extra it maps is an extra of the newest recorded TRL, and every goal is
one the install planner accepts."""

from __future__ import annotations

from common.trl_extras import EXTRA_GOALS
from stack.goals import GOALS
from stack.matrix import load


def test_every_goal_is_a_planner_goal() -> None:
    assert set(EXTRA_GOALS.values()) <= set(GOALS)


def test_every_extra_is_declared_by_the_newest_trl() -> None:
    newest = load().releases["trl"][-1]
    extras = {
        part.split("extra ==")[1].strip(" '\")") for line in newest.requires if "extra ==" in line for part in [line]
    }
    assert set(EXTRA_GOALS) <= extras, sorted(set(EXTRA_GOALS) - extras)
