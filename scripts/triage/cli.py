"""Command line of the log triage: the parser and ``main`` (read -> find -> match -> render)."""

from __future__ import annotations

import argparse
import time
from typing import Dict, List, Optional, Sequence

from common.output import HelpFormatter, dumps_strict, emit
from common.values import bounded_int
from triage import find
from triage.inputs import DEFAULT_MIB, MAX_MIB, Request, TriageInputError, build_request
from triage.match import Index, IndexUnreadable, Match, load_index
from triage.read import InputError, SourceStats, check_sources, iter_hits, make_sources, scanner
from triage.render import build_report, render_text

EPILOG = """\
what it reads:
  one or more log files (a rank or a server per file; a file name like rank3.log names the rank), or standard
  input ('-', the default), where lines may carry torchrun's '[rank3]:' / '[default3]:' prefixes. Files are read
  in pieces, never more than --max-mib each; only lines that hold an error, warning, kill, timeout, release or a
  message of the troubleshooting index are decoded. It writes nothing and runs nothing.

what it reports:
  the root failure: the first failure in time across the logs (each line's timestamp, else the last one before it
  in the same rank), with its file, line number, rank and host; the echoes it causes on other ranks (NCCL watchdog
  timeouts, ChildFailedError and the launcher's teardown, broken pipes) apart from it; the figures of an OOM;
  the releases the log prints; the troubleshooting entry (file and heading) whose quoted message the failure
  line holds, with the variant for your releases (--trl/--vllm, --report, else the log's); and the next command.
  A failure that no entry quotes is marked unknown, with the upstream package that prints it when the facts index
  knows the message, and the smallest excerpt worth reading (its traceback's last frames and the failure line).

exit codes:
  0  report produced (a known, unknown or no failure)
  2  usage error or unreadable input

examples:
  python3 scripts/triage_log.py train.log
  python3 scripts/triage_log.py logs/rank*.log vllm-server.log --trl 1.12.0 --vllm 0.27.1
  kubectl logs job/grpo | python3 scripts/triage_log.py --json
  python3 scripts/check_optional_backends.py --json > report.json
  python3 scripts/triage_log.py train.log --report report.json
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="triage_log.py",
        description=(
            "Read-only triage of a failed scaled TRL run's logs: finds the first failure across ranks and servers, "
            "separates it from its echoes, and names the troubleshooting entry and the next command."
        ),
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("logs", nargs="*", metavar="LOG", help="log files; '-' or none reads standard input")
    parser.add_argument("--trl", metavar="VERSION", help="the TRL release of the run (overrides the log and --report)")
    parser.add_argument("--vllm", metavar="VERSION", help="the vLLM release of the run (the server's)")
    parser.add_argument(
        "--report", metavar="FILE", help="a check_optional_backends.py --json report of the training environment"
    )
    parser.add_argument(
        "--max-mib",
        type=bounded_int(1, MAX_MIB),
        default=DEFAULT_MIB,
        metavar="MIB",
        help="read at most this many MiB of each log (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of text")
    parser.add_argument("--verbose", action="store_true", help="list every echo, later failure and known message")
    return parser


def triage(request: Request, index: Optional[Index] = None) -> Dict[str, object]:
    """The report for a request: read -> find -> match -> choose the root -> assemble."""
    start = time.perf_counter()
    index = index or load_index()
    sources = make_sources(request.paths)
    check_sources(sources)
    pattern = scanner(index.scan_tokens())
    stats: List[SourceStats] = []
    hits = iter_hits(sources, pattern, find.wants_context, request.limit_bytes, stats)
    findings = find.collect(hits, sources)
    matched: Dict[str, List[Match]] = {}
    for shape, group in findings.groups.items():
        if group.kind != find.OTHER or len(matched) < find.MAX_GROUPS:
            found = index.matches(group.text)
            if found:
                matched[shape] = found
    known = {shape for shape, found in matched.items() if any(m.message.kind == "entry" for m in found)}
    choice = find.choose_root(findings, known, len(sources))
    return build_report(
        findings,
        choice,
        index,
        matched,
        sources,
        stats,
        request.releases,
        request.release_origin,
        time.perf_counter() - start,
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        request = build_request(args)
        report = triage(request)
    except TriageInputError as error:
        parser.error(str(error))
    except InputError as error:
        parser.error(f"{error.path}: {error.reason}")
    except IndexUnreadable as error:
        parser.exit(2, f"triage_log.py: error: {error}\n")
    if request.json:
        emit(dumps_strict(report))
    else:
        emit(render_text(report, request.verbose))
    return 0
