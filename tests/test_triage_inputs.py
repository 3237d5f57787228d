"""The triage's request (``scripts/triage/inputs.py``): flag values checked, releases from flags and a report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from triage.inputs import TriageInputError, build_request, report_releases

from conftest import REPORT_HEAD


def _request(**changes):
    values = {"logs": [], "trl": None, "vllm": None, "report": None, "max_mib": 8, "json": False, "verbose": False}
    values.update(changes)
    return build_request(**values)


def test_defaults_read_standard_input() -> None:
    request = _request()
    assert request.paths == ("-",) and request.releases == {} and request.limit_bytes == 8 * 1024 * 1024


def test_flags_override_the_report(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text(
        json.dumps({**REPORT_HEAD, "packages": {"trl": {"version": "1.13.2"}, "vllm": {"version": "0.28.0"}}})
    )
    request = _request(report=str(report), trl="v1.12.0")
    assert request.releases == {"trl": "1.12.0", "vllm": "0.28.0"}
    assert request.release_origin == {"trl": "--trl", "vllm": "--report"}


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"trl": "1.12; rm -rf /"}, "--trl must be a release number"),
        ({"vllm": "x" * 500}, "--vllm must be a release number"),
        ({"logs": ["-", "-"]}, "standard input"),
        ({"logs": ["a.log"] * 300}, "at most 256"),
        ({"max_mib": 0}, "--max-mib"),
    ],
)
def test_bad_values(changes: dict, says: str) -> None:
    with pytest.raises(TriageInputError, match=says):
        _request(**changes)


def test_a_report_that_is_not_a_diagnostic_report(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"packages": 3}')
    with pytest.raises(TriageInputError, match=r"not a check_optional_backends\.py --json report"):
        report_releases(str(path))
    with pytest.raises(TriageInputError, match="no such file"):
        report_releases(str(tmp_path / "missing.json"))
