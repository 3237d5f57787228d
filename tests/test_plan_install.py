"""plan_install.py end to end in a subprocess: text and --json, exit codes, the live environment, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stack_helpers import TRL_18, TRL_116, run, run_json, write_report


def test_text_starts_with_the_verdict_and_fits_100_columns(tmp_path: Path) -> None:
    path = write_report(tmp_path, "3.12.3", {**TRL_116, "vllm": "0.33.0"})
    code, out, err = run(["--report", str(path), "--want", "vllm-server", "--keep", "vllm==0.31.0"], tmp_path)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("plan_install: 3 option(s); the nearest changes vllm 0.33.0 -> 0.31.0")
    assert "/env/bin/python -m pip install 'trl[vllm]==1.16.0' vllm==0.31.0" in out
    assert all(len(line) <= 100 for line in lines)
    assert not list(Path(tmp_path).rglob("__pycache__"))


def test_keep_without_want_keeps_the_installed_stack_working(tmp_path: Path) -> None:
    path = write_report(tmp_path, "3.11.9", TRL_18)
    code, data = run_json(["--report", str(path), "--keep", "trl>=1.10.0"], tmp_path)
    assert code == 0 and data["goal"] == [] and "keep the installed stack" in data["goal_note"]
    first = data["options"][0]
    assert first["changes"][0] == {"package": "trl", "from": "1.8.0", "to": "1.10.0", "kind": "upgrade"}
    assert first["pip"] == "/env/bin/python -m pip install trl==1.10.0"  # the nearest release the specifier allows
    code, _out, err = run(["--report", str(path), "--keep", "trl"], tmp_path)
    assert code == 2 and "name at least one goal" in err


def test_releases_newer_than_the_matrix_are_said_plainly(tmp_path: Path) -> None:
    from stack.matrix import load

    matrix = load()
    newest = matrix.newest("transformers")
    newer = newest.split(".")[0] + "." + str(int(newest.split(".")[1]) + 50) + ".0"
    path = write_report(tmp_path, "3.12.3", {**TRL_116, "transformers": newer})
    code, out, _err = run(["--report", str(path), "--want", "ddp", "--keep", "vllm==99.0.0"], tmp_path)
    lines = out.splitlines()
    expected = f"note: transformers {newer} is newer than the recorded matrix (fetched {matrix.fetched}"
    notes = lines[1 : lines.index(next(line for line in lines if line.startswith("goal:")))]  # the verdict area
    assert any(line.startswith(expected) for line in notes), out
    assert any(line.startswith("note: vllm 99.0.0 is newer than the recorded matrix") for line in notes)
    code, data = run_json(["--report", str(path), "--want", "ddp"], tmp_path)
    assert code == 0 and data["newer_than_matrix"][0].startswith(f"transformers {newer} is newer than")
    assert data["options"][0]["set"]["transformers"] == newer  # kept as it is, its own requirements unchecked


def test_impossible_goal_exits_1_and_names_the_constraint(tmp_path: Path) -> None:
    path = write_report(tmp_path, "3.12.3", TRL_116)
    keeps = ["--keep", "transformers==5.24.0", "--keep", "kernels==0.17.2"]  # 5.24.0 takes kernels >=0.18.2,<0.19
    code, data = run_json(["--report", str(path), "--want", "hub-kernels", *keeps], tmp_path)
    assert code == 1 and data["status"] == "impossible"
    assert data["drop"] == ["--keep transformers==5.24.0", "--keep kernels==0.17.2"]


def test_python_flag_for_another_interpreter_names_it(tmp_path: Path) -> None:
    path = write_report(tmp_path, "3.12.3", TRL_116)
    code, data = run_json(["--report", str(path), "--want", "peft", "--python", "3.11"], tmp_path)
    assert code == 0
    assert data["options"][0]["pip"].startswith("python3.11 -m pip install ")


def test_live_environment_reads_metadata_without_imports(tmp_path: Path) -> None:
    site = tmp_path / "site"
    for name, version in {"trl": "1.16.0", "transformers": "5.24.0", "torch": "2.13.0+cu130"}.items():
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    import os
    import subprocess
    import sys

    from stack_helpers import SCRIPT

    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-S", str(SCRIPT), "--want", "ddp", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
        env=env,
    )
    data = json.loads(done.stdout)
    assert data["installed"]["torch"] == "2.13.0" and data["installed"]["trl"] == "1.16.0"
    assert data["source"] == "live environment"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--want", "warp-drive"], "unknown goal 'warp-drive'"),
        (["--want", "flash-attn"], "outside the recorded matrix"),
        ([], "name at least one goal"),
        (["--want", "ddp", "--keep", "notapkg==1"], "not in the stack matrix"),
        (["--want", "ddp", "--keep", "torch==$(rm -rf /)"], "is not a version specifier"),
        (["--want", "ddp", "--python", "2.7"], "--python '2.7'"),
        (["--want", "ddp", "--cuda", "banana"], "--cuda 'banana'"),
        (["--want", "ddp", "--options", "0"], "--options 0"),
        (["--want", "ddp", "--report", "/dev/zero"], "--report /dev/zero"),
        (["--want", "ddp", "--report", "missing.json"], "--report missing.json"),
    ],
)
def test_bad_input_exits_2_without_a_traceback(tmp_path: Path, args: list, message: str) -> None:
    code, out, err = run(args, tmp_path)
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "content",
    [
        '{"tool": "other"}',
        "[1, 2]",
        "{not json",
        '{"tool": "check_optional_backends", "python": {}, "packages": {}}',
        '{"tool": "check_optional_backends", "python": {"version": "3.12"}, "packages": {"trl": "x"}}',
    ],
)
def test_a_report_that_is_not_a_diagnostic_report_exits_2(tmp_path: Path, content: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(content)
    code, out, err = run(["--report", str(path), "--want", "ddp"], tmp_path)
    assert code == 2 and out == "" and "Traceback" not in err


def test_hostile_versions_in_a_report_are_ignored_not_echoed(tmp_path: Path) -> None:
    path = write_report(tmp_path, "3.12.3", {**TRL_116, "vllm": "\x1b[31m0.1;rm -rf ~"})
    code, out, _err = run(["--report", str(path), "--want", "ddp"], tmp_path)
    assert code == 0 and "\x1b" not in out and "rm -rf" not in out


def test_the_pip_line_runs_when_pasted_with_an_interpreter_under_the_home_folder(tmp_path: Path) -> None:
    """Issue 27: a report's interpreter shown as ``~/my env/bin/python`` is printed ``~/'my env/bin/python'``: pasted
    into bash (HOME a temporary folder) the tilde expands and the interpreter runs; a quoted '~/...' would not."""
    import subprocess

    home = tmp_path / "home"
    python = home / "my env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$HOME/ran"\n')
    python.chmod(0o755)
    path = write_report(tmp_path, "3.12.3", {"trl": "1.16.0"}, executable="~/my env/bin/python")
    code, out, _err = run(["--report", str(path), "--want", "ddp"], tmp_path)
    (line,) = [ln.strip() for ln in out.splitlines() if "-m pip install" in ln][:1]
    assert code == 0 and line.startswith("~/'my env/bin/python' -m pip install ")
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", line], env=env, capture_output=True, timeout=10)
    assert done.returncode == 0, done.stderr
    assert (home / "ran").read_text().split("\n")[:3] == ["-m", "pip", "install"]
