"""Regular expressions compiled on first use.

The scripts never write bytecode, so every run pays for what it imports; compiling a module's patterns at import
was about a tenth of the default diagnostic's run, most of them for inputs the run never sees (a secret's shape,
a YAML anchor). :func:`lazy` returns a stand-in that compiles its pattern the first time one of its methods is
read and then binds the compiled pattern's methods to itself, so later calls cost what a compiled pattern's do.

Standard library only.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["LazyPattern", "lazy"]

_METHODS = ("search", "match", "fullmatch", "sub", "subn", "finditer", "findall", "split")


class LazyPattern:
    """A stand-in for ``re.compile(source, flags)`` that compiles on first use (see the module's docstring)."""

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source = source
        self._flags = flags

    def __getattr__(self, name: str) -> Any:  # reached only for names not yet bound to the instance
        if name.startswith("__"):
            raise AttributeError(name)
        compiled = self.__dict__.get("_compiled")
        if compiled is None:
            compiled = self._compiled = re.compile(self._source, self._flags)
            for method in _METHODS:
                setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)


def lazy(source: str, flags: int = 0) -> Any:
    """A pattern compiled on first use; typed ``Any`` so that callers keep ``re.Pattern``'s methods."""
    return LazyPattern(source, flags)
