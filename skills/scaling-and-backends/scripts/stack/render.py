"""Render a plan as compact text (verdict first, fits 100 columns); ``--json`` prints the plan dict itself."""

from __future__ import annotations

from typing import Any, Dict, List

from stack.resolve import ORDER

STACK = ORDER  # the matrix's packages, named in the pip-check summary (the rest of pip's list is their dependencies)


def render_text(result: Dict[str, Any]) -> str:
    lines: List[str] = [f"plan_install: {result['verdict']}"]
    lines += [f"note: {line}" for line in result["newer_than_matrix"]]
    goal = ", ".join(result["goal"])
    lines.append(f"goal: {goal} ({result['goal_note']})" if goal else f"goal: {result['goal_note']}")
    lines.append(f"constraints: {'; '.join(result['constraints'])}")
    installed = ", ".join(f"{k} {v}" for k, v in result["installed"].items()) or "no stack package"
    lines.append(f"from: {result['source']}: {installed}")
    if result["as_installed"] and result["status"] != "satisfied":
        lines.append("as installed, the goal fails: " + "; ".join(result["as_installed"][:4]))
    for number, option in enumerate(result["options"], 1):
        lines.append("")
        title = f"option {number}: moves {option['moved']} installed package(s)"
        lines.append(title)
        if option["pip"]:
            lines.append(f"  {option['pip']}")
        for change in option["changes"]:
            if change["kind"] == "add":
                to = change["to"] or "(pip chooses)"
                lines.append(f"  adds {change['package']} {to}")
            else:
                lines.append(f"  {change['kind']}s {change['package']} {change['from']} -> {change['to']}")
        kept = ", ".join(f"{k} {v}" for k, v in option["set"].items())
        lines.append(f"  set: {kept}")
        for cap in option["capped"]:
            lines.append(f"  capped: {cap}")
        if option["cuda"]:
            cuda = ", ".join(f"{k} CUDA {v}" for k, v in option["cuda"].items() if v)
            if cuda:
                lines.append(f"  PyPI wheels: {cuda}")
        for floor in option["floors"]:
            word = {"requires": "needs", "warns": "supports only", "prefers": "works best with"}.get(floor["kind"], "")
            lines.append(f"  floor: {floor['feature']} {word} {floor['subject']}{floor['spec']} ({floor['source']})")
        if number == 1:
            for why in option["why_not_nearer"]:
                lines.append(f"  why not nearer: {why}")
    if result.get("pip_check"):
        lines += _pip_lines(result["pip_check"])
    for problem in result["problems"]:
        lines.append(
            f"blocked: {problem['reason']}"
            + (f" (constraint: {problem['constraint']})" if problem["constraint"] else "")
        )
    if result["status"] == "impossible":
        for conflict in result["conflicts"]:
            lines.append(f"blocked: {conflict}")
        if result["drop"]:
            lines.append("drop one of these to make it possible: " + ", ".join(result["drop"]))
        else:
            lines.append("no single constraint to drop makes it possible; drop a goal or widen --python")
    if result["search_exhausted"]:
        lines.append("note: the search stopped at its budget; wider options may exist")
    fetched = result["matrix"]["fetched"]
    lines.append(
        f"how: recorded release metadata and source floors (scripts/stack/matrix.json, fetched {fetched}); "
        + ("pip's resolver checked option 1 (--check-with-pip)" if result.get("pip_check") else "pip is not run")
    )
    return "\n".join(lines) + "\n"


def _pip_lines(check: Dict[str, Any]) -> List[str]:
    """What pip's resolver made of option 1 (``--check-with-pip``)."""
    lines = ["", f"pip check (option 1; contacted the package index): {check['command']}"]
    if check["status"] == "failed":
        return [*lines, f"  pip could not resolve it: {check['error']}"]
    if check["status"] == "agrees":
        lines.append("  pip picks the plan's release of every package in the set")
    for line in check["differs"]:
        lines.append(f"  DIFFERS: {line}")
    stack = ", ".join(f"{k} {check['resolved'][k]}" for k in STACK if k in check["resolved"])
    lines.append(f"  pip would install: {stack}")
    return lines
