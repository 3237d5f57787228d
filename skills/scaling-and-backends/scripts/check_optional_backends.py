#!/usr/bin/env python3
"""Read-only readiness report for the TRL scaling backends on this machine.

Gathers facts without importing torch or any backend (a default run reads package metadata, a few
source files as text, and asks ``nvidia-smi``/``rocm-smi`` with a short timeout), derives version
compatibility from the installed TRL's own metadata, and judges each backend path
(``ddp`` ... ``async-grpo-lora``) as ready, limited or unavailable with the smallest next step.

Facts are gathered by small functions, judged by separate rule functions, and printed by renderers
(text or ``--json``). Standard library only; ``packaging`` and PyYAML are used when present.

This file is the command line: it parses the flags into one ``diagnostic.inputs.Request``; the work lives in the
``diagnostic`` package (inputs; gather: packages, builds, compat, release_diff, gpus, rocm, launch, node,
interpreter, interpreter_hint and the opt-in probes and network; judge: rules, crosschecks, report; render,
release_lines) and the shared ``common`` helpers.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # a diagnostic must not leave __pycache__ behind (nor for its sibling modules)

import argparse  # noqa: E402
import os  # noqa: E402
from typing import Optional, Sequence  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from common.multinode import COLLECTION_TEMPLATES  # noqa: E402
from common.output import (  # noqa: E402
    SCRUBBER,
    HelpFormatter,
    clean_tree,
    dumps_strict,
    emit,
    fit_width,
    progress,
    run_cli,
)
from common.values import bounded_float  # noqa: E402
from diagnostic.base import (  # noqa: E402
    BACKEND_HELP,
    BACKEND_IDS,
    DEFAULT_NETWORK_TIMEOUT,
    DEFAULT_PROBE_TIMEOUT,
    PROBE_WORKERS,
    STACK_IDS,
    sanitize,
)
from diagnostic.gpus import DEFAULT_SMI_TIMEOUT  # noqa: E402
from diagnostic.inputs import Request, UsageError, load_request  # noqa: E402
from diagnostic.report import collect  # noqa: E402

_PACKAGE_LINES = "\n".join(["  " + ", ".join(STACK_IDS[:10]) + ",", "  " + ", ".join(STACK_IDS[10:])])
_BACKEND_LINES = "\n".join(f"  {bid:<16}{BACKEND_HELP[bid]}" for bid in BACKEND_IDS)
EPILOG = f"""\
backend ids (for --require):
{_BACKEND_LINES}

verdicts: ready (every static check passes; add --probe-imports for import evidence), limited (usable with a
caveat shown as evidence), unavailable (missing, too old/new, broken, or no suitable GPU). Each verdict that
is not ready names the smallest next step: a command for you to consider; this script never runs it.

package ids (for --probe-imports; module names work too):
{_PACKAGE_LINES}

what a default run does: reads package metadata (*.dist-info on sys.path) and a few installed source files as
text (torch/version.py with ast, TRL/transformers/accelerate version gates), asks nvidia-smi and rocm-smi
(each with a {DEFAULT_SMI_TIMEOUT:g} s timeout), reads the accelerate default config
($HF_HOME/accelerate/default_config.yaml; HF_HOME defaults to $XDG_CACHE_HOME/huggingface, that to ~/.cache)
and selected environment variables (secrets redacted). It imports no backend, opens no socket, writes no file
and creates no CUDA context.

probes (opt-in, each in its own subprocess with HF_HUB_OFFLINE=1, HF_HUB_DISABLE_UPDATE_CHECK=1,
TRANSFORMERS_OFFLINE=1 and a timeout, {PROBE_WORKERS} at a time): --probe-imports imports the stack packages
(a crash, hang or ImportError is reported, not raised); --probe-torch imports torch and reads torch.cuda device
properties and NCCL availability without allocating GPU memory. Importing a backend can take seconds.

--probe-network HOST:PORT[,HOST:PORT] (opt-in, off by default): resolves each host and opens one TCP connection
to it (nothing is sent) with a timeout (default {DEFAULT_NETWORK_TIMEOUT:g} s, or --timeout); each target is reported
ok, refused (nothing listens yet), timeout (packets dropped), unreachable or unresolved, with the time taken.

