"""diagnostic/render.py: home masking and secret scrubbing over the whole report, and the verdict block the text
report ends with (the full text report is exercised through real runs in tests/test_check_optional_backends.py)."""

from __future__ import annotations

from diagnostic.base import REDACTED
from diagnostic.render import sanitize, verdict_block


def test_sanitize_masks_the_home_and_scrubs_secrets_everywhere() -> None:
    report = {"a": ["/opt/me/x", "/opt/me2/y", "/opt/me"], "b": {"c": "token s3cr3t here"}, "n": 3}
    assert sanitize(report, "/opt/me", ["s3cr3t"]) == {
        "a": ["~/x", "/opt/me2/y", "~"],  # a longer name that starts with the home is not the home
        "b": {"c": f"token {REDACTED} here"},
        "n": 3,
    }
    assert sanitize(report, None, []) == report


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
