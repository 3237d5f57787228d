#!/usr/bin/env python3
"""Install the skill through every route, with the real agent clients, and report what each client then shows.

    python3 tools/check_clients.py                      # every route; text report
    python3 tools/check_clients.py --markdown           # the install table of docs/clients.md
    python3 tools/check_clients.py --json --routes tool-codex,skills-cli
    python3 tools/check_clients.py --prefix ~/.cache/sab-clients   # keep the npm install between runs
    python3 tools/check_clients.py --render tools/clients/last_check.json   # that table from a saved --json

It installs the clients pinned in ``tools/clients/pins.py`` from npm into a prefix, snapshots this checkout as a
fresh clone would hold it, and runs each route (``--list-routes``) in a new empty home. For each route it reports the
skill folders installed (files, size, entries outside the skill), the skills each client registers and the ones its
model is shown. No model is contacted: Codex prints its model input offline (``codex debug prompt-input``), and
Claude Code and Gemini CLI send theirs to a loopback stand-in on 127.0.0.1 that records it and answers with an error.
Exit codes: 0 every route the README keeps is right, 1 one is not, 2 npm or the registry is unavailable, bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple, Optional

TOOLS_DIR = Path(__file__).resolve().parent
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

from clients import observe, pins, report  # noqa: E402
from clients.report import ClientView, RouteResult  # noqa: E402
from clients.routes import PLUGIN_SKILL, ROUTE_KEYS, ROUTES, SKILL, Route, warnings  # noqa: E402
from clients.sandbox import Home, NpmUnavailable, install_clients, snapshot_checkout  # noqa: E402

# The routes README.md documents; the others are checked because users try them.
# Every route but the Gemini CLI extension, which the README names as not supported.
README_ROUTES = frozenset(
    {
        "tool-claude",
        "copy-claude",
        "claude-plugin",
        "tool-codex",
        "codex-plugin",
        "tool-gemini",
        "gemini-skills-install",
        "gemini-skills-link",
        "skills-cli",
    }
)
SUB_SKILLS = ("backend-selection", "vllm-reference", "troubleshooting")
OUR_NAMES = frozenset({SKILL, *SUB_SKILLS})


class Request(NamedTuple):
    routes: tuple
    output: str  # "text", "markdown" or "json"
    prefix: Optional[Path]
    checkout: Path
    render: Optional[Path]


def parse_args(argv: Optional[list] = None) -> Request:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--routes", help=f"comma-separated subset of: {', '.join(ROUTE_KEYS)}")
    parser.add_argument("--list-routes", action="store_true", help="print the routes and exit")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="the install table of docs/clients.md")
    form.add_argument("--json", action="store_true", help="machine-readable report")
    parser.add_argument("--prefix", type=Path, help="npm prefix to install the clients into (reused when complete)")
    parser.add_argument(
        "--render", type=Path, help="print the docs/clients.md table of a saved --json report; runs nothing"
    )
    parser.add_argument("--checkout", type=Path, default=TOOLS_DIR.parent, help="the checkout to install from")
    args = parser.parse_args(argv)
    if args.list_routes:
        for route in ROUTES:
            print(f"{route.key:24} {route.full or route.label}")
        raise SystemExit(0)
    keys = tuple(args.routes.split(",")) if args.routes else ROUTE_KEYS
    unknown = [key for key in keys if key not in ROUTE_KEYS]
    if unknown:
        parser.error(f"unknown route {', '.join(unknown)}; --list-routes shows them")
    output = "markdown" if args.markdown else "json" if args.json else "text"
    return Request(keys, output, args.prefix, args.checkout, args.render)


def read_baselines(root: Path, bin_dir: Path, clients: set) -> dict:
    """Each client's own skills, read in an empty home, so only what a route added is reported."""
    empty = Home(root, bin_dir)
    baselines = {}
    if "claude" in clients:
        baselines["claude"] = frozenset(observe.claude_listing(empty, [], frozenset()).model_visible)
    if "codex" in clients:
        codex = observe.codex_listing(empty, frozenset())
        baselines["codex"] = frozenset(codex.registered) | frozenset(codex.model_visible)
    if "gemini" in clients:
        gemini = observe.gemini_listing(empty, frozenset())
        baselines["gemini"] = frozenset(gemini.registered) | frozenset(gemini.model_visible)
    return baselines


def view(client: str, home: Home, baselines: dict) -> observe.Listing:
    if client == "claude":
        candidates = [*OUR_NAMES, *(f"{SKILL}:{name}" for name in OUR_NAMES)]
        return observe.claude_listing(home, sorted(candidates), baselines["claude"])
    if client == "codex":
        return observe.codex_listing(home, baselines["codex"])
    return observe.gemini_listing(home, baselines["gemini"])


def run_route(route: Route, root: Path, bin_dir: Path, src: Path, baselines: dict) -> RouteResult:
    home = Home(root, bin_dir)
    runs = route.steps(home, src)
    copies = observe.find_copies(home.path, OUR_NAMES | {PLUGIN_SKILL})
    views = [ClientView(client, view(client, home, baselines)) for client in route.readers]
    failed = any(ran.returncode != 0 for ran in runs)
    return RouteResult(route.key, route.client, route.label, copies, views, warnings(runs, src), failed)


def main(argv: Optional[list] = None) -> int:
    request = parse_args(argv)
    if request.render is not None:
        try:
            results = report.from_json(json.loads(request.render.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"check_clients: cannot render {request.render}: {error}", file=sys.stderr)
            return 2
        print(report.markdown(results, README_ROUTES))
        return 0
    with tempfile.TemporaryDirectory(prefix="check-clients-") as scratch:
        root = Path(scratch)
        routes = [route for route in ROUTES if route.key in request.routes]
        clients = {name for route in routes for name in (route.client, *route.readers) if name in pins.CLIENTS}
        try:
            bin_dir = install_clients(request.prefix or root / "npm", clients)
        except NpmUnavailable as error:
            print(f"check_clients: {error}", file=sys.stderr)
            return 2
        src = snapshot_checkout(request.checkout, root / "src")
        baselines = read_baselines(root, bin_dir, {client for route in routes for client in route.readers})
        results = [run_route(route, root, bin_dir, src, baselines) for route in routes]
    if request.output == "json":
        print(json.dumps(report.as_json(results), indent=2))
    elif request.output == "markdown":
        print(report.markdown(results, README_ROUTES))
    else:
        print(report.text(results))
    kept = [result for result in results if result.key in README_ROUTES]
    return 1 if any(report.problems(result) for result in kept) else 0


if __name__ == "__main__":
    raise SystemExit(main())
