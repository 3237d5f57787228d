"""The one reading discipline of the bundle's scripts: files and subprocess output, each bounded (HTTP bodies:
:mod:`common.http`).

- :func:`read_bytes` / :func:`read_text` read a regular file only (a FIFO, device, directory or socket is refused
  after a ``stat`` and again after opening, and the open is non-blocking, so a FIFO can never hang the reader),
  never more than ``limit`` bytes, and say whether they truncated.
- :func:`run_capped` runs a command with a byte cap per stream and a deadline; on either overrun its whole process
  group is killed, and a grandchild that keeps the pipes open cannot hold the reader. :func:`start_command` and
  :func:`finish_command` are its two halves, for a caller that works while the command runs.
- :func:`measure_json` / :func:`measure_yaml` measure a structured document before any recursive parser sees it:
  nesting depth by one linear scan of the text (no recursion), and for YAML the count of anchors and aliases, each
  against one limit; a document over a limit raises :class:`StructureError` naming that limit.

Standard library only; no function here writes a file or opens a socket it was not asked to.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import stat
import sys
import time
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from common.lazy_re import lazy

__all__ = [
    "MAX_ALIASES",
    "MAX_ANCHORS",
    "MAX_NESTING",
    "CommandResult",
    "InputError",
    "ReadResult",
    "Started",
    "StructureError",
    "file_size",
    "finish_command",
    "iter_chunks",
    "iter_stdin_chunks",
    "measure_json",
    "measure_yaml",
    "read_bytes",
    "read_text",
    "read_text_or_none",
    "read_whole",
    "run_capped",
    "start_command",
]

DEFAULT_FILE_LIMIT = 4_000_000
DEFAULT_OUTPUT_LIMIT = 1_000_000
_CHUNK = 65536


# --------------------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------------------


class InputError(Exception):
    """An input that cannot be read. ``reason`` is a short phrase ("a FIFO, not a regular file"), never the data.

    ``status`` says which kind of failure it is, for a JSON report: ``not_found`` (no such file), ``not_regular``
    (a directory, FIFO, device or socket), ``too_large`` (over the byte limit; never parsed as a prefix) or
    ``unreadable`` (anything else: permissions, a link loop, an invalid path)."""

    def __init__(self, path: str, reason: str, status: str = "unreadable") -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.status = status


class ReadResult(NamedTuple):
    """Bytes read from a file; ``truncated`` when the file held more than the limit."""

    data: bytes
    truncated: bool

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _os_reason(error: OSError) -> str:
    if error.errno == errno.ENOENT:
        return "no such file"
    if error.errno == errno.ELOOP:
        return "symbolic link loop"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if error.errno == errno.ENOTDIR:
        return "a path component is not a directory"
    if error.errno == errno.ENAMETOOLONG:
        return "file name too long"
    return error.strerror or type(error).__name__


def _os_status(error: OSError) -> str:
    return "not_found" if error.errno == errno.ENOENT else "unreadable"


def _open_regular(path: str) -> Tuple[int, int]:
    """A read-only descriptor of the regular file ``path`` and its size; raises :class:`InputError` otherwise."""
    if "\0" in path:
        raise InputError(path.replace("\0", "\\0"), "the path contains a NUL byte")
    try:
        before = os.stat(path)
    except OSError as error:
        raise InputError(path, _os_reason(error), _os_status(error)) from None
    except ValueError:
        raise InputError(path, "invalid path") from None
    if not stat.S_ISREG(before.st_mode):
        raise InputError(path, f"{_kind(before.st_mode)}, not a regular file", "not_regular")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        raise InputError(path, _os_reason(error), _os_status(error)) from None
    try:
        after = os.fstat(fd)
    except OSError as error:
        os.close(fd)
        raise InputError(path, _os_reason(error), _os_status(error)) from None
    if not stat.S_ISREG(after.st_mode):  # swapped between stat and open
        os.close(fd)
        raise InputError(path, f"{_kind(after.st_mode)}, not a regular file", "not_regular")
    return fd, after.st_size


def iter_chunks(path: str, chunk: int = 1 << 20, limit: int = DEFAULT_FILE_LIMIT, start: int = 0) -> Iterator[bytes]:
    """The regular file ``path`` in pieces of at most ``chunk`` bytes, from byte ``start``, never more than ``limit``
    bytes in all: streaming, so memory stays at one piece whatever the file's size. Raises :class:`InputError`
    (before the first piece) for anything but a readable regular file."""
    path = os.fspath(path)
    fd, _size = _open_regular(path)
    return _iter_fd(fd, path, chunk, limit, start, close=True)


def file_size(path: str) -> int:
    """The size of the regular file ``path``; raises :class:`InputError` for anything else."""
    fd, size = _open_regular(os.fspath(path))
    os.close(fd)
    return size


def iter_stdin_chunks(chunk: int = 1 << 20, limit: int = DEFAULT_FILE_LIMIT) -> Iterator[bytes]:
    """Standard input in pieces, at most ``limit`` bytes in all. A terminal is refused (it would wait for typing)."""
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else -1
    except (AttributeError, ValueError, OSError):
        fd = -1
    if fd < 0:
        raise InputError("<stdin>", "no standard input")
    if os.isatty(fd):
        raise InputError("<stdin>", "a terminal: pipe a log in or name log files")
    return _iter_fd(fd, "<stdin>", chunk, limit, 0, close=False)


def _iter_fd(fd: int, path: str, chunk: int, limit: int, start: int, close: bool) -> Iterator[bytes]:
    try:
        if start:
            os.lseek(fd, start, os.SEEK_SET)
        left = limit
        while left > 0:
            try:
                data = os.read(fd, min(chunk, left))
            except BlockingIOError:
                if close:
                    raise InputError(path, "would block (not a regular file)") from None
                import select  # a non-blocking pipe handed to us: wait for it, never spin

                select.select([fd], [], [], 1.0)
                continue
            except OSError as error:
                raise InputError(path, _os_reason(error), _os_status(error)) from None
            if not data:
                return
            left -= len(data)
            yield data
    finally:
        if close:
            os.close(fd)


def read_bytes(path: str, limit: int = DEFAULT_FILE_LIMIT) -> ReadResult:
    """At most ``limit`` bytes of the regular file ``path``. Raises :class:`InputError` for anything else."""
    path = os.fspath(path)
    fd, _ = _open_regular(path)
    try:
        chunks: List[bytes] = []
        size = 0
        while size <= limit:
            try:
                chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            except BlockingIOError:
                raise InputError(path, "would block (not a regular file)", "not_regular") from None
            except OSError as error:
                raise InputError(path, _os_reason(error)) from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        return ReadResult(data[:limit], True)
    return ReadResult(data, False)


def read_text(path: str, limit: int = DEFAULT_FILE_LIMIT) -> str:
    """UTF-8 text (invalid bytes replaced) of a regular file; raises :class:`InputError`, also when it is larger
    than ``limit`` bytes (use :func:`read_bytes` to accept a truncated prefix)."""
    return read_whole(path, limit).text()


def read_whole(path: str, limit: int = DEFAULT_FILE_LIMIT) -> ReadResult:
    """:func:`read_bytes`, but a file over ``limit`` bytes raises :class:`InputError` (status ``too_large``), so a
    caller can never parse a truncated prefix."""
    result = read_bytes(path, limit)
    if result.truncated:
        raise InputError(path, f"too large (larger than {limit:,} bytes)", "too_large")
    return result


def read_text_or_none(path: str, limit: int = DEFAULT_FILE_LIMIT) -> Optional[str]:
    """:func:`read_text`, or ``None`` when the file is missing, not regular, unreadable or over ``limit``."""
    try:
        return read_text(path, limit)
    except InputError:
        return None


# --------------------------------------------------------------------------------------------------------------
# Structured documents, measured before a parser recurses into them
# --------------------------------------------------------------------------------------------------------------

MAX_NESTING = 64  # no config, report or answer this bundle reads nests deeper; parsers recurse once per level
MAX_ANCHORS = 100  # YAML anchors (&name); Accelerate and TRL configs use none
MAX_ALIASES = 100  # YAML aliases (*name): each can expand a whole subtree, so they are bounded before parsing
MAX_COLLECTIONS = 20_000  # a sound backstop: every opening bracket and inline "- " counted, closing ones ignored


class StructureError(ValueError):
    """A document refused before parsing. ``limit`` names the bound: nesting, anchors, aliases or collections."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


