"""Declared ranges quoted in the text: a requirement in inline code on a line that names one TRL minor
(``TRL 1.16: `vllm<=0.31.0,>=0.22.0` ``) must be a line that some patch of that minor declares in the recorded
stack matrix (``scripts/stack/matrix.json``, pip's own metadata reading). The generated compatibility section is
checked against the matrix by ``tools/stack_matrix.py --check`` instead.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from typing import Dict, List, Set, Tuple

from .common import SKILL_DIR

MATRIX = SKILL_DIR / "scripts" / "stack" / "matrix.json"
GENERATED = ("troubleshooting/compatibility.md",)
TRL_MINOR_RE = re.compile(r"\bTRL (\d+\.\d+)(?:\.\d+)?\b(?![.\d]*[–-]\d)")
SPEC_SPAN_RE = re.compile(r"`([a-z][a-z0-9_.-]*)((?:(?:==|>=|<=|~=|<|>)[0-9][0-9a-z.*]*,?)+)`")


def _scripts_on_path() -> None:
    sys.dont_write_bytecode = True  # the shipped scripts/ folder must never get a __pycache__ from a check
    scripts = str(SKILL_DIR / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)


def normalized(spec: str) -> Tuple[str, ...]:
    """The clauses of ``spec`` without spaces, sorted, so `a<=2,>=1` equals `a>=1,<=2`."""
    return tuple(sorted(c.replace(" ", "") for c in spec.split(",") if c.strip()))


@lru_cache(maxsize=1)
def declared_by_minor() -> Dict[str, Dict[str, Set[Tuple[str, ...]]]]:
    """TRL minor -> package -> the specifiers its patches declare (any extra, any marker)."""
    _scripts_on_path()
    from common import versions

    data = json.loads(MATRIX.read_text(encoding="utf-8"))
    trl = data["packages"]["trl"]
    found: Dict[str, Dict[str, Set[Tuple[str, ...]]]] = {}
    for version, record in trl["releases"].items():
        minor = ".".join(version.split(".")[:2])
        for line in trl["sets"][record["requires"]]:
            req = versions.parse_requirement(line)
            if req is not None and req.specifier:
                found.setdefault(minor, {}).setdefault(req.key, set()).add(normalized(req.specifier))
    return found


def range_claims(text: str) -> List[Tuple[int, str, str, str]]:
    """(line, TRL minor, package, specifier) for each quoted range on a line that names exactly one TRL minor."""
    claims = []
    for number, line in enumerate(text.splitlines(), 1):
        minors = set(TRL_MINOR_RE.findall(line))
        if len(minors) != 1:
            continue
        (minor,) = minors
        for match in SPEC_SPAN_RE.finditer(line):
            claims.append((number, minor, match.group(1), match.group(2)))
    return claims


class RangeChecks:
    """Mixin of ``Checker``: quoted declared ranges against the matrix."""

    def check_ranges(self, rel: str, text: str) -> None:
        if rel in GENERATED or not MATRIX.is_file():
            return
        declared = declared_by_minor()
        for line, minor, package, spec in range_claims(text):
            if minor not in declared:
                continue  # a TRL minor outside the recorded matrix
            if package not in declared[minor]:
                continue  # not a package TRL declares (an install pin the text advises)
            if normalized(spec) in declared[minor][package]:
                self.record(rel, line, "range", f"{package}{spec}")  # type: ignore[attr-defined]
                continue
            known = sorted(f"{package}{','.join(s)}" for s in declared[minor][package])
            self.fail(  # type: ignore[attr-defined]
                rel,
                line,
                "range",
                f"{package}{spec}",
                f"what TRL {minor} declares (scripts/stack/matrix.json)",
                known,
                note="quote the release's own range, or point to troubleshooting/compatibility.md",
            )