{COLLECTION_TEMPLATES}
output: compact text ending in a one-line verdict (home shown as ~ unless --verbose), or --json
(schema: scripts/check_optional_backends.schema.json).

exit codes: 0 report produced; 1 a --require backend is not ready; 2 usage error (unknown flag or backend id,
missing --accelerate-config file, a --probe-network value that is not HOST:PORT).
"""


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (every flag is documented in --help)."""
    parser = argparse.ArgumentParser(
        prog="check_optional_backends.py",
        description=(
            "Report which TRL scaling backends this Python environment can use: package versions, install "
            "consistency, compatibility derived from the installed TRL metadata, GPUs and *_VISIBLE_DEVICES, "
            "the accelerate config, and a ready/limited/unavailable verdict per backend. Read-only."
        ),
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON (stable keys, schema_version 1)")
    parser.add_argument(
        "--require",
        metavar="IDS",
        default="",
        help="comma-separated backend ids that must be 'ready'; exit 1 otherwise (ids listed below)",
    )
    parser.add_argument(
        "--probe-torch",
        action="store_true",
        help="import torch in a subprocess; read torch.cuda device properties and NCCL availability "
        "(allocates no GPU memory)",
    )
    parser.add_argument(
        "--probe-imports",
        nargs="?",
        const="all",
        default=None,
        metavar="PKGS",
        help="import each installed stack package in its own subprocess with a timeout; optionally only "
        "PKGS, a comma list of package ids or module names (--probe-imports=vllm,deepspeed)",
    )
    parser.add_argument(
        "--probe-network",
        metavar="HOST:PORT[,...]",
        default=None,
        help="resolve each host and try one TCP connect (no payload) to it, e.g. the rendezvous port and a vLLM "
        "server port; opt-in: the default run opens no socket",
    )
    parser.add_argument(
        "--timeout",
        type=bounded_float(0, 3600, exclusive_minimum=True),
        default=None,
        metavar="SECONDS",
        help=f"timeout for each subprocess (default {DEFAULT_SMI_TIMEOUT:g} s for nvidia-smi/rocm-smi, "
        f"{DEFAULT_PROBE_TIMEOUT:g} s per probe, {DEFAULT_NETWORK_TIMEOUT:g} s per --probe-network target)",
    )
    parser.add_argument(
        "--accelerate-config",
        metavar="PATH",
        default=None,
        help="check this accelerate config file instead of the default one",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show full paths (home not masked), every compatibility row, package locations and info findings",
    )
    return parser


def parse_request(argv: Optional[Sequence[str]] = None) -> Request:
    """The command line as a checked Request; SystemExit (argparse's exit code, 2 for a usage error) otherwise."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return load_request(
            json=args.json,
            verbose=args.verbose,
            require=args.require,
            probe_torch=args.probe_torch,
            probe_imports=args.probe_imports,
            probe_network=args.probe_network,
            timeout=args.timeout,
            accelerate_config=args.accelerate_config,
        )
    except UsageError as error:
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"{parser.prog}: error: {error}\n")
        raise SystemExit(2) from None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point: 0 report, 1 --require not met, 2 usage error."""
    try:
        request = parse_request(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    with progress("gathering facts" + (" and running probes" if request.probing else "")):
        report, secrets = collect(request)
    for secret in secrets:
        SCRUBBER.add(secret)
    home = None if request.verbose else os.path.expanduser("~")
    if home in ("", "/", "~"):
        home = None
    report = sanitize(report, home, secrets)
    required = request.required_ids
    if request.json:
        output = dumps_strict(report)
    else:
        from diagnostic.render import render_text  # the text report only: --json never compiles it

        output = fit_width(render_text(clean_tree(report), request.verbose, required))
    emit(output)
    failing = [b for b in report["backends"] if b["id"] in required and b["status"] != "ready"]
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(run_cli(main, "check_optional_backends.py"))
