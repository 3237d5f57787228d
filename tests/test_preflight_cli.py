"""scripts/preflight/cli.py: URLs, the parser and its help, the token scrubber."""

from __future__ import annotations

import pytest

from common.output import Scrubber
from preflight import cli as vcli
from preflight import data as vdata


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("http://replica-a:8000/", "http://replica-a:8000"),
        ("HTTPS://Host.example/vllm-a/", "https://host.example/vllm-a"),
        ("http://[::1]:8000", "http://[::1]:8000"),
    ],
)
def test_normalize_url(raw, expected):
    assert vcli.normalize_url(raw) == expected


@pytest.mark.parametrize("raw", ["ftp://host", "host:8000", "http://user:s3cr3t-pass@host:8000", "http://h:8000/?a=1"])
def test_normalize_url_rejects_and_never_echoes_credentials(raw):
    with pytest.raises(vcli.UsageError) as caught:
        vcli.normalize_url(raw)
    assert "s3cr3t" not in str(caught.value)


def test_scrubber_replaces_a_registered_token():
    scrubber = Scrubber()
    scrubber.add("tok-123456")
    assert scrubber("header Bearer tok-123456 seen") == "header Bearer <redacted> seen"


def test_parser_exposes_the_documented_flags_and_help():
    parser = vcli.build_parser()
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
    text = " ".join(vcli.build_parser().format_help().split())
    assert "CONNECT request to the proxy" in text and "HTTPS_PROXY" in text
