"""The lookup's one typed request, built from the command's flag values (never from a parsed Namespace).

Releases come from ``--trl``/``--vllm`` and ``--release NAME==VERSION`` first, then from a diagnostic report
(``--report``, the JSON of ``check_optional_backends.py --json``)."""

from __future__ import annotations

import re
from typing import Dict, NamedTuple, Optional, Sequence, Tuple

from common.troubleshooting import ReleaseError, release_value, report_releases, search_words
from common.values import short

MAX_CHARS = 20_000  # a pasted traceback fits; a whole log goes to triage_log.py
MAX_LINES = 200
MAX_RELEASES = 16
REPORT_PACKAGES = ("trl", "vllm", "transformers", "torch", "accelerate", "peft", "deepspeed", "bitsandbytes")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,60}$")


class LookupInputError(Exception):
    """A usage error or an input that cannot be read (exit 2); the message names the flag or file."""


class Request(NamedTuple):
    text: str  # the words given, as given (whitespace kept: each line is matched as a log line)
    words: Tuple[str, ...]  # their search words (common.troubleshooting.search_words)
    releases: Dict[str, str]  # package -> version
    release_origin: Dict[str, str]  # package -> "--trl" | "--release" | "--report"
    json: bool


def _release_pair(value: str) -> Tuple[str, str]:
    name, sep, version = value.partition("==")
    name = name.strip().lower().replace("_", "-")
    if not sep or not _NAME.match(name):
        raise LookupInputError(f"--release takes NAME==VERSION such as transformers==5.24.0, not {short(value)}")
    checked = release_value(version, f"--release {name}")
    return name, str(checked)


def build_request(
    query: Sequence[str],
    trl: Optional[str],
    vllm: Optional[str],
    releases: Sequence[str],
    report: Optional[str],
    json: bool,
) -> Request:
    """The request from the command's values; raises :class:`LookupInputError` for a bad one."""
    text = " ".join(query or ())
    if not text.strip():
        raise LookupInputError('give the error text or symptom words, e.g. "weight sync hangs at the first step"')
    if len(text) > MAX_CHARS or text.count("\n") >= MAX_LINES:
        raise LookupInputError(
            f"the text has {len(text)} characters and {text.count(chr(10)) + 1} lines; give the error line or the "
            f"symptom (at most {MAX_CHARS} characters, {MAX_LINES} lines), or run scripts/triage_log.py on the log"
        )
    words = tuple(search_words(text))
    if not words:
        raise LookupInputError(f"no words to look up in {short(text)}: give the error text or symptom words")
    if len(releases or ()) > MAX_RELEASES:
        raise LookupInputError(f"at most {MAX_RELEASES} --release values")
    found: Dict[str, str] = {}
    origin: Dict[str, str] = {}
    try:
        if report:
            for package, version in report_releases(report, REPORT_PACKAGES).items():
                found[package], origin[package] = version, "--report"
        for value in releases or ():
            package, version = _release_pair(value)
            found[package], origin[package] = version, "--release"
        for package, value, flag in (("trl", trl, "--trl"), ("vllm", vllm, "--vllm")):
            version = release_value(value, flag)
            if version:
                found[package], origin[package] = version, flag
    except ReleaseError as error:
        raise LookupInputError(str(error)) from None
    return Request(text, words, found, origin, bool(json))
