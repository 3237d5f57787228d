"""Command line of the vLLM pre-flight: parser, argument checks, token handling and ``main``."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional, Sequence

from common.output import SCRUBBER, HelpFormatter, clean_tree, dumps_strict, emit, escape_controls, fit_width, progress
from common.values import InvalidValue, bounded_float, bounded_int, integer
from preflight.data import (
    ASYNC_GRPO_DEFAULT_MAX_STALENESS,
    DEFAULT_DEADLINE_S,
    DEFAULT_TIMEOUT_S,
    SCHEMA_VERSION,
    TOOL,
    TRL_FALLBACK_VERSION,
    Intent,
)
from preflight.fetch import probe_all
from preflight.report import build_report, render_text
from preflight.trl_facts import local_vllm_version, trl_vllm_range

# --------------------------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------------------------

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
  python3 scripts/check_vllm_server.py --vllm-url http://replica-a:8000 --vllm-url http://replica-b:8000 \\
      --trainer async-grpo --lora-rank 16 --max-staleness 4 --max-length 4096
  # GRPO server mode, full fine-tuning, as a CI gate with JSON output
  python3 scripts/check_vllm_server.py --vllm-url http://localhost:8000 --trainer grpo --max-length 2560 \\
      --json --require
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="check_vllm_server.py",
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


class UsageError(Exception):
    pass


def normalize_url(raw: str) -> str:
    """Validate a base URL; return it without a trailing slash. Never echoes credentials."""
    try:
        parts = urllib.parse.urlsplit(raw.strip())
        port = parts.port
    except ValueError:
        raise UsageError("a --vllm-url is not a valid URL (check the port)") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise UsageError("--vllm-url must start with http:// or https://")
    if not parts.hostname:
        raise UsageError("--vllm-url has no host")
    if parts.username is not None or parts.password is not None:
        raise UsageError("--vllm-url must not carry credentials; put the token in an env var and pass --auth-env")
    if parts.query or parts.fragment:
        raise UsageError("--vllm-url must be a base URL without ?query or #fragment")
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port else host
    return urllib.parse.urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def parse_intent(args: argparse.Namespace) -> Intent:
    raw_rank = str(args.lora_rank).strip().lower()
    if raw_rank == "full":
        rank: Optional[int] = None
    else:
        try:
            rank = integer(raw_rank, "--lora-rank", 1, 1_000_000)
        except InvalidValue:
            raise UsageError("--lora-rank must be a whole number from 1 to 1000000, or 'full'") from None
    if args.max_staleness < 0:
        raise UsageError("--max-staleness must be >= 0")
    if args.max_length is not None and args.max_length < 1:
        raise UsageError("--max-length must be a positive number of tokens")
    if not args.timeout > 0 or not args.deadline > 0:
        raise UsageError("--timeout and --deadline must be positive")
    if args.auth_env is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", args.auth_env):
        raise UsageError("--auth-env takes the NAME of an environment variable, not its value")
    return Intent(
        trainer=args.trainer,
        lora_rank=rank,
        max_staleness=args.max_staleness,
        max_length=args.max_length,
        model=args.model,
        adapters=tuple(dict.fromkeys(args.adapter)),
        importance_sampling_correction=args.importance_sampling_correction,
        auth_env=args.auth_env,
    )


_ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")


def auth_env_label(name: str) -> str:
    """How a message names the --auth-env argument: the name itself only when it reads as an env var name (a pasted
    token is never echoed)."""
    return f"--auth-env {name}" if _ENV_NAME_RE.match(name) else "the variable named by --auth-env"


def read_token(name: Optional[str]) -> Optional[str]:
    """The bearer token from the environment variable ``name``; UsageError (never echoing the value) otherwise."""
    if name is None:
        return None
    value = os.environ.get(name, "")
    if not value.strip():
        raise UsageError(f"{auth_env_label(name)}: that environment variable is not set or empty")
    token = value.strip()
    SCRUBBER.add(token)
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in token):
        raise UsageError(f"{auth_env_label(name)}: the token contains control characters")
    if not token.isascii():  # an HTTP header carries Latin-1 at most; bearer tokens are ASCII (RFC 6750 b64token)
        raise UsageError(f"{auth_env_label(name)}: the token contains characters outside printable ASCII")
    return token


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse, probe, judge, print. Exit 0 report, 1 --require not met, 2 usage error (crashes: see run_cli)."""
    started = time.monotonic()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.auth_env is not None and not _ENV_NAME_RE.match(args.auth_env):
        SCRUBBER.add(args.auth_env)  # a value pasted where a name belongs is never printed
    try:
        intent = parse_intent(args)
        urls = list(dict.fromkeys(normalize_url(u) for u in args.vllm_url))
        token = read_token(intent.auth_env)
    except UsageError as error:
        sys.stderr.write(f"{parser.prog}: error: {escape_controls(str(error))}\n")
        return 2
    headers = {"Accept": "application/json", "User-Agent": f"{TOOL}/{SCHEMA_VERSION} (read-only pre-flight)"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    # The deadline bounds the whole run: keep a reserve for judging and printing after the probes.
    probe_s = max(0.05, args.deadline - min(1.0, 0.15 * args.deadline) - (time.monotonic() - started))
    timeout = min(args.timeout, probe_s)
    with progress(f"probing {len(urls)} server(s)"):
        snaps = probe_all(urls, headers, timeout, probe_s)
    headers.clear()
    report = build_report(snaps, intent, trl_vllm_range(), local_vllm_version())
    output = (
        dumps_strict(report)
        if args.json
        else fit_width(render_text(clean_tree(report), True if args.require else None))
    )
    emit(output)
    if args.require and report["verdict"] != "ok":
        return 1
    return 0
