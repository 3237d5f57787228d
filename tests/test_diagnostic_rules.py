"""diagnostic/rules.py: the one-line verdict over the judged backends (the per-backend rules are exercised through
real runs in tests/test_check_optional_backends.py)."""

from __future__ import annotations

from diagnostic.rules import verdict_line

BACKENDS = [
    {"id": "ddp", "status": "ready"},
    {"id": "fsdp2", "status": "ready"},
    {"id": "deepspeed", "status": "limited"},
    {"id": "vllm-server", "status": "unavailable"},
]


def test_the_verdict_line_groups_backends_by_status() -> None:
    assert verdict_line(BACKENDS, (), probed=True) == (
        "verdict: ready: ddp, fsdp2; limited: deepspeed; unavailable: vllm-server"
    )
    assert verdict_line([], (), probed=True) == "verdict: ready: none; limited: none; unavailable: none"
    assert verdict_line(BACKENDS[:1], (), probed=False).endswith(
        "(static checks; imports not probed: add --probe-imports)"
    )


def test_the_verdict_line_says_whether_require_is_met() -> None:
    assert verdict_line(BACKENDS, ("ddp", "fsdp2"), probed=True).endswith("; --require ddp,fsdp2: met")
    assert verdict_line(BACKENDS, ("ddp", "vllm-server", "deepspeed"), probed=True).endswith(
        "; --require ddp,vllm-server,deepspeed: FAILED (deepspeed, vllm-server not ready)"
    )
