"""diagnostic/render.py: the verdict block the text report ends with (the full text report is exercised through real
runs in tests/test_check_optional_backends.py)."""

from __future__ import annotations

from diagnostic.render import verdict_block


def test_the_verdict_block_lists_each_status_then_the_require_result() -> None:
    backends = [{"id": "ddp", "status": "ready"}, {"id": "deepspeed", "status": "unavailable"}]
    assert verdict_block(backends, ("ddp", "deepspeed"), probed=True) == [
        "Verdict:",
        "  ready: ddp",
        "  limited: none",
        "  unavailable: deepspeed",
        "Require ddp,deepspeed: FAILED (deepspeed not ready)",
    ]
    assert verdict_block(backends, (), probed=False)[0] == (
        "Verdict (static checks; imports not probed: add --probe-imports):"
    )
