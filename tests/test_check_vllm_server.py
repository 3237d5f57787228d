"""check_vllm_server.py, the command: its parser and help (the pre-flight's runs against servers are in
tests/test_check_vllm_server_e2e.py)."""

from __future__ import annotations

import check_vllm_server
from preflight import data as vdata


def test_parser_exposes_the_documented_flags_and_help():
    parser = check_vllm_server.build_parser()
    flags = {opt for action in parser._actions for opt in action.option_strings}
    assert {
        "--vllm-url",
        "--trainer",
        "--lora-rank",
        "--max-staleness",
        "--max-length",
        "--model",
        "--adapter",
        "--auth-env",
        "--timeout",
        "--deadline",
        "--json",
        "--require",
        "--no-importance-sampling-correction",
    } <= flags
    text = parser.format_help()
    for route in vdata.ROUTES:
        assert route in text
    assert "exit codes" in text and "--require given and the verdict is not ok" in text
    assert parser.get_default("max_staleness") == 4 and parser.get_default("trainer") == "async-grpo"


def test_help_documents_the_connect_through_an_https_proxy():
    text = " ".join(check_vllm_server.build_parser().format_help().split())
    assert "CONNECT request to the proxy" in text and "HTTPS_PROXY" in text
