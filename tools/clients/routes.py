"""Every install route checked: the commands a user types, and which clients then read the result."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Callable, NamedTuple

from clients.sandbox import Home, Ran

SKILL = "scaling-and-backends"
PLUGIN_SKILL = f"{SKILL}:{SKILL}"
# The README's plain-copy block, line for line (tests/test_clients_routes.py keeps the two equal); run in the checkout.
COPY_COMMANDS = (
    "mkdir -p ~/.claude/skills",
    "cp -R skills/scaling-and-backends ~/.claude/skills/",
    "find ~/.claude/skills/scaling-and-backends -name __pycache__ -type d -prune -exec rm -rf {} +",
)
# Client lines that describe this sandbox, not the skill (temporary home, no bubblewrap or ripgrep, no trust).
NOISE = (
    "could not create PATH aliases",
    "bubblewrap",
    "Ripgrep is not available",
    "untrusted folder",
    "folder is not trusted",
    "EBADENGINE",
)
CHEVRON = "\u276f "  # the marker Claude Code's validator starts each finding with
_WARN_RE = re.compile(r"\bwarn|⚠|\berror\b|\bfailed\b|not found|skipping|refus", re.I)
# Lines that quote a skill's description (the clients echo it while installing) are not warnings.
_DESCRIPTION_RE = re.compile(r"^(\* )?[a-z-]+: (Use|Read) |^(Use|Read) when |^Read before ")


class Route(NamedTuple):
    key: str
    client: str  # the client whose command installs (or "tool" for tools/install_skill.py)
    label: str  # the command as a user would type it, with <repo> for the checkout
    readers: tuple  # clients whose view of the result is checked
    steps: Callable[[Home, Path], list]
    full: str = ""  # the commands as run, flags included (``--list-routes``), when they differ from the label


def _tool(agent: str) -> Callable[[Home, Path], list]:
    def steps(home: Home, src: Path) -> list:
        return [home.run([sys.executable, str(src / "tools" / "install_skill.py"), "--agent", agent])]

    return steps


def _copy(home: Home, src: Path) -> list:
    script = f"cd {shlex.quote(str(src))} && " + " && ".join(COPY_COMMANDS)
    return [home.run(["bash", "-c", script])]


def _claude_plugin(home: Home, src: Path) -> list:
    return [
        home.run(["claude", "plugin", "validate", str(src)]),
        home.run(["claude", "plugin", "marketplace", "add", str(src)]),
        home.run(["claude", "plugin", "install", f"{SKILL}@{SKILL}"]),
    ]


def _codex_plugin(home: Home, src: Path) -> list:
    return [
        home.run(["codex", "plugin", "marketplace", "add", str(src)]),
        home.run(["codex", "plugin", "add", f"{SKILL}@{SKILL}"]),
    ]


def _gemini(*args: str, stdin: str = "") -> Callable[[Home, Path], list]:
    def steps(home: Home, src: Path) -> list:
        return [home.run(["gemini", *[arg.replace("<repo>", str(src)) for arg in args]], stdin=stdin)]

    return steps


def _skills_cli(home: Home, src: Path) -> list:
    agents = ["-a", "claude-code", "-a", "codex", "-a", "gemini-cli"]
    return [home.run(["skills", "add", str(src), "-g", "-y", *agents], timeout=180)]


ROUTES = (
    Route("tool-claude", "claude", "python3 tools/install_skill.py --agent claude", ("claude",), _tool("claude")),
    Route("copy-claude", "claude", "cp -R skills/scaling-and-backends ~/.claude/skills/", ("claude",), _copy),
    Route(
        "claude-plugin",
        "claude",
        "claude plugin marketplace add <repo>; claude plugin install",
        ("claude",),
        _claude_plugin,
        "claude plugin validate <repo>; claude plugin marketplace add <repo>; "
        "claude plugin install scaling-and-backends@scaling-and-backends",
    ),
    Route("tool-codex", "codex", "python3 tools/install_skill.py --agent codex", ("codex",), _tool("codex")),
    Route(
        "codex-plugin",
        "codex",
        "codex plugin marketplace add <repo>; codex plugin add",
        ("codex",),
        _codex_plugin,
        "codex plugin marketplace add <repo>; codex plugin add scaling-and-backends@scaling-and-backends",
    ),
    Route("tool-gemini", "gemini", "python3 tools/install_skill.py --agent gemini", ("gemini",), _tool("gemini")),
    Route(
        "gemini-skills-install",
        "gemini",
        "gemini skills install <repo>/skills/scaling-and-backends",
        ("gemini",),
        _gemini("skills", "install", "<repo>/skills/scaling-and-backends", "--consent"),
        "gemini skills install <repo>/skills/scaling-and-backends --consent",
    ),
    Route(
        "gemini-skills-link",
        "gemini",
        "gemini skills link <repo>/skills/scaling-and-backends",
        ("gemini",),
        _gemini("skills", "link", "<repo>/skills/scaling-and-backends", "--consent"),
        "gemini skills link <repo>/skills/scaling-and-backends --consent",
    ),
    Route(
        "gemini-extension",
        "gemini",
        "gemini extensions install <repo>",
        ("gemini",),
        _gemini("extensions", "install", "<repo>", "--consent", stdin="y\n"),
        "gemini extensions install <repo> --consent (answering y to the trust question)",
    ),
    Route(
        "skills-cli",
        "skills",
        "npx skills add <repo>",
        ("claude", "codex", "gemini"),
        _skills_cli,
        "skills add <repo> -g -y -a claude-code -a codex -a gemini-cli",
    ),
)
ROUTE_KEYS = tuple(route.key for route in ROUTES)


def warnings(runs: list[Ran], src: Path) -> list[str]:
    """Every line a step printed that warns or fails, minus sandbox noise, with the checkout shown as <repo>."""
    found: list[str] = []
    for ran in runs:
        in_findings = False
        for raw in ran.output.splitlines():
            line = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw).strip(" │┌└◇●■▲|")
            if line.startswith("⚠ Found"):
                in_findings = True  # Claude Code's validator: the findings follow as "<U+276F> field: message" lines
                continue
            if in_findings and line.startswith(CHEVRON):
                line = "⚠ " + line[2:]
            elif line:
                in_findings = False
            quoted = _DESCRIPTION_RE.search(line)
            if line and _WARN_RE.search(line) and not quoted and not any(noise in line for noise in NOISE):
                shown = line.replace(str(src), "<repo>")
                if shown not in found:
                    found.append(shown[:200])
        if ran.returncode != 0:
            found.append(f"exit {ran.returncode}: {' '.join(ran.argv[:4])}".replace(str(src), "<repo>"))
    return found
