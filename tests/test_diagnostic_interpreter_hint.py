"""scripts/diagnostic/interpreter_hint.py: the interpreter to use when this one has no torch but a training env has.

Environments are real folder trees in ``tmp_path`` (``bin/python`` plus, when the case needs it,
``lib/python3.X/site-packages/torch/__init__.py``); the environment variables and the working folder are passed in.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
from diagnostic import interpreter_hint as ih

from conftest import SCRIPTS_DIR
from diagnostic_helpers import SCHEMA, SCRIPT, base_env, schema_errors


def make_env(root: Path, torch: bool = False, python: bool = True, windows: bool = False) -> Path:
    if python:
        exe = root / ("Scripts/python.exe" if windows else "bin/python")
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text("#!/bin/sh\n")  # not empty and executable: what a real interpreter link resolves to
        exe.chmod(0o755)
    site = root / ("Lib/site-packages" if windows else "lib/python3.11/site-packages")
    site.mkdir(parents=True, exist_ok=True)
    if torch:
        (site / "torch").mkdir()
        (site / "torch" / "__init__.py").write_text("")
    return root


def facts_for(
    tmp_path: Path,
    has_torch: bool,
    environ: Optional[dict] = None,
    prefix: Optional[Path] = None,
) -> ih.InterpreterFacts:
    system = tmp_path / "system"
    system.mkdir(exist_ok=True)
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    return ih.gather_interpreter_facts(
        has_torch=has_torch,
        environ=environ or {},
        cwd=project,
        prefix=str(prefix or system),
        executable=str(system / "bin" / "python3"),
    )


def test_no_hint_when_this_interpreter_has_torch(tmp_path: Path) -> None:
    make_env(tmp_path / "project" / ".venv", torch=True)
    verdict = ih.judge_interpreter(facts_for(tmp_path, has_torch=True))
    assert verdict == ih.InterpreterVerdict(None, None)
    assert ih.interpreter_hint_line(verdict) is None


def test_no_hint_without_any_other_environment(tmp_path: Path) -> None:
    facts = facts_for(tmp_path, has_torch=False)
    assert facts.candidates == ()
    assert ih.judge_interpreter(facts).message is None


def test_cwd_venv_with_torch_is_named_relative_to_the_working_folder(tmp_path: Path) -> None:
    make_env(tmp_path / "project" / ".venv", torch=True)
    facts = facts_for(tmp_path, has_torch=False)
    verdict = ih.judge_interpreter(facts)
    assert verdict.suggested is not None and verdict.suggested.source == "./.venv"
    line = ih.interpreter_hint_line(verdict)
    assert line is not None
    assert "has no torch" in line and "is in the working folder" in line and "it has torch" in line
    assert line.endswith("run the diagnostic with ./.venv/bin/python instead")


def test_active_virtual_env_is_named_and_preferred_over_the_cwd_one(tmp_path: Path) -> None:
    active = make_env(tmp_path / "envs" / "train", torch=True)
    make_env(tmp_path / "project" / "venv", torch=True)
    verdict = ih.judge_interpreter(facts_for(tmp_path, has_torch=False, environ={"VIRTUAL_ENV": str(active)}))
    assert verdict.suggested is not None and verdict.suggested.source == "VIRTUAL_ENV"
    assert "is active" in (verdict.message or "")
    assert str(active / "bin" / "python") in (verdict.message or "")


def test_conda_prefix_with_torch_wins_over_an_active_venv_without_it(tmp_path: Path) -> None:
    venv = make_env(tmp_path / "venv-no-torch", torch=False)
    conda = make_env(tmp_path / "conda", torch=True)
    environ = {"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": str(conda)}
    verdict = ih.judge_interpreter(facts_for(tmp_path, has_torch=False, environ=environ))
    assert verdict.suggested is not None and verdict.suggested.source == "CONDA_PREFIX"


def test_an_environment_without_torch_is_still_named_and_says_so(tmp_path: Path) -> None:
    make_env(tmp_path / "project" / ".venv", torch=False)
    verdict = ih.judge_interpreter(facts_for(tmp_path, has_torch=False))
    assert "it has no torch either" in (verdict.message or "")


def test_the_running_environment_is_not_suggested_to_itself(tmp_path: Path) -> None:
    venv = make_env(tmp_path / "project" / ".venv", torch=False)
    facts = facts_for(tmp_path, has_torch=False, environ={"VIRTUAL_ENV": str(venv)}, prefix=venv)
    assert [c.is_current for c in facts.candidates] == [True]  # VIRTUAL_ENV and ./.venv are one folder, listed once
    assert ih.judge_interpreter(facts).message is None


def test_the_running_venv_is_recognised_by_its_interpreter_when_the_prefix_is_the_base_one(tmp_path: Path) -> None:
    """``python -S`` in a venv leaves ``sys.prefix`` at the base installation; the interpreter's folder still tells."""
    venv = make_env(tmp_path / "project" / ".venv", torch=False)
    facts = ih.gather_interpreter_facts(
        has_torch=False,
        environ={},
        cwd=tmp_path / "project",
        prefix=str(tmp_path / "base"),
        executable=str(venv / "bin" / "python"),
    )
    assert [c.is_current for c in facts.candidates] == [True]
    assert ih.judge_interpreter(facts).message is None


