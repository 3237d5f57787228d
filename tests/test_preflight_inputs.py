"""preflight/inputs.py: base URLs, the training intent, the bearer token and the request they make."""

from __future__ import annotations

import pytest
from common.output import Scrubber
from preflight import inputs


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("http://replica-a:8000/", "http://replica-a:8000"),
        ("HTTPS://Host.example/vllm-a/", "https://host.example/vllm-a"),
        ("http://[::1]:8000", "http://[::1]:8000"),
    ],
)
def test_normalize_url(raw, expected):
    assert inputs.normalize_url(raw) == expected


@pytest.mark.parametrize("raw", ["ftp://host", "host:8000", "http://user:s3cr3t-pass@host:8000", "http://h:8000/?a=1"])
def test_normalize_url_rejects_and_never_echoes_credentials(raw):
    with pytest.raises(inputs.UsageError) as caught:
        inputs.normalize_url(raw)
    assert "s3cr3t" not in str(caught.value)


def test_scrubber_replaces_a_registered_token():
    scrubber = Scrubber()
    scrubber.add("tok-123456")
    assert scrubber("header Bearer tok-123456 seen") == "header Bearer <redacted> seen"


def intent_values(**changes):
    values = {
        "trainer": "async-grpo",
        "lora_rank": "full",
        "max_staleness": 4,
        "max_length": None,
        "model": None,
        "adapters": [],
        "importance_sampling_correction": True,
        "auth_env": None,
    }
    values.update(changes)
    return values


def test_the_intent_is_checked_and_adapters_keep_their_order():
    intent = inputs.parse_intent(**intent_values(lora_rank=" 16 ", adapters=["b", "a", "b"]))
    assert intent.lora_rank == 16 and intent.adapters == ("b", "a")
    assert inputs.parse_intent(**intent_values(lora_rank="FULL")).lora_rank is None
    for bad, message in (
        ({"lora_rank": "0"}, "--lora-rank must be a whole number"),
        ({"max_staleness": -1}, "--max-staleness must be >= 0"),
        ({"max_length": 0}, "--max-length must be a positive"),
        ({"auth_env": "hf_abc-123"}, "--auth-env takes the NAME"),
    ):
        with pytest.raises(inputs.UsageError, match=message):
            inputs.parse_intent(**intent_values(**bad))


def test_the_request_holds_unique_urls_and_a_token_it_never_shows():
    request = inputs.load_request(
        vllm_urls=["http://a:8000/", "http://a:8000", "http://b:8000"],
        timeout=2.0,
        deadline=10.0,
        environ={"VLLM_TOKEN": " tok-abcdef123 "},
        **intent_values(auth_env="VLLM_TOKEN"),
    )
    assert request.urls == ("http://a:8000", "http://b:8000")
    assert request.token == "tok-abcdef123" and "tok-abcdef123" not in repr(request)
    with pytest.raises(inputs.UsageError, match="--auth-env MISSING: that environment variable is not set or empty"):
        inputs.load_request(
            vllm_urls=["http://a"], timeout=1.0, deadline=1.0, environ={}, **intent_values(auth_env="MISSING")
        )
    with pytest.raises(inputs.UsageError, match="positive"):
        inputs.load_request(vllm_urls=["http://a"], timeout=0.0, deadline=1.0, **intent_values())
