"""Words of the shell commands the scripts print, quoted so the line runs as printed when pasted into a POSIX shell.

Standard library only.
"""

from __future__ import annotations

import shlex

__all__ = ["shell_word"]


def shell_word(text: str) -> str:
    """``text`` as one shell word. A leading ``~/`` (a path shown under the home folder) stays outside the quotes,
    since a quoted tilde is not expanded: ``~/my env/bin/python`` becomes ``~/'my env/bin/python'``."""
    if text == "~":
        return text
    if text.startswith("~/"):
        rest = text[2:]
        return "~/" + shlex.quote(rest) if rest else "~/"
    return shlex.quote(text)
