#!/usr/bin/env python3
"""Install, update, check or remove the scaling-and-backends skill in an agent's skills folder.

    python3 tools/install_skill.py --agent claude                 # ~/.claude/skills/scaling-and-backends
    python3 tools/install_skill.py --agent codex --project        # ./.agents/skills/scaling-and-backends
    python3 tools/install_skill.py --agent dir --dest ~/my-skills # ~/my-skills/scaling-and-backends
    python3 tools/install_skill.py --agent claude --update        # replace an installed copy with this checkout
    python3 tools/install_skill.py --agent claude --check         # missing, changed and extra files
    python3 tools/install_skill.py --agent claude --uninstall     # remove a copy this tool installed

It copies exactly the installable files of ``skills/scaling-and-backends/`` (``SKILL.md``, ``LICENSE``, ``agents/``,
the three sub-skill folders and ``scripts/``; never ``__pycache__``, compiled files or dot files) into ``<skills
folder>/<skill name>`` and writes a stamp file (``.install-stamp.json``: version, agent and a SHA-256 per file). It
refuses to write into or remove a folder that has no stamp (a folder it did not install), and refuses to update or
remove a copy whose files were edited after installing. Standard library only. Exit codes: 0 done (or ``--check``
found the copy identical), 1 refused or ``--check`` found differences, 2 usage error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

# The bundle's own reading and output rules (regular files only, bounded, never blocking; strict JSON with its
# depth measured before parsing; the shared scrubber and escaping), without leaving bytecode in scripts/.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "skills" / "scaling-and-backends" / "scripts"))
from common.output import escape_controls, scrub  # noqa: E402
from common.read import InputError, read_whole  # noqa: E402
from common.values import InvalidValue, load_json  # noqa: E402

SKILL_NAME = "scaling-and-backends"
SUB_SKILLS = ("backend-selection", "vllm-reference", "troubleshooting")
# The installed unit: everything an agent reads or runs, nothing used only to develop the skill.
INSTALLED_ENTRIES = ("SKILL.md", "LICENSE", "agents", *SUB_SKILLS, "scripts")
STAMP_NAME = ".install-stamp.json"
STAMP_TOOL = "scaling-and-backends tools/install_skill.py"
# Never copied, never counted as an extra file in an installed copy (Python writes them when a script runs).
CACHE_DIR_NAMES = frozenset({"__pycache__"})
CACHE_SUFFIXES = (".pyc", ".pyo")

# Skills folders per agent: (user scope, relative to the home folder; project scope, relative to the working folder).
AGENT_SKILLS_DIRS = {
    "claude": (".claude/skills", ".claude/skills"),
    "codex": (".agents/skills", ".agents/skills"),
    "cursor": (".cursor/skills", ".cursor/skills"),
    "gemini": (".gemini/skills", ".gemini/skills"),
}
AGENTS = (*AGENT_SKILLS_DIRS, "dir")

STAMP_LIMIT = 4_000_000  # a stamp lists about a hundred files; a larger one is not ours
FILE_LIMIT = 64 * 1024 * 1024  # the largest file hashed; the unit's files are a few kB each
MAX_DEPTH = 32  # folder levels walked below a copy; the unit is four deep
MAX_ENTRIES = 100_000  # entries walked below a copy
_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
_PYC_RE = re.compile(r"^(?P<stem>[^.]+)\.[A-Za-z0-9_\-]+(?:\.opt-[12])?\.pyc$")  # name.cpython-311.opt-1.pyc

_VERSION_RE = re.compile(r"^\s+version:\s*[\"']?([^\"'\s]+)[\"']?\s*$")


class InstallError(Exception):
    """A refusal or an unusable source; the message says why and what to do."""


# ======================================================================================================================
# Facts: the source tree, an installed copy, its stamp
# ======================================================================================================================


def source_root() -> Path:
    """The skill folder of the checkout this tool belongs to: ``skills/scaling-and-backends`` beside ``tools/``."""
    return Path(__file__).resolve().parent.parent / "skills" / SKILL_NAME


def is_ignored(name: str) -> bool:
    """Names never copied: caches, compiled files and dot files (the stamp included)."""
    return name in CACHE_DIR_NAMES or name.endswith(CACHE_SUFFIXES) or name.startswith(".")


def installable_files(root: Path) -> list[str]:
    """Sorted relative POSIX paths of the files of the installed unit under ``root``.

    Symbolic links are refused (an installed copy must not point outside itself); a missing entry is an error.
    """
    files: list[str] = []
    for entry in INSTALLED_ENTRIES:
        path = root / entry
        if path.is_symlink():
            raise InstallError(f"{entry}: is a symbolic link; the installed unit holds plain files only")
        if path.is_file():
            files.append(entry)
        elif path.is_dir():
            files += _walk(root, path)
        else:
            raise InstallError(f"{root}: {entry} is missing; run this tool from a complete checkout")
    return sorted(files)


def _walk(root: Path, top: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        for name in dirnames:
            if (here / name).is_symlink() and not is_ignored(name):
                raise InstallError(f"{(here / name).relative_to(root).as_posix()}: symbolic links are not installed")
        dirnames[:] = sorted(name for name in dirnames if not is_ignored(name))
        for name in filenames:
            if is_ignored(name):
                continue
            if (here / name).is_symlink():
                raise InstallError(f"{(here / name).relative_to(root).as_posix()}: symbolic links are not installed")
            found.append((here / name).relative_to(root).as_posix())
    return found


def _entries(folder: Path) -> list[tuple[str, bool]]:
    """Every entry under ``folder`` as (relative POSIX path, is a real folder), walked without recursion and
    without following a symbolic link (a link, to a folder too, is listed as an entry). Refuses a tree deeper than
    :data:`MAX_DEPTH` or larger than :data:`MAX_ENTRIES`."""
    found: list[tuple[str, bool]] = []
    stack: list[tuple[Path, int]] = [(folder, 0)]
    while stack:
        here, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InstallError(f"{folder}: nests deeper than {MAX_DEPTH} folders; not a copy this tool installed")
        try:
            with os.scandir(here) as listing:
                children = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            raise InstallError(f"cannot list {here}: {error.strerror or error}") from None
        for child in children:
            if len(found) >= MAX_ENTRIES:
                raise InstallError(f"{folder}: more than {MAX_ENTRIES:,} entries; not a copy this tool installed")
            relative = Path(child.path).relative_to(folder).as_posix()
            is_dir = child.is_dir(follow_symlinks=False)
            found.append((relative, is_dir))
            if is_dir:
                stack.append((Path(child.path), depth + 1))
    return found


def _is_python_cache(relative: str, stamped: set[str]) -> bool:
    """A file Python itself writes beside a stamped module: ``dir/__pycache__/mod.<tag>.pyc`` for ``dir/mod.py``.
    Anything else under ``__pycache__`` or named ``*.pyc`` is the user's file and counts as extra."""
    parts = relative.split("/")
    if len(parts) < 2 or parts[-2] not in CACHE_DIR_NAMES:
        return False
    match = _PYC_RE.match(parts[-1])
    return match is not None and "/".join([*parts[:-2], match.group("stem") + ".py"]) in stamped


