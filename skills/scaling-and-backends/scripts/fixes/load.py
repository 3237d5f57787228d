"""Read the recorded fix index (``index.json.gz``): gzip and json only, parsed once per process.

The index holds, per package, its releases in version order and its merged changes ``[release, pr, title, paths,
broke]``: ``release`` indexes the releases (``-1``: on the default branch, in no tag of the snapshot), ``paths`` the
modules the change touched below the package folder, ``broke`` ``[pr, release]`` of the change a revert or
regression fix names (else 0). Built by ``tools/fix_index.py`` from each repository's tags; see its docstring.

Packages: trl (0.19 on), accelerate (1.4 on), peft (0.8 on), deepspeed (0.14.4 on), bitsandbytes (0.45 on),
liger-kernel (0.5.9 on), kernels. Not indexed: transformers (its training paths are defined in the tool, but its
mirror is over the fetch limit) and vLLM (no mirror and no complete release-notes source).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Tuple

from common.read import InputError, read_whole

INDEX_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "index.json.gz")
SCHEMA = 1
MAX_BYTES = 8 * 1024 * 1024
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "from",
        "with",
        "into",
        "when",
        "not",
        "are",
        "was",
        "were",
        "this",
        "that",
        "than",
        "then",
        "use",
        "used",
        "using",
        "via",
        "its",
        "has",
        "have",
        "add",
        "adds",
        "added",
        "fix",
        "fixes",
        "fixed",
        "fixing",
        "support",
        "update",
        "updates",
        "updated",
        "allow",
        "make",
        "makes",
        "more",
        "error",
        "errors",
        "issue",
        "issues",
        "bug",
        "bugs",
        "pass",
        "passing",
        "work",
        "works",
        "new",
        "also",
        "only",
        "all",
        "any",
        "can",
        "cannot",
        "could",
        "should",
        "would",
        "will",
        "after",
        "before",
    ]
)


class IndexUnreadable(Exception):
    """The fix index is missing or not a sound index."""


class Change(NamedTuple):
    package: str
    release: Optional[str]  # None: on the default branch, untagged in the snapshot
    order: int  # position among the package's releases; len(releases) when untagged
    pr: int
    title: str
    paths: Tuple[str, ...]
    broke: Optional[Tuple[int, str]]  # (pr, release) that this change reverts or fixes a regression of
    tokens: FrozenSet[str]


class Package(NamedTuple):
    name: str
    repo: str
    releases: Tuple[str, ...]
    snapshot: str


class FixIndex(NamedTuple):
    packages: Dict[str, Package]
    changes: Tuple[Change, ...]
    frequency: Dict[str, int]  # token -> how many changes hold it


_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+")


_NORMAL: Dict[str, str] = {}  # raw piece -> its token ("" when dropped); most pieces repeat across changes


def _normal(raw: str) -> str:
    token = raw.lower().strip("_")
    if len(token) > 4 and token[-1] == "s" and token[-2] != "s":
        token = token[:-1]
    return token if len(token) >= 3 and not token[0].isdigit() and token not in _STOP else ""


def words(text: str) -> List[str]:
    """Lower-case search tokens: identifiers whole and split at ``_``, ``.``, ``/`` and camelCase; no stop words."""
    out: Dict[str, None] = {}
    for raw in _IDENT.findall(text) + _PART.findall(text):
        token = _NORMAL.get(raw)
        if token is None:
            token = _NORMAL[raw] = _normal(raw)
        if token:
            out[token] = None
    return list(out)


def parse(data: bytes) -> FixIndex:
    """The index held in ``data`` (gzip-compressed JSON); raises :class:`IndexUnreadable`."""
    try:
        raw = json.loads(gzip.decompress(data).decode("utf-8"))
        if raw.get("schema") != SCHEMA:
            raise IndexUnreadable(f"schema {raw.get('schema')!r}, expected {SCHEMA}")
        packages: Dict[str, Package] = {}
        changes: List[Change] = []
        frequency: Dict[str, int] = {}
        for name, meta in raw["packages"].items():
            releases = tuple(meta["releases"])
            packages[name] = Package(name, meta["repo"], releases, meta["snapshot"])
            for row in raw["changes"][name]:
                index, pr, title, paths, broke = row[:5]
                split = tuple(paths.split(","))
                # rows written by tools/fix_index.py carry their tokens; an older row is tokenised here
                tokens = frozenset(row[5].split() if len(row) > 5 else words(title + " " + " ".join(split)))
                for token in tokens:
                    frequency[token] = frequency.get(token, 0) + 1
                release = releases[index] if index >= 0 else None
                order = index if index >= 0 else len(releases)
                changes.append(
                    Change(name, release, order, pr, title, split, tuple(broke) if broke else None, tokens)  # type: ignore[arg-type]
                )
    except IndexUnreadable:
        raise
    except (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        raise IndexUnreadable(f"not a fix index ({type(error).__name__})") from None
    return FixIndex(packages, tuple(changes), frequency)


_CACHE: Dict[str, FixIndex] = {}


def load_index(path: str = INDEX_PATH) -> FixIndex:
    """The parsed index at ``path``, read once per process."""
    if path not in _CACHE:
        try:
            data = read_whole(path, MAX_BYTES).data
        except InputError as error:
            raise IndexUnreadable(f"{error.path}: {error.reason}") from None
        _CACHE[path] = parse(data)
    return _CACHE[path]
