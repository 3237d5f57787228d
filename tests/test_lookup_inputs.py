"""The lookup's request (``scripts/lookup/inputs.py``): the words, and releases from flags, --release and a report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lookup.inputs import LookupInputError, build_request

from conftest import REPORT_HEAD


def _request(**changes):
    values = {"query": ["weight", "sync", "hangs"], "trl": None, "vllm": None, "releases": [], "report": None}
    values.update(changes)
    return build_request(json=False, **values)


def test_words_and_releases(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text(
        json.dumps({**REPORT_HEAD, "packages": {"trl": {"version": "1.13.2"}, "peft": {"version": "0.21.2"}}})
    )
    request = _request(report=str(report), trl="v1.12.0", releases=["Transformers==5.24.0", "peft==0.20.0"])
    assert request.words == ("weight", "sync", "hang")
    assert request.releases == {"trl": "1.12.0", "peft": "0.20.0", "transformers": "5.24.0"}
    assert request.release_origin == {"trl": "--trl", "peft": "--release", "transformers": "--release"}


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"query": []}, "give the error text or symptom words"),
        ({"query": ["  ", "\t"]}, "give the error text or symptom words"),
        ({"query": ["1 2 3 ..."]}, "no words to look up"),
        ({"query": ["x" * 20_001]}, "at most 20000 characters"),
        ({"trl": "1.12; rm -rf /"}, "--trl must be a release number"),
        ({"releases": ["transformers>=5"]}, "--release takes NAME==VERSION"),
        ({"releases": ["peft==latest"]}, "--release peft must be a release number"),
        ({"releases": ["a==1.0"] * 17}, "at most 16"),
        ({"report": "/nonexistent/r.json"}, "--report"),
    ],
)
def test_bad_values(changes: dict, says: str) -> None:
    with pytest.raises(LookupInputError, match=says.replace("(", r"\(")):
        _request(**changes)