def present_files(folder: Path, stamped: Optional[set[str]] = None) -> list[str]:
    """Every file (and symbolic link) under an installed copy except the stamp and Python's own caches of stamped
    modules (used to find extra files). A ``__pycache__`` folder itself is not an entry; what it holds is."""
    stamped = stamped or set()
    found = []
    for relative, is_dir in _entries(folder):
        if relative == STAMP_NAME:
            continue
        if is_dir:
            continue
        if _is_python_cache(relative, stamped):
            continue
        found.append(relative)
    return sorted(found)


def read_file_bytes(path: Path, limit: int = FILE_LIMIT) -> bytes:
    """A regular file's bytes, never a FIFO, device or folder, never over ``limit``; else :class:`InstallError`."""
    if path.is_symlink():
        raise InstallError(f"{path}: is a symbolic link; refusing to follow it")
    try:
        return read_whole(str(path), limit).data
    except InputError as error:
        raise InstallError(f"{error.path}: {error.reason}") from None


def sha256(path: Path) -> str:
    return hashlib.sha256(read_file_bytes(path)).hexdigest()


def skill_version(root: Path) -> str:
    """``metadata.version`` from the frontmatter of ``root/SKILL.md``."""
    try:
        text = read_file_bytes(root / "SKILL.md", STAMP_LIMIT).decode("utf-8")
    except UnicodeDecodeError as error:
        raise InstallError(f"{root / 'SKILL.md'}: not UTF-8 text (byte {error.start})") from None
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise InstallError(f"{root / 'SKILL.md'}: no frontmatter")
    in_metadata = False
    for line in lines[1:]:
        if line.strip() == "---":
            break
        if not line.startswith((" ", "\t")):
            in_metadata = line.rstrip() == "metadata:"
            continue
        match = _VERSION_RE.match(line)
        if in_metadata and match:
            return match.group(1)
    raise InstallError(f"{root / 'SKILL.md'}: no metadata.version in the frontmatter")


