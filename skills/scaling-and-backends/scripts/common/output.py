"""What the bundle's scripts print, made safe in one place: secrets scrubbed by value, control characters escaped,
strict JSON, lines a person can scan, and a CLI runner that never shows a traceback.

- :data:`SCRUBBER` (a :class:`Scrubber`) removes known token shapes (Hugging Face, GitHub, ``sk-`` style keys,
  AWS access key ids, Slack, JWTs, bearer values), credentials in anything URL-like (any case, with or without a
  scheme, several ``@``, any character in the password), ``token=``/``key=``/``secret=``/``password=`` values, and
  every secret the script registered (:meth:`Scrubber.add`) in its raw, JSON-escaped, ``repr`` and URL-quoted forms
  and any fragment of 8 or more characters of them. Short common values (``CACHE_KEY=3.11``,
  ``SSH_AUTH_SOCK=/root``) are left alone. It runs LAST, on every string written to stdout or stderr.
- :func:`escape_controls` shows C0/C1 controls, DEL, line/paragraph separators and bidi controls as escapes, so a
  value can never forge a line of the report; :func:`clean_tree` applies it to every string of a report.
- :func:`dumps_strict` writes RFC 8259 JSON (never ``NaN``/``Infinity``; non-string keys become strings).
- :func:`fit_width` wraps text to 100 columns; :func:`clip` shortens a value after scrubbing it.
- :func:`run_cli` runs a ``main``: a closed pipe ends quietly, an internal crash exits 2 with one line, and stdout
  and stderr pass through the scrubber. :func:`progress` shows a line on stderr for a step over 2 s, only on a TTY.

Standard library only.
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import json
import math
import os
import re
import sys
import time
from typing import Any, Callable, Iterator, List, Optional, Sequence, Set, Tuple

__all__ = [
    "REDACTED",
    "SCRUBBER",
    "WIDTH",
    "HelpFormatter",
    "Scrubber",
    "clean_tree",
    "clip",
    "dumps_strict",
    "emit",
    "escape_controls",
    "fit_width",
    "looks_like_secret",
    "one_line",
    "progress",
    "run_cli",
    "scrub",
]

REDACTED = "<redacted>"
WIDTH = 100
MIN_FRAGMENT = 8

# --------------------------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------------------------

_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    + "|".join(
        (
            r"hf_[A-Za-z0-9]{10,}",  # Hugging Face user tokens
            r"api_org_[A-Za-z0-9]{10,}",  # Hugging Face organisation tokens (legacy)
            r"gh[pousr]_[A-Za-z0-9]{16,}",  # GitHub classic, OAuth, user-to-server, server, refresh
            r"github_pat_[A-Za-z0-9_]{16,}",  # GitHub fine-grained
            r"glpat-[A-Za-z0-9_\-]{16,}",  # GitLab
            r"sk-[A-Za-z0-9_\-]{12,}",  # OpenAI / Anthropic style keys (sk-..., sk-proj-..., sk-ant-...)
            r"[sr]k_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe style
            r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}(?![A-Za-z0-9])",  # AWS access key ids
            r"xox[abposre]-[A-Za-z0-9\-]{10,}",  # Slack
            r"AIza[0-9A-Za-z_\-]{30,}",  # Google API keys
            r"npm_[A-Za-z0-9]{30,}",  # npm
            # JWT; starts only where a token run starts, so a long "eyJ_eyJ_..." run is scanned once, not per "eyJ"
            r"(?<![_\-])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
        )
    )
    + ")"
)
# "Authorization: Bearer x", "Proxy-Authorization=Basic x": the value, whatever its shape (placeholders kept).
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:basic|bearer|token|digest)\s+)?)(?!<)"
    r"([^\s\"',;]+)"
)
# A bearer value in prose: needs a digit, so "a bearer token" stays.
_BEARER = re.compile(r"(?i)\b(bearer\s+)(?=[A-Za-z0-9._~+/=\-]*[0-9])([A-Za-z0-9._~+/=\-]{8,})")
# name=value pairs. An exact secret name scrubs any value; a name that only contains one (CACHE_KEY, SSH_AUTH_SOCK)
# scrubs only a value that looks like a secret.
_EXACT_NAME = re.compile(
    r"(?i)(?:token|access[_-]?token|auth[_-]?token|refresh[_-]?token|id[_-]?token|key|api[_-]?key|apikey|secret|"
    r"client[_-]?secret|password|passwd|pwd|sig|signature|x-amz-signature|x-amz-credential)"
)
_SECRET_WORD = re.compile(r"(?i)token|key|secret|password|passwd|pwd|auth|credential")
# One pass over name=value pairs (a linear scan: the name is a whole identifier); the callback decides.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z0-9_\-]+)(?P<sep>[ \t]*(?:=|:(?=[ \t]))[ \t]*[\"']?)"
    r"(?P<value>[^\s&,;\"'<>)\]}]+)"
)
# "--api-key X", "--hf-token X": a flag whose last word names a secret, then its value after a space.
_SECRET_FLAG = re.compile(
    r"(?i)(?<![A-Za-z0-9_\-])(--?(?:[A-Za-z0-9]+[-_])*(?:key|token|secret|password|passwd|pwd)[ \t]+[\"']?)"
    r"(?P<value>[^\s\"'-][^\s\"']*)"
)
# "scheme://user:pass word@host": a URL password with a space, up to the first "@" before a host (bounded).
_URL_SPACED_PASSWORD = re.compile(
    r"(?i)\b([a-z][a-z0-9+.\-]{0,30}://[^\s/@:]{0,256}:)(?P<value>[^\n@]{1,128}?)(?=@[A-Za-z0-9\[_])"
)
# "hf_token": "value" in JSON or a dict repr.
_QUOTED_ASSIGNMENT = re.compile(r"(?P<name>(?P<q>[\"'])[A-Za-z0-9_\-]+(?P=q)\s*:\s*[\"'])(?P<value>[^\"'\s]+)")
_COMMON_VALUE = re.compile(
    r"(?i)^(?:[-+]?[0-9][0-9.,_:]*|true|false|yes|no|on|off|none|null|nil|unset|empty|auto|default|"
    r"[a-z]{1,7}|\*+|x+|<[^>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[~.]?/.*|[A-Za-z]:\\.*)$"
)
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*_[A-Z0-9_]*$")  # a variable's name given as a value (SERVER_TOKEN)
# What a secret-named value may be and still be shown: booleans, placeholders, paths, short words (not numbers:
# NCCL_IB_AUTH_KEY=84729103657482019376 is a secret, and so is an upper-case base32 one).
_PLAIN_VALUE = re.compile(
    r"(?i)^(?:true|false|yes|no|on|off|none|null|nil|unset|empty|auto|default|[a-z]{1,7}|\*+|x+|<[^>]*>|"
    r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[~.]?/.*|[A-Za-z]:\\.*)$"
)
_SCHEMES_WORDS = ("basic", "bearer", "token", "digest")
_RUN_WITH_AT = re.compile(r"(?<![^\s@])[^\s@]*@\S*")  # starts only at a run's start: linear, never per character
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")


def looks_like_secret(value: str) -> bool:
    """Whether a value of a secret-sounding name should be hidden: at least 8 characters and not a boolean, path,
    placeholder, short word or another variable's name. Digits alone and upper-case letters and digits count as
    secrets (a PIN-like key, a base32 one)."""
    value = value.strip().strip("\"'")
    if len(value) < MIN_FRAGMENT or _PLAIN_VALUE.match(value) or _ENV_NAME.match(value):
        return False
    return not value.startswith(REDACTED)


def _userinfo(run: str) -> str:
    """Hide the userinfo of a URL-like run: everything between the scheme (or the run's start) and the last ``@``
    that is followed by a host."""
    at = run.rfind("@")
    if at <= 0 or at + 1 >= len(run) or not (run[at + 1].isalnum() or run[at + 1] in "[_"):
        return run
    scheme = None
    for match in _SCHEME.finditer(run, 0, at):
        scheme = match
    if scheme is not None:
        start = scheme.end()
    else:
        colon = run.find(":", 0, at)
        if colon < 0:  # name@host without a password: an e-mail address or an ssh target, not a credential
            return run
        start = max(run.rfind(ch, 0, colon) for ch in "=,;([{\"'<`") + 1
    if start >= at or run[start:at] == REDACTED:
        return run
    return run[:start] + REDACTED + run[at:]


def _variants(secret: str) -> Set[str]:
    import urllib.parse  # only when a secret is registered: the default diagnostic never pays for it

    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        escape_controls(secret),
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret, safe=""),
    }
    return {form for form in forms if form}


class Scrubber:
    """Removes secrets from text: registered values (and fragments of them) first, then known shapes."""

    def __init__(self) -> None:
        self._variants: List[str] = []
        self._lock = _thread.allocate_lock()

    def add(self, secret: Optional[str]) -> None:
        """Register a secret value (a token read from the environment). Values under 4 characters are ignored."""
        if not secret or len(secret.strip()) < 4:
            return
        with self._lock:
            merged = set(self._variants) | _variants(secret) | _variants(secret.strip())
            self._variants = sorted(merged, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        if not text:
            return text
        for variant in self._variants:
            if variant in text:
                text = text.replace(variant, REDACTED)
        text = scrub_shapes(text)
        for variant in self._variants:
            if len(variant) >= MIN_FRAGMENT:
                text = _drop_fragments(text, variant)
        return text


def _drop_fragments(text: str, secret: str) -> str:
    """Replace every 8-character window of ``text`` that also occurs inside ``secret`` (overlapping windows merge).
    Time linear in ``text`` for a given secret: one ``find`` scan per window of the secret."""
    k = MIN_FRAGMENT
    grams = {secret[i : i + k] for i in range(len(secret) - k + 1)}
    spans: List[Tuple[int, int]] = []
    for gram in grams:
        start = text.find(gram)
        while start >= 0:
            spans.append((start, start + k))
            start = text.find(gram, start + 1)
    if not spans:
        return text
    spans.sort()
    merged: List[List[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces = []
    last = 0
    for start, end in merged:
        pieces.append(text[last:start])
        pieces.append(REDACTED)
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def scrub_shapes(text: str) -> str:
    """Known token shapes, auth headers, secret parameters and URL userinfo; no registered values."""
    if not text:
        return text
    text = _TOKEN_SHAPES.sub(REDACTED, text)
    text = _AUTH_HEADER.sub(
        lambda m: m.group(0) if m.group(2).lower() in _SCHEMES_WORDS else m.group(1) + REDACTED, text
    )
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    if "://" in text:
        text = _URL_SPACED_PASSWORD.sub(_spaced_password, text)
    text = _SECRET_FLAG.sub(_secret_flag, text)
    text = _ASSIGNMENT.sub(_assignment, text)
    text = _QUOTED_ASSIGNMENT.sub(
        lambda m: (
            m.group("name") + REDACTED
            if _SECRET_WORD.search(m.group("name")) and looks_like_secret(m.group("value"))
            else m.group(0)
        ),
        text,
    )
    if "@" in text:
        text = _RUN_WITH_AT.sub(lambda m: _userinfo(m.group(0)), text)
    return text


def _spaced_password(match: re.Match[str]) -> str:
    value = match.group("value")
    if " " not in value or value.startswith(REDACTED):
        return match.group(0)  # no space: the userinfo rule below sees the whole run
    return match.group(1) + REDACTED


def _secret_flag(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.startswith((REDACTED, "$", "<")) or value.lower() in ("empty", "none", "null"):
        return match.group(0)
    return match.group(1) + REDACTED


def _assignment(match: re.Match[str]) -> str:
    """name=value: an exact secret name hides any value but a placeholder (and ``key`` keeps a common value, as in
    a cache key); a name that only contains a secret word hides only a value that looks like a secret."""
    name, value = match.group("name"), match.group("value")
    bare = name.lstrip("-")
    if value.startswith(REDACTED):
        return match.group(0)
    if _EXACT_NAME.fullmatch(bare):
        if _COMMON_VALUE.match(value) and (bare.lower() == "key" or value.startswith("<")):
            return match.group(0)
        return name + match.group("sep") + REDACTED
    if _SECRET_WORD.search(bare) and looks_like_secret(value):
        return name + match.group("sep") + REDACTED
    return match.group(0)


SCRUBBER = Scrubber()


def scrub(text: str) -> str:
    """:data:`SCRUBBER` applied to ``text``."""
    return SCRUBBER(text)


# --------------------------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------------------------


# C0/C1 controls, DEL, Arabic letter mark, zero-width and joiner marks, bidi marks and overrides, line/paragraph
# separators, invisible operators, the byte-order mark and lone surrogates: none may reach a report unescaped.
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ud800-\udfff]"
)
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    code = ord(char)
    return _NAMED_ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape_controls(text: str, keep_newlines: bool = False) -> str:
    """``text`` with control, separator and bidi characters shown as escapes (``\\x1b``, ``\\r``, ``\\u202e``)."""
    if text.isascii() and text.isprintable():
        return text  # printable ASCII holds nothing to escape
    if keep_newlines:
        return "\n".join(_CONTROL.sub(_escape, line) for line in text.split("\n"))
    return _CONTROL.sub(_escape, text)


def clip(text: str, limit: int = 240) -> str:
    """``text`` scrubbed, escaped and shortened to ``limit`` characters (scrubbing first, so a cut never leaves
    the head of a secret behind)."""
    text = escape_controls(scrub(str(text)))
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - 3)]
    partial = cut.rfind("<")
    if partial >= 0 and REDACTED.startswith(cut[partial:]):
        cut = cut[:partial]
    return cut + "..."


def one_line(text: str, limit: int = 240) -> str:
    """The first non-empty line of ``text``, clipped."""
    for line in str(text or "").splitlines():
        if line.strip():
            return clip(line.strip(), limit)
    return ""


def clean_tree(value: Any, escape: bool = True, _depth: int = 0) -> Any:
    """A JSON-ready copy of ``value``: string keys, no non-finite floats (None), bytes/sets/tuples/other objects
    made plain, and (``escape``) control characters escaped in every string."""
    if _depth > 200:
        return "..."
    if isinstance(value, str):
        return escape_controls(value) if escape else value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= 128 else str(value)[:40] + "..."
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {
            clean_tree(k if isinstance(k, str) else _key_text(k), escape, _depth + 1): clean_tree(v, escape, _depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [clean_tree(v, escape, _depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return [clean_tree(v, escape, _depth + 1) for v in sorted(value, key=repr)]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    return clean_tree(str(value), escape, _depth + 1)


def _key_text(key: Any) -> str:
    if isinstance(key, float) and not math.isfinite(key):
        return str(key)
    if isinstance(key, int) and not isinstance(key, bool) and key.bit_length() > 128:
        return "<large integer>"
    return str(key) if not isinstance(key, (bytes, bytearray)) else f"<{len(key)} bytes>"


def dumps_strict(value: Any, indent: Optional[int] = 2) -> str:
    """RFC 8259 JSON text of ``value`` (see :func:`clean_tree`), ASCII only, with a final newline."""
    return json.dumps(clean_tree(value, escape=False), indent=indent, allow_nan=False, ensure_ascii=True) + "\n"


def terminal_columns() -> int:
    """What ``shutil.get_terminal_size().columns`` answers (``COLUMNS``, then the terminal, else 80), without
    importing shutil and the compression modules it pulls in."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's raw-description formatter, at most ``WIDTH`` columns wide. Passing the width also keeps argparse
    from importing shutil, which it does for every ``add_argument`` call otherwise."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("width", min(terminal_columns(), WIDTH) - 2)
        super().__init__(prog, **kwargs)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Description and epilog keep their line breaks, within ``WIDTH`` columns: a hard-wrapped paragraph or table
        cell (lines that ran to the source's margin, continued at the same text column) is reflowed under its text
        column. Command lines stay whole so that they still paste."""
        lines: List[str] = []
        for head, body, column, source in _help_blocks(text.splitlines()):
            if len(source) == 1 and (not body or len(indent) + len(source[0]) <= WIDTH):
                lines.append(indent + source[0])
            else:
                lines += _wrap_words(" ".join(body), indent + head, indent + " " * column)
        return "\n".join(lines)


# What a help line that must stay whole starts with: a command to paste, or a comment above one.
_COMMAND_STARTS = ("python3 ", "python ", "accelerate ", "trl ", "vllm ", "torchrun ", "curl ", "pip ", "$ ", "# ")
# A source line at least this long was wrapped by its author at the margin, so the next line continues it.
_HARD_WRAPPED = 80


def _help_blocks(lines: List[str]) -> List[Tuple[str, List[str], int, List[str]]]:
    """(first-line prefix, words, text column, source lines) per paragraph or table cell of a help text."""
    blocks: List[Tuple[str, List[str], int, List[str]]] = []
    previous = ""
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        continues = (
            blocks
            and stripped
            and len(previous) >= _HARD_WRAPPED
            and not _is_command(previous)
            and not _is_command(line)
            and indent == blocks[-1][2]
            and _text_column(line) == indent
        )
        if continues:
            blocks[-1][1].extend(stripped.split())
            blocks[-1][3].append(line)
        elif not stripped or _is_command(line):
            blocks.append((line, [], indent, [line]))
        else:
            column = _text_column(line)
            blocks.append((line[:column], line[column:].split(), column, [line]))
        previous = line
    return blocks


def _is_command(line: str) -> bool:
    return line.lstrip().startswith(_COMMAND_STARTS)


def _text_column(line: str) -> int:
    """Where a help line's text starts: after a short label and a gap of two or more spaces (a table row such as
    ``    overhead      2.5 GiB ...``), else at the line's own indent."""
    match = re.match(r"( *)(\S+(?: \S+){0,3}) {2,}(?=\S)", line)
    if match and match.end() <= 30:
        return match.end()
    return len(line) - len(line.lstrip(" "))


def _wrap_words(text: str, first: str, follow: str) -> List[str]:
    """``text`` wrapped at spaces within ``WIDTH``: the first line after ``first``, the rest after ``follow``."""
    out: List[str] = []
    current = first
    fresh = True
    for word in text.split(" "):
        if not fresh and len(current) + 1 + len(word) > WIDTH:
            out.append(current)
            current, fresh = follow, True
        current += word if fresh else " " + word
        fresh = False
    out.append(current)
    return out


def fit_width(text: str, width: int = WIDTH) -> str:
    """Wrap every line longer than ``width`` at spaces; continuation lines keep the indent plus four spaces.

    The text is scrubbed first: a secret cut by a wrap would no longer match its shape when the output is scrubbed
    again on its way out. Linear in the length of ``text`` (an offset walks each line; nothing is re-sliced)."""
    text = scrub(text)
    out: List[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = len(line) - len(line.lstrip(" "))
        follow = " " * min(indent + 4, width // 2)
        out.extend(_wrap_line(line, width, follow))
    return "\n".join(out)


def _wrap_line(line: str, width: int, follow: str) -> List[str]:
    """The pieces of one long line: the first ``width`` wide, the rest ``follow`` plus what fits after it."""
    pieces: List[str] = []
    start, room, prefix = 0, width, ""
    while len(line) - start > room:
        cut = line.rfind(" ", start + 1, start + room + 1)
        if cut <= start or not line[start:cut].strip():
            cut = start + room  # one word longer than the line: break it
            pieces.append(prefix + line[start:cut])
            start = cut
        else:
            pieces.append((prefix + line[start:cut]).rstrip())
            start = cut + 1
            while start < len(line) and line[start] == " ":
                start += 1
        prefix, room = follow, width - len(follow)
    pieces.append(prefix + line[start:])
    return pieces


# --------------------------------------------------------------------------------------------------------------
# Writing and running
# --------------------------------------------------------------------------------------------------------------


class _ScrubbingStream:
    """A text stream that scrubs everything written to it, last."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(scrub(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _silence_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the interpreter's final flush stays quiet."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def emit(text: str, stream: Any = None) -> bool:
    """Write ``text`` (scrubbed last) and flush; False when the reader closed the pipe (then stdout is silenced)."""
    stream = stream or sys.stdout
    try:
        stream.write(scrub(text))
        stream.flush()
    except BrokenPipeError:
        _silence_stdout()
        return False
    return True


@contextlib.contextmanager
def progress(label: str, after_s: float = 2.0, stream: Any = None) -> Iterator[None]:
    """Show ``label... N s`` on stderr while the block runs past ``after_s`` seconds, only when stderr is a TTY."""
    import threading

    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    if not tty:
        yield
        return
    stop = threading.Event()
    shown = [False]
    start = time.monotonic()

    def tick() -> None:
        wait = after_s
        while not stop.wait(wait):
            with contextlib.suppress(Exception):
                stream.write(f"\r{escape_controls(label)[:80]}... {time.monotonic() - start:.0f} s")
                stream.flush()
                shown[0] = True
            wait = 1.0

    thread = threading.Thread(target=tick, name="progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(2.0)
        if shown[0]:
            with contextlib.suppress(Exception):
                stream.write("\r\x1b[K")
                stream.flush()


def run_cli(main: Callable[[Optional[Sequence[str]]], int], prog: str, argv: Optional[Sequence[str]] = None) -> int:
    """Run ``main(argv)`` with stdout/stderr scrubbed; return the exit code.

    A closed pipe ends quietly (the code main returned, or 0); ``KeyboardInterrupt`` exits 130; any other
    exception is an internal error: one line on stderr and exit 2, never the codes a verdict uses.
    """
    original = (sys.stdout, sys.stderr)
    for stream in original:
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")
    sys.stdout, sys.stderr = _ScrubbingStream(original[0]), _ScrubbingStream(original[1])
    code: int
    try:
        try:
            result = main(argv)
            code = 0 if result is None else int(result)
        except SystemExit as exit_:
            if exit_.code is None or isinstance(exit_.code, int):
                code = int(exit_.code or 0)
            else:
                sys.stderr.write(f"{prog}: error: {one_line(str(exit_.code))}\n")
                code = 2
        except BrokenPipeError:
            _silence_stdout()
            code = 0
        except KeyboardInterrupt:
            sys.stderr.write(f"{prog}: interrupted\n")
            code = 130
        except MemoryError:
            sys.stderr.write(f"{prog}: internal error: out of memory\n")
            code = 2
        except Exception as error:  # never a traceback, never the verdict codes
            where = ""
            tb = error.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            if tb is not None:
                where = f" (at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno})"
            sys.stderr.write(f"{prog}: internal error: {type(error).__name__}: {one_line(str(error), 160)}{where}\n")
            code = 2
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
        except (OSError, ValueError):
            pass
    finally:
        sys.stdout, sys.stderr = original
    return code
