"""Quoted messages matched against upstream message templates (``tools/claims/messages.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

from claims.checker import Checker  # noqa: E402
from claims.common import DEFAULT_FACTS  # noqa: E402
from claims.messages import match_message, quote_matches_template  # noqa: E402
from claims.upstream import Facts  # noqa: E402

TEMPLATE = "tensor_parallel_size ({}) must divide world size ({}) evenly."


@pytest.mark.parametrize(
    ("quote", "template", "expected"),
    [
        ("tensor_parallel_size (3) must divide world size (8) evenly.", TEMPLATE, True),
        ("tensor_parallel_size (3) must  divide\nworld size (8) evenly.", TEMPLATE, True),
        ("must divide world size", TEMPLATE, True),
        ("tensor_parallel_size (3) must divide … evenly.", TEMPLATE, True),
        ("tensor_parallel_size (3) must multiply world size (8) evenly.", TEMPLATE, False),
        ("tensor_parallel_size (3) must divide world size (8) evenly. And more.", TEMPLATE, False),
        ("Model meta-llama/Llama-3.1-8B not found", "Model {} not found", True),
        ("I invented this whole sentence and it is not supported at all", "{} is not supported at all", False),
        ("DoRA is not supported at all", "{} is not supported at all", True),
        ("Falling back to merged sync. Any reason text at all.", "Falling back to merged sync. {}", True),
        ("completely invented text here", "The value of {} is wrong", False),
    ],
)
def test_quote_matching(quote, template, expected):
    assert quote_matches_template(quote, template) is expected


def test_exception_prefix_is_optional_in_quotes():
    checker = Checker(Facts.load(DEFAULT_FACTS))
    ctx = checker.context()
    assert match_message(ctx, "ValueError: tensor_parallel_size (3) must divide world size (8) evenly.")
    assert not match_message(ctx, "ValueError: tensor_parallel_size (3) must halve world size (8) evenly.")
