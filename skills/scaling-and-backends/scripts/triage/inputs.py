"""The triage's one typed request, built from the command's flag values (never from a parsed Namespace).

Releases come, in this order, from ``--trl``/``--vllm``, from a diagnostic report (``--report``, the JSON of
``check_optional_backends.py --json``), then from what the log prints."""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from common.troubleshooting import ReleaseError, release_value
from common.troubleshooting import report_releases as read_report_releases

MAX_MIB = 4096
DEFAULT_MIB = 1024
MAX_SOURCES = 256
DEFAULT_DEADLINE_S = 20.0
MAX_DEADLINE_S = 3600.0


class TriageInputError(Exception):
    """A usage error or an input that cannot be read (exit 2); the message names the flag or file."""


class Request(NamedTuple):
    paths: Tuple[str, ...]  # "-" is standard input
    releases: Dict[str, str]  # given by flags or the report: package -> version
    release_origin: Dict[str, str]  # package -> "--trl" | "--report"
    json: bool
    verbose: bool
    limit_bytes: int
    deadline_s: float = DEFAULT_DEADLINE_S  # the reading stops then, all logs together, and says so


def report_releases(path: str) -> Dict[str, str]:
    """trl and vllm versions from a diagnostic JSON report (``packages.<id>.version``)."""
    try:
        return read_report_releases(path)
    except ReleaseError as error:
        raise TriageInputError(str(error)) from None


def build_request(
    logs: Sequence[str],
    trl: Optional[str],
    vllm: Optional[str],
    report: Optional[str],
    max_mib: int,
    json: bool,
    verbose: bool,
    deadline: float = DEFAULT_DEADLINE_S,
) -> Request:
    """The request from the command's values; raises :class:`TriageInputError` for a bad one."""
    paths: List[str] = list(logs or ["-"])
    if len(paths) > MAX_SOURCES:
        raise TriageInputError(f"at most {MAX_SOURCES} log files per run, not {len(paths)}")
    if paths.count("-") > 1:
        raise TriageInputError("standard input ('-') can be named once")
    releases: Dict[str, str] = {}
    origin: Dict[str, str] = {}
    if report:
        for package, version in report_releases(report).items():
            releases[package], origin[package] = version, "--report"
    for package, value, flag in (("trl", trl, "--trl"), ("vllm", vllm, "--vllm")):
        try:
            version = release_value(value, flag)
        except ReleaseError as error:
            raise TriageInputError(str(error)) from None
        if version:
            releases[package], origin[package] = version, flag
    if not isinstance(max_mib, int) or not 1 <= max_mib <= MAX_MIB:
        raise TriageInputError(f"--max-mib must be between 1 and {MAX_MIB}")
    if not isinstance(deadline, (int, float)) or not 0 < deadline <= MAX_DEADLINE_S:
        raise TriageInputError(f"--deadline must be more than 0 and at most {MAX_DEADLINE_S:g} seconds")
    return Request(tuple(paths), releases, origin, bool(json), bool(verbose), max_mib * 1024 * 1024, float(deadline))
