"""The recorded compatibility matrix (``matrix.json`` beside this file, written by ``tools/stack_matrix.py``):
releases with Requires-Python, the Requires-Dist lines that name a stack package and the date, plus the feature
floors that exist only in source. Read once, bounded, checked for shape; questions about it are answered here.

Capped open requirements: a requirement without an upper bound is evidence only for the releases that existed
when the declaring release was published. Where a later release of the same package bounds that requirement (the
package learned to cap it: TRL's ``vllm`` extra, vLLM's ``transformers``), the open requirement is capped at the
upper bound the next bounding release declares (``Matrix.open_cap``). Not at the newest subject release on the
declaring release's date: vLLM excludes the transformers releases that broke it rather than capping by date, so a
date cap would move installed transformers releases that vLLM's own next bound accepts; and for TRL 0.19.1 the
matrix records no vLLM that old. The text names both. Computed from the recorded releases; the format is unchanged.
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


class Cap(NamedTuple):
    """An upper bound the planner adds to an open-ended requirement (see the module docstring)."""

    spec: str  # "<=0.10.2"
    text: str  # "trl 0.19.1 declares vllm>=0.8.3 without an upper bound; capped at 0.10.2, ..."


def _bounded(spec: str) -> bool:
    """Whether ``spec`` has an upper bound (``<``, ``<=``, ``==`` without a wildcard, ``~=``, ``===``)."""
    for clause in (c.strip() for c in spec.split(",")):
        if clause.startswith(("<", "~=", "===")) or (clause.startswith("==") and not clause.endswith(".*")):
            return True
    return False


def _upper_clauses(spec: str) -> str:
    """The upper bound of a bounded ``spec`` as ``<``/``<=`` clauses ("" when it is not plain)."""
    found = []
    for clause in (c.strip() for c in spec.split(",")):
        if clause.startswith("<"):
            found.append(clause)
        elif clause.startswith("==") and not clause.startswith("===") and not clause.endswith(".*"):
            found.append("<=" + clause[2:])
    return ",".join(found)


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
        self._position = {name: {r.version: i for i, r in enumerate(rows)} for name, rows in self.releases.items()}
        self._bounding: Dict[Tuple[str, str, Tuple[str, ...]], List[Tuple[int, str, str]]] = {}
        self._caps: Dict[Tuple[str, str, str], Optional[Cap]] = {}

    def names(self) -> List[str]:
        return list(self.releases)

    def release(self, name: str, version: str) -> Optional[Release]:
        return self._by_version.get(name, {}).get(version)

    def floors_for(self, feature: str) -> List[Floor]:
        return [f for f in self.floors if f.feature == feature]

    def newest(self, name: str) -> Optional[str]:
        rows = self.releases.get(name)
        return rows[-1].version if rows else None

    def _bounding_releases(self, name: str, subject: str, context: Tuple[str, ...]) -> List[Tuple[int, str, str]]:
        """(position, version, spec) of each ``name`` release that bounds ``subject`` above under ``context`` (the
        extras its marker names; ``()`` for a base requirement)."""
        key = (name, subject, context)
        if key not in self._bounding:
            found = []
            for position, release in enumerate(self.releases.get(name, [])):
                for req in parse_lines(release.requires):
                    if req.key == subject and versions.marker_extras(req.marker) == context and _bounded(req.specifier):
                        found.append((position, release.version, req.specifier))
                        break
            self._bounding[key] = found
        return self._bounding[key]

    def open_cap(self, name: str, version: str, req: versions.Requirement) -> Optional[Cap]:
        """The dated cap on ``name==version``'s requirement ``req`` (None: it is bounded, or never capped later)."""
        key = (name, version, req.raw)
        if key in self._caps:
            return self._caps[key]
        cap = None
        release = self.release(name, version)
        if req.key != name and req.key in self.releases and not _bounded(req.specifier) and release and release.date:
            position = self._position[name][version]
            later = [
                b for b in self._bounding_releases(name, req.key, versions.marker_extras(req.marker)) if b[0] > position
            ]
            if later:
                cap = self._cap(name, release, req, later[0])
        self._caps[key] = cap
        return cap

    def _cap(
        self, name: str, release: Release, req: versions.Requirement, later: Tuple[int, str, str]
    ) -> Optional[Cap]:
        upper = _upper_clauses(later[2])
        if not upper:
            return None
        declared = f"{req.key}{req.specifier}" if req.specifier else f"{req.key} (any release)"
        dated = [r.version for r in self.releases[req.key] if r.date and r.date <= release.date]
        then = f"newest {req.key} on {release.date}: {dated[-1]}" if dated else f"none recorded by {release.date}"
        return Cap(
            upper,
            f"{name} {release.version} declares {declared} without an upper bound; capped at {req.key}{upper}, "
            f"as {name} {later[1]} declares {req.key}{later[2]} ({then})",
        )


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
