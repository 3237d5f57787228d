#!/usr/bin/env python3
"""Compare ``check_optional_backends.py --json`` reports from the nodes of one job before a multi-node launch.

Reads N reports (files, ``-`` for standard input; a file may hold several reports, or the ``srun --label`` /
``pdsh`` output of all nodes), groups every fact that must agree, and prints each difference with the value on
each node ("nodes 0-3: X; node 4: Y"), a class (blocking, warning, info) and the fix. Reads only the files it is
given: no socket, no import of torch, no write. Standard library only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # like the diagnostic: leave no __pycache__ behind

import argparse  # noqa: E402
import os  # noqa: E402
from typing import Any, Optional, Sequence  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


from common.multinode import COLLECTION_TEMPLATES  # noqa: E402
from common.output import HelpFormatter, clean_tree, clip, dumps_strict, emit, escape_controls, run_cli  # noqa: E402
from nodes.compare import compare  # noqa: E402
from nodes.load import InputError, Request, UsageError, load_request  # noqa: E402
from nodes.render import render_text  # noqa: E402

PROG = "compare_nodes.py"
EPILOG = f"""\
classes: blocking (the job will hang or fail: different torch/NCCL/vLLM/TRL/DeepSpeed versions or CUDA builds,
duplicate hostnames, machine_rank or NODE_RANK, disagreeing main_process_ip/num_machines/num_processes, a
NCCL_SOCKET_IFNAME that selects no interface that is up, mixed GPU models under FSDP/DeepSpeed, unequal visible
GPU counts), warning (driver or Python differences, GPU memory, other packages, RDMA, other NCCL_*/GLOO_*
variables, each node's own errors), info (differences that rarely matter, such as which interfaces are up).

{COLLECTION_TEMPLATES}
exit codes: 0 comparison printed; 1 --require-consistent and a blocking difference; 2 usage error or unusable
input (unreadable file, not JSON, another tool's output, another schema_version, fewer than two reports).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Compare check_optional_backends.py --json reports from every node of one job and print what differs, "
            "grouped by value, with a class (blocking/warning/info) and a fix. Read-only."
        ),
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "reports",
        nargs="*",
        metavar="REPORT",
        help="report files of the training nodes ('-' reads standard input; a file may hold several reports or "
        "srun --label / pdsh output)",
    )
    parser.add_argument(
        "--vllm-server",
        action="append",
        default=[],
        metavar="REPORT",
        help="report of a vLLM server node (repeatable): compared with the trainers on torch, NCCL, vLLM and "
        "(where installed) TRL only, not on GPUs or the accelerate config",
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON (schema_version 1)")
    parser.add_argument(
        "--require-consistent", action="store_true", help="exit 1 when any blocking difference is found"
    )
    return parser


def parse_request(argv: Optional[Sequence[str]] = None) -> Request:
    """The command line as a Request (argparse exits on a flag it rejects)."""
    args = build_parser().parse_args(argv)
    return Request(tuple(args.reports), tuple(args.vllm_server), args.json, args.require_consistent)


def main(argv: Optional[Sequence[str]] = None, stdin: Any = None) -> int:
    """Entry point: 0 comparison printed, 1 --require-consistent failed, 2 usage error or unusable input."""
    try:
        request = parse_request(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        nodes = load_request(request, stdin)
    except UsageError as error:
        build_parser().print_usage(sys.stderr)
        sys.stderr.write(f"{PROG}: error: {escape_controls(str(error))}\n")
        return 2
    except InputError as error:  # a path or label with control characters is shown escaped
        sys.stderr.write(f"{PROG}: error: {escape_controls(str(error))}\n")
        return 2
    try:
        result = compare(nodes)
    except (AttributeError, KeyError, TypeError, ValueError) as error:  # a hand-edited or truncated report
        sys.stderr.write(
            f"{PROG}: error: a report does not have the structure check_optional_backends.py --json writes "
            f"({type(error).__name__}: {clip(str(error), 160)}); collect it again\n"
        )
        return 2
    result = clean_tree(result)  # every value scrubbed before rendering; control characters cannot forge lines
    emit(dumps_strict(result) if request.json else render_text(result))
    return 1 if request.require_consistent and result["counts"]["blocking"] else 0


if __name__ == "__main__":
    sys.exit(run_cli(main, PROG))  # scrubbed output; a closed pipe or a crash never shows a traceback
