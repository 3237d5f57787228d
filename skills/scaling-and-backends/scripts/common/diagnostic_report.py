"""What a command accepts as a diagnostic report (``--report FILE``): the JSON object that this bundle's
``check_optional_backends.py --json`` writes, with its ``tool`` name and exactly its ``schema_version``.

A report of another schema may keep the same field names with other meanings, so it is refused with the command
that writes a readable one, never read by guesswork. ``compare_nodes.py`` applies the same rule with its own wording
(``nodes/load.py``). Standard library only.
"""

from __future__ import annotations

from typing import Any, Optional

from common.values import short

__all__ = ["DIAGNOSTIC_SCHEMA_VERSION", "DIAGNOSTIC_TOOL", "report_problem"]

DIAGNOSTIC_TOOL = "check_optional_backends"  # diagnostic/base.py TOOL
DIAGNOSTIC_SCHEMA_VERSION = 1  # diagnostic/base.py SCHEMA_VERSION
WRITE_ONE = "write one with this bundle's: python3 scripts/check_optional_backends.py --json > report.json"


def report_problem(data: Any) -> Optional[str]:
    """Why ``data`` (parsed JSON) is not a report this bundle reads, or None when it is one."""
    if not isinstance(data, dict):
        return f"not a check_optional_backends.py --json report (a JSON {type(data).__name__}); {WRITE_ONE}"
    tool = data.get("tool")
    if tool != DIAGNOSTIC_TOOL:
        what = f"tool {short(tool)}" if tool is not None else "no 'tool' field"
        return f"not a check_optional_backends.py --json report ({what}); {WRITE_ONE}"
    version = data.get("schema_version")
    if type(version) is not int or version != DIAGNOSTIC_SCHEMA_VERSION:  # true and 1.0 equal 1; none is written
        return (
            f"schema_version {short(version)}, and this bundle reads schema_version {DIAGNOSTIC_SCHEMA_VERSION}; "
            f"{WRITE_ONE}"
        )
    return None
