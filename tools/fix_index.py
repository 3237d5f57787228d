#!/usr/bin/env python3
"""Build ``scripts/fixes/index.json.gz``: every merged change, by the first release that ships it.

    python3 tools/fix_index.py --mirrors /path/to/mirrors          # rebuild from bare git mirrors
    python3 tools/fix_index.py --repo trl=/path/to/trl.git ...      # or name each package's git directory
    python3 tools/fix_index.py --check                              # validate the committed index, offline

Source: each repository's tagged history. A release tag is a final version (``v1.9.0``, ``0.50.1``; no rc/dev).
Commits are assigned to releases by walking the tags in version order: the commits of tag T that no tag of a
lower version reaches (``git log T --not <lower tags>``) first shipped in T, which is exactly the lowest-version tag
that ``git tag --contains`` lists. A squash-merge subject ends in ``(#N)``, the pull request; a merge commit's
``Merge pull request #N`` takes its title from the body. A pull request cherry-picked into a patch release on a
branch keeps its number, so a change's release is the lowest release over its commits. Commits on the default
branch that no tag reaches are kept with release ``-1`` (untagged in the snapshot).

Only changes that touch the installed package (its source folder and build files) are kept, and only from the
first release of the window on; touched files are stored as module paths below the package folder (``.py``
dropped), at most MAX_PATHS of them. A subject that reverts or fixes a regression from ``#N`` (``Revert "…
(#N)"``, ``revert #N``, ``regression from/introduced by/in/caused by #N``) records ``[N, release of N]``.

``--samples FILE`` (written on every build) records, for a deterministic sample of changes, the lowest final release
that ``git tag --contains`` lists for each of the change's commits; the build fails when the walk disagrees, and
tests/test_fix_index.py checks the shipped index against that file.

Not indexed: transformers (its mirror is over the fetch limit; ``--repo transformers=DIR`` with the training paths
of SOURCE_PATHS works when a mirror exists) and vLLM (no mirror, and no complete release-notes source).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

TOOLS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parent
FIXES_DIR = REPO_ROOT / "skills" / "scaling-and-backends" / "scripts" / "fixes"
DEFAULT_OUTPUT = FIXES_DIR / "index.json.gz"
if str(FIXES_DIR.parent) not in sys.path:
    sys.path.insert(0, str(FIXES_DIR.parent))

from fixes.load import words  # noqa: E402  (the search's own tokens, stored so the command need not compute them)

DEFAULT_SAMPLES = REPO_ROOT / "tests" / "fixtures" / "fix_index_samples.json"
SCHEMA = 1
MAX_PATHS = 8
MAX_TITLE = 120
SAMPLE_COUNT = 24

# package -> (owner/name, first release of the window)
PACKAGES: Dict[str, Tuple[str, str]] = {
    "trl": ("huggingface/trl", "0.19.0"),
    "accelerate": ("huggingface/accelerate", "1.4.0"),
    "peft": ("huggingface/peft", "0.8.0"),
    "deepspeed": ("deepspeedai/DeepSpeed", "0.14.4"),
    "bitsandbytes": ("bitsandbytes-foundation/bitsandbytes", "0.45.0"),
    "liger-kernel": ("linkedin/Liger-Kernel", "0.5.9"),
    "kernels": ("huggingface/kernels", "0.1.0"),
    "transformers": ("huggingface/transformers", "4.56.0"),
}
# package -> (prefixes that are stripped and kept as module paths, files kept by name)
SOURCE_PATHS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    "trl": (("trl/",), ("pyproject.toml", "setup.py", "setup.cfg")),
    "accelerate": (("src/accelerate/",), ("setup.py", "pyproject.toml")),
    "peft": (("src/peft/",), ("setup.py", "pyproject.toml")),
    "deepspeed": (
        ("deepspeed/", "csrc/", "op_builder/", "accelerator/"),
        ("setup.py", "requirements/requirements.txt"),
    ),
    "bitsandbytes": (("bitsandbytes/", "csrc/"), ("pyproject.toml", "setup.py", "CMakeLists.txt")),
    "liger-kernel": (("src/liger_kernel/",), ("setup.py", "pyproject.toml")),
    "kernels": (("kernels/src/kernels/", "src/kernels/"), ("kernels/pyproject.toml", "pyproject.toml")),
    # transformers: only what training touches (documented in the module docstring of scripts/fixes/load.py)
    "transformers": (
        (
            "src/transformers/trainer",
            "src/transformers/training_args",
            "src/transformers/integrations/",
            "src/transformers/quantizers/",
            "src/transformers/modeling_utils",
            "src/transformers/modeling_flash_attention_utils",
            "src/transformers/optimization",
            "src/transformers/data/data_collator",
        ),
        ("setup.py", "pyproject.toml"),
    ),
}
# Keep the folder the prefix names (csrc/, op_builder/) so "csrc/adam" stays apart from "ops/adam".
KEEP_PREFIX = {"csrc/", "op_builder/", "accelerator/"}

FINAL_TAG = re.compile(r"^v?(\d+(?:\.\d+){1,3})(?:\.post\d+)?$")
PR_SUBJECT = re.compile(r"\(#(\d+)\)\s*$")
PR_MERGE = re.compile(r"^Merge pull request #(\d+) from ")
REVERT_QUOTED = re.compile(r'^Revert "(.*)"')
REGRESSION_REF = re.compile(
    r"(?:revert(?:s|ing)?|regression(?:s)?\s+(?:from|introduced\s+(?:by|in)|in|caused\s+by|of))\s*(?:pr\s*)?#(\d+)",
    re.IGNORECASE,
)


class BuildError(Exception):
    """The mirrors cannot give a trustworthy index."""


def version_tuple(text: str) -> Tuple[int, ...]:
    parts = tuple(int(p) for p in text.split("."))
    return parts + (0,) * (3 - len(parts)) if len(parts) < 3 else parts


def git(git_dir: str, *args: str) -> str:
    result = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BuildError(f"git {' '.join(args[:3])} in {git_dir}: {result.stderr.strip()[:200]}")
    return result.stdout


def release_tags(git_dir: str) -> List[Tuple[str, str]]:
    """(version, tag) of every final-release tag, in version order; the first tag per version wins."""
    seen: Dict[str, str] = {}
    for tag in git(git_dir, "tag", "--list").split():
        m = FINAL_TAG.match(tag)
        if m:
            seen.setdefault(".".join(str(p) for p in version_tuple(m.group(1))), tag)
    return sorted(seen.items(), key=lambda item: version_tuple(item[0]))


def compact_paths(package: str, files: Iterable[str]) -> List[str]:
    """Module paths below the package folder (``trainer/grpo_trainer``), build files by name; others dropped."""
    prefixes, named = SOURCE_PATHS[package]
    out: List[str] = []
    for name in files:
        kept: Optional[str] = None
        if name in named:
            kept = name
        else:
            for prefix in prefixes:
                if name.startswith(prefix):
                    rest = name[len(prefix) :] if prefix.endswith("/") else name[len(prefix.rsplit("/", 1)[0]) + 1 :]
                    kept = (prefix if prefix in KEEP_PREFIX else "") + re.sub(r"\.py$", "", rest)
                    break
        if kept and kept not in out:
            out.append(kept)
    return out


LOG_FORMAT = "%x1e%H%x1f%s%x1f%b%x1f"


def walk(git_dir: str, include: str, exclude: Sequence[str]) -> List[Tuple[str, str, str, List[str]]]:
    """(sha, subject, body's first line, files) of the commits of ``include`` that ``exclude`` does not reach."""
    text = git(
        git_dir,
        "log",
        f"--format={LOG_FORMAT}",
        "--name-only",
        "--diff-merges=first-parent",
        include,
        "--not",
        *exclude,
    )
    out = []
    for record in text.split("\x1e")[1:]:
        sha, subject, body, files = record.split("\x1f")
        first = next((line.strip() for line in body.splitlines() if line.strip()), "")
        out.append((sha, subject.strip(), first, [f for f in files.splitlines() if f.strip()]))
    return out


def pr_and_title(subject: str, body_first: str) -> Tuple[Optional[int], str]:
    m = PR_SUBJECT.search(subject)
    if m:
        return int(m.group(1)), subject[: m.start()].strip()
    m = PR_MERGE.match(subject)
    if m:
        return int(m.group(1)), body_first or subject
    return None, subject


def regression_ref(subject: str) -> Optional[int]:
    """The pull request a revert or regression fix names, read from the subject only."""
    quoted = REVERT_QUOTED.match(subject)
    if quoted:
        inner = PR_SUBJECT.search(quoted.group(1)) or re.search(r"#(\d+)", quoted.group(1))
        return int(inner.group(1)) if inner else None
    m = REGRESSION_REF.search(subject)
    return int(m.group(1)) if m else None


def assign(git_dir: str) -> Tuple[List[str], Dict[int, dict], str, str]:
    """Releases (versions, in order), pull request -> change, the default branch's date and commit."""
    tags = release_tags(git_dir)
    if not tags:
        raise BuildError(f"{git_dir}: no release tags")
    versions = [v for v, _ in tags]
    changes: Dict[int, dict] = {}
    walks = [(i, tag, [t for _, t in tags[:i]]) for i, (_, tag) in enumerate(tags)]
    walks.append((-1, "HEAD", [t for _, t in tags]))
    for index, include, exclude in walks:
        for sha, subject, body_first, files in walk(git_dir, include, exclude):
            pr, title = pr_and_title(subject, body_first)
            if pr is None:
                continue
            change = changes.get(pr)
            if change is None:
                changes[pr] = {"release": index, "title": title, "subject": subject, "files": files, "shas": [sha]}
                continue
            change["shas"].append(sha)
            change["files"] = change["files"] + [f for f in files if f not in change["files"]]
            if index >= 0 and (change["release"] < 0 or index < change["release"]):
                change["release"] = index
    head = git(git_dir, "log", "-1", "--format=%cs %H", "HEAD").split()
    return versions, changes, head[0], head[1][:12]


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def build_package(package: str, git_dir: str) -> Tuple[dict, list, Dict[int, dict]]:
    versions, changes, date, head = assign(git_dir)
    first = version_tuple(PACKAGES[package][1])
    window = [i for i, v in enumerate(versions) if version_tuple(v) >= first]
    if not window:
        raise BuildError(f"{package}: no release from {PACKAGES[package][1]} on")
    offset = window[0]
    titles = {c["title"]: pr for pr, c in changes.items()}
    rows = []
    for pr, change in sorted(changes.items(), key=lambda item: (item[1]["release"] < 0, item[1]["release"], item[0])):
        index = change["release"]
        if 0 <= index < offset:
            continue
        paths = compact_paths(package, change["files"])
        if not paths:
            continue
        broke: object = 0
        ref = regression_ref(change["subject"])
        if ref is None and change["subject"].startswith('Revert "'):
            ref = titles.get(REVERT_QUOTED.match(change["subject"]).group(1))  # type: ignore[union-attr]
        if ref in changes and changes[ref]["release"] >= 0 and (index < 0 or changes[ref]["release"] < index):
            broke = [ref, versions[changes[ref]["release"]]]
        shown = paths[:MAX_PATHS] + ([f"+{len(paths) - MAX_PATHS}"] if len(paths) > MAX_PATHS else [])
        rows.append(
            [index - offset if index >= 0 else -1, pr, clip(change["title"], MAX_TITLE), ",".join(shown), broke]
        )
    meta = {"repo": PACKAGES[package][0], "releases": versions[offset:], "snapshot": date, "head": head}
    return meta, rows, changes


def earliest_containing(git_dir: str, sha: str) -> Optional[str]:
    """The lowest final release among ``git tag --contains SHA``."""
    found = []
    for tag in git(git_dir, "tag", "--contains", sha).split():
        m = FINAL_TAG.match(tag)
        if m:
            found.append(".".join(str(p) for p in version_tuple(m.group(1))))
    return min(found, key=version_tuple) if found else None


def samples_for(package: str, git_dir: str, meta: dict, rows: list, changes: Dict[int, dict], count: int) -> List[dict]:
    """A deterministic spread of released changes, each checked with ``git tag --contains``."""
    released = [row for row in rows if row[0] >= 0]
    if not released:
        return []
    step = max(1, len(released) // count)
    out = []
    for row in released[::step][:count]:
        answers = [earliest_containing(git_dir, sha) for sha in changes[row[1]]["shas"]]
        earliest = min((a for a in answers if a), key=version_tuple, default=None)
        walked = meta["releases"][row[0]]
        if earliest != walked:
            raise BuildError(f"{package} #{row[1]}: walk says {walked}, git tag --contains says {earliest}")
        out.append({"package": package, "pr": row[1], "commits": changes[row[1]]["shas"], "tag_contains": earliest})
    return out


def mirror_dir(root: Path, repo: str) -> Optional[Path]:
    base = root / repo.replace("/", "+")
    for candidate in (base / "repo", base):
        if (candidate / "HEAD").is_file():
            return candidate
    return None


def build(git_dirs: Dict[str, str], samples_per_package: int) -> Tuple[dict, List[dict]]:
    index: dict = {"schema": SCHEMA, "fields": ["release", "pr", "title", "paths", "broke"], "packages": {}}
    index["changes"] = {}
    samples: List[dict] = []
    for package in PACKAGES:
        if package not in git_dirs:
            continue
        meta, rows, changes = build_package(package, git_dirs[package])
        index["packages"][package] = meta
        index["changes"][package] = rows
        samples += samples_for(package, git_dirs[package], meta, rows, changes, samples_per_package)
    return index, samples


def with_tokens(index: dict) -> dict:
    """The index with each row's search tokens as a sixth field (space-joined): tokenising 3,000+ titles costs the
    lookup about 0.1 s per run, reading them costs a split."""
    out = dict(index, fields=["release", "pr", "title", "paths", "broke", "tokens"], changes={})
    for package, rows in index["changes"].items():
        out["changes"][package] = [
            [*row[:5], " ".join(words(row[2] + " " + " ".join(row[3].split(","))))] for row in rows
        ]
    return out


def encode(index: dict) -> bytes:
    text = json.dumps(with_tokens(index), ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def check(index: dict, samples: List[dict]) -> List[str]:
    """Problems with an index (and its recorded samples); empty when it is sound."""
    problems: List[str] = []
    if index.get("schema") != SCHEMA:
        return [f"schema {index.get('schema')!r}, expected {SCHEMA}"]
    for package, meta in index.get("packages", {}).items():
        releases = meta.get("releases", [])
        if [version_tuple(v) for v in releases] != sorted(version_tuple(v) for v in releases):
            problems.append(f"{package}: releases out of order")
        seen: Set[int] = set()
        for row in index["changes"].get(package, []):
            release, pr, title, paths, broke = row[:5]
            if not (release == -1 or 0 <= release < len(releases)):
                problems.append(f"{package} #{pr}: release index {release} out of range")
            if not isinstance(pr, int) or pr in seen:
                problems.append(f"{package} #{pr}: missing or repeated")
            seen.add(pr)
            if not title or not paths:
                problems.append(f"{package} #{pr}: no title or paths")
            if broke and not (isinstance(broke, list) and len(broke) == 2):
                problems.append(f"{package} #{pr}: bad regression record {broke!r}")
    for sample in samples:
        meta = index["packages"].get(sample["package"])
        rows = {row[1]: row for row in index["changes"].get(sample["package"], [])}
        row = rows.get(sample["pr"])
        if meta is None or row is None:
            problems.append(f"sample {sample['package']} #{sample['pr']}: not in the index")
        elif row[0] < 0 or meta["releases"][row[0]] != sample["tag_contains"]:
            problems.append(f"sample {sample['package']} #{sample['pr']}: index disagrees with git tag --contains")
    return problems


def load(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fix_index.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mirrors", metavar="DIR", help="a folder of bare mirrors named owner+name (or owner+name/repo)"
    )
    parser.add_argument("--repo", action="append", default=[], metavar="PKG=GITDIR", help="one package's git directory")
    parser.add_argument("--out", default=str(DEFAULT_OUTPUT), help="the index to write or check")
    parser.add_argument("--samples", default=str(DEFAULT_SAMPLES), help="the tag --contains samples to write or check")
    parser.add_argument("--check", action="store_true", help="validate the committed index offline; exit 1 if unsound")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    out, samples_path = Path(args.out), Path(args.samples)
    if args.check:
        try:
            problems = check(load(out), json.loads(samples_path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as error:
            problems = [f"unreadable: {error}"]
        for problem in problems:
            print(f"fix_index.py: {problem}", file=sys.stderr)
        return 1 if problems else 0
    git_dirs: Dict[str, str] = {}
    if args.mirrors:
        for package, (repo, _) in PACKAGES.items():
            found = mirror_dir(Path(args.mirrors), repo)
            if found:
                git_dirs[package] = str(found)
    for item in args.repo:
        package, _, path = item.partition("=")
        if package not in PACKAGES or not path:
            print(f"fix_index.py: --repo {item!r}: expected one of {', '.join(PACKAGES)}=GITDIR", file=sys.stderr)
            return 2
        git_dirs[package] = path
    if not git_dirs:
        print("fix_index.py: give --mirrors DIR or --repo PKG=GITDIR (or --check)", file=sys.stderr)
        return 2
    try:
        index, samples = build(git_dirs, max(1, SAMPLE_COUNT // len(git_dirs)))
    except BuildError as error:
        print(f"fix_index.py: {error}", file=sys.stderr)
        return 1
    problems = check(index, samples)
    if problems:
        print("\n".join(f"fix_index.py: {p}" for p in problems), file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(encode(index))
    samples_path.write_text(json.dumps(samples, indent=1) + "\n", encoding="utf-8")
    for package, meta in index["packages"].items():
        rows = index["changes"][package]
        untagged = sum(1 for r in rows if r[0] < 0)
        print(
            f"{package}: {meta['releases'][0]}..{meta['releases'][-1]} ({len(meta['releases'])} releases), "
            f"{len(rows)} changes ({untagged} untagged), snapshot {meta['snapshot']}"
        )
    print(f"wrote {out} ({out.stat().st_size:,} bytes) and {samples_path} ({len(samples)} samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
