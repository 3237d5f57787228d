#!/usr/bin/env python3
"""Move the bundle's release window to what the registry serves today: one command over the existing generators.

    python3 tools/refresh_window.py            # ask PyPI, say what the windows miss, then regenerate everything
    python3 tools/refresh_window.py --plan     # only ask PyPI and print what to extend (exit 1 when anything)
    python3 tools/refresh_window.py --check    # every generator's --check, offline (what the tests check)

The plan compares the newest final release of each package on the registry (its JSON API, one request per package)
with the windows the generators declare: ``HISTORY`` and ``PINS`` in tools/refresh_upstream_facts.py, ``WINDOW``
and ``ACCEPTED_CAP`` in tools/stack_matrix.py. It edits none of them: each line names the constant and the value
to give it, because a new release also needs its text read (README "Moving the bundle to a new TRL or vLLM
release"). With nothing to extend (or ``--anyway``) it runs, in order: the upstream facts and release history, the
matrix (``--cache`` keeps pip's answers between runs), the stated floors and the generated compatibility section,
the release differences, the triage index and the planner defaults, then the scope checker over the skill text.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence

TOOLS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parent
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import refresh_upstream_facts as facts_tool  # noqa: E402
import stack_matrix  # noqa: E402

COMMAND = "python3 tools/refresh_window.py"
MATRIX_CACHE = facts_tool.DEFAULT_WHEEL_DIR.parent / "matrix"
# Generators in the order each one reads what the one before wrote: (label, argv to write, argv to check).
STEPS = (
    ("upstream facts and release history", ["tools/refresh_upstream_facts.py"], ["--offline", "--check"]),
    ("stack matrix", ["tools/stack_matrix.py"], ["--check"]),
    ("stated floors and compatibility section", ["tools/stack_matrix.py", "--stated-only"], None),
    ("release differences", ["tools/release_differences.py"], ["--check"]),
    ("triage index", ["tools/triage_index.py"], ["--check"]),
    ("planner defaults", ["-m", "tools.facts.planner_defaults"], ["--check"]),
    ("skill text scope checks", ["tools/skill_claims.py"], []),
)
# The index of upstream fixes is rebuilt from the repositories' tagged history (fetched mirrors, not PyPI): only
# with --mirrors; its check always runs.
FIX_INDEX = ("upstream fix index", ["tools/fix_index.py"], ["--check"])
FOLLOW_UP = (
    "then: the planner's choices follow the matrix; run python3 -m pytest -q tests/test_stack_pip_answers.py and\n"
    "re-record a case whose answer moved with python3 tools/record_pip_answers.py CASE (network), fix the text the\n"
    "scope checker flagged, update the 'Newest on PyPI on <date>' sentence of every Versions section, run the suite"
)
OFFLINE_MISS = "--offline was given"  # refresh_upstream_facts: an archive is not cached, so it cannot be re-read


class Extension(NamedTuple):
    """One window that does not reach the registry's newest release, and the edit that moves it."""

    package: str
    newest: str
    where: str  # the constant, in its file
    change: str  # the value to give it


def minor_cap(version: str) -> str:
    """``<X.(Y+1)``: a window cap that takes every patch of ``version``'s minor."""
    major, minor = version.split(".")[:2]
    return f"<{major}.{int(minor) + 1}"


def plan(
    newest: Mapping[str, str],
    history: Mapping[str, Sequence[str]],
    pins: Mapping[str, Sequence[str]],
    window: Mapping[str, str],
    caps: Mapping[str, str],
) -> List[Extension]:
    """What to extend so the windows reach ``newest`` (package -> newest final release on the registry).

    ``history``: the releases HISTORY indexes; ``pins``: the pinned releases per package, primary first;
    ``window`` and ``caps``: the matrix's declared ranges. Pure: no network, no files."""
    found: List[Extension] = []
    for name, spec in window.items():
        release = newest.get(name)
        if release and not stack_matrix.in_window(release, spec):
            lower = spec.split(",")[0]
            upper = f"<={release}" if name == "vllm" else minor_cap(release)
            found.append(Extension(name, release, f"WINDOW[{name!r}] in tools/stack_matrix.py", f"{lower},{upper}"))
    for name, cap in caps.items():
        release = newest.get(name)
        if release and not stack_matrix.in_window(release, cap):
            found.append(
                Extension(name, release, f"ACCEPTED_CAP[{name!r}] in tools/stack_matrix.py", minor_cap(release))
            )
    for name, releases in history.items():
        release = newest.get(name)
        if release and release not in releases and _after(release, releases):
            minor = ".".join(release.split(".")[:2]) + "."
            same = [r for r in releases if r.startswith(minor)]
            change = f"replace {same[-1]} with {release}" if same else f"append {release}"
            found.append(Extension(name, release, f"HISTORY[{name!r}] in tools/refresh_upstream_facts.py", change))
    for name, pinned in pins.items():
        release = newest.get(stack_matrix.versions.normalize_name(name))
        if not release or not _after(release, pinned):
            continue
        if name == "vllm":  # the primary stays the newest vLLM TRL's extra accepts; the newest is a further pin
            change = f'add Pin("vllm", "{release}") after the primary {pinned[0]}'
        else:
            change = f"{name} {pinned[0]} -> {release} (the primary pin)"
        found.append(Extension(name, release, "PINS in tools/refresh_upstream_facts.py", change))
    return found