def test_a_folder_without_an_interpreter_is_never_suggested(tmp_path: Path) -> None:
    make_env(tmp_path / "project" / "venv", torch=True, python=False)
    facts = facts_for(tmp_path, has_torch=False)
    assert facts.candidates[0].python is None
    assert ih.judge_interpreter(facts).message is None


def test_missing_env_folders_and_blank_variables_are_skipped(tmp_path: Path) -> None:
    environ = {"VIRTUAL_ENV": str(tmp_path / "gone"), "CONDA_PREFIX": "  "}
    assert facts_for(tmp_path, has_torch=False, environ=environ).candidates == ()


def test_windows_layout_is_recognised(tmp_path: Path) -> None:
    root = make_env(tmp_path / "project" / ".venv", torch=True, windows=True)
    assert ih.env_python(root) == str(root / "Scripts" / "python.exe")
    assert ih.env_has_torch(root)


def test_home_paths_are_shortened(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = make_env(home / "envs" / "train", torch=True)
    facts = ih.gather_interpreter_facts(
        has_torch=False,
        environ={"VIRTUAL_ENV": str(env), "HOME": str(home)},
        cwd=tmp_path / "elsewhere",
        prefix=str(tmp_path / "system"),
        executable="/usr/bin/python3",
    )
    assert "run the diagnostic with ~/envs/train/bin/python instead" in (ih.judge_interpreter(facts).message or "")


def test_json_shape(tmp_path: Path) -> None:
    make_env(tmp_path / "project" / ".venv", torch=True)
    facts = facts_for(tmp_path, has_torch=False)
    data = ih.interpreter_hint_json(facts, ih.judge_interpreter(facts))
    assert set(data) == {"executable", "prefix", "has_torch", "environments", "suggested_python", "message"}
    assert data["has_torch"] is False
    assert data["suggested_python"] == str(tmp_path / "project" / ".venv" / "bin" / "python")
    assert data["environments"] == [
        {
            "source": "./.venv",
            "prefix": str(tmp_path / "project" / ".venv"),
            "python": str(tmp_path / "project" / ".venv" / "bin" / "python"),
            "has_torch": True,
            "is_current": False,
        }
    ]


def test_json_paths_go_through_the_mask(tmp_path: Path) -> None:
    make_env(tmp_path / "project" / ".venv", torch=True)
    facts = facts_for(tmp_path, has_torch=False)
    data = ih.interpreter_hint_json(facts, ih.judge_interpreter(facts), mask=lambda path: "MASKED")
    assert data["executable"] == data["prefix"] == data["suggested_python"] == "MASKED"
    assert data["environments"][0]["python"] == data["environments"][0]["prefix"] == "MASKED"


@pytest.fixture(scope="module")
def real_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("real") / "project"
    project.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")], check=True, timeout=120)
    return project


@pytest.mark.parametrize("real_venv_has_torch", [False, True])
def test_real_interpreter_in_a_real_venv_from_another_python(real_project: Path, real_venv_has_torch: bool) -> None:
    """End to end with a real venv: this test's interpreter (no torch) run from a folder holding a real .venv."""
    site = next((real_project / ".venv").glob("lib/python*/site-packages"))
    if real_venv_has_torch:
        (site / "torch").mkdir(exist_ok=True)
        (site / "torch" / "__init__.py").write_text("")
    else:
        shutil.rmtree(site / "torch", ignore_errors=True)
    code = (
        f"import sys; sys.path.insert(0, {str(SCRIPTS_DIR)!r}); from diagnostic import interpreter_hint as ih;"
        "f = ih.gather_interpreter_facts(has_torch=False); print(ih.interpreter_hint_line(ih.judge_interpreter(f)))"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(real_project.parent)}
    result = subprocess.run(
        [sys.executable, "-B", "-c", code], cwd=real_project, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    expected = "it has torch" if real_venv_has_torch else "it has no torch either"
    assert expected in result.stdout
    assert result.stdout.strip().endswith("run the diagnostic with ./.venv/bin/python instead")


# --- wired into the diagnostic ----------------------------------------------------------------------------------------


def run_diagnostic(
    project: Path, home: Path, *args: str, env_extra: Optional[dict] = None
) -> subprocess.CompletedProcess:
    env = base_env(home, home / "bin")
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-S", str(SCRIPT), *args], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_diagnostic_names_the_project_venv_near_the_top_and_in_json(tmp_path: Path) -> None:
    project = tmp_path / "project"
    make_env(project / ".venv", torch=True)
    text = run_diagnostic(project, tmp_path / "home")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    start = next(i for i, line in enumerate(lines[:4]) if line.startswith("Interpreter: "))  # under the header
    logical = lines[start]
    for line in lines[start + 1 :]:  # the text is wrapped at 100 columns; continuations are indented
        if not line.startswith("    "):
            break
        logical += " " + line.strip()
    assert logical.startswith("Interpreter: this interpreter (")
    assert logical.endswith("run the diagnostic with ./.venv/bin/python instead")
    result = run_diagnostic(project, tmp_path / "home", "--json")
    report = json.loads(result.stdout)
    assert schema_errors(report, json.loads(SCHEMA.read_text(encoding="utf-8"))) == []
    assert report["interpreter"]["suggested_python"] == str(project / ".venv" / "bin" / "python")
    assert report["interpreter"]["has_torch"] is False
    assert " ".join(report["interpreter"]["message"].split()) == logical[len("Interpreter: ") :]


def test_the_diagnostic_says_nothing_when_the_active_env_is_the_running_one(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env_extra = {"VIRTUAL_ENV": sys.prefix}
    text = run_diagnostic(project, tmp_path / "home", env_extra=env_extra)
    assert text.returncode == 0, text.stderr
    assert "Interpreter:" not in text.stdout
    report = json.loads(run_diagnostic(project, tmp_path / "home", "--json", env_extra=env_extra).stdout)
    assert report["interpreter"]["message"] is None and report["interpreter"]["suggested_python"] is None
    assert [e["is_current"] for e in report["interpreter"]["environments"]] == [True]


@pytest.mark.parametrize("kind", ["empty", "not-executable", "folder"])
def test_a_file_that_cannot_be_an_interpreter_is_never_suggested(tmp_path: Path, kind: str) -> None:
    """Issue 21: a 0-byte, non-executable ./.venv/bin/python (or a folder by that name) was recommended."""
    venv = make_env(tmp_path / "project" / ".venv", torch=True)
    exe = venv / "bin" / "python"
    if kind == "empty":
        exe.write_text("")
    elif kind == "not-executable":
        exe.chmod(0o644)
    else:
        exe.unlink()
        exe.mkdir()
    assert ih.env_python(str(venv)) is None
