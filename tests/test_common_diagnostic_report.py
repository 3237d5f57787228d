"""scripts/common/diagnostic_report.py: what a --report file must be (this bundle's diagnostic report, exactly its
schema_version), and each command that reads one refuses another with exit 2 and the command that writes one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from common.diagnostic_report import REPORT_LIMIT, ReportError, read_report, report_problem

from conftest import REPORT_HEAD, SCRIPTS_DIR


def test_the_diagnostics_own_report_is_accepted() -> None:
    assert report_problem({**REPORT_HEAD, "packages": {}}) is None


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ([1, 2], "a JSON list"),
        ({"packages": {}}, "no 'tool' field"),
        ({"tool": "trl env", "schema_version": 1}, "tool 'trl env'"),
        ({"tool": "check_optional_backends"}, "schema_version None"),
        ({"tool": "check_optional_backends", "schema_version": 2}, "schema_version 2,"),
        ({"tool": "check_optional_backends", "schema_version": True}, "schema_version True"),
        ({"tool": "check_optional_backends", "schema_version": "1"}, "schema_version '1'"),
        ({"tool": "x" * 5000, "schema_version": 1}, "characters)"),
    ],
)
def test_anything_else_is_refused_with_what_it_is(data: object, said: str) -> None:
    problem = report_problem(data)
    assert problem is not None and said in problem and "check_optional_backends.py --json" in problem
    assert len(problem) < 240


def test_read_report_reads_one_and_names_what_is_wrong_with_another(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({**REPORT_HEAD, "packages": {"trl": {"version": "1.16.0"}}}))
    assert read_report(str(good))["packages"]["trl"]["version"] == "1.16.0"
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (REPORT_LIMIT + 1))
    for path, said in ((huge, "larger than"), (tmp_path / "missing.json", "--report"), (tmp_path, "--report")):
        with pytest.raises(ReportError, match=said):
            read_report(str(path))


@pytest.mark.parametrize(
    "argv",
    [
        ["triage_log.py", "{log}", "--report", "{report}"],
        ["find_fix.py", "weight sync hangs", "--report", "{report}"],
        ["plan_install.py", "--want", "ddp", "--report", "{report}"],
    ],
    ids=["triage_log", "find_fix", "plan_install"],
)
def test_each_command_refuses_a_report_of_another_schema(tmp_path: Path, argv: list) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"tool": "check_optional_backends", "schema_version": 2, "packages": {}}))
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 0.5\n")
    args = [a.format(log=log, report=report) for a in argv]
    run = subprocess.run(
        [sys.executable, "-B", str(SCRIPTS_DIR / args[0]), *args[1:]], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and run.stdout == "", (run.returncode, run.stdout, run.stderr)
    assert "schema_version 2" in run.stderr and "Traceback" not in run.stderr
