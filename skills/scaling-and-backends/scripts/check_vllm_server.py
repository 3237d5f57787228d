#!/usr/bin/env python3
"""Read-only pre-flight of running vLLM servers for TRL GRPO server mode and AsyncGRPO.

It sends only GET requests to four routes of each server (``/health``, ``/version``, ``/v1/models``,
``/server_info?config_format=json``), judges what the servers publish against what the user intends to
train, and predicts what TRL 1.16 will do at start-up: adapter-only LoRA sync, a merged fallback with a
warning, full-weight sync, or an error. It never loads, unloads, pauses or writes anything.

This file is the command line: it parses the flags into one ``preflight.inputs.Request`` and runs the stages of the
``preflight`` package: ``inputs`` (the request), ``fetch`` (GETs bounded by timeouts and one total deadline),
``trl_facts`` (the installed TRL's vLLM range), ``rules_server`` and ``rules_replicas`` (pure rule functions citing
the upstream code they reproduce), ``report`` (report and text); ``data`` holds routes, citations and snapshots.
The shared ``common`` helpers read, check values and write output. Standard library only; Python 3.9+.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # the bundle must not gain a __pycache__ folder

import argparse  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from typing import Optional, Sequence  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from common.output import (  # noqa: E402
    HelpFormatter,
    clean_tree,
    dumps_strict,
    emit,
    escape_controls,
    fit_width,
    progress,
    run_cli,
)
from common.values import bounded_float, bounded_int  # noqa: E402
from preflight.data import (  # noqa: E402
    ASYNC_GRPO_DEFAULT_MAX_STALENESS,
    DEFAULT_DEADLINE_S,
    DEFAULT_TIMEOUT_S,
    SCHEMA_VERSION,
    TOOL,
    TRL_FALLBACK_VERSION,
)
from preflight.fetch import probe_all  # noqa: E402
from preflight.inputs import Request, UsageError, load_request  # noqa: E402
from preflight.report import build_report, render_text  # noqa: E402
from preflight.trl_facts import local_vllm_version, trl_vllm_range  # noqa: E402

PROG = "check_vllm_server.py"
EPILOG = f"""\
what it reads (GET only; the one other request is a proxy CONNECT, below):
  /health  /version  /v1/models  /server_info?config_format=json
  /server_info exists only when the server runs with VLLM_SERVER_DEV_MODE=1; a 404 there means dev mode is off.
  It never sends POST, never loads, unloads, pauses or resumes anything, and never starts a server.
  One exception to 'GET only' on the wire: with HTTPS_PROXY set, an https:// URL is reached through a CONNECT
  request to the proxy (the tunnel urllib opens); the requests inside the tunnel are still these GETs.

