"""What a command accepts as a diagnostic report (``--report FILE``): the JSON object that this bundle's
``check_optional_backends.py --json`` writes, with its ``tool`` name and exactly its ``schema_version``;
:func:`read_report` reads one (bounded, strict JSON) for ``triage_log.py``, ``find_fix.py`` and ``plan_install.py``.

A report of another schema may keep the same field names with other meanings, so it is refused with the command
that writes a readable one, never read by guesswork. ``compare_nodes.py`` applies the same rule with its own wording
(``nodes/load.py``). Standard library only.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from common.read import InputError, read_bytes
from common.values import InvalidValue, load_json, short

__all__ = [
    "DIAGNOSTIC_SCHEMA_VERSION",
    "DIAGNOSTIC_TOOL",
    "REPORT_LIMIT",
    "ReportError",
    "read_report",
    "report_problem",
]

DIAGNOSTIC_TOOL = "check_optional_backends"  # diagnostic/base.py TOOL
DIAGNOSTIC_SCHEMA_VERSION = 1  # diagnostic/base.py SCHEMA_VERSION
REPORT_LIMIT = 8_000_000  # bytes; a diagnostic report is tens of kB
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


class ReportError(ValueError):
    """A ``--report`` file that cannot be used; the message names the flag and the file."""


def read_report(path: str) -> Dict[str, Any]:
    """The report in ``path``: a regular file of at most :data:`REPORT_LIMIT` bytes, strict JSON within the
    parser's bounds, and a report this bundle reads (:func:`report_problem`); else :class:`ReportError`."""
    try:
        read = read_bytes(path, REPORT_LIMIT)
    except InputError as error:
        raise ReportError(f"--report {path}: {error.reason}") from None
    if read.truncated:
        raise ReportError(f"--report {path}: larger than {REPORT_LIMIT:,} bytes")
    try:
        data = load_json(read.data, f"--report {path}", max_bytes=REPORT_LIMIT)
    except InvalidValue as error:
        raise ReportError(str(error)) from None
    problem = report_problem(data)
    if problem:
        raise ReportError(f"--report {path}: {problem}")
    return data
