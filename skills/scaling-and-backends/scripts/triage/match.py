"""The triage's own use of the troubleshooting index: the grep for an unknown message and the command to run next.
The index, its matcher and the release variants are shared with the lookup: ``common/troubleshooting.py``.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any, Dict, Optional

from common.troubleshooting import EXCEPTION_LINE, SKILL_DIR, runnable

_SAFE_FRAGMENT = re.compile(r"[A-Za-z][A-Za-z ,.:;()/_-]{11,}")


def grep_command(text: str) -> str:
    """``grep -rn -F '<fragment>' troubleshooting/`` for the longest plain run of a message (letters and
    punctuation only: no digits, quotes or shell characters; a run is a piece of the line as it stands, so the
    same grep finds it in the log), or "" when it has none long enough. ``text`` must be scrubbed already: a
    ``<redacted>`` is never part of a run, so the command never holds a secret or a text the log lacks."""
    body = EXCEPTION_LINE.match(text)
    message = body.group("msg") if body and body.group("msg") else text
    runs = [run.strip(" ,.:;") for run in _SAFE_FRAGMENT.findall(message)]
    runs = [run for run in runs if len(run) >= 12]
    if not runs:
        return ""
    best = max(runs, key=len)
    if len(best) > 48:
        best = best[:48].rsplit(" ", 1)[0]
    fragment = shlex.quote(best.strip(" ,.:;"))
    return f"grep -rn -F {fragment} {shlex.quote(os.path.join(SKILL_DIR, 'troubleshooting'))}/"


def next_command(entry: Optional[Dict[str, Any]], root_text: str) -> str:
    """The entry's Verify command with a server address from the failure line filled in; without an entry, the
    diagnostic (it reads the installed releases, which every answer depends on)."""
    commands = [str(c) for c in (entry or {}).get("commands", [])]
    if not commands:
        return runnable("python3 scripts/check_optional_backends.py")
    command = runnable(commands[0])
    url = re.search(r"https?://(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9][A-Za-z0-9.\-]*)", root_text)
    if url:
        host = url.group(1).rstrip(".")
        for placeholder in ("<server-ip>", "<server>", "<replica>"):
            command = command.replace(placeholder, host)
    return command