def read_stamp(folder: Path) -> Optional[dict]:
    """The stamp this tool wrote into ``folder``, or None when there is none (or it is not ours: a link, a FIFO,
    a device, over :data:`STAMP_LIMIT`, too deep, or a file list that is not safe relative paths with digests). A
    stamp can come from anywhere (a cloned repository holds one with ``--project``), so nothing in it is trusted."""
    path = folder / STAMP_NAME
    if path.is_symlink():
        return None
    try:
        data = load_json(read_whole(str(path), STAMP_LIMIT).data, STAMP_NAME, max_bytes=STAMP_LIMIT, max_depth=8)
    except (InputError, InvalidValue):
        return None
    if not isinstance(data, dict) or data.get("tool") != STAMP_TOOL or not isinstance(data.get("files"), dict):
        return None
    if not all(_safe_relative(name) and isinstance(digest, str) and _DIGEST_RE.match(digest)
               for name, digest in data["files"].items()):  # fmt: skip
        return None
    return data


def _safe_relative(name: str) -> bool:
    """A stamp's file name: a relative POSIX path inside the copy (no ``..``, no absolute path, no controls)."""
    if not name or name.startswith("/") or "\\" in name or len(name) > 1000:
        return False
    if any(ord(char) < 0x20 or char == "\x7f" for char in name):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


# ======================================================================================================================
# Rules: compare a copy with its source or its stamp
# ======================================================================================================================


@dataclass
class Comparison:
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not (self.missing or self.changed or self.extra)


def compare(expected: dict[str, str], folder: Path) -> Comparison:
    """Files of ``folder`` against ``expected`` (relative path -> SHA-256)."""
    present = set(present_files(folder, set(expected)))
    result = Comparison()
    for relative in sorted(expected):
        if relative not in present:
            result.missing.append(relative)
        elif sha256(folder / relative) != expected[relative]:
            result.changed.append(relative)
    result.extra = sorted(present - set(expected))
    return result


def source_digests(root: Path) -> dict[str, str]:
    return {relative: sha256(root / relative) for relative in installable_files(root)}


# ======================================================================================================================
# Actions
# ======================================================================================================================


def destination(agent: str, scope: str, dest: Optional[str]) -> Path:
    """``<skills folder>/scaling-and-backends`` for the agent and scope, or under ``--dest``."""
    if dest is not None:
        base = Path(dest).expanduser()
    elif agent == "dir":
        raise InstallError("--agent dir needs --dest DIR (the skills folder that will hold scaling-and-backends/)")
    else:
        user_dir, project_dir = AGENT_SKILLS_DIRS[agent]
        base = Path.home() / user_dir if scope == "user" else Path.cwd() / project_dir
    return base.absolute() / SKILL_NAME


def _copy_tree(source: Path, files: list[str], target: Path, stamp: dict) -> None:
    target.mkdir(parents=True)
    for relative in files:
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / relative, target / relative)
    (target / STAMP_NAME).write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _make_stamp(source: Path, agent: str, digests: dict[str, str]) -> dict:
    return {"tool": STAMP_TOOL, "name": SKILL_NAME, "version": skill_version(source), "agent": agent, "files": digests}


def _require_own_unmodified(folder: Path, action: str) -> dict:
    stamp = read_stamp(folder)
    if stamp is None:
        raise InstallError(
            f"{folder} was not installed by this tool (no {STAMP_NAME}); refusing to {action} it. "
            "Move it away yourself if you mean to replace it."
        )
    edits = compare(stamp["files"], folder)
    if not edits.identical:
        raise InstallError(
            f"{folder} was edited after installing ({_describe(edits)}); refusing to {action} it. "
            "Keep your edits elsewhere, then remove the folder yourself."
        )
    return stamp


