"""The recorded compatibility matrix (``matrix.json`` beside this file, written by ``tools/stack_matrix.py``):
releases with Requires-Python, the Requires-Dist lines that name a stack package and the date, plus the feature
floors that exist only in source. Read once, bounded, checked for shape; questions about it are answered here.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from common import versions
from common.read import InputError, read_bytes
from common.values import load_json

MATRIX_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matrix.json")
MATRIX_LIMIT = 2_000_000  # bytes; the recorded file is far smaller (a test bounds it)
MATRIX_DEPTH = 16  # the recorded file nests 5 levels deep


class MatrixError(Exception):
    """The matrix file is missing, too large or malformed."""


class Floor(NamedTuple):
    """A feature floor: for ``owner`` releases (all when ``releases`` is empty and ``owner_spec`` holds), the
    ``subject`` must satisfy ``spec`` (``kind`` requires), is preferred inside it (prefers), or the owner release
    only has the feature (present)."""

    feature: str
    owner: str
    releases: Tuple[str, ...]
    owner_spec: str
    subject: str
    spec: str
    kind: str
    file: str

    def applies_to(self, owner_version: str) -> bool:
        if self.releases:
            return owner_version in self.releases
        return bool(versions.specifier_contains(self.owner_spec or "", owner_version))


class Release(NamedTuple):
    version: str
    date: str
    python: str
    requires: Tuple[str, ...]
    cuda: str


class Matrix:
    """Typed access to the recorded matrix."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.fetched: str = str(data.get("fetched", "?"))
        self.window: Dict[str, str] = dict(data.get("window", {}))
        self.releases: Dict[str, List[Release]] = {}
        self.index: Dict[str, List[str]] = {}
        for name, package in data["packages"].items():
            sets = package["sets"]
            rows = []
            for version, record in package["releases"].items():
                rows.append(
                    Release(
                        version,
                        str(record.get("date", "")),
                        str(record.get("python", "")),
                        tuple(sets[record["requires"]]),
                        str(record.get("cuda", "")),
                    )
                )
            rows.sort(key=lambda r: versions.version_key(r.version) or (0,))  # type: ignore[arg-type,return-value]
            self.releases[name] = rows
            self.index[name] = list(package.get("index", []))
        self.floors: List[Floor] = [
            Floor(
                str(f["feature"]),
                str(f["owner"]),
                tuple(f.get("releases", ())),
                str(f.get("owner_spec", "")),
                str(f["subject"]),
                str(f.get("spec", "")),
                str(f["kind"]),
                str(f["file"]),
            )
            for f in data["floors"]
        ]
        self._by_version = {name: {r.version: r for r in rows} for name, rows in self.releases.items()}

    def names(self) -> List[str]:
        return list(self.releases)

    def release(self, name: str, version: str) -> Optional[Release]:
        return self._by_version.get(name, {}).get(version)

    def floors_for(self, feature: str) -> List[Floor]:
        return [f for f in self.floors if f.feature == feature]


_LOADED: Dict[str, Matrix] = {}


def load(path: str = MATRIX_PATH) -> Matrix:
    """The matrix at ``path`` (read once per process); ``MatrixError`` when it cannot be used."""
    if path in _LOADED:
        return _LOADED[path]
    try:
        read = read_bytes(path, MATRIX_LIMIT)
    except InputError as error:
        raise MatrixError(f"cannot read the stack matrix {path}: {error.reason}") from None
    if read.truncated:
        raise MatrixError(f"the stack matrix {path} is larger than {MATRIX_LIMIT} bytes")
    try:
        data = load_json(read.text(), f"the stack matrix {path}", max_bytes=MATRIX_LIMIT, max_depth=MATRIX_DEPTH)
        matrix = Matrix(data)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        raise MatrixError(f"the stack matrix {path} is malformed ({type(error).__name__}); regenerate it") from None
    _LOADED[path] = matrix
    return matrix


def parse_lines(lines: Sequence[str]) -> List[versions.Requirement]:
    parsed = []
    for line in lines:
        req = _parse(line)
        if req is not None:
            parsed.append(req)
    return parsed


_PARSED: Dict[str, Optional[versions.Requirement]] = {}


_LINE_RE = re.compile(r"^([a-z0-9][a-z0-9.-]*)(?:\[([a-z0-9,._-]+)\])?([^;]*)(?:;\s*(.+))?$")
_SPEC_RE = re.compile(r"(?:(?:===|==|!=|~=|<=|>=|<|>)[0-9A-Za-z.*+!]+,?)*")


def _parse(line: str) -> Optional[versions.Requirement]:
    """A recorded line (the generator writes them normalized: ``name[extras]spec; marker``), split without
    ``packaging``'s parser; anything else goes through the shared parser."""
    if line not in _PARSED:
        match = _LINE_RE.match(line)
        if match and _SPEC_RE.fullmatch(match.group(3)):
            name, extras, spec, marker = match.groups()
            _PARSED[line] = versions.Requirement(
                name=name,
                key=name,
                extras=tuple(sorted(extras.split(","))) if extras else (),
                specifier=spec,
                marker=marker or "",
                raw=line,
            )
        else:
            _PARSED[line] = versions.parse_requirement(line)
    return _PARSED[line]
