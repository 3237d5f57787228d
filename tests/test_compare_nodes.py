"""compare_nodes.py, the command: reports in files and on standard input, exit codes, usage errors, hostile report
values and --help. The stages have their own files (tests/test_nodes_<module>.py)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import List

import compare_nodes
import pytest

from node_helpers import COMPARE, collect_baseline, compare_json, run_compare


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> List[Path]:
    return collect_baseline(tmp_path_factory.mktemp("baseline"))


def test_labelled_streams_and_concatenated_reports_are_split(baseline: List[Path], tmp_path: Path) -> None:
    texts = [p.read_text(encoding="utf-8") for p in baseline]
    srun = "".join(f"{i}: {line}\n" for i, text in enumerate(texts) for line in text.splitlines())
    done = run_compare(["--json", "-"], stdin=srun)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [n["source"] for n in result["nodes"]] == ["<stdin> [0]", "<stdin> [1]", "<stdin> [2]"]
    assert result["findings"] == []
    per_node = [[f"node{i}: {line}\n" for line in text.splitlines()] for i, text in enumerate(texts)]
    pdsh = "".join(line for row in itertools.zip_longest(*per_node, fillvalue="") for line in row)  # interleaved
    (tmp_path / "pdsh.txt").write_text(pdsh, encoding="utf-8")
    result = compare_json([tmp_path / "pdsh.txt"])
    assert [n["hostname"] for n in result["nodes"]] == ["node0", "node1", "node2"]
    (tmp_path / "all.json").write_text("".join(texts), encoding="utf-8")
    assert len(compare_json([tmp_path / "all.json"])["nodes"]) == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"tool": "check_vllm_server", "schema_version": 1}', "not a check_optional_backends.py --json report"),
        ('{"schema_version": 1}', "no 'tool' field"),
        ("[1, 2]", "expected the JSON object"),
        ("{not json", "not JSON"),
        ("", "empty (no report)"),
    ],
)
def test_unusable_inputs_are_clear_errors(baseline: List[Path], tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    done = run_compare([str(baseline[0]), str(bad)])
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_reports_with_the_wrong_shape_are_errors_not_tracebacks(baseline: List[Path], tmp_path: Path) -> None:
    report = json.loads(baseline[1].read_text(encoding="utf-8"))
    for damage in ({"packages": []}, {"node": {**report["node"], "env": "x"}}, {"accelerators": None}):
        broken = tmp_path / "broken.json"
        broken.write_text(json.dumps({**report, **damage}), encoding="utf-8")
        done = run_compare([str(baseline[0]), str(broken)])
        assert done.returncode == 2, (damage, done.stdout)
        assert "Traceback" not in done.stderr and "error:" in done.stderr


def test_values_from_reports_are_scrubbed_and_escaped(baseline: List[Path], tmp_path: Path) -> None:
    """A hand-edited report cannot make the comparison print a token or forge a line."""
    report = json.loads(baseline[1].read_text(encoding="utf-8"))
    token = "hf_" + "Z" * 34
    report["node"]["env"]["NCCL_DEBUG"] = f"INFO {token}"
    report["node"]["hostname"] = "evil\nBLOCKING forged: line"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(report), encoding="utf-8")
    for args in ([], ["--json"]):
        done = run_compare([*args, str(baseline[0]), str(edited)])
        assert done.returncode == 0, done.stderr
        assert token not in done.stdout and "<redacted>" in done.stdout
        assert "\nBLOCKING forged" not in done.stdout


def test_usage_errors(baseline: List[Path], tmp_path: Path) -> None:
    assert run_compare([str(baseline[0])]).returncode == 2  # one node is not a comparison
    assert run_compare([]).returncode == 2
    missing = run_compare([str(baseline[0]), str(tmp_path / "absent.json")])
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    assert run_compare(["--bogus", str(baseline[0]), str(baseline[1])]).returncode == 2
    assert run_compare(["-", "--vllm-server", "-"], stdin="").returncode == 2
    assert compare_nodes.main(["--help"]) == 0


def test_help_has_the_collection_templates() -> None:
    text = subprocess.run([sys.executable, str(COMPARE), "--help"], capture_output=True, text=True, check=True).stdout
    assert "srun --nodes=$SLURM_JOB_NUM_NODES --ntasks-per-node=1 --output=reports/%N.json" in text
    assert "--label" in text and "pdsh -w" in text and "ssh" in text
    assert "--require-consistent" in text and "--vllm-server" in text