what it checks, per server and across servers:
  reachability (refused, dns, timeout, tls, redirect, 401/403, 404, non-JSON), vLLM version against the range the
  installed TRL declares (TRL {TRL_FALLBACK_VERSION}'s >=0.22.0,<=0.31.0 when TRL is not installed), served model,
  max_model_len against --max-length, weight_transfer_config where the sync path uses NCCL, logprobs_mode,
  LoRA (lora_config, max_lora_rank against the adapter rank, max_loras against max_staleness + 2,
  data_parallel_size, VLLM_ALLOW_RUNTIME_LORA_UPDATING), and across replicas: base model, vLLM version,
  LoRA limits, max_model_len, logprobs_mode and loaded adapter names.
  It predicts TRL 1.16's start-up outcome per server (trl_outcome): adapter-only, merged-fallback (TRL warns),
  full-weights (GRPO, or AsyncGRPO full fine-tuning), startup-error (TRL raises), or unknown.

verdict and exit codes:
  verdict ok: no error and no warning; warn: warnings only; fail: at least one error (unreachable counts).
  0  report produced (without --require, whatever the verdict)
  1  --require given and the verdict is not ok (any error or warning; info lines never count)
  2  usage error or unusable input (bad URL, unset --auth-env variable, bad number)

JSON (--json), schema_version 1:
  verdict, trl_outcome (one mode, or 'inconsistent' across servers), intent, trl (vllm_spec and its source),
  trainer_side_vllm, servers[] (url, verdict, reachable, proxy, requests[] with status/error per GET, vllm_version,
  vllm_version_in_trl_range, dev_mode, served_models, adapters, max_model_len, logprobs_mode, dtype,
  weight_transfer_config, lora_config, parallel, runtime_lora_updating, trl_outcome (mode, trl_says, source)),
  findings[] (severity error|warning|info, id, server or null for cross-server, message, fix, source),
  fixes[] (each distinct fix with the servers and finding ids it resolves), counts.

network behaviour:
  --timeout bounds each request's connect and each read; --deadline bounds the whole run (servers are probed in
  parallel; a server still unanswered then is reported with error kind 'deadline').
  HTTP(S)_PROXY / NO_PROXY are honoured as Python's urllib honours them (as TRL's requests client does).
  Redirects are followed only to the same scheme, host and port; a redirect elsewhere is refused and reported.
  TLS certificates are verified (set SSL_CERT_FILE for a private CA); there is no switch to turn that off.
  The token named by --auth-env is sent as 'Authorization: Bearer <token>' to the given hosts only (an HTTP proxy
  on a plain http:// URL relays it, as with any client; servers[].proxy shows the proxy used) and is never
  printed, logged or written to the JSON.

examples:
  # two AsyncGRPO replicas behind a proxy, LoRA rank 16, prompt + completion up to 4096 tokens
  python3 scripts/check_vllm_server.py --vllm-url http://replica-a:8000 \\
      --vllm-url http://replica-b:8000 --trainer async-grpo --lora-rank 16 --max-staleness 4 \\
      --max-length 4096
  # GRPO server mode, full fine-tuning, as a CI gate with JSON output
  python3 scripts/check_vllm_server.py --vllm-url http://localhost:8000 --trainer grpo \\
      --max-length 2560 --json --require
"""


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (every flag is documented in --help)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Read-only pre-flight of running vLLM servers before a TRL GRPO (server mode) or AsyncGRPO run: "
            "says in seconds whether TRL 1.16 will sync adapter-only, fall back to merged weights, or fail at "
            "start-up, and which server flag or env var to change."
        ),
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--vllm-url",
        action="append",
        required=True,
        metavar="URL",
        help="base URL of a vLLM server (http:// or https://, optional path prefix); repeat for each replica",
    )
    parser.add_argument(
        "--trainer",
        choices=("async-grpo", "grpo"),
        default="async-grpo",
        help="async-grpo: AsyncGRPOTrainer; grpo: GRPOTrainer with vllm_mode='server' (default: %(default)s)",
    )
    parser.add_argument(
        "--lora-rank",
        default="full",
        metavar="R|full",
        help="LoRA rank r of the adapter you train (the highest, rank_pattern included), or 'full' for full "
        "fine-tuning (default: %(default)s)",
    )
    parser.add_argument(
        "--max-staleness",
        type=bounded_int(0, 1_000_000),
        default=ASYNC_GRPO_DEFAULT_MAX_STALENESS,
        metavar="N",
        help="AsyncGRPOConfig.max_staleness; the server needs --max-loras >= N + 2 (default: %(default)s, "
        "AsyncGRPOConfig's default)",
    )
    parser.add_argument(
        "--max-length",
        type=bounded_int(1, 1_000_000_000),
        metavar="TOKENS",
        help="longest prompt + completion in tokens (e.g. max prompt length + max_completion_length); "
        "checked against max_model_len",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="the model the trainer loads (its name or path as given to the trainer); must be served under that name",
    )
    parser.add_argument(
        "--adapter",
        action="append",
        default=[],
        metavar="NAME",
        help="an adapter that must be loaded on every server (e.g. trl-policy-v12); repeatable. Without it, "
        "adapter names are compared across servers",
    )
    parser.add_argument(
        "--no-importance-sampling-correction",
        dest="importance_sampling_correction",
        action="store_false",
        help="GRPO only: you set vllm_importance_sampling_correction=False, so logprobs_mode is informational",
    )
    parser.add_argument(
        "--auth-env",
        metavar="VAR",
        help="name of an environment variable holding a bearer token for the servers (the value is never printed)",
    )
    parser.add_argument(
        "--timeout",
        type=bounded_float(0, 3600, exclusive_minimum=True),
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="per-request connect/read timeout (default: %(default)s)",
    )
    parser.add_argument(
        "--deadline",
        type=bounded_float(0, 86_400, exclusive_minimum=True),
        default=DEFAULT_DEADLINE_S,
        metavar="SECONDS",
        help="bound on the whole run, all servers together (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of text")
    parser.add_argument(
        "--require",
        action="store_true",
        help="exit 1 unless the verdict is ok (no error and no warning), for CI and scripted gates",
    )
    return parser


def parse_request(argv: Optional[Sequence[str]] = None) -> Request:
    """The command line as a checked Request: argparse exits on a flag it rejects; UsageError for a bad value."""
    args = build_parser().parse_args(argv)
    return load_request(
        vllm_urls=args.vllm_url,
        trainer=args.trainer,
        lora_rank=args.lora_rank,
        max_staleness=args.max_staleness,
        max_length=args.max_length,
        model=args.model,
        adapters=args.adapter,
        importance_sampling_correction=args.importance_sampling_correction,
        auth_env=args.auth_env,
        timeout=args.timeout,
        deadline=args.deadline,
        json=args.json,
        require=args.require,
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse, probe, judge, print. Exit 0 report, 1 --require not met, 2 usage error (crashes: see run_cli)."""
    started = time.monotonic()
    try:
        request = parse_request(argv)
    except UsageError as error:
        sys.stderr.write(f"{PROG}: error: {escape_controls(str(error))}\n")
        return 2
    headers = {"Accept": "application/json", "User-Agent": f"{TOOL}/{SCHEMA_VERSION} (read-only pre-flight)"}
    if request.token:
        headers["Authorization"] = f"Bearer {request.token}"
    # The deadline bounds the whole run: keep a reserve for judging and printing after the probes.
    probe_s = max(0.05, request.deadline - min(1.0, 0.15 * request.deadline) - (time.monotonic() - started))
    timeout = min(request.timeout, probe_s)
    with progress(f"probing {len(request.urls)} server(s)"):
        snaps = probe_all(list(request.urls), headers, timeout, probe_s)
    headers.clear()
    report = build_report(snaps, request.intent, trl_vllm_range(), local_vllm_version())
    output = (
        dumps_strict(report)
        if request.json
        else fit_width(render_text(clean_tree(report), True if request.require else None))
    )
    emit(output)
    if request.require and report["verdict"] != "ok":
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, PROG))
