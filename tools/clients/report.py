"""Judge each route and render the results: text table, the README's Markdown table, JSON."""

from __future__ import annotations

from typing import NamedTuple

from clients import pins
from clients.observe import Copy, Listing
from clients.routes import PLUGIN_SKILL, SKILL

# Clients with a setting that keeps the model from picking the skill on its own.
HAS_INVOCATION_SETTING = {"claude": "disable-model-invocation", "codex": "allow_implicit_invocation", "gemini": ""}
LABELS = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI", "skills": "skills CLI"}


class ClientView(NamedTuple):
    client: str
    listing: Listing


class RouteResult(NamedTuple):
    key: str
    client: str
    label: str
    copies: list[Copy]
    views: list[ClientView]
    warnings: list[str]
    failed_step: bool


def problems(result: RouteResult) -> list[str]:
    """Why a route is not right; empty when it is."""
    found: list[str] = []
    if result.failed_step:
        found.append("a step failed")
    real = [copy for copy in result.copies if not copy.linked]
    if not result.copies:
        found.append("nothing installed")
    for copy in result.copies:
        if copy.outside:
            found.append(f"{copy.where}: {len(copy.outside)} entries outside the skill")
    if len(real) > 1:
        found.append(f"{len(real)} skill folders")
    for view in result.views:
        names = view.listing.registered
        if names not in ([SKILL], [PLUGIN_SKILL]):
            found.append(f"{LABELS[view.client]} registers {len(names)}: {', '.join(names) or 'none'}")
        if HAS_INVOCATION_SETTING[view.client] and view.listing.model_visible:
            found.append(f"{LABELS[view.client]} shows the model {', '.join(view.listing.model_visible)}")
    return found


def short_problems(result: RouteResult) -> list[str]:
    """The table's verdict: a few words per kind of problem."""
    found: list[str] = []
    if result.failed_step:
        found.append("install fails")
    if any(copy.outside for copy in result.copies):
        found.append("copies development files")
    for view in result.views:
        count = len(view.listing.registered)
        if view.listing.registered not in ([SKILL], [PLUGIN_SKILL]):
            found.append(
                f"{LABELS[view.client]}: {count} skills" if count != 1 else f"{LABELS[view.client]}: wrong name"
            )
        if HAS_INVOCATION_SETTING[view.client] and view.listing.model_visible:
            found.append(f"{LABELS[view.client]}: model sees it")
    return found


def _size(size: int) -> str:
    return f"{size / 1024:.0f} kB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MB"


def copies_cell(copies: list[Copy]) -> str:
    if not copies:
        return "none"
    cells = []
    for copy in copies:
        kind = f"link to {copy.linked}" if copy.linked else f"{copy.files} files, {_size(copy.size)}"
        cells.append(f"`{copy.where}` ({kind})")
    return "; ".join(cells)


def outside_cell(copies: list[Copy]) -> str:
    outside = sorted({entry for copy in copies for entry in copy.outside})
    if not outside:
        return "none"
    shown = ", ".join(f"`{entry}`" for entry in outside[:6])
    return shown + (f" +{len(outside) - 6}" if len(outside) > 6 else "")


def views_cell(views: list[ClientView], attribute: str) -> str:
    cells = []
    for view in views:
        names = getattr(view.listing, attribute)
        text = ", ".join(f"`{name}`" for name in names) if names else "none"
        cells.append(f"{LABELS[view.client]}: {text}" if len(views) > 1 else text)
    return "; ".join(cells)


def markdown(results: list[RouteResult], kept: frozenset) -> str:
    lines = [
        f"Checked {pins.CHECKED} with {pins.versions_line()} (written by `tools/check_clients.py --markdown`), each "
        "route in a fresh home, from a clean clone:",
        "",
        "| client | route | in this README | installed | outside the skill | skills registered | model-visible "
        "| verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        short = short_problems(result)
        verdict = "**right**" if not problems(result) else "no: " + "; ".join(short or problems(result))
        lines.append(
            f"| {LABELS[result.client]} | `{result.label}` | {'yes' if result.key in kept else 'no'} "
            f"| {copies_cell(result.copies)} | {outside_cell(result.copies)} "
            f"| {views_cell(result.views, 'registered')} | {views_cell(result.views, 'model_visible')} | {verdict} |"
        )
    return "\n".join(lines)


def text(results: list[RouteResult]) -> str:
    out = [f"client check {pins.CHECKED}: {pins.versions_line()}"]
    for result in results:
        found = problems(result)
        out.append(f"{result.key}: {'right' if not found else 'NOT RIGHT'}  ({result.label})")
        out.append(f"  installed: {copies_cell(result.copies)}; outside the skill: {outside_cell(result.copies)}")
        for view in result.views:
            out.append(
                f"  {LABELS[view.client]}: registered {', '.join(view.listing.registered) or 'none'}; "
                f"model-visible {', '.join(view.listing.model_visible) or 'none'}"
                + ("".join(f"; {note}" for note in view.listing.notes))
            )
        out += [f"  warning: {line}" for line in result.warnings]
        out += [f"  problem: {line}" for line in found]
    return "\n".join(out)


def as_json(results: list[RouteResult]) -> dict:
    return {
        "checked": pins.CHECKED,
        "clients": {key: {"package": package, "version": version} for key, (package, version) in pins.CLIENTS.items()},
        "routes": [
            {
                "route": result.key,
                "client": result.client,
                "command": result.label,
                "copies": [copy._asdict() for copy in result.copies],
                "clients_view": {
                    view.client: {
                        "registered": view.listing.registered,
                        "model_visible": view.listing.model_visible,
                        "notes": view.listing.notes,
                    }
                    for view in result.views
                },
                "warnings": result.warnings,
                "failed_step": result.failed_step,
                "problems": problems(result),
            }
            for result in results
        ],
    }


def from_json(data: dict) -> list[RouteResult]:
    """The results of a saved ``--json`` report, to render them again (``--render``)."""
    return [
        RouteResult(
            route["route"],
            route["client"],
            route["command"],
            [Copy(**copy) for copy in route["copies"]],
            [
                ClientView(client, Listing(view["registered"], view["model_visible"], view.get("notes", [])))
                for client, view in route["clients_view"].items()
            ],
            route["warnings"],
            route["failed_step"],
        )
        for route in data["routes"]
    ]
