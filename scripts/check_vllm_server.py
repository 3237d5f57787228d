#!/usr/bin/env python3
"""Read-only pre-flight of running vLLM servers for TRL GRPO server mode and AsyncGRPO.

It sends only GET requests to four routes of each server (``/health``, ``/version``, ``/v1/models``,
``/server_info?config_format=json``), judges what the servers publish against what the user intends to
train, and predicts what TRL 1.16 will do at start-up: adapter-only LoRA sync, a merged fallback with a
warning, full-weight sync, or an error. It never loads, unloads, pauses or writes anything.

This file is the entry point only. The work is in the ``preflight`` package, a module per job: ``data`` (routes,
citations, snapshots), ``fetch`` (GETs bounded by timeouts and one total deadline), ``rules_server`` and
``rules_replicas`` (pure rule functions citing the upstream code they reproduce), ``trl_facts`` (the installed TRL's
vLLM range), ``report`` (report and text), ``cli`` (arguments and ``main``), and the shared ``common`` helpers
(``read``, ``values``, ``output``). Standard library only; Python 3.9+.
"""

from __future__ import annotations

import os
import sys

sys.dont_write_bytecode = True  # the bundle must not gain a __pycache__ folder

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from common.output import run_cli  # noqa: E402
from preflight.cli import build_parser, main  # noqa: E402

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(run_cli(main, "check_vllm_server.py"))
