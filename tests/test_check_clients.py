"""tools/check_clients.py against the real clients from npm (skipped without npm or the registry), and the docs
table it wrote (always).

The npm install is cached in the temporary folder, keyed by the pinned versions, so only the first run on a machine
pays for it (about 30 s); the route checked live here (the install tool for Codex: Codex answers offline, in about
5 s) stands for the rest, which take minutes (Claude Code and Gemini CLI start once per question) and are in the
committed report.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))

from clients import pins
from clients.routes import ROUTES

README = (REPO_ROOT / "docs" / "clients.md").read_text(encoding="utf-8")  # the client-check table


def readme_table() -> str:
    match = re.search(r"<!-- client-check: begin -->\n(.*?)<!-- client-check: end -->", README, re.S)
    assert match, "docs/clients.md has no client-check table"
    return match.group(1)


def test_readme_table_is_the_committed_check_of_the_pinned_clients() -> None:
    table = readme_table()
    assert f"Checked {pins.CHECKED} with {pins.versions_line()}" in table
    saved = json.loads((REPO_ROOT / "tools" / "clients" / "last_check.json").read_text(encoding="utf-8"))
    assert saved["checked"] == pins.CHECKED
    assert {key: value["version"] for key, value in saved["clients"].items()} == {
        key: version for key, (_, version) in pins.CLIENTS.items()
    }
    rendered = subprocess.run(
        [
            sys.executable,
            "-B",
            str(REPO_ROOT / "tools" / "check_clients.py"),
            "--render",
            "tools/clients/last_check.json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=True,
    ).stdout
    assert table.strip() == rendered.strip(), (
        "docs/clients.md table differs from tools/clients/last_check.json: re-render it"
    )
    assert [route["route"] for route in saved["routes"]] == [route.key for route in ROUTES]


def test_every_route_the_readme_keeps_copies_only_the_skill() -> None:
    rows = [line for line in readme_table().splitlines() if line.startswith("| ") and "| yes |" in line]
    assert len(rows) >= 4
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[4] == "none", f"a route the README keeps copies files outside the skill: {row}"


def registry_reachable() -> str:
    """Why the live check cannot run here, or "" when it can."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not on PATH"
    try:
        done = subprocess.run([npm, "ping"], capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "npm ping timed out: the npm registry is not reachable"
    return "" if done.returncode == 0 else "npm ping failed: the npm registry is not reachable"


@pytest.fixture(scope="module")
def live_report() -> dict:
    reason = registry_reachable()
    if reason:
        pytest.skip(f"the client check needs npm and its registry: {reason}")
    key = hashlib.sha256("\n".join(pins.npm_specs()).encode()).hexdigest()[:12]
    prefix = Path(tempfile.gettempdir()) / f"scaling-and-backends-clients-{key}"
    argv = [sys.executable, "-B", str(REPO_ROOT / "tools" / "check_clients.py"), "--json", "--prefix", str(prefix)]
    done = subprocess.run([*argv, "--routes", "tool-codex"], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    if done.returncode == 2:
        pytest.skip(f"the client check could not install the clients: {done.stderr.strip()[-300:]}")
    return {route["route"]: route for route in json.loads(done.stdout)["routes"]}


def test_codex_copy_registers_the_root_and_shows_the_model_none(live_report: dict) -> None:
    route = live_report["tool-codex"]
    assert [copy["outside"] for copy in route["copies"]] == [[]]
    view = route["clients_view"]["codex"]
    assert "scaling-and-backends" in view["registered"]
    assert view["model_visible"] == []
