"""Bundle contract checks shared by the real-repo tests and the fixture tests.

Every ``check_*`` function takes a bundle root and returns a list of problems, one human-readable line each
(``<file>:<line>: <what is wrong>``); an empty list means the bundle passes that check. The rules are documented in
``tests/test_bundle_contract.py``.
"""

from __future__ import annotations

import ast
import math
import os
import posixpath
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import unquote

import yaml

_TOOLS_DIR = Path(__file__).resolve().parent.parent / "tools"
if str(_TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(_TOOLS_DIR))

from claim_scopes import parse_scopes  # noqa: E402  (the skill text's release-scope grammar)

# --- the installed unit and the repository layout -----------------------------------------------------------------

ROOT_SKILL_NAME = "scaling-and-backends"
SUB_SKILLS = ("backend-selection", "vllm-reference", "troubleshooting")
# A sub-skill's index is README.md, not SKILL.md: Codex, Gemini CLI and the skills CLI register every SKILL.md they
# find under a skills folder as a skill of its own, so only the root may carry that name.
SUB_SKILL_INDEX = "README.md"
INSTALLED_UNIT = ("SKILL.md", "LICENSE", "agents", *SUB_SKILLS, "scripts")
# The repository holds the skill at skills/<name>/ (the folder every client route installs) and development files.
SKILLS_FOLDER = "skills"
DEV_ENTRIES = (
    ".ci",
    ".claude-plugin",
    ".gitignore",
    "CHANGELOG.md",
    "docs",
    "LICENSE",
    "README.md",
    "pyproject.toml",
    "tests",
    "tools",
)
ALLOWED_TOP_LEVEL = frozenset((SKILLS_FOLDER, *DEV_ENTRIES))
# Skipped by the directory walk used outside a git checkout: VCS data, environments, caches, build output.
WALK_SKIP_NAMES = frozenset({".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "build", "dist"})
WALK_SKIP_SUFFIXES = (".egg-info", ".pyc")

# --- frontmatter ---------------------------------------------------------------------------------------------------

FRONTMATTER_KEYS = frozenset({"name", "description", "disable-model-invocation", "metadata", "license"})
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 500
LICENSE_ID = "Apache-2.0"
APACHE_LICENSE_MARKERS = (
    "Apache License",
    "Version 2.0, January 2004",
    "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
    "END OF TERMS AND CONDITIONS",
)

# --- skills-ref (the spec validator) ---------------------------------------------------------------------------------

SKILLS_REF_VERSION = "0.1.1"
# The one error skills-ref 0.1.1 may report: our Claude Code extension field. Any other output is drift.
SKILLS_REF_EXPECTED_ERRORS = [
    "Unexpected fields in frontmatter: disable-model-invocation. "
    "Only ['allowed-tools', 'compatibility', 'description', 'license', 'metadata', 'name'] are allowed."
]
EXTENSION_FIELD = "disable-model-invocation"

# --- size budgets ----------------------------------------------------------------------------------------------------

ROOT_MAX_LINES = 120
MAX_ESTIMATED_TOKENS = 5000  # a file must stay strictly under this
CHARS_PER_TOKEN = 4

# --- machine paths ---------------------------------------------------------------------------------------------------

# An absolute path starts at a line start, a space, a quote, a bracket, "=" or ":"; not after a word character,
# "." (relative), "~" (home-relative, fine), ">" or "}" (after a placeholder), "$" or "-".
_ABSOLUTE = r"(?<![\w.~>}$-])"
MACHINE_PATH_PATTERNS = (
    re.compile(_ABSOLUTE + r"/(?:work|tmp|root|Users)/"),
    re.compile(_ABSOLUTE + r"/home/[A-Za-z0-9_.-]+/"),
    re.compile(r"(?<!\w)[A-Z]:\\"),
)

# --- time-sensitive wording ------------------------------------------------------------------------------------------

VERSIONS_HEADING = "## Versions (time-sensitive)"
# Regex fragments, matched case-insensitively; a longer name comes before its prefix (liger-kernel before liger).
PACKAGE_NAMES = (
    "trl",
    "vllm",
    "accelerate",
    "peft",
    "transformers",
    "deepspeed",
    "bitsandbytes",
    "liger[-_]kernel",
    "liger",
    "kernels",
    "pytorch",
    "torch",
    "flash[-_]attn",
    "flash[-_]attention",
    "unsloth",
    "huggingface[-_]hub",
    "python",
)
_VERSION_NUMBER = r"v?\d+\.(?:\d+|x|\*)(?:\.(?:\d+|x|\*))*\+?"
PACKAGE_VERSION_RE = re.compile(
    r"(?<![\w-])(?:" + "|".join(PACKAGE_NAMES) + r")(?![A-Za-z_])"  # the package name
    r"(?:\[[^\]\s]*\])?"  # optional extras: trl[vllm]
    r"[\s(:]*(?:(?:[=<>!~^]=?|[≥≤@]|-)\s*)?"  # separator or specifier: " ", "==", ">=", "@", "-"
     + _VERSION_NUMBER,
    re.IGNORECASE,
)
VERSION_TAG_RE = re.compile(r"(?<![\w.-])[vV]\d+\.\d+(?:\.\d+)*")
TIME_WORDS_RE = re.compile(
    r"\b(?:latest|currently|as\s+of|recently|nowadays|new\s+in|at\s+the\s+time\s+of\s+writing"
    r"|this\s+(?:week|month|year))\b",
    re.IGNORECASE,
)
YEAR_RE = re.compile(r"(?<![\w#/.:-])(?:2019|20[23]\d)(?!\d)")
# `<!-- check: vllm==0.27.1 -->` is the claims checker's directive to test the next block against another release.
CHECK_DIRECTIVE_RE = re.compile(r"^\s*<!--\s*check:.*-->\s*$")


# ======================================================================================================================
# Files
# ======================================================================================================================


def list_files(root: Path) -> list[str]:
    """Relative POSIX paths of the files under ``root``.

    Inside a git work tree: git's view of ``root`` (tracked plus untracked files that are not ignored).
    Elsewhere (fixtures, an unpacked copy): a walk that skips VCS data, environments, caches and build output.
    Symbolic links are listed as entries and never followed.
    """
    from_git = _git_files(root)
    return from_git if from_git is not None else _walk_files(root)


def _git_files(root: Path) -> Optional[list[str]]:
    try:
        top = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=30
        )
        if top.returncode != 0 or not top.stdout.strip():
            return None
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if listed.returncode != 0:
        return None
    names = {name for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if name}
    return sorted(name for name in names if (root / name).is_file() or (root / name).is_symlink())


def _walk_skipped(name: str) -> bool:
    return name in WALK_SKIP_NAMES or name.endswith(WALK_SKIP_SUFFIXES)


def _walk_files(root: Path) -> list[str]:
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [name for name in dirnames if not _walk_skipped(name)]
        # os.walk lists a symlinked directory among dirnames without entering it: report it as an entry.
        linked_dirs = [name for name in dirnames if (here / name).is_symlink()]
        dirnames[:] = [name for name in dirnames if name not in linked_dirs]
        for name in filenames + linked_dirs:
            if not _walk_skipped(name):
                found.append((here / name).relative_to(root).as_posix())
    return sorted(found)


def exists_with_exact_case(root: Path, relative: str) -> bool:
    """True when every component of ``relative`` appears, spelt exactly so, in its parent's directory listing."""
    current = root
    for part in relative.split("/"):
        try:
            names = os.listdir(current)
        except OSError:
            return False
        if part not in names:
            return False
        current = current / part
    return True


def skill_md_paths() -> list[tuple[str, str]]:
    """(relative path, expected ``name``) of each file with frontmatter: the root ``SKILL.md``, each sub-skill index."""
    return [("SKILL.md", ROOT_SKILL_NAME)] + [(f"{sub}/{SUB_SKILL_INDEX}", sub) for sub in SUB_SKILLS]


def repository_of(root: Path) -> Optional[Path]:
    """The repository holding a bundle root at ``<repository>/skills/<name>/``, or None when it sits elsewhere."""
    return root.parent.parent if root.parent.name == SKILLS_FOLDER else None


def skill_markdown_files(root: Path) -> list[str]:
    """Every skill Markdown file: the root ``SKILL.md`` and every ``.md`` file inside a sub-skill folder."""
    files = list_files(root)
    chosen = [path for path in files if path == "SKILL.md"]
    chosen += [path for path in files if path.endswith(".md") and path.split("/")[0] in SUB_SKILLS]
    return chosen


def is_reference_file(relative: str) -> bool:
    """A Markdown file in a sub-skill folder that is not its index (nor the root ``SKILL.md``)."""
    return relative.endswith(".md") and posixpath.basename(relative) not in ("SKILL.md", SUB_SKILL_INDEX)


def estimated_tokens(text: str) -> int:
    """Token estimate used by the size budget: characters / 4, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


# ======================================================================================================================
# Markdown scanning
# ======================================================================================================================


@dataclass(frozen=True)
class MarkdownLine:
    number: int  # 1-based
    text: str
    kind: str  # "frontmatter", "fence" (a fenced code block, its delimiters included) or "prose"


_FENCE_OPEN_RE = re.compile(r"^\s*(`{3,}|~{3,})")
_INLINE_CODE_RE = re.compile(r"(`+)(.+?)\1")


def scan_markdown(text: str) -> list[MarkdownLine]:
    """Classify each line of a Markdown file as frontmatter, fenced code or prose."""
    lines = text.splitlines()
    scanned: list[MarkdownLine] = []
    index = 0
    if lines and lines[0].rstrip() == "---":
        closing = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
        if closing is not None:
            scanned += [MarkdownLine(i + 1, lines[i], "frontmatter") for i in range(closing + 1)]
            index = closing + 1
    fence: Optional[str] = None
    for i in range(index, len(lines)):
        line = lines[i]
        if fence is None:
            opening = _FENCE_OPEN_RE.match(line)
            if opening:
                fence = opening.group(1)
                scanned.append(MarkdownLine(i + 1, line, "fence"))
            else:
                scanned.append(MarkdownLine(i + 1, line, "prose"))
        else:
            scanned.append(MarkdownLine(i + 1, line, "fence"))
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
    return scanned


def without_inline_code(line: str) -> str:
    """The line with every inline code span blanked out (same length, so columns stay put)."""
    return _INLINE_CODE_RE.sub(lambda match: " " * len(match.group(0)), line)


# ======================================================================================================================
# Frontmatter
# ======================================================================================================================


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.safe_load`` semantics, but a repeated mapping key is an error instead of silently winning."""


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def split_frontmatter(text: str) -> Optional[list[str]]:
    """The frontmatter lines between the opening ``---`` (first line) and the next ``---`` line, or None."""
    lines = text.splitlines()
    if not lines or lines[0].rstrip() != "---":
        return None
    for index in range(1, len(lines)):
        if lines[index].rstrip() == "---":
            return lines[1:index]
    return None


def frontmatter_problems(text: str, expected_name: str) -> list[str]:
    """What is wrong with one ``SKILL.md``'s frontmatter (without the file name)."""
    raw = split_frontmatter(text)
    if raw is None:
        return ["no YAML frontmatter (the file must start with a '---' line and close it with another)"]
    try:
        data = yaml.load("\n".join(raw), Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        return [f"frontmatter is not valid YAML: {' '.join(str(error).split())}"]
    if not isinstance(data, dict):
        return ["frontmatter is not a YAML mapping"]
    problems: list[str] = []
    keys = set(data)
    if keys - FRONTMATTER_KEYS:
        problems.append(f"unexpected frontmatter keys {sorted(keys - FRONTMATTER_KEYS, key=str)}")
    if FRONTMATTER_KEYS - keys:
        problems.append(f"missing frontmatter keys {sorted(FRONTMATTER_KEYS - keys)}")
    problems += _name_problems(data.get("name"), expected_name)
    if "description" in data:
        problems += _description_problems(data["description"], raw)
    if "disable-model-invocation" in data and data["disable-model-invocation"] is not True:
        problems.append(f"disable-model-invocation must be the boolean true, got {data['disable-model-invocation']!r}")
    if "metadata" in data:
        problems += _metadata_problems(data["metadata"])
    if "license" in data and data["license"] != LICENSE_ID:
        problems.append(f"license must be {LICENSE_ID!r}, got {data['license']!r}")
    return problems


def _name_problems(name: object, expected_name: str) -> list[str]:
    if name is None:
        return []  # reported as a missing key
    if not isinstance(name, str):
        return [f"name must be a string, got {name!r}"]
    problems = []
    if not NAME_RE.match(name) or len(name) > MAX_NAME_CHARS:
        problems.append(f"name {name!r} must match {NAME_RE.pattern} and have at most {MAX_NAME_CHARS} characters")
    if name != expected_name:
        problems.append(f"name {name!r} must be {expected_name!r}")
    return problems


def _description_problems(description: object, raw: list[str]) -> list[str]:
    problems = []
    raw_line = next((line for line in raw if line.startswith("description:")), "")
    if not raw_line.startswith('description: "'):
        problems.append('description must be a double-quoted YAML scalar (the line must start with description: ")')
    if not isinstance(description, str) or not description.strip():
        return [*problems, "description must be a non-empty string"]
    if len(description) > MAX_DESCRIPTION_CHARS:
        problems.append(f"description has {len(description)} characters; the limit is {MAX_DESCRIPTION_CHARS}")
    if "<" in description or ">" in description:
        problems.append("description must not contain angle brackets")
    return problems


def _metadata_problems(metadata: object) -> list[str]:
    if not isinstance(metadata, dict):
        return [f"metadata must be a mapping, got {metadata!r}"]
    problems = [
        f"metadata entry {key!r}: {value!r} must map a string to a string"
        for key, value in metadata.items()
        if not isinstance(key, str) or not isinstance(value, str)
    ]
    if metadata.get("disco-role") != "operating":
        problems.append(f"metadata.disco-role must be 'operating', got {metadata.get('disco-role')!r}")
    return problems


def frontmatter_version(text: str) -> Optional[str]:
    """``metadata.version`` of a ``SKILL.md`` (the release number; only the root carries it), or None."""
    raw = split_frontmatter(text)
    try:
        data = yaml.safe_load("\n".join(raw)) if raw is not None else None
    except yaml.YAMLError:
        return None
    metadata = data.get("metadata") if isinstance(data, dict) else None
    version = metadata.get("version") if isinstance(metadata, dict) else None
    return version if isinstance(version, str) else None


def root_version_problems(text: str) -> list[str]:
    """The root ``SKILL.md`` carries the release number as ``metadata.version``, MAJOR.MINOR.PATCH."""
    version = frontmatter_version(text)
    if version is None or not VERSION_RE.match(version):
        return [f"metadata.version must be a MAJOR.MINOR.PATCH string, got {version!r}"]
    return []


def frontmatter_name(text: str) -> Optional[str]:
    raw = split_frontmatter(text)
    try:
        data = yaml.safe_load("\n".join(raw)) if raw is not None else None
    except yaml.YAMLError:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


def check_frontmatter(root: Path) -> list[str]:
    """Frontmatter of every ``SKILL.md``: keys, name, description, the extension flag, metadata, license."""
    problems: list[str] = []
    owners: dict[str, str] = {}
    for relative, expected_name in skill_md_paths():
        if not exists_with_exact_case(root, relative):
            problems.append(f"{relative}: missing")
            continue
        text = (root / relative).read_text(encoding="utf-8")
        problems += [f"{relative}: {problem}" for problem in frontmatter_problems(text, expected_name)]
        if relative == "SKILL.md":
            problems += [f"{relative}: {problem}" for problem in root_version_problems(text)]
        name = frontmatter_name(text)
        if name is not None and name in owners:
            problems.append(f"{relative}: name {name!r} is already used by {owners[name]}")
        elif name is not None:
            owners[name] = relative
    return problems


def check_license(root: Path) -> list[str]:
    """A ``LICENSE`` file at the root that holds the Apache License 2.0 text."""
    if not exists_with_exact_case(root, "LICENSE"):
        return ["LICENSE: missing at the bundle root"]
    text = (root / "LICENSE").read_text(encoding="utf-8")
    return [f"LICENSE: does not contain {marker!r}" for marker in APACHE_LICENSE_MARKERS if marker not in text]


# ======================================================================================================================
# skills-ref
# ======================================================================================================================


def check_skills_ref(root: Path, work_dir: Path) -> list[str]:
    """Run skills-ref on a copy of each skill at ``<work_dir>/<name>/`` (root: the installed unit).

    Full validation must return exactly ``SKILLS_REF_EXPECTED_ERRORS``; validating the parsed metadata without
    the extension field must return nothing. Needs skills-ref importable (Python 3.11+).
    """
    from skills_ref.errors import ParseError
    from skills_ref.parser import parse_frontmatter
    from skills_ref.validator import validate, validate_metadata

    problems: list[str] = []
    for relative, name in skill_md_paths():
        copy = work_dir / name
        if copy.exists():
            shutil.rmtree(copy)
        _copy_skill(root, posixpath.dirname(relative), copy)
        errors = validate(copy)
        if errors != SKILLS_REF_EXPECTED_ERRORS:
            problems.append(
                f"{relative}: skills-ref validate() returned {errors!r}; expected exactly the extension-field error"
            )
        try:
            metadata, _ = parse_frontmatter((copy / "SKILL.md").read_text(encoding="utf-8"))
        except (OSError, ParseError) as error:
            problems.append(f"{relative}: skills-ref could not parse the frontmatter: {error}")
            continue
        metadata.pop(EXTENSION_FIELD, None)
        errors = validate_metadata(metadata, copy)
        if errors:
            problems.append(f"{relative}: skills-ref validate_metadata() without {EXTENSION_FIELD} returned {errors!r}")
    return problems


def _copy_skill(root: Path, folder: str, destination: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    if folder:
        source = root / folder
        if source.is_dir():
            shutil.copytree(source, destination, ignore=ignore)
            index = destination / SUB_SKILL_INDEX
            if index.is_file():  # validated as the skill it would be if a client registered the folder alone
                index.rename(destination / "SKILL.md")
        else:
            destination.mkdir(parents=True)
        return
    destination.mkdir(parents=True)
    for entry in INSTALLED_UNIT:
        source = root / entry
        if source.is_dir():
            shutil.copytree(source, destination / entry, ignore=ignore)
        elif source.is_file():
            shutil.copy2(source, destination / entry)


# ======================================================================================================================
# Layout
# ======================================================================================================================


def check_installed_unit(root: Path) -> list[str]:
    """The installed unit's entries exist; no symlinks; ``SKILL.md`` and other Markdown only where the checks look."""
    problems = []
    for entry in INSTALLED_UNIT:
        if not exists_with_exact_case(root, entry):
            problems.append(f"{entry}: missing from the installed unit")
        elif (root / entry).is_dir() != (entry not in ("SKILL.md", "LICENSE")):
            problems.append(f"{entry}: wrong kind of entry (file versus folder)")
    for relative in list_files(root):
        if relative.split("/")[0] not in INSTALLED_UNIT:
            continue
        if (root / relative).is_symlink():
            problems.append(f"{relative}: symbolic links are not allowed in the installed unit")
        if posixpath.basename(relative).lower() == "skill.md" and relative != "SKILL.md":
            problems.append(
                f"{relative}: only the root may hold a SKILL.md (clients register every one as a skill); "
                f"a sub-skill's index is {SUB_SKILL_INDEX}"
            )
        elif relative.endswith(".md") and relative != "SKILL.md" and relative.split("/")[0] not in SUB_SKILLS:
            problems.append(f"{relative}: Markdown in the installed unit belongs in a sub-skill folder")
    return problems


def check_top_level(root: Path) -> list[str]:
    """Every top-level entry of the repository is part of the installed unit or a known development entry."""
    repository = repository_of(root)
    if repository is None:
        return [f"{root.name}: the bundle must sit at <repository>/{SKILLS_FOLDER}/{ROOT_SKILL_NAME}/"]
    others = sorted(entry.name for entry in (repository / SKILLS_FOLDER).iterdir() if entry.name != root.name)
    problems = [f"{SKILLS_FOLDER}/{name}: the skills folder holds only {ROOT_SKILL_NAME}/" for name in others]
    entries = sorted({relative.split("/")[0] for relative in list_files(repository)})
    return problems + [
        f"{entry}: unexpected top-level entry (allowed: {', '.join(sorted(ALLOWED_TOP_LEVEL))})"
        for entry in entries
        if entry not in ALLOWED_TOP_LEVEL
    ]


# ======================================================================================================================
# Links and reference depth
# ======================================================================================================================


@dataclass(frozen=True)
class Link:
    source: str  # file the link is in, relative to the bundle root
    line: int
    target: str  # as written
    resolved: Optional[str]  # bundle-relative path of a local target; None for URLs, anchors and broken targets
    problem: Optional[str]


_INLINE_LINK_RE = re.compile(r"\[[^\]]*\]\(\s*(<[^>]*>|[^\s)]*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_REFERENCE_DEFINITION_RE = re.compile(r"^\s{0,3}\[(?!\^)[^\]]+\]:\s*(<[^>]*>|\S+)")  # not a [^footnote]:
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_EXTERNAL_SCHEMES = ("http:", "https:", "mailto:")


def links_in(root: Path, source: str) -> list[Link]:
    """Inline links, images and reference definitions in the prose of one Markdown file (code is not a link)."""
    found = []
    for line in scan_markdown((root / source).read_text(encoding="utf-8")):
        if line.kind != "prose":
            continue
        text = without_inline_code(line.text)
        targets = [match.group(1) for match in _INLINE_LINK_RE.finditer(text)]
        definition = _REFERENCE_DEFINITION_RE.match(text)
        if definition:
            targets.append(definition.group(1))
        for target in targets:
            resolved, problem = resolve_link(root, source, target)
            found.append(Link(source, line.number, target, resolved, problem))
    return found


def resolve_link(root: Path, source: str, target: str) -> tuple[Optional[str], Optional[str]]:
    """(bundle-relative target, problem). URLs, mailto and pure anchors give (None, None)."""
    target = target.strip("<>")
    if not target:
        return None, "empty link target"
    if target.lower().startswith(_EXTERNAL_SCHEMES) or target.startswith("#"):
        return None, None
    if _SCHEME_RE.match(target) or target.startswith(("/", "\\")) or "\\" in target:
        return None, "links must be relative paths inside the bundle"
    path = unquote(target.split("#", 1)[0].split("?", 1)[0])
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
    if joined.split("/")[0].lower() not in {entry.lower() for entry in INSTALLED_UNIT}:
        return None, "the target lies outside the installed unit"
    if not exists_with_exact_case(root, joined):
        return None, f"{joined} does not exist (names are case-sensitive)"
    return joined, None


def check_links(root: Path) -> list[str]:
    """Every relative link in skill Markdown resolves, with exact case, inside the installed unit."""
    problems = []
    for source in skill_markdown_files(root):
        for link in links_in(root, source):
            if link.problem:
                problems.append(f"{link.source}:{link.line}: broken link ({link.target}): {link.problem}")
    return problems


def check_reference_depth(root: Path) -> list[str]:
    """References are one level deep, the root routes to every sub-skill and every script command is named.

    A reference file (a Markdown file in a sub-skill folder other than its ``README.md`` index) links only to the
    root ``SKILL.md`` and the indexes, never to another reference file; the root ``SKILL.md`` links every sub-skill
    index; each reference file is linked from its own sub-skill's index; every script under ``scripts/`` that is a
    command (it has an ``if __name__ == "__main__":`` block) is mentioned by path in the root ``SKILL.md``.
    """
    problems = []
    markdown = skill_markdown_files(root)
    links = {source: links_in(root, source) for source in markdown}
    linked_from = {
        source: {link.resolved for link in found if link.resolved is not None} for source, found in links.items()
    }
    for source in filter(is_reference_file, markdown):
        for link in links[source]:
            if link.resolved is not None and is_reference_file(link.resolved):
                problems.append(
                    f"{source}:{link.line}: reference file links another reference file ({link.target}); "
                    "references must stay one level deep (link back to an index instead)"
                )
        sub_skill_md = f"{source.split('/')[0]}/{SUB_SKILL_INDEX}"
        if source not in linked_from.get(sub_skill_md, set()):
            problems.append(f"{source}: not linked from {sub_skill_md}")
    for sub in SUB_SKILLS:
        if f"{sub}/{SUB_SKILL_INDEX}" not in linked_from.get("SKILL.md", set()):
            problems.append(f"SKILL.md: does not link {sub}/{SUB_SKILL_INDEX}")
    root_text = (root / "SKILL.md").read_text(encoding="utf-8") if exists_with_exact_case(root, "SKILL.md") else ""
    for script in script_commands(root):
        if script not in root_text:
            problems.append(f"SKILL.md: does not mention the command {script}")
    return problems


def script_commands(root: Path) -> list[str]:
    """Python files under ``scripts/`` with a module-level ``if __name__ == "__main__":`` block."""
    commands = []
    for relative in list_files(root):
        is_python = relative.startswith("scripts/") and relative.endswith(".py")
        if is_python and has_main_block((root / relative).read_text(encoding="utf-8")):
            commands.append(relative)
    return commands


def has_main_block(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return bool(re.search(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", source, re.MULTILINE))
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            sides = [node.test.left, *node.test.comparators]
            names = {side.id for side in sides if isinstance(side, ast.Name)}
            constants = {side.value for side in sides if isinstance(side, ast.Constant)}
            if names == {"__name__"} and constants == {"__main__"}:
                return True
    return False


# ======================================================================================================================
# Sizes, machine paths, time-sensitive wording
# ======================================================================================================================


def check_sizes(root: Path) -> list[str]:
    """Root ``SKILL.md`` at most 120 lines; every skill Markdown file under 5,000 estimated tokens."""
    problems = []
    if exists_with_exact_case(root, "SKILL.md"):
        lines = len((root / "SKILL.md").read_text(encoding="utf-8").splitlines())
        if lines > ROOT_MAX_LINES:
            problems.append(f"SKILL.md: {lines} lines; the root budget is {ROOT_MAX_LINES}")
    for relative in skill_markdown_files(root):
        tokens = estimated_tokens((root / relative).read_text(encoding="utf-8"))
        if tokens >= MAX_ESTIMATED_TOKENS:
            problems.append(
                f"{relative}: about {tokens} tokens (characters/{CHARS_PER_TOKEN}); "
                f"each file must stay under {MAX_ESTIMATED_TOKENS}"
            )
    return problems


def machine_path_hits(text: str) -> list[tuple[int, str]]:
    """(line, matched text) of every absolute machine path in ``text``."""
    hits = []
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern in MACHINE_PATH_PATTERNS:
            hits += [(number, match.group(0)) for match in pattern.finditer(line)]
    return hits


def check_machine_paths(root: Path) -> list[str]:
    """No absolute machine path in any text file of the repository (binary and non-UTF-8 files are skipped)."""
    problems = []
    repository = repository_of(root) or root
    for relative in list_files(repository):
        path = repository / relative
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        problems += [f"{relative}:{line}: machine path {found!r}" for line, found in machine_path_hits(text)]
    return problems


def versions_heading_lines(text: str) -> list[int]:
    return [
        line.number for line in scan_markdown(text) if line.kind == "prose" and line.text.rstrip() == VERSIONS_HEADING
    ]


def without_scopes(line: str) -> str:
    """The line with its inline release scopes (``TRL ≥ 1.14``, ``vLLM 0.22–0.31``, ``removed in TRL 1.8``) blanked
    out: a scope names minors of TRL or vLLM, which the text may do anywhere. A patch release (``TRL 1.16.0``) stays
    a pin, and pins belong in the Versions section."""
    prose = without_inline_code(line)
    for scope in parse_scopes(prose):
        if not re.search(r"\d+\.\d+\.\d+", scope.text):
            line = line.replace(scope.text, " " * len(scope.text), 1)
    return line


def time_sensitive_hits(text: str) -> list[tuple[int, str, str]]:
    """(line, kind, matched text) of time-sensitive wording outside the ``## Versions (time-sensitive)`` section.

    Package pins and ``v1.2`` tags count everywhere (prose, inline code, fenced code, frontmatter), except inline
    release scopes in prose (``TRL ≥ 1.14``); the words and years count in prose and frontmatter only. A
    claims-checker directive line (``<!-- check: ... -->``) is exempt.
    """
    hits = []
    in_section = False
    for line in scan_markdown(text):
        if line.kind == "prose" and re.match(r"^#{1,2}\s", line.text):
            in_section = line.text.rstrip() == VERSIONS_HEADING
        if in_section or CHECK_DIRECTIVE_RE.match(line.text):
            continue
        checks: list[tuple[str, re.Pattern[str], Callable[[str], str]]] = [
            ("package version", PACKAGE_VERSION_RE, without_scopes if line.kind != "fence" else lambda value: value),
            ("version tag", VERSION_TAG_RE, lambda value: value),
        ]
        if line.kind != "fence":
            checks += [("word", TIME_WORDS_RE, without_inline_code), ("year", YEAR_RE, without_inline_code)]
        for kind, pattern, view in checks:
            hits += [(line.number, kind, match.group(0)) for match in pattern.finditer(view(line.text))]
    return hits


def check_time_sensitive(root: Path) -> list[str]:
    """One ``## Versions (time-sensitive)`` section per skill Markdown file; time-sensitive text only inside it."""
    problems = []
    for relative in skill_markdown_files(root):
        text = (root / relative).read_text(encoding="utf-8")
        headings = versions_heading_lines(text)
        if len(headings) != 1:
            where = f" (lines {', '.join(map(str, headings))})" if headings else ""
            problems.append(f"{relative}: needs exactly one '{VERSIONS_HEADING}' heading, found {len(headings)}{where}")
        problems += [
            f"{relative}:{line}: time-sensitive {kind} {found!r} outside '{VERSIONS_HEADING}'"
            for line, kind, found in time_sensitive_hits(text)
        ]
    return problems


# Checks that need nothing but the bundle root (skills-ref also needs a scratch folder and Python 3.11+).
CHECKS: dict[str, Callable[[Path], list[str]]] = {
    "installed_unit": check_installed_unit,
    "top_level": check_top_level,
    "frontmatter": check_frontmatter,
    "license": check_license,
    "links": check_links,
    "reference_depth": check_reference_depth,
    "sizes": check_sizes,
    "machine_paths": check_machine_paths,
    "time_sensitive": check_time_sensitive,
}


# ----------------------------------------------------------------------------------------------------------------------
# Fixture bundles are stored under names no agent client picks up and built under their real names at test time
# ----------------------------------------------------------------------------------------------------------------------

FIXTURE_SKILL_NAME = "SKILL.fixture.md"


def build_fixture_bundle(stored: Path) -> Path:
    """Copy ``stored`` to ``<new temporary repository>/skills/<its name>``, ``SKILL.fixture.md`` renamed ``SKILL.md``.

    The copy lives for the test session (removed at exit). Stored fixtures must not hold a real ``SKILL.md``: Codex,
    Gemini CLI and the skills CLI would list it as a skill of any clone of this repository.
    """
    import atexit
    import tempfile

    stray = sorted(path.relative_to(stored).as_posix() for path in stored.rglob("SKILL.md"))
    if stray:
        raise AssertionError(
            f"{stored}: stored fixtures hold a real SKILL.md ({', '.join(stray)}); name it {FIXTURE_SKILL_NAME}"
        )
    parent = Path(tempfile.mkdtemp(prefix="fixture-bundle-"))
    atexit.register(shutil.rmtree, parent, True)
    built = parent / SKILLS_FOLDER / stored.name
    built.parent.mkdir()
    shutil.copytree(stored, built, ignore=shutil.ignore_patterns("__pycache__"))
    for path in sorted(built.rglob(FIXTURE_SKILL_NAME)):
        path.rename(path.with_name("SKILL.md"))
    return built