_JSON_STRING = lazy(r'"[^"\\]*(?:\\[\s\S]?[^"\\]*)*(?:"|\Z)')
_BRACKETS_ONLY = bytes(set(range(256)) - set(b"[]{}"))
_DELTA = [0] * 256
_DELTA[ord("[")] = _DELTA[ord("{")] = 1
_DELTA[ord("]")] = _DELTA[ord("}")] = -1


def _bracket_depth(text: str) -> int:
    """The deepest bracket nesting of ``text`` (strings already removed): one pass, no recursion, no Python loop
    per character."""
    brackets = text.encode("utf-8", "surrogatepass").translate(None, _BRACKETS_ONLY)
    if not brackets:
        return 0
    return max(0, max(itertools.accumulate(map(_DELTA.__getitem__, brackets))))


def _too_deep(depth: int, max_depth: int) -> StructureError:
    return StructureError(f"nests deeper than {max_depth} levels (at least {depth:,})", "nesting")


def measure_json(data: Union[str, bytes], max_depth: int = MAX_NESTING) -> None:
    """Raise :class:`StructureError` when the JSON text ``data`` nests deeper than ``max_depth``. Linear in its
    length: strings are skipped by one regular expression that cannot backtrack, brackets counted in C."""
    text = data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else data
    if "[" not in text and "{" not in text:
        return
    depth = _bracket_depth(_JSON_STRING.sub("", text))
    if depth > max_depth:
        raise _too_deep(depth, max_depth)


