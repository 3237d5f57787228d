"""scripts/preflight/report.py: one malformed server is a finding for that server; the report and text layout."""

from __future__ import annotations

from preflight import report as vllm_report

from vllm_helpers import TRL_RANGE, intent, snapshot


def test_a_server_whose_answers_break_a_rule_is_a_finding_and_the_others_are_judged(monkeypatch) -> None:
    good, bad = snapshot(url="http://good:8000"), snapshot(url="http://bad:8000")
    real = vllm_report.judge_server

    def judge(snap, *args):
        if snap.url == "http://bad:8000":
            raise TypeError("unhashable type: 'list'")
        return real(snap, *args)

    monkeypatch.setattr(vllm_report, "judge_server", judge)
    report = vllm_report.build_report([good, bad], intent(), TRL_RANGE, None)
    by_url = {server["url"]: server for server in report["servers"]}
    assert by_url["http://good:8000"]["vllm_version"] == "0.31.0"
    assert by_url["http://bad:8000"]["verdict"] == "fail"
    bad_ids = [f["id"] for f in report["findings"] if f["server"] == "http://bad:8000"]
    assert bad_ids == ["malformed-answer"]


def test_the_text_ends_with_the_verdict_block_and_the_require_result() -> None:
    report = vllm_report.build_report([snapshot()], intent(max_length=99999), TRL_RANGE, None)
    lines = vllm_report.render_text(report, require=True).rstrip("\n").splitlines()
    assert lines[-5].startswith("Verdict: ")
    assert lines[-4].startswith("  errors: max-model-len-too-low [1]")
    assert lines[-1].startswith("Require: FAILED")
    assert not vllm_report.render_text(report).rstrip("\n").splitlines()[-1].startswith("Require")
