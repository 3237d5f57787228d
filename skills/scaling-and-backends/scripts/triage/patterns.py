"""What the triage looks for in a line: rank and host prefixes, timestamps, failures, the echoes a failure causes on
other ranks, OOM figures and printed releases. Pure data and small pure functions; no I/O."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

from common.troubleshooting import EXCEPTION_LINE  # the matcher's exception-line form, shared with the lookup

# Byte strings that a line worth reading holds (case-sensitive, searched in bulk over each piece of the log). A line
# without any of them is never decoded. The bulk search costs in proportion to how often a token's FIRST byte occurs
# in the log, so tokens start with capitals or rare bytes where they can (a space or a common lower-case letter
# first would triple the cost). The index's messages that hold none of these add their own (see match.py).
SCAN_TOKENS: Tuple[bytes, ...] = (
    b"Error",
    b"ERROR",
    b"error",  # CUDA error, NCCL error, compiler errors
    b"Exception",
    b"EOF",
    b"Traceback",
    b"Timed out",
    b"Timeout",
    b"timed out",
    b"WARN",
    b"Warning",
    b"Killed",
    b"killed",
    b"Failed",
    b"FAILED",
    b"failed",
    b"Failures:",
    b"SIG",
    b"Signal",
    b"Segmentation",
    b"Root Cause",
    b"Retrying",
    b"OutOfMemory",
    b"OOM",
    b"Out of memory",
    b"CUDA",
    b"Connection",
    b"Cannot",
    b"NCCL WARN",
    b"Broken pipe",
    b"broken pipe",
    b"Abort",
    b"Fatal",
    b"FATAL",
    b"fatal",
    b"CRITICAL",
    b"Version",
    b"version",
    b"exitcode",
)
# Prefixes that name the rank of an interleaved line: torchrun --tee/--log-line-prefix "[rank3]:", "[default3]:",
# Open MPI "[1,3]<stderr>:". The match is stripped before the line is judged.
RANK_PREFIX = re.compile(r"^\[(?:rank|default)([0-9]{1,6})\]:\s?|^\[[0-9]{1,6},([0-9]{1,6})\]<std(?:out|err)>:\s?")
# "host:pid:tid [rank] NCCL ..." (NCCL's own prefix) names the host and the rank.
NCCL_PREFIX = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,62}):([0-9]+):[0-9]+ \[([0-9]{1,6})\] NCCL ")
# "[Rank 3]" / "Rank 3" inside torch's messages.
RANK_IN_TEXT = re.compile(r"\[(?:PG [^\[\]]*)?Rank ([0-9]{1,6})\]|\brank[ =:]+([0-9]{1,6})\b", re.I)

_MONTHS = {
    m: i for i, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1)
}
_ISO = re.compile(r"\b[0-9]{4}-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:[.,]([0-9]{1,9}))?")
_LEVEL_MD = re.compile(
    r"\b(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|WARN)\s+([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?"
)
_GLOG = re.compile(r"\b[IWEF]([0-9]{2})([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{1,9})\b")
_SYSLOG = re.compile(
    r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +([0-9]{1,2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})\b"
)


def timestamp(text: str) -> Optional[float]:
    """Seconds since the start of the year (month, day and time of day; the year is ignored, so that the formats
    of torch, vLLM, Python logging and syslog compare), or None when the line carries no time."""
    for pattern in (_ISO, _GLOG, _LEVEL_MD):
        match = pattern.search(text)
        if match:
            month, day, hour, minute, second, frac = match.groups()
            return _seconds(int(month), int(day), int(hour), int(minute), int(second), frac)
    match = _SYSLOG.search(text)
    if match:
        month, day, hour, minute, second = match.groups()
        return _seconds(_MONTHS[month], int(day), int(hour), int(minute), int(second), None)
    return None


def _seconds(month: int, day: int, hour: int, minute: int, second: int, frac: Optional[str]) -> Optional[float]:
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    value = float((((month * 31 + day) * 24 + hour) * 60 + minute) * 60 + second)
    if frac:
        value += int(frac) / 10 ** len(frac)
    return value


TRACEBACK_START = "Traceback (most recent call last):"

# "A.*B" as "A, then anything without another A, then B": the same lines, but each A is followed once, so a line
# full of A costs its length, not its length times the number of A (the first form restarts at every A).
_UNTIL = "(?:(?!{}).)*?"

# Lines that are only a consequence of a failure elsewhere (another rank died, the launcher tears the job down). They
# are reported as echoes and are the root only when nothing else failed.
ECHO_PATTERNS: Tuple[Tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("watchdog timeout", r"Watchdog caught collective operation timeout|[Ww]atchdog thread terminated"),
        ("watchdog timeout", r"Timeout at NCCL work"),
        ("watchdog timeout", r"ProcessGroupNCCL'?s? watchdog|[Ss]ome NCCL operations have failed or timed out"),
        ("NCCL abort", r"NCCL communicator was aborted|ncclRemoteError"),
        ("NCCL abort", r"remote process exited or there was a network error"),
        ("NCCL abort", r"To avoid data inconsistency, we are taking the entire process down"),
        ("launcher teardown", r"ChildFailedError|torch\.distributed\.elastic\.multiprocessing\.errors"),
        ("launcher teardown", r"elastic\.multiprocessing\.api:failed \(exitcode|Sending process \d+ closing signal"),
        ("launcher teardown", r"SignalException|[Pp]rocess \d+ got signal|[Rr]eceived (?:SIG\w+|\d+ death signal)"),
        (
            "launcher teardown",
            r"Terminating process|failed \(exitcode: |subprocess\.CalledProcessError"
            + _UNTIL.format(r"subprocess\.CalledProcessError")
            + "accelerate",
        ),
        ("launcher teardown", r"^\s*(?:raise )?ChildFailedError|Root Cause \(first observed failure\)"),
        (
            "launcher teardown",
            r"returned non-zero exit status|Command '\[" + _UNTIL.format(r"Command '\[") + r"\]' returned",
        ),
        ("broken connection", r"[Bb]roken pipe|Connection reset by peer|Connection closed by peer|EOFError"),
        (
            "broken connection",
            # A store that cannot bind its port (failed to listen, EADDRINUSE) is a root cause, not an echo.
            r"^(?:(?!DistNetworkError).)*DistNetworkError(?!.*(?:failed to listen|EADDRINUSE))|"
            r"DistStoreError"
            + _UNTIL.format("DistStoreError")
            + r"(?:reset|closed|Broken)|recvValue failed|Socket Timeout",
        ),
        ("keyboard interrupt", r"KeyboardInterrupt"),
    )
)

# Lines that are failures whatever their form.
FAILURE_PATTERNS: Tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        r"CUDA out of memory|OutOfMemoryError|out of memory",
        r"Segmentation fault|core dumped|Fatal Python error|Bus error",
        r"NCCL WARN|NCCL error|ncclSystemError|ncclInternalError|ncclInvalidUsage|ncclUnhandledCudaError",
        r"^\s*(?:ERROR|CRITICAL|FATAL)\b|\b(?:ERROR|CRITICAL)\s+\d{2}-\d{2} |\[(?:ERROR|CRITICAL)[\]|]",
        r"\bKilled\b|exitcode\s*:\s*-9|SIGKILL",
        r"CUDA error:|device-side assert|illegal memory access",
        r"\b[A-Z]\w*(?:Error|Exception): ",  # an exception logged after a prefix
    )
)
WARNING_PATTERN = re.compile(r"Warning\b|\bWARN(?:ING)?\b|\bwarn\(")

# torchelastic's failure table (printed by the launcher when a worker fails).
ELASTIC_ROW = re.compile(r"^\s*(time|host|rank|exitcode|error_file)\s*:\s*(.*?)\s*$")
ELASTIC_ROOT = "Root Cause (first observed failure)"

# OOM figures, torch >= 2.1 and older wording.
_SIZE = r"(?<![0-9.,])([0-9][0-9.,]*)\s*([KMGT]i?B|bytes)"  # a number only from its start: linear in a long one
OOM_FIGURES: Tuple[Tuple[str, re.Pattern[str]], ...] = (
    ("tried_to_allocate", re.compile(r"Tried to allocate " + _SIZE)),
    ("gpu", re.compile(r"GPU (\d+) has a total capacity|\(GPU (\d+);")),
    ("total", re.compile(r"total capacity of " + _SIZE + r"|" + _SIZE + r" total capacity")),
    ("free", re.compile(r"of which " + _SIZE + r" is free|" + _SIZE + r" free")),
    ("in_use", re.compile(r"this process has " + _SIZE + r" memory in use")),
    ("allocated", re.compile(r"Of the allocated memory " + _SIZE + r" is allocated|" + _SIZE + r" already allocated")),
    (
        "reserved",
        re.compile(r"and " + _SIZE + r" is reserved by PyTorch but unallocated|" + _SIZE + r" reserved in total"),
    ),
)

# Releases the log prints: `trl env`, pip freeze lines, vLLM's start-up banner, TRL's vLLM range warning.
PACKAGES = ("trl", "vllm", "transformers", "torch", "accelerate", "peft", "deepspeed")
_LABELS = {"trl": "TRL", "vllm": "vLLM", "transformers": "Transformers", "torch": "PyTorch|torch",
           "accelerate": "Accelerate", "peft": "PEFT", "deepspeed": "DeepSpeed"}  # fmt: skip
_V = r"v?(\d+\.\d+(?:\.\d+)?(?:(?:rc|a|b|\.post|\.dev)\d+)?(?:\+[\w.]+)?)"
RELEASE_PATTERNS: Tuple[Tuple[str, re.Pattern[str]], ...] = tuple(
    [(name, re.compile(r"(?i)(?<![\w-])" + re.escape(name) + r"\s*==\s*" + _V)) for name in PACKAGES]
    + [(name, re.compile(r"(?i)(?:^|[-*\s])(?:" + label + r") version:\s*" + _V)) for name, label in _LABELS.items()]
    + [
        ("vllm", re.compile(r"vLLM API server version " + _V)),
        ("vllm", re.compile(r"Initializing an? (?:V1 )?LLM engine \(" + _V + r"\)")),
        (
            "vllm",
            re.compile(
                r"supports vLLM versions from "
                + _UNTIL.format("supports vLLM versions")
                + r" You have version "
                + _V
                + r" installed"
            ),
        ),
        ("deepspeed", re.compile(r"DeepSpeed info: version=" + _V)),
    ]
)


def releases_in(text: str) -> List[Tuple[str, str]]:
    """(package, version) pairs a line prints."""
    if "ersion" not in text and "==" not in text:
        return []
    found = []
    for name, pattern in RELEASE_PATTERNS:
        match = pattern.search(text)
        if match:
            found.append((name, match.group(1)))
    return found


def oom_figures(text: str) -> Dict[str, str]:
    """The figures of a CUDA OOM message ("2.00 GiB"), keyed tried_to_allocate, gpu, total, free, in_use,
    allocated, reserved; empty for any other line."""
    if "out of memory" not in text and "OutOfMemory" not in text:
        return {}
    figures: Dict[str, str] = {}
    for name, pattern in OOM_FIGURES:
        match = pattern.search(text)
        if not match:
            continue
        groups = [g for g in match.groups() if g is not None]
        figures[name] = groups[0] if name == "gpu" else f"{groups[0]} {groups[1]}"
    return figures


def echo_kind(text: str) -> Optional[str]:
    """The kind of echo a line is (``watchdog timeout``, ``launcher teardown``, …), or None."""
    for name, pattern in ECHO_PATTERNS:
        if pattern.search(text):
            return name
    return None


def is_failure(text: str) -> bool:
    """An exception line or a line of a failure form (OOM, segfault, NCCL WARN, ERROR-level log, kill)."""
    return bool(EXCEPTION_LINE.match(text)) or any(pattern.search(text) for pattern in FAILURE_PATTERNS)


# A whole word that holds a digit. It starts only where a word starts and reads to its first digit, so a long word
# costs its length once (``\S*\d\S*`` backtracked over every suffix of a long word without digits: quadratic).
VARIABLE = re.compile(r"(?<!\S)[^\s\d]*\d\S*")


def shape(text: str) -> str:
    """A line with every word that holds a digit replaced: one key for the same message on every rank and step."""
    return VARIABLE.sub("#", " ".join(text.split()))


def split_rank(text: str) -> Tuple[Optional[int], str]:
    """The rank a line's prefix names (None without one) and the line without the prefix."""
    match = RANK_PREFIX.match(text)
    if not match:
        return None, text
    value = match.group(1) or match.group(2)
    return int(value), text[match.end() :]


def ranks_text(ranks: Sequence[int]) -> str:
    """``0-3, 5`` for a set of ranks."""
    values = sorted(set(ranks))
    parts: List[str] = []
    start = prev = None
    for value in values:
        if start is None:
            start = prev = value
        elif value == prev + 1:  # type: ignore[operator]
            prev = value
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = value
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)