# A quoted scalar can start only where a token starts: after a line start, a space or a flow indicator.
_YAML_QUOTED = lazy(
    r"""(?:(?<=[\s\[{,:])|^)(?:'[^']*(?:''[^']*)*(?:'|\Z)|"[^"\\]*(?:\\[\s\S]?[^"\\]*)*(?:"|\Z))""",
    re.MULTILINE,
)
_YAML_COMMENT = lazy(r"(?:(?<=\s)|^)#[^\n]*", re.MULTILINE)
_YAML_ANCHOR = lazy(r"(?:(?<=[\s\[{,])|^)&[^\s\[\]{},]+", re.MULTILINE)
_YAML_ALIAS = lazy(r"(?:(?<=[\s\[{,])|^)\*[^\s\[\]{},]+", re.MULTILINE)
_YAML_INLINE_ENTRY = lazy(r"[-?:][ \t]+(?=[-?][ \t]|[-?]$)", re.MULTILINE)
_YAML_LINE_LEAD = lazy(r"[ ]*((?:[-?][ \t]+)*)")


def measure_yaml(
    text: str, max_depth: int = MAX_NESTING, max_anchors: int = MAX_ANCHORS, max_aliases: int = MAX_ALIASES
) -> None:
    """Raise :class:`StructureError` when the YAML ``text`` nests deeper than ``max_depth`` (block indentation,
    inline ``- - -`` entries and flow brackets together), holds more than ``max_anchors`` anchors or
    ``max_aliases`` aliases, or more than :data:`MAX_COLLECTIONS` collection openings in all (a bound that holds
    whatever the scan takes for a string). Linear in the length of ``text``; nothing is parsed."""
    bare = _YAML_COMMENT.sub("", _YAML_QUOTED.sub("''", text))
    flow = _bracket_depth(bare)
    if flow > max_depth:
        raise _too_deep(flow, max_depth)
    block = 0
    indents: List[int] = []
    for line in bare.split("\n"):
        lead = _YAML_LINE_LEAD.match(line)
        assert lead is not None  # the pattern matches the empty string
        if lead.end() == len(line.rstrip()) and not lead.group(1):
            continue  # blank or comment-only
        indent = len(line) - len(line.lstrip(" "))
        while indents and indents[-1] >= indent:
            indents.pop()
        indents.append(indent)
        entries = lead.group(1).count("-") + lead.group(1).count("?")
        block = max(block, len(indents) + entries)
    if block + flow > max_depth:
        raise _too_deep(block + flow, max_depth)
    anchors = len(_YAML_ANCHOR.findall(text))
    if anchors > max_anchors:
        raise StructureError(f"holds more than {max_anchors} anchors (&name): {anchors:,}", "anchors")
    aliases = len(_YAML_ALIAS.findall(text))
    if aliases > max_aliases:
        raise StructureError(f"holds more than {max_aliases} aliases (*name): {aliases:,}", "aliases")
    openings = text.count("[") + text.count("{") + len(_YAML_INLINE_ENTRY.findall(text))
    if openings > MAX_COLLECTIONS:
        raise StructureError(f"holds more than {MAX_COLLECTIONS:,} collection openings: {openings:,}", "collections")


# --------------------------------------------------------------------------------------------------------------
# Subprocesses
# --------------------------------------------------------------------------------------------------------------


class CommandResult(NamedTuple):
    """What a command printed (each stream capped) and how it ended.

    ``status``: ok | failed (non-zero exit) | timeout | too-large (output cap reached) | not_found (could not start).
    """

    status: str
    returncode: Optional[int]
    stdout: str
    stderr: str
    seconds: float
    truncated: bool = False

    def as_dict(self) -> Dict[str, Any]:
        return {
            "status": self.status,
            "returncode": self.returncode,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "seconds": self.seconds,
            "truncated": self.truncated,
        }


