"""Read source files straight out of a wheel (zip) or an sdist (tar.gz) without unpacking the archive."""

from __future__ import annotations

import ast
import hashlib
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class SourceArchive:
    """The text members of one release archive, addressed by their path inside the package.

    For an sdist the leading ``<name>-<version>/`` folder is stripped, so ``deepspeed/runtime/config.py`` names the
    same file in a wheel and in an sdist. Only members whose names end in ``suffixes`` are indexed; their bytes are
    read on demand.
    """

    def __init__(self, path: Path, suffixes: tuple = (".py", ".yaml", ".yml", ".txt", "METADATA", "PKG-INFO")) -> None:
        self.path = Path(path)
        self._zip: Optional[zipfile.ZipFile] = None
        self._tar: Optional[tarfile.TarFile] = None
        self._members: Dict[str, object] = {}
        self._trees: Dict[str, ast.Module] = {}
        name = self.path.name
        if name.endswith(".whl") or name.endswith(".zip"):
            self._zip = zipfile.ZipFile(self.path)
            for info in self._zip.infolist():
                if not info.is_dir() and info.filename.endswith(suffixes):
                    self._members[info.filename] = info
        elif name.endswith((".tar.gz", ".tgz", ".tar")):
            self._tar = tarfile.open(self.path)  # noqa: SIM115 - closed by close()/__exit__
            for info in self._tar.getmembers():
                if not info.isfile() or not info.name.endswith(suffixes):
                    continue
                parts = info.name.split("/", 1)
                if len(parts) == 2:
                    self._members[parts[1]] = info
        else:
            raise ValueError(f"unsupported archive type: {name}")

    def close(self) -> None:
        self._trees.clear()
        if self._zip is not None:
            self._zip.close()
        if self._tar is not None:
            self._tar.close()

    def __enter__(self) -> SourceArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def names(self, prefix: str = "", suffix: str = "") -> List[str]:
        """Sorted member paths that start with ``prefix`` and end with ``suffix``."""
        return sorted(n for n in self._members if n.startswith(prefix) and n.endswith(suffix))

    def has(self, path: str) -> bool:
        return path in self._members

    def read_text(self, path: str) -> str:
        """The decoded text of one member; ``KeyError`` when it is absent."""
        info = self._members[path]
        if self._zip is not None:
            data = self._zip.read(info)  # type: ignore[arg-type]
        else:
            assert self._tar is not None
            handle = self._tar.extractfile(info)  # type: ignore[arg-type]
            assert handle is not None
            data = handle.read()
        return data.decode("utf-8", errors="replace")

    def parse(self, path: str) -> ast.Module:
        """The AST of one Python member (cached per archive). A syntax error is fatal: the facts must not depend on
        the interpreter."""
        tree = self._trees.get(path)
        if tree is None:
            tree = self._trees[path] = ast.parse(self.read_text(path), filename=path)
        return tree

    def python_files(self, *prefixes: str) -> Iterator[str]:
        """Python members under any of ``prefixes`` (all of them when none is given), sorted."""
        for name in self.names(suffix=".py"):
            if not prefixes or any(name.startswith(p) for p in prefixes):
                yield name


def module_name(path: str) -> str:
    """``trl/trainer/grpo_config.py`` -> ``trl.trainer.grpo_config``; ``pkg/__init__.py`` -> ``pkg``."""
    stem = path[:-3] if path.endswith(".py") else path
    parts = stem.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)
