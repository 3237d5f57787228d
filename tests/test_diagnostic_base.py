"""diagnostic/base.py: the small helpers every diagnostic module uses."""

from __future__ import annotations

import os
from pathlib import Path

from diagnostic import base


def test_version_tuple_reads_the_leading_release_parts() -> None:
    assert base.version_tuple("550.54.15") == (550, 54, 15)
    assert base.version_tuple("2.13.0+cu128") == (2, 13, 0)
    assert base.version_tuple("1.0rc1") == (1,)  # stops at the first part that is not a number
    assert base.version_tuple(None) == () and base.version_tuple("dev") == ()


def test_display_specifier_puts_lower_bounds_first() -> None:
    assert base.display_specifier("<=0.31.0,>=0.22.0") == ">=0.22.0,<=0.31.0"
    assert base.display_specifier(" !=1.2 , >1.0,<2") == ">1.0,!=1.2,<2"
    assert base.display_specifier("") == ""


def test_fmt_mib_shows_gib_from_ten_gib_up() -> None:
    assert base.fmt_mib(None) == "?"
    assert base.fmt_mib(10239) == "10239 MiB"
    assert base.fmt_mib(81559) == "80 GiB"


def test_read_text_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    text = tmp_path / "a.txt"
    text.write_bytes(b"abc\xff")
    assert base.read_text(str(text)) == "abc\ufffd"
    assert base.read_text(str(text), limit=2) == "ab"
    assert base.read_text(str(tmp_path)) is None and base.read_text(str(tmp_path / "absent")) is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert base.read_text(str(fifo)) is None  # refused, not waited on


def test_findings_and_first_lines_are_safe_to_print() -> None:
    assert base.new_finding("info", "code", "message") == {"severity": "info", "code": "code", "message": "message"}
    token = "hf_" + "Q" * 34
    line = base.first_line(f"\n  failed with {token}\nsecond line")
    assert token not in line and line.startswith("failed with") and "second" not in line
    assert token not in base.redact_value(f"HF_TOKEN={token}")


def test_sanitize_masks_the_home_and_scrubs_secrets_everywhere() -> None:
    report = {"a": ["/opt/me/x", "/opt/me2/y", "/opt/me"], "b": {"c": "token s3cr3t here"}, "n": 3}
    assert base.sanitize(report, "/opt/me", ["s3cr3t"]) == {
        "a": ["~/x", "/opt/me2/y", "~"],  # a longer name that starts with the home is not the home
        "b": {"c": f"token {base.REDACTED} here"},
        "n": 3,
    }
    assert base.sanitize(report, None, []) == report


def test_version_tuple_stops_at_a_part_int_cannot_read() -> None:
    """Issue 27: 5,000 digits and a superscript digit ("²".isdigit() is True) end the release, never raise."""
    assert base.version_tuple("550.54.15") == (550, 54, 15)
    assert base.version_tuple("12." + "9" * 5000) == (12,)
    assert base.version_tuple("9" * 5000) == ()
    assert base.version_tuple("12.\u00b2") == (12,)
