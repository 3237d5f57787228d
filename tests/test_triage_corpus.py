"""The log triage on the failure-report corpus (``tests/fixtures/failure_reports/``): every case's error text and
log excerpt names the case's entry, alone and inside an 8-rank log with noise and echoes from the other ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
from common import troubleshooting as match
from triage.inputs import Request
from triage_log import triage

from triage_helpers import interleave, watchdog

CORPUS = Path(__file__).parent / "fixtures" / "failure_reports"
# Cases whose posted error text the triage does not recognise yet (strict, so a fix shows up as an unexpected pass).
NOT_YET: Dict[str, str] = {}


def _cases() -> List[Any]:
    params = []
    for path in sorted(CORPUS.glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        marks = [pytest.mark.xfail(reason=NOT_YET[path.stem], strict=True)] if path.stem in NOT_YET else []
        params.append(pytest.param(case, "error_text", id=f"{path.stem}-error_text", marks=marks))
        if case.get("log_excerpt"):
            params.append(pytest.param(case, "log_excerpt", id=f"{path.stem}-log_excerpt"))
    return params


@pytest.fixture(scope="module")
def index() -> match.Index:
    return match.load_index()


def _run(tmp_path: Path, text: str, index: match.Index, releases: Dict[str, str]) -> Dict[str, Any]:
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    request = Request((str(log),), releases, {p: "--trl" for p in releases}, True, False, 1 << 30)
    return triage(request, index)


def _named(report: Dict[str, Any]) -> Dict[str, str]:
    entry = report["entry"] or {}
    return {"file": entry.get("file", ""), "heading": entry.get("heading", "")}


@pytest.mark.parametrize(("case", "field"), _cases())
def test_the_case_names_its_entry(tmp_path: Path, index: match.Index, case: Dict[str, Any], field: str) -> None:
    report = _run(tmp_path, case[field] + "\n", index, {})
    assert report["verdict"] == "known", (case["thread"], report["root"] and report["root"]["text"])
    assert _named(report) == case["entry"], case["thread"]


@pytest.mark.parametrize(("case", "field"), _cases())
def test_the_case_inside_a_noisy_multi_rank_log(
    tmp_path: Path, index: match.Index, case: Dict[str, Any], field: str
) -> None:
    per_rank = {rank: [watchdog(rank), f"[Rank {rank}] Broken pipe"] for rank in range(8) if rank != 3}
    per_rank[3] = case[field].splitlines()
    report = _run(tmp_path, interleave(per_rank, noise_lines=200), index, {})
    assert _named(report) == case["entry"], case["thread"]
    assert report["root"]["ranks"] == [3]
    assert {e["kind"] for e in report["echoes"]} >= {"watchdog timeout"}