def install(source: Path, target: Path, agent: str) -> str:
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise InstallError(f"{target} exists and is not a folder; refusing to overwrite it")
    if target.exists():
        if read_stamp(target) is not None:
            raise InstallError(f"{target} is already installed; use --update to replace it")
        if any(target.iterdir()):
            raise InstallError(f"{target} exists and was not installed by this tool; refusing to overwrite it")
        target.rmdir()
    digests = source_digests(source)
    stamp = _make_stamp(source, agent, digests)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{SKILL_NAME}-", dir=target.parent))
    try:
        _copy_tree(source, sorted(digests), staging / "new", stamp)
        (staging / "new").rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return f"installed {SKILL_NAME} {stamp['version']} ({len(digests)} files) into {target}"


def update(source: Path, target: Path, agent: str) -> str:
    if not target.is_dir() or target.is_symlink():
        raise InstallError(f"{target} is not installed; run without --update to install it")
    old = _require_own_unmodified(target, "update")
    digests = source_digests(source)
    stamp = _make_stamp(source, agent, digests)
    staging = Path(tempfile.mkdtemp(prefix=f".{SKILL_NAME}-", dir=target.parent))
    try:
        _copy_tree(source, sorted(digests), staging / "new", stamp)
        target.rename(staging / "old")
        try:
            (staging / "new").rename(target)
        except OSError:
            (staging / "old").rename(target)  # put the installed copy back before reporting the failure
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return f"updated {SKILL_NAME} {old.get('version', '?')} -> {stamp['version']} in {target}"


def shown(text: str) -> str:
    """What this tool prints: secrets scrubbed, control characters in paths escaped (newlines kept)."""
    return escape_controls(scrub(text), keep_newlines=True)


def uninstall(target: Path) -> str:
    if not target.is_dir() or target.is_symlink():
        raise InstallError(f"{target} is not installed; nothing to remove")
    stamp = _require_own_unmodified(target, "remove")
    shutil.rmtree(target)
    return f"removed {SKILL_NAME} {stamp.get('version', '?')} from {target}"


def check(source: Path, target: Path) -> tuple[bool, str]:
    if not target.is_dir():
        return False, f"{target}: not installed"
    result = compare(source_digests(source), target)
    stamp = read_stamp(target)
    lines = []
    if stamp is None:
        lines.append(f"{target}: not installed by this tool (no {STAMP_NAME})")
    else:
        lines.append(f"{target}: installed version {stamp.get('version')}, source version {skill_version(source)}")
    for kind in ("missing", "changed", "extra"):
        lines += [f"  {kind}: {relative}" for relative in getattr(result, kind)]
    lines.append("identical to the source" if result.identical else f"differs from the source ({_describe(result)})")
    return result.identical and stamp is not None, "\n".join(lines)


def _describe(result: Comparison) -> str:
    parts = [f"{len(getattr(result, kind))} {kind}" for kind in ("missing", "changed", "extra")]
    return ", ".join(parts)


# ======================================================================================================================
# Command line
# ======================================================================================================================


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="install_skill.py",
        description="Install, update, check or remove the scaling-and-backends skill for one agent.",
        epilog="Exit codes: 0 done or identical, 1 refused or differences found, 2 usage error.",
    )
    parser.add_argument("--agent", required=True, choices=AGENTS, help="whose skills folder (dir: needs --dest)")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--user", dest="scope", action="store_const", const="user", help="home folder (default)")
    scope.add_argument("--project", dest="scope", action="store_const", const="project", help="working folder")
    parser.set_defaults(scope="user")
    parser.add_argument("--dest", metavar="DIR", help="the skills folder to use instead of the agent's")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--update", action="store_true", help="replace a copy this tool installed")
    action.add_argument("--uninstall", action="store_true", help="remove a copy this tool installed")
    action.add_argument("--check", action="store_true", help="report missing, changed and extra files")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    source = source_root()
    try:
        target = destination(args.agent, args.scope, args.dest)
    except InstallError as error:
        print(shown(f"install_skill.py: error: {error}"), file=sys.stderr)
        return 2
    try:
        if args.check:
            identical, report = check(source, target)
            print(shown(report))
            return 0 if identical else 1
        if args.uninstall:
            message = uninstall(target)
        elif args.update:
            message = update(source, target, args.agent)
        else:
            message = install(source, target, args.agent)
    except (InstallError, OSError) as error:
        print(shown(f"install_skill.py: {error}"), file=sys.stderr)
        return 1
    except RecursionError:
        print(shown(f"install_skill.py: {target}: nests too deep to walk; refusing"), file=sys.stderr)
        return 1
    print(shown(message))
    return 0


if __name__ == "__main__":
    sys.exit(main())
