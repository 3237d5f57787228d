"""The allow-list: claims the checker cannot judge, each with its reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set


@dataclass
class Allowlist:
    entries: Dict[str, str]
    problems: List[str]
    used: Set[str] = field(default_factory=set)

    @classmethod
    def load(cls, path: Optional[Path]) -> Allowlist:
        entries: Dict[str, str] = {}
        problems: List[str] = []
        if path is None or not path.is_file():
            return cls(entries, problems)
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, reason = line.partition(" # ")
            name, reason = name.strip(), reason.strip()
            if not sep or not reason:
                problems.append(f"{path.name}:{number}: entry {name!r} needs a reason: '<identifier> # <reason>'")
                continue
            entries[name] = reason
        return cls(entries, problems)

    def allows(self, identifier: str) -> bool:
        if identifier in self.entries:
            self.used.add(identifier)
            return True
        return False

    def unused(self) -> List[str]:
        return sorted(set(self.entries) - self.used)
