"""A failed claim, as one printed line, and the nearest real names to suggest."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable, Tuple

from .common import NEAREST_COUNT


@dataclass(frozen=True)
class Failure:
    path: str
    line: int
    kind: str
    identifier: str
    where: str
    nearest: Tuple[str, ...] = ()
    note: str = ""

    def format(self) -> str:
        if self.kind.startswith("scope"):
            return f"{self.path}:{self.line}: [{self.kind}] {self.identifier!r} {self.where}; {self.note}"
        text = f"{self.path}:{self.line}: [{self.kind}] {self.identifier!r} not found in {self.where}"
        if self.nearest:
            text += "; nearest: " + ", ".join(self.nearest)
        elif not self.note:
            text += "; nearest: (none)"
        if self.note:
            text += f"; {self.note}"
        return text


def nearest(name: str, candidates: Iterable[str], count: int = NEAREST_COUNT) -> Tuple[str, ...]:
    pool = sorted(set(candidates))
    found = difflib.get_close_matches(name, pool, n=count, cutoff=0.6)
    if not found:
        found = difflib.get_close_matches(name, pool, n=count, cutoff=0.4)
    return tuple(found)
