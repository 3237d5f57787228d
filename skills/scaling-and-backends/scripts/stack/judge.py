"""Judge: turn the resolver's solutions into a plan: a verdict, the ranked options with their exact pip lines and
changes, why the installed set (and each moved package's installed release) fails, the feature floors that apply,
and, when nothing fits, the constraint to drop. The plan is a plain dict: the renderers and ``--json`` share it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from common import versions
from common.output import shell_word

from stack.goals import combined
from stack.inputs import PlanRequest
from stack.matrix import Matrix
from stack.resolve import (
    ORDER,
    Constraints,
    Solution,
    Space,
    as_installed,
    blockers,
    exact_keep,
    floors_of,
    keep_conflicts,
    relaxations,
    solve,
)

SCHEMA_VERSION = 1
TOOL = "plan_install"
KEEP_GOAL = "no --want: keep the installed stack (trl, transformers, torch, accelerate and the rest) working"


def constraints_of(request: PlanRequest) -> Constraints:
    return Constraints(
        python=request.python,
        cuda=request.cuda,
        keeps={k.name: k.spec for k in request.keeps},
        keep_texts={k.name: k.text for k in request.keeps},
        python_given=request.python_given,
    )


def pip_line(interpreter: str, space: Space, solution: Solution) -> Optional[str]:
    """``<python> -m pip install`` with a pin for every package that moves or is added (None: nothing to do)."""
    chosen = solution.chosen
    extras = space.extras.get("trl", ())
    targets: List[str] = []
    for name in ORDER:
        if name not in chosen or name in solution.free:
            continue
        changes = name in solution.moved or name in solution.added
        if name == "trl" and extras:
            targets.append(f"trl[{','.join(extras)}]=={chosen['trl']}")
        elif changes:
            targets.append(f"{name}=={chosen[name]}")
    if not solution.moved and not solution.added and not extras:
        return None
    if not solution.moved and not solution.added:
        return None  # the extras' packages are all present at fitting releases
    return f"{shell_word(interpreter)} -m pip install " + " ".join(shell_word(t) for t in targets)


def _direction(old: str, new: str) -> str:
    order = versions.compare_versions(new, old)
    return "upgrade" if order and order > 0 else "downgrade" if order and order < 0 else "reinstall"


def changes_of(space: Space, solution: Solution) -> List[Dict[str, Any]]:
    rows = []
    for name in ORDER:
        if name in solution.moved:
            old, new = space.installed[name], solution.chosen[name]
            rows.append({"package": name, "from": old, "to": new, "kind": _direction(old, new)})
        elif name in solution.added:
            shown = None if name in solution.free else solution.chosen[name]
            rows.append({"package": name, "from": None, "to": shown, "kind": "add"})
    return rows


def caps_of(space: Space, chosen: Dict[str, str]) -> List[str]:
    """The dated caps (``Matrix.open_cap``) that the chosen releases put on each other."""
    found: List[str] = []
    for name, version in chosen.items():
        for other, needs in space.needs(name, version).items():
            if other in chosen:
                found += [n.cap for n in needs if n.cap and n.cap not in found]
    return found


def newer_than_matrix(request: PlanRequest, matrix: Matrix) -> List[str]:
    """Installed or kept releases newer than the newest the matrix records: planned with their own requirements
    unchecked, and said so."""
    seen: Dict[str, str] = {}
    for name, version in request.installed.items():
        seen[name] = version
    for keep in request.keeps:
        pinned = exact_keep(keep.spec)
        if pinned:
            seen[keep.name] = pinned
    lines = []
    for name in ORDER:
        version, newest = seen.get(name), matrix.newest(name)
        if version and newest and (versions.compare_versions(version, newest) or 0) > 0:
            lines.append(
                f"{name} {version} is newer than the recorded matrix (fetched {matrix.fetched}; newest recorded "
                f"{newest}): kept as it is, its own requirements unchecked"
            )
    return lines


def _option(space: Space, request: PlanRequest, solution: Solution) -> Dict[str, Any]:
    floors = floors_of(space, solution.chosen)
    shown = {n: solution.chosen[n] for n in ORDER if n in solution.chosen and n not in solution.free}
    return {
        "pip": pip_line(request.interpreter, space, solution),
        "set": shown,
        "capped": caps_of(space, shown),
        "changes": changes_of(space, solution),
        "moved": len(solution.moved),
        "why_not_nearer": blockers(space, solution.chosen),
        "floors": [
            {
                "feature": f.feature,
                "subject": f.subject,
                "spec": f.spec,
                "kind": f.kind,
                "source": f"{f.owner}: {f.file}",
            }
            for f in floors
            if f.spec
        ],
        "python": space.constraints.python,
        "cuda": {n: space.cuda_of(n, solution.chosen[n]) for n in ("torch", "vllm") if n in solution.chosen} or None,
    }


def plan(request: PlanRequest, matrix: Matrix) -> Dict[str, Any]:
    """The whole plan for ``request`` (JSON-ready)."""
    goal = combined(request.wants)
    constraints = constraints_of(request)
    space = Space(matrix, goal, request.installed, constraints, request.wants)
    solutions, exhausted = solve(space, request.options)
    current = as_installed(space)
    options = [_option(space, request, s) for s in solutions]
    if options and not options[0]["changes"]:
        verdict, status = "the installed set already satisfies the goal; nothing to install", "satisfied"
    elif options:
        first = options[0]
        moved = ", ".join(_change_text(c) for c in first["changes"])
        verdict, status = f"{len(options)} option(s); the nearest changes {moved}", "plan"
    else:
        verdict, status = "no release set satisfies the goal under these constraints", "impossible"
    drop: List[str] = []
    conflicts: List[str] = []
    if not options:
        drop = relaxations(matrix, request.wants, request.installed, constraints)
        conflicts = keep_conflicts(space)
    return {
        "tool": TOOL,
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "verdict": verdict,
        "goal": list(request.wants),
        "goal_note": goal.note or KEEP_GOAL,
        "constraints": _constraint_texts(request),
        "source": request.source,
        "interpreter": request.interpreter,
        "installed": {n: request.installed[n] for n in ORDER if n in request.installed},
        "newer_than_matrix": newer_than_matrix(request, matrix),
        "as_installed": current,
        "options": options,
        "problems": [{"package": p.package, "reason": p.reason, "constraint": p.constraint} for p in space.problems],
        "drop": drop,
        "conflicts": conflicts,
        "search_exhausted": exhausted,
        "matrix": {"fetched": matrix.fetched, "window": matrix.window},
    }


def _change_text(change: Dict[str, Any]) -> str:
    if change["kind"] == "add":
        return f"adds {change['package']}" + (f" {change['to']}" if change["to"] else "")
    return f"{change['package']} {change['from']} -> {change['to']}"


def _constraint_texts(request: PlanRequest) -> List[str]:
    texts = [f"--keep {k.text}" for k in request.keeps]
    texts.append(f"--python {request.python}" if request.python_given else f"Python {request.python} (environment)")
    if request.cuda:
        texts.append(f"--cuda {request.cuda}")
    return texts


def exit_code(result: Dict[str, Any]) -> int:
    return 1 if result["status"] == "impossible" else 0
