"""What the bundle's scripts print, made safe in one place: secrets scrubbed by value, control characters escaped,
strict JSON, lines a person can scan, and a CLI runner that never shows a traceback.

- :data:`SCRUBBER` (a :class:`Scrubber`; :func:`scrub` on one string) removes known token shapes (Hugging Face,
  GitHub, ``sk-`` style keys, AWS access key ids, Slack, JWTs, also after ``-``/``_``, bearer values), credentials
  in anything URL-like (any case, with or without a scheme, several ``@``, any character in the password, control
  characters too), the value after a secret name wherever it stands (``password=``, ``ERROR: password=``,
  ``WANDB_API_KEY="..."``, ``{"api_key": "..."}``, ``--api-key X``, ``'--api-key', 'X'``, an AWS secret key
  after its name), and every secret the script registered (:func:`register_secret`) in its raw, JSON-escaped,
  ``repr`` and URL-quoted forms and any fragment of 8 or more characters of them. Short common values
  (``CACHE_KEY=3.11``, ``SSH_AUTH_SOCK=/root``) are left alone. Time is linear in the input.
- It works on VALUES, before serialisation: :func:`scrub_tree` scrubs every string of a report (keys too, a value
  by its key's name with :func:`scrub_pair`, the item after a secret flag in a list); :func:`clean_tree` and
  :func:`dumps_strict` call it, so ``--json`` output always parses. Text is scrubbed once more as it is written
  (:func:`emit`, :func:`run_cli`'s streams); JSON from :func:`dumps_strict` (a :class:`ScrubbedText`) is not.
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
import functools
import json
import math
import os
import re
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from common.lazy_re import lazy

__all__ = [
    "REDACTED",
    "SCRUBBER",
    "WIDTH",
    "HelpFormatter",
    "ScrubbedText",
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
    "register_secret",
    "run_cli",
    "scrub",
    "scrub_pair",
    "scrub_tree",
    "shell_word",
]

REDACTED = "<redacted>"
WIDTH = 100
MIN_FRAGMENT = 8

# --------------------------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------------------------
# Every rule below scans its input a bounded number of times: a pattern may only start where a run of its
# characters starts (a lookbehind), a value's end is found once per position and cached, and a value is judged on
# its first _DECIDE_LIMIT characters. tests/test_common_output.py feeds 1 MB inputs of several shapes and bounds
# the CPU time.

_DECIDE_LIMIT = 1024  # a longer value under a secret name is hidden without reading all of it
_SEEN_LENGTH = 200  # texts up to this long are remembered once scrubbed, at most _SEEN_CAP of them
_SEEN_CAP = 20_000
_GRAM_CAP = 600_000  # fragments of registered secrets kept in memory (an environment value is at most 128 KiB)

_TOKEN_SHAPES = lazy(
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
        )
    )
    + ")"
)
# A run of base64url characters and dots that holds "eyJ" (a JWT's first two characters), matched whole from the
# run's start: the JWT inside it is found by splitting the run at its dots (_drop_jwts), once.
_JWT_RUN = lazy(r"(?<![A-Za-z0-9_\-.])[A-Za-z0-9_\-.]*eyJ[A-Za-z0-9_\-.]*")
# "Authorization: Bearer x", "Proxy-Authorization=Basic x": the value, whatever its shape (placeholders kept).
_AUTH_HEADER = lazy(
    r"(?i)\b((?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:(?:basic|bearer|token|digest)[ \t]+)?)(?!<)"
    r"([^\s\"']+)"
)
# A bearer value in prose: needs a digit, so "a bearer token" stays.
_BEARER = lazy(r"(?i)\b(bearer\s+)(?=[A-Za-z0-9._~+/=\-]*[0-9])([A-Za-z0-9._~+/=\-]{8,})")
# "scheme://user:pass word@host": a URL password holding a space, tab or control character, up to the first "@"
# before a host (bounded). One without is left to the userinfo rule, which sees the whole run.
_URL_ODD_PASSWORD = lazy(
    r"(?i)\b([a-z][a-z0-9+.\-]{0,30}://[^\s/@:]{0,256}:)(?P<value>[^\n@]{1,128}?)(?=@[A-Za-z0-9\[_])"
)
_ODD_CHAR = lazy(r"[^\S\n]|[\x00-\x1f\x7f]")
_PORT_PATH = lazy(r"[0-9]{1,5}(?:/|$)")

# Names. An exact secret name hides any value but a placeholder; a name that ends with a secret noun
# (WANDB_API_KEY, DB_PASSWORD) hides any value but a short common one; a name that only contains a secret word
# (CACHE_KEY, SSH_AUTH_SOCK) hides a value that looks like a secret.
_EXACT_NAME = lazy(
    r"(?:token|access_?token|auth_?token|refresh_?token|id_?token|key|api_?key|apikey|secret|client_?secret|"
    r"password|passwd|pwd|sig|signature|x_amz_signature|x_amz_credential|(?:aws_)?secret_?access_?key|"
    r"private_?key|secret_?key)"
)
_STRONG_SUFFIX = lazy(
    r"(?:token|secret|password|passwd|api_?key|apikey|secret_?key|access_?key|private_?key|auth_?key|"
    r"client_?secret|credentials?)$"
)
_SECRET_WORD = lazy(r"(?i)token|key|secret|password|passwd|pwd|auth|credential")
_NOT_SECRET_NAME = lazy(r"tokeniz|tokens(?:_|$)")
# name=value, name: value, "name": "value", name = 'value', --name=value (JSON-escaped quotes too). Only the name
# and separator are matched; the value's end is found by _value_end.
_SECRETISH = r"(?=[A-Za-z0-9_.\-]*?(?i:token|key|secret|passw|pwd|auth|credential|sig))"  # skip other names fast
_NAME_SEP = lazy(
    r"(?<![A-Za-z0-9_.\-])(?:(?P<nq>\\?[\"'])" + _SECRETISH + r"(?P<qname>[A-Za-z0-9_.\-]+)(?P=nq)[ \t]*[:=][ \t]*"
    r"|" + _SECRETISH + r"(?P<name>[A-Za-z0-9_\-][A-Za-z0-9_.\-]*)[ \t]*(?:=|:(?=[ \t\"'\\]))[ \t]*)"
    r"(?P<vq>\\?[\"'])?"
)
# "--api-key X", "--hf-token 'X'", and the next item of an argument list: "'--api-key', 'X'", "[\"--token\", \"X\"]".
_FLAG = r"--?(?:[A-Za-z0-9]+[-_])*(?:key|token|secret|password|passwd|pwd|credentials?)"
_FLAG_ONLY = lazy("(?i)" + _FLAG)
_SECRET_FLAG = lazy(
    r"(?i)(?<![A-Za-z0-9_\-])(?:(?P<fq>\\?[\"'])" + _FLAG + r"(?P=fq)[ \t]*,[ \t]*|" + _FLAG + r"[ \t]+(?!--))"
    r"(?P<vq>\\?[\"'])?"
)
# A secret name, then a few separator characters of any kind, then a key-like value (16+ characters mixing upper
# case, lower case and digits): "'AWS_SECRET_ACCESS_KEY', '/wJalr...'", "aws_secret_access_key:/wJalr...".
_NAMED_BLOB = lazy(
    r"(?i)(?<![A-Za-z0-9_\-])([A-Za-z0-9_\-]*?(?:secret|token|password|passwd|api_?key|access_?key|private_?key|"
    r"auth_?key|credentials?)[ \t:=,\"'\\]{1,8})(?P<value>[A-Za-z0-9+/=_\-]{16,})"
)
_AFTER_QUOTE = frozenset(" \t\r\n,;:)]}&\\\"'.")  # what may follow a closing quote
# Where an unquoted value ends: white space, a quote, or "&" before the next query parameter.
_PLAIN_END = lazy(r"[\s\"'`]|\\(?=[\"'])|&(?=[A-Za-z0-9_.\-]+=)")
_PLACEHOLDER = lazy(
    r"(?i)^(?:<[^<>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\*+|x{1,4}|true|false|yes|no|on|off|none|null|nil|unset|empty|"
    r"\"\"|'')$"
)
_COMMON_VALUE = lazy(
    r"(?i)^(?:[-+]?[0-9][0-9.,_:]*|true|false|yes|no|on|off|none|null|nil|unset|empty|auto|default|"
    r"[a-z]{1,7}|\*+|x+|<[^>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[~.]?/.*|[A-Za-z]:\\.*)$"
)
_ENV_NAME = lazy(r"^[A-Z][A-Z0-9]*_[A-Z0-9_]*$")  # a variable's name given as a value (SERVER_TOKEN)
# What a secret-named value may be and still be shown: booleans, placeholders, paths, short words (not numbers:
# NCCL_IB_AUTH_KEY=84729103657482019376 is a secret, and so is an upper-case base32 one).
_PLAIN_VALUE = lazy(
    r"(?i)^(?:true|false|yes|no|on|off|none|null|nil|unset|empty|auto|default|[a-z]{1,7}|\*+|x+|<[^>]*>|"
    r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[~.]?/.*|[A-Za-z]:\\.*)$"
)
_FLAG_OR_METAVAR = lazy(r"-[A-Za-z]|[A-Z][A-Z_]{0,15}")
_BASE64ISH = lazy(r"/?[A-Za-z0-9+/]{15,}={0,2}")
_SCHEMES_WORDS = ("basic", "bearer", "token", "digest")
# What the rules need somewhere in the text: a secret word (the name rules, auth headers, bearer values) or a
# shape's start (token shapes, JWTs, URLs). Substring tests (fast, unlike a regular expression's alternation) let
# plain words, numbers and paths through at once.
_WORDS = ("token", "key", "secret", "passw", "pwd", "auth", "credential", "sig", "bearer")
_SHAPE_STARTS = (
    *("hf_", "api_org_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-", "k_live_", "k_test_"),
    *("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "xox", "AIza", "npm_", "eyJ", "://", "@"),
)
# A run that holds "@", started only at a run's start (linear). Runs end at a space, tab or newline only, so a
# carriage return or other control character inside URL credentials keeps them one run.
_RUN_WITH_AT = lazy(r"(?<![^ \t\n@])[^ \t\n@]*@[^ \t\n]*")
_SCHEME = lazy(r"[A-Za-z][A-Za-z0-9+.\-]*://")


def _mixed(value: str) -> bool:
    """Upper case, lower case and digits all present (a random key; rarely a word, path or version)."""
    return any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)


def _base64ish(value: str) -> bool:
    """A value that starts like a path but is a key: base64 characters only, mixed, few slashes (an AWS secret
    access key may start with "/": ``/K7MDENG/bPxRfiCY...``; ``/usr/lib/X11R6Fonts`` is a path)."""
    return _BASE64ISH.fullmatch(value) is not None and value.count("/") <= len(value) // 10 + 1 and _mixed(value)


def looks_like_secret(value: str) -> bool:
    """Whether a value of a secret-sounding name should be hidden: at least 8 characters and not a boolean, path,
    placeholder, short word or another variable's name. Digits alone and upper-case letters and digits count as
    secrets (a PIN-like key, a base32 one), and so do a base64 key that starts with "/" and a value holding "="."""
    value = value.strip().strip("\"'")
    if len(value) < MIN_FRAGMENT or _ENV_NAME.match(value) or value.startswith(REDACTED):
        return False
    if "=" in value or _base64ish(value):
        return True
    return not _PLAIN_VALUE.match(value)


def _name_kind(name: str, in_tree: bool = False) -> Optional[str]:
    """``exact``, ``strong`` or ``word`` for a name that says secret (see above), else None. In a report's tree
    (``in_tree``) only exact and strong names count, and a bare ``key`` does not (a finding's key is no secret)."""
    return _short_name_kind(name, in_tree) if len(name) <= 64 else _judge_name(name, in_tree)


@functools.lru_cache(maxsize=4096)
def _short_name_kind(name: str, in_tree: bool) -> Optional[str]:
    return _judge_name(name, in_tree)


def _judge_name(name: str, in_tree: bool) -> Optional[str]:
    bare = name.lstrip("-").rsplit(".", 1)[-1].lower().replace("-", "_")
    if not bare or _NOT_SECRET_NAME.search(bare):
        return None
    if _EXACT_NAME.fullmatch(bare):
        return None if in_tree and bare == "key" else "exact"
    if _STRONG_SUFFIX.search(bare):
        return "strong"
    if not in_tree and _SECRET_WORD.search(bare):
        return "word"
    return None


def _hidden(kind: str, bare: str, head: str, length: int) -> bool:
    """Whether the value (its first characters ``head``, ``length`` in all) of a ``kind`` name is hidden."""
    value = head.strip()
    if not value or value.startswith(REDACTED):
        return False
    judged = value.rstrip(")]},;.:")
    if _PLACEHOLDER.match(judged) or _ENV_NAME.match(judged):
        return False
    if length > _DECIDE_LIMIT:
        return True
    if kind == "flag":  # the next flag ("-v", "--port") or a metavar ("--api-key KEY") is no value
        return not (judged.startswith("--") or _FLAG_OR_METAVAR.fullmatch(judged))
    if kind == "exact":
        return not (bare == "key" and "=" not in judged and _COMMON_VALUE.match(judged))
    if kind == "strong":
        return looks_like_secret(judged) or not _COMMON_VALUE.match(judged)
    return looks_like_secret(judged)


class _Ends:
    """The next position at or after ``start`` where a value ends, per kind of end. Each answer is cached: a scan
    over growing positions searches every stretch of the text once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.cache: Dict[str, Tuple[int, int]] = {}

    def next(self, kind: str, start: int) -> int:
        cached = self.cache.get(kind)
        if cached is not None and cached[0] <= start <= cached[1]:
            return cached[1]
        if kind == "plain":
            match = _PLAIN_END.search(self.text, start)
            found = match.start() if match else len(self.text)
        else:
            found = self.text.find(kind, start)
            if found < 0:
                found = len(self.text)
        self.cache[kind] = (start, found)
        return found


def _value_end(text: str, start: int, quote: Optional[str], ends: _Ends) -> int:
    """Where a value starting at ``start`` ends: at its closing quote on the same line (before the backslash of
    an escaped one), else where an unquoted value ends."""
    if quote:
        line_end = ends.next("\n", start)
        close = ends.next(quote[-1], start)
        for _ in range(8):  # a quote followed by more of the value (password="ab"cd") is inside it
            if close >= line_end or close + 1 >= len(text) or text[close + 1] in _AFTER_QUOTE:
                break
            close = text.find(quote[-1], close + 1, line_end)
            close = line_end if close < 0 else close
        if close < line_end:
            return close - 1 if quote[0] == "\\" and close > start and text[close - 1] == "\\" else close
    return ends.next("plain", start)


def _scan_values(text: str, pattern: re.Pattern[str], kind_of: Callable[[re.Match[str]], Optional[str]]) -> str:
    """Hide the value after each match of ``pattern`` whose ``kind_of`` names a secret and whose value
    :func:`_hidden` rejects. A value that is kept is scanned again (``ERROR: password=...``); a hidden one is
    skipped."""
    match = pattern.search(text)
    if match is None:
        return text
    pieces: List[str] = []
    last = pos = 0
    ends = _Ends(text)
    while True:
        if pos:
            match = pattern.search(text, pos)
        if match is None:
            break
        pos = match.end()
        kind = kind_of(match)
        if kind is None:
            continue
        end = _value_end(text, pos, match.group("vq"), ends)
        if end > pos and _hidden(kind, _bare(match), text[pos : min(end, pos + _DECIDE_LIMIT)], end - pos):
            pieces.append(text[last:pos])
            pieces.append(REDACTED)
            last = pos = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def _bare(match: re.Match[str]) -> str:
    name = match.groupdict().get("name") or match.groupdict().get("qname") or ""
    return name.lstrip("-").rsplit(".", 1)[-1].lower().replace("-", "_")


def _assignment_kind(match: re.Match[str]) -> Optional[str]:
    return _name_kind(match.group("name") or match.group("qname"))


def _drop_jwts(run: str) -> str:
    """A run with its JWTs (``eyJ...`` header, payload and optional signature, dot-separated) hidden. A JWT may
    follow ``-`` or ``_`` (``x-eyJ...``, ``tok_eyJ...``), or any letter or digit when its header decodes to JSON
    text (``node1eyJhbGci...`` in a hostname; ``keyJSONParser.parse`` is no JWT)."""
    parts = run.split(".")
    out: List[str] = []
    i = 0
    while i < len(parts):
        part = parts[i]
        at = part.find("eyJ")
        while at > 0 and part[at - 1] not in "_-" and not _json_head(part[at : at + 12]):
            at = part.find("eyJ", at + 1)
        if at >= 0 and len(part) - at >= 11 and i + 1 < len(parts) and len(parts[i + 1]) >= 4:
            out.append(part[:at] + REDACTED)
            i += 3 if i + 2 < len(parts) and "eyJ" not in parts[i + 2][:3] else 2
        else:
            out.append(part)
            i += 1
    return ".".join(out)


def _json_head(head: str) -> bool:
    """Whether 12 base64url characters decode to printable ASCII, as a JWT header's ``{"alg":"...`` does."""
    import binascii  # built in

    try:
        raw = binascii.a2b_base64(head.replace("-", "+").replace("_", "/"))
    except (binascii.Error, ValueError):
        return False
    return len(raw) == 9 and all(32 <= byte < 127 for byte in raw)


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
        self._grams: Set[str] = set()
        self._lock = _thread.allocate_lock()
        self._seen: Dict[str, str] = {}  # short texts already scrubbed (a report repeats its keys and words)

    def add(self, secret: Optional[str]) -> None:
        """Register a secret value (a token read from the environment). Values under 4 characters are ignored."""
        if not secret or len(secret.strip()) < 4:
            return
        with self._lock:
            new = (_variants(secret) | _variants(secret.strip())) - set(self._variants)
            self._variants = sorted(set(self._variants) | new, key=len, reverse=True)
            grams = set(self._grams)
            for form in sorted(new, key=len):
                if len(grams) + len(form) > _GRAM_CAP:
                    break  # the whole value is still replaced; only its fragments beyond the cap are not
                grams.update(form[i : i + MIN_FRAGMENT] for i in range(len(form) - MIN_FRAGMENT + 1))
            self._grams = grams
            self._seen = {}

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if len(text) > _SEEN_LENGTH:
            return self._scrub(text)
        seen = self._seen
        done = seen.get(text)
        if done is None:
            done = self._scrub(text)
            if len(seen) < _SEEN_CAP:
                seen[text] = done
        return done

    def _scrub(self, text: str) -> str:
        for variant in self._variants:
            if variant in text:
                text = text.replace(variant, REDACTED)
        text = scrub_shapes(text)
        if self._grams:
            text = _drop_fragments(text, self._grams)
        return text


def _drop_fragments(text: str, grams: Set[str]) -> str:
    """Replace every 8-character window of ``text`` that is a window of a registered secret (overlapping windows
    merge). One set look-up per character: linear in ``text`` whatever the secrets' length."""
    k = MIN_FRAGMENT
    hits = [i for i in range(len(text) - k + 1) if text[i : i + k] in grams]
    if not hits:
        return text
    pieces = []
    last = 0
    start, end = hits[0], hits[0] + k
    for i in hits[1:]:
        if i <= end:
            end = i + k
            continue
        pieces += [text[last:start], REDACTED]
        last, start, end = end, i, i + k
    pieces += [text[last:start], REDACTED, text[end:]]
    return "".join(pieces)


def scrub_shapes(text: str) -> str:
    """Known token shapes, auth headers, secret flags and parameters and URL userinfo; no registered values."""
    if not text:
        return text
    lower = text.lower()
    word = any(w in lower for w in _WORDS)
    if not word and not any(start in text for start in _SHAPE_STARTS):
        return text
    text = _TOKEN_SHAPES.sub(REDACTED, text)
    if "eyJ" in text:
        text = _JWT_RUN.sub(lambda m: _drop_jwts(m.group(0)), text)
    if word:
        text = _AUTH_HEADER.sub(
            lambda m: m.group(0) if m.group(2).lower() in _SCHEMES_WORDS else m.group(1) + REDACTED, text
        )
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    if "://" in text:
        text = _URL_ODD_PASSWORD.sub(_odd_password, text)
    if word:
        if "-" in text:
            text = _scan_values(text, _SECRET_FLAG, lambda m: "flag")
        if "=" in text or ":" in text:
            text = _scan_values(text, _NAME_SEP, _assignment_kind)
        text = _NAMED_BLOB.sub(lambda m: m.group(1) + REDACTED if _mixed(m.group("value")) else m.group(0), text)
    if "@" in text:
        text = _RUN_WITH_AT.sub(lambda m: _userinfo(m.group(0)), text)
    return text


def _odd_password(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.startswith(REDACTED) or not _ODD_CHAR.search(value) or _PORT_PATH.match(value):
        return match.group(0)  # an ordinary password: the userinfo rule below sees the whole run
    return match.group(1) + REDACTED


SCRUBBER = Scrubber()


def scrub(text: str) -> str:
    """:data:`SCRUBBER` applied to ``text``: registered secrets, their fragments and every known shape."""
    return SCRUBBER(text)


def register_secret(value: Optional[str]) -> None:
    """Register a secret value with :data:`SCRUBBER` (its escaped forms and 8-character fragments too)."""
    SCRUBBER.add(value)


def scrub_pair(name: str, value: str) -> str:
    """``value`` as shown under the name ``name`` (a dictionary key, a variable): hidden whole when the name is a
    secret's (``password``, ``WANDB_API_KEY``) and the value is not a placeholder or short common value, else
    :func:`scrub`-bed."""
    kind = _name_kind(name, in_tree=True)
    bare = name.lstrip("-").rsplit(".", 1)[-1].lower().replace("-", "_")
    if kind is not None and _hidden(kind, bare, value[:_DECIDE_LIMIT], len(value)):
        return REDACTED
    return scrub(value)


def shell_word(value: str) -> str:
    """``value`` as one word of a printed shell command: scrubbed BEFORE it is quoted (a quoted secret, its
    quotes rewritten as ``'"'"'``, no longer has a shape the scrubber knows), then quoted when it holds shell
    syntax. A leading ``~/`` (a path shown under the home folder) stays outside the quotes, since a quoted tilde
    is not expanded: ``~/my env/bin/python`` becomes ``~/'my env/bin/python'``."""
    import shlex  # only where a command is built

    word = scrub(value)
    if word == "~":
        return word
    if word.startswith("~/"):
        rest = word[2:]
        return "~/" + shlex.quote(rest) if rest else "~/"
    return shlex.quote(word)


def scrub_tree(value: Any, _depth: int = 0) -> Any:
    """A copy of ``value`` (dicts, lists, tuples; other objects kept as they are) with every string scrubbed by
    value, BEFORE it is serialised or rendered: dictionary keys too, a value by its key's name
    (:func:`scrub_pair`), and the item after a secret flag in a list (``["--api-key", "X"]``)."""
    if isinstance(value, str):
        return scrub(value)
    if _depth > 200:
        return "..."
    if isinstance(value, dict):
        out: Dict[Any, Any] = {}
        for key, item in value.items():
            shown = scrub(key) if isinstance(key, str) else key
            if shown in out:  # two keys scrubbed alike stay two entries
                number = 2
                while f"{shown} ({number})" in out:
                    number += 1
                shown = f"{shown} ({number})"
            if isinstance(key, str) and isinstance(item, str):
                out[shown] = scrub_pair(key, item)
            else:
                out[shown] = scrub_tree(item, _depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        items: List[Any] = []
        after_flag = False
        for item in value:
            if isinstance(item, str) and after_flag and _hidden("flag", "", item[:_DECIDE_LIMIT], len(item)):
                items.append(REDACTED)
            else:
                items.append(scrub_tree(item, _depth + 1))
            after_flag = isinstance(item, str) and _FLAG_ONLY.fullmatch(item) is not None
        return items if isinstance(value, list) else tuple(items)
    return value


# --------------------------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------------------------


# C0/C1 controls, DEL, Arabic letter mark, zero-width and joiner marks, bidi marks and overrides, line/paragraph
# separators, invisible operators, the byte-order mark and lone surrogates: none may reach a report unescaped.
_CONTROL = lazy(
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


def clean_tree(value: Any, escape: bool = True) -> Any:
    """A JSON-ready copy of ``value``: every string scrubbed by value first (:func:`scrub_tree`), string keys, no
    non-finite floats (None), bytes/sets/tuples/other objects made plain, and (``escape``) control characters
    escaped in every string."""
    return _plain(scrub_tree(value), escape)


def _plain(value: Any, escape: bool, _depth: int = 0) -> Any:
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
            _plain(k if isinstance(k, str) else scrub(_key_text(k)), escape, _depth + 1): _plain(v, escape, _depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_plain(v, escape, _depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return [_plain(scrub_tree(v), escape, _depth + 1) for v in sorted(value, key=repr)]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    return _plain(scrub(str(value)), escape, _depth + 1)


def _key_text(key: Any) -> str:
    if isinstance(key, float) and not math.isfinite(key):
        return str(key)
    if isinstance(key, int) and not isinstance(key, bool) and key.bit_length() > 128:
        return "<large integer>"
    return str(key) if not isinstance(key, (bytes, bytearray)) else f"<{len(key)} bytes>"


class ScrubbedText(str):
    """Text already scrubbed: JSON built from values that were each scrubbed before serialisation
    (:func:`dumps_strict`), or text scrubbed before it was wrapped (:func:`fit_width`). :func:`emit` and the
    streams of :func:`run_cli` write it as it is: a pass over serialised JSON could miss an escaped secret or
    break the document's structure. Joined with other text it becomes a plain ``str`` and is scrubbed again."""


def dumps_strict(value: Any, indent: Optional[int] = 2) -> ScrubbedText:
    """RFC 8259 JSON text of ``value``, ASCII only, with a final newline: every string (keys too) scrubbed by
    value before serialisation (:func:`clean_tree`), so the document always parses and holds no known secret."""
    text = json.dumps(clean_tree(value, escape=False), indent=indent, allow_nan=False, ensure_ascii=True)
    return ScrubbedText(text + "\n")


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


def fit_width(text: str, width: int = WIDTH) -> ScrubbedText:
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
    return ScrubbedText("\n".join(out))  # scrubbed before it was wrapped: emit writes it as it is


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
    """A text stream that scrubs everything written to it, last (text that was scrubbed value by value before it
    was serialised, a :class:`ScrubbedText`, is written as it is)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(text if isinstance(text, ScrubbedText) else scrub(text))
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
    """Write ``text`` and flush; False when the reader closed the pipe (then stdout is silenced). Text is scrubbed
    last; a :class:`ScrubbedText` (:func:`dumps_strict`'s JSON) was scrubbed value by value and is written as is."""
    stream = stream or sys.stdout
    try:
        stream.write(text if isinstance(text, ScrubbedText) else ScrubbedText(scrub(text)))
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