SKIPPED_PATH_ENTRIES: List[str] = []  # PATH entries find_executable skipped (empty or relative), for the report


def find_executable(name: str) -> Optional[str]:
    """The first executable file called ``name`` in an absolute PATH entry, like ``shutil.which`` without
    importing shutil. An empty or relative entry (``::``, ``.``, ``bin``) would run a file from the working folder,
    which a cloned repository can plant: it is skipped and recorded in :data:`SKIPPED_PATH_ENTRIES`."""
    for folder in os.get_exec_path():
        if not os.path.isabs(folder):
            shown = folder or "(empty)"
            if shown not in SKIPPED_PATH_ENTRIES:
                SKIPPED_PATH_ENTRIES.append(shown)
            continue
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _kill_group(process: Any) -> None:
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        with contextlib.suppress(OSError):
            process.kill()


class Started(NamedTuple):
    """A command started by :func:`start_command`, to be read by :func:`finish_command`."""

    process: Any
    start: float

    def cancel(self) -> None:
        """Kill the command's process group and close its pipes, when its answer is no longer wanted."""
        if self.process.poll() is None:
            _kill_group(self.process)
        for stream in (self.process.stdout, self.process.stderr):
            with contextlib.suppress(OSError):
                stream.close()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=1.0)


def start_command(
    argv: Sequence[str], env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None
) -> Union[Started, CommandResult]:
    """Start ``argv`` with no stdin, in its own process group, and return at once: a :class:`Started` whose
    output :func:`finish_command` reads later (other work can run meanwhile), or the ``not_found`` result of a
    command that could not start."""
    import subprocess  # imported here: the default diagnostic may never run a command

    start = time.monotonic()
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,  # closed at once; opening /dev/null would be a write-mode open
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=None if env is None else dict(env),
            cwd=cwd,
        )
    except (OSError, ValueError) as error:
        reason = _os_reason(error) if isinstance(error, OSError) else "invalid argument"
        return CommandResult("not_found", None, "", reason, 0.0)
    with contextlib.suppress(OSError):
        process.stdin.close()
    return Started(process, start)


def finish_command(started: Started, timeout: float, limit: int = DEFAULT_OUTPUT_LIMIT) -> CommandResult:
    """Read a started command's stdout and stderr, at most ``limit`` bytes each, until ``timeout`` seconds after
    it STARTED. On overrun of either, the command's process group is killed and what was read is kept."""
    import selectors
    import subprocess

    process = started.process
    deadline = started.start + max(0.0, float(timeout))
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    buffers: Dict[int, bytearray] = {out_fd: bytearray(), err_fd: bytearray()}
    status: Optional[str] = None
    with selectors.DefaultSelector() as selector:
        for stream in (process.stdout, process.stderr):
            os.set_blocking(stream.fileno(), False)
            selector.register(stream.fileno(), selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                status = "timeout"
                break
            for key, _ in selector.select(min(remaining, 0.5)):
                fd = key.fd
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    selector.unregister(fd)
                    continue
                buffer = buffers[fd]
                buffer += chunk
                if len(buffer) > limit:
                    del buffer[limit:]
                    status = "too-large"
            if status is not None:
                break
    if status is not None:
        _kill_group(process)
    for stream in (process.stdout, process.stderr):
        with contextlib.suppress(OSError):
            stream.close()
    try:
        process.wait(timeout=max(0.1, min(2.0, deadline - time.monotonic() + 1.0)))
    except subprocess.TimeoutExpired:
        _kill_group(process)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=1.0)
        status = status or "timeout"
    if status is None:
        status = "ok" if process.returncode == 0 else "failed"
    out = bytes(buffers[out_fd])
    err = bytes(buffers[err_fd])
    return CommandResult(
        status=status,
        returncode=process.returncode,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        seconds=round(time.monotonic() - started.start, 3),
        truncated=status == "too-large",
    )


def run_capped(
    argv: Sequence[str],
    timeout: float,
    limit: int = DEFAULT_OUTPUT_LIMIT,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
) -> CommandResult:
    """Run ``argv`` with no stdin, reading at most ``limit`` bytes of each of stdout and stderr within ``timeout``
    seconds (:func:`start_command`, then :func:`finish_command`)."""
    started = start_command(argv, env, cwd)
    return started if isinstance(started, CommandResult) else finish_command(started, timeout, limit)
