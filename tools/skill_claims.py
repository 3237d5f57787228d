#!/usr/bin/env python3
"""Check every upstream name in the skill text against ``tests/facts/upstream_facts.json``.

    python3 tools/skill_claims.py                 # all skill files; prints one line per failure, exit 1 if any
    python3 tools/skill_claims.py FILE.md ...     # only these files
    python3 tools/skill_claims.py --claims FILE   # list the claims found (debugging the extractor)

The conventions it enforces are in docs/verification.md, "Writing skill text: the conventions the tests check".
In short:
inline code shaped like a flag, an env var, a route, a ``snake_case`` name, a ``*Config``/``*Trainer`` class or
``name=value`` is a claim; so are command lines in shell blocks, ``*Config(...)`` keywords in Python blocks, keys in
YAML blocks and blockquoted messages. Each claim must name something the pinned releases really have.

This file is the command; the checker lives in ``tools/claims/`` (one module per job). The names other code uses
(``Facts``, ``Checker``, ``Failure``, ``check_paths``, ...) stay importable from here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

TOOLS_DIR = Path(__file__).resolve().parent
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import claim_scopes  # noqa: E402
from claims.allowlist import Allowlist  # noqa: E402
from claims.checker import Checker  # noqa: E402
from claims.common import DEFAULT_ALLOWLIST, DEFAULT_FACTS, REPO_ROOT, SKILL_DIR  # noqa: E402
from claims.failures import Failure  # noqa: E402
from claims.helpers import _parser_flags  # noqa: E402
from claims.markdown import iter_code_spans, parse_markdown, skill_files  # noqa: E402
from claims.messages import _shorten, match_message, quote_matches_template  # noqa: E402
from claims.shell_split import iter_shell_commands  # noqa: E402
from claims.upstream import Facts  # noqa: E402

# Names other code reaches through this module (``import skill_claims as sc; sc.Facts``).
__all__ = [
    "DEFAULT_ALLOWLIST",
    "DEFAULT_FACTS",
    "REPO_ROOT",
    "SKILL_DIR",
    "Allowlist",
    "Checker",
    "Facts",
    "Failure",
    "_parser_flags",
    "build_parser",
    "check_paths",
    "claim_scopes",
    "iter_code_spans",
    "iter_shell_commands",
    "main",
    "match_message",
    "parse_markdown",
    "quote_matches_template",
    "skill_files",
]


def check_paths(
    paths: Sequence[Path],
    root: Path = SKILL_DIR,
    facts_path: Path = DEFAULT_FACTS,
    allowlist_path: Optional[Path] = DEFAULT_ALLOWLIST,
) -> Tuple[List[Failure], Checker]:
    allowlist = Allowlist.load(allowlist_path)
    checker = Checker(Facts.load(facts_path), root, allowlist, facts_path)
    for path in paths:
        checker.check_file(path)
    return sorted(set(checker.failures), key=lambda f: (f.path, f.line, f.kind, f.identifier)), checker


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Check the skill text's upstream names against the facts file.")
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: every skill file)")
    parser.add_argument(
        "--root",
        type=Path,
        default=SKILL_DIR,
        help="bundle root (default: this repository's skills/scaling-and-backends)",
    )
    parser.add_argument("--facts", type=Path, default=DEFAULT_FACTS, help="facts file")
    parser.add_argument("--allowlist", type=Path, default=DEFAULT_ALLOWLIST, help="allow-list file")
    parser.add_argument("--claims", action="store_true", help="print every claim found instead of failures")
    parser.add_argument(
        "--scopes",
        action="store_true",
        help="print each scope-checked claim with the releases it is stated for and where it holds",
    )
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    files = args.files or skill_files(args.root)
    try:
        failures, checker = check_paths(files, args.root, args.facts, args.allowlist)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.claims:
        for path, line, kind, identifier in checker.claims:
            print(f"{path}:{line}: [{kind}] {identifier}")
        return 0
    if args.scopes and checker.history is not None:
        history = checker.history
        for path, item in checker.resolved:
            stated = history.label(item.package, item.scope)
            holds = history.label(item.package, history.mask_indices(item.package, item.mask))
            claim = _shorten(item.identifier, 80)
            print(f"{path}:{item.line}: [{item.kind}] {claim} stated for {stated}; holds in {holds}")
        return 0
    problems = list(checker.allowlist.problems)
    if not args.files:
        problems += [f"{args.allowlist.name}: unused entry {name!r}" for name in checker.allowlist.unused()]
    for failure in failures:
        print(failure.format())
    for problem in problems:
        print(problem)
    total = len(failures) + len(problems)
    print(f"{total} failure(s) in {len(files)} file(s), {len(checker.claims)} claims checked", file=sys.stderr)
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