def _after(release: str, known: Sequence[str]) -> bool:
    """True when ``release`` sorts after every one of ``known``."""
    return all((stack_matrix.versions.compare_versions(release, k) or 0) > 0 for k in known)


def current_windows() -> Dict[str, Mapping[str, object]]:
    """The windows the generators declare now (read from their modules, not copied)."""
    primaries: Dict[str, List[str]] = {}
    for pin in facts_tool.PINS:
        primaries.setdefault(pin.package, []).append(pin.version)
    return {
        "history": facts_tool.HISTORY,
        "pins": primaries,
        "window": stack_matrix.WINDOW,
        "caps": stack_matrix.ACCEPTED_CAP,
    }


def newest_on_registry(names: Sequence[str]) -> Dict[str, str]:
    """The newest final release of each package (the registry's JSON API; the matrix tool's own listing)."""
    found = {}
    for name in names:
        listing = stack_matrix.index_listing(name)
        if listing:
            found[name] = max(listing, key=stack_matrix.versions.version_key)  # type: ignore[arg-type]
    return found


def render_plan(extensions: Sequence[Extension]) -> List[str]:
    if not extensions:
        return ["the windows reach the newest release of every package on the registry"]
    lines = [f"{len(extensions)} window(s) to extend before regenerating:"]
    lines += [f"  {e.package} {e.newest}: {e.where}: {e.change}" for e in extensions]
    return lines


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, capture_output=True, text=True, check=False)


def check_all() -> int:
    """Every generator's check, offline; a facts check that lacks cached archives is reported as skipped."""
    failed = 0
    for label, argv, check in (*STEPS, FIX_INDEX):
        if check is None:
            continue
        done = _run([*argv, *check])
        if done.returncode == 0:
            print(f"ok       {label}")
        elif OFFLINE_MISS in done.stderr:
            print(f"skipped  {label}: the archives are not cached (run {COMMAND} once to fill the cache)")
        else:
            failed += 1
            print(f"stale    {label}:")
            for line in (done.stderr or done.stdout).strip().splitlines()[-8:]:
                print(f"    {line}")
    return 1 if failed else 0


def regenerate(cache: Path, mirrors: Optional[Path] = None) -> int:
    steps = [*STEPS]
    if mirrors is not None:
        label, argv, check = FIX_INDEX
        steps.append((label, [*argv, "--mirrors", str(mirrors)], check))
    else:
        print(f"== {FIX_INDEX[0]}: not rebuilt (pass --mirrors DIR, the folder of fetched repository mirrors)")
    for label, argv, _check in steps:
        extra = ["--cache", str(cache)] if argv == ["tools/stack_matrix.py"] else []
        print(f"== {label}: python3 {' '.join(argv + extra)}", flush=True)
        done = subprocess.run([sys.executable, *argv, *extra], cwd=REPO_ROOT, check=False)
        if done.returncode != 0:
            print(f"{label} failed (exit {done.returncode}); fix it, then rerun {COMMAND}", file=sys.stderr)
            return 1
    print(FOLLOW_UP)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="run every generator's check offline; exit 1 if stale")
    mode.add_argument("--plan", action="store_true", help="only print what the windows miss; exit 1 if anything")
    parser.add_argument("--anyway", action="store_true", help="regenerate even when a window misses a release")
    parser.add_argument("--cache", type=Path, default=MATRIX_CACHE, help=f"pip answers cache (default {MATRIX_CACHE})")
    parser.add_argument(
        "--mirrors", type=Path, help="folder of fetched repository mirrors (owner+name/): also rebuild the fix index"
    )
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.check:
        return check_all()
    windows = current_windows()
    names = sorted(set(windows["window"]) | set(windows["caps"]) | set(windows["history"]) | set(_pin_names()))
    extensions = plan(newest_on_registry(names), **windows)  # type: ignore[arg-type]
    print("\n".join(render_plan(extensions)))
    if args.plan:
        return 1 if extensions else 0
    if extensions and not args.anyway:
        print(f"edit those, then rerun {COMMAND} (or pass --anyway to regenerate the current windows)")
        return 1
    args.cache.mkdir(parents=True, exist_ok=True)
    return regenerate(args.cache, args.mirrors)


def _pin_names() -> List[str]:
    return [stack_matrix.versions.normalize_name(p.package) for p in facts_tool.PINS]


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
