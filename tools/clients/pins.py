"""The agent clients the check installs, pinned in one place with the date they were last checked."""

from __future__ import annotations

from typing import Iterable

# Last run against these releases (npm `latest` on that day). Bump the versions and the date together.
CHECKED = "2026-12-02"
CLIENTS = {
    "claude": ("@anthropic-ai/claude-code", "2.1.332"),
    "codex": ("@openai/codex", "0.171.0"),
    "gemini": ("@google/gemini-cli", "0.61.0"),
    "skills": ("skills", "1.7.4"),
}
# Claude Code 2.1 and the skills CLI 1.7 declare node >= 22; the npm `node` package brings one into the prefix.
NODE = ("node", "22.23.3")


NEEDS_NODE = frozenset({"claude", "skills"})


def npm_specs(clients: Iterable[str] = tuple(CLIENTS)) -> list[str]:
    """``name@version`` for the packages these clients need (all of them by default), the newer node included."""
    keys = [key for key in CLIENTS if key in set(clients)]
    packages = [CLIENTS[key] for key in keys] + ([NODE] if NEEDS_NODE & set(keys) else [])
    return [f"{name}@{version}" for name, version in packages]


def versions_line() -> str:
    """``Claude Code 2.1.332, Codex CLI 0.171.0, ...`` for the report header."""
    labels = {"claude": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI", "skills": "skills CLI"}
    return ", ".join(f"{labels[key]} {version}" for key, (_, version) in CLIENTS.items())
