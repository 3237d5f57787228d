"""The planner against pip's own answers (tests/fixtures/pip_answers/, recorded by tools/record_pip_answers.py
with the registry; no network here): the planner's first choice is a set pip resolved, with dependencies, and
every goal the planner calls impossible was impossible for pip too."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from stack import judge
from stack.inputs import PlanRequest, parse_keeps
from stack.matrix import load

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "pip_answers"
TOOLS_DIR = REPO_ROOT / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

MATRIX = load()
ANSWERS: List[Dict[str, Any]] = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(FIXTURES.glob("*.json"))]
DECIDED = [a for a in ANSWERS if a["pip"]["returncode"] is not None]
DECIDED_CASES = DECIDED


def _plan(answer: Dict[str, Any]) -> Dict[str, Any]:
    env = answer["environment"]
    request = PlanRequest(
        tuple(answer["want"]),
        parse_keeps(answer["keep"], MATRIX.names()),
        answer["python"] or env["python"],
        answer["python"] is not None,
        answer["cuda"],
        dict(env["installed"]),
        "python3",
        "fixture",
        True,
        1,
    )
    return judge.plan(request, MATRIX)


def test_enough_cases_were_recorded_with_a_date() -> None:
    assert len(DECIDED) >= 25, [a["case"] for a in ANSWERS if a not in DECIDED]
    assert all(a["recorded"] for a in ANSWERS)
    assert sum(1 for a in DECIDED if a["planner"]["status"] == "impossible") >= 5
    assert any(a["environment"]["installed"].get("trl", "9").startswith(("0.", "1.0", "1.8")) for a in DECIDED)


def test_the_recorder_still_defines_every_recorded_case() -> None:
    import record_pip_answers as recorder

    assert {a["case"] for a in ANSWERS} <= set(recorder.CASES)


@pytest.mark.parametrize("answer", DECIDED_CASES, ids=[a["case"] for a in DECIDED])
def test_planner_agrees_with_pip(answer: Dict[str, Any]) -> None:
    result = _plan(answer)
    pip = answer["pip"]
    if result["status"] == "impossible":
        if pip["returncode"] == 0:
            # pip knows only declared ranges: a goal blocked by a floor that lives in source, or by the cap on a
            # range declared without an upper bound (Matrix.open_cap), resolves for pip
            floor = any(" needs " in line for line in result["conflicts"])
            assert floor or _capped(pip["resolved"]), (result["conflicts"], pip["resolved"])
            return
        assert pip["resolution_impossible"] or pip["no_matching_distribution"], pip["error"]
        return
    chosen = result["options"][0]["set"]
    assert chosen == answer["planner"]["set"], "the planner's first choice changed: re-record this case"
    assert pip["returncode"] == 0, pip["error"]
    for name, version in chosen.items():
        assert pip["resolved"].get(name) == version, (name, version, pip["resolved"].get(name))


def _capped(resolved: Dict[str, str]) -> bool:
    """Whether pip's set breaks a cap the planner puts on an open-ended range (and only such a cap)."""
    from common import versions
    from stack.matrix import parse_lines

    for name, version in resolved.items():
        release = MATRIX.release(name, version)
        for req in parse_lines(release.requires) if release else []:
            cap = MATRIX.open_cap(name, version, req)
            other = resolved.get(req.key)
            if cap and other and versions.specifier_contains(cap.spec, other) is False:
                return True
    return False
