"""check_optional_backends.py: the safety promise, the opt-in probes, and Python 3.9-3.13 compatibility."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest

from diagnostic_helpers import (
    SCRIPT,
    add_dist,
    add_fixture_dist,
    add_stack,
    audit_run,
    backend,
    fake_nvidia_smi,
    fake_rocm_smi,
    run_script,
)

# --- the safety promise, checked with an audit hook -------------------------------------------------------------------


@pytest.fixture
def full_stack(tmp_path: Path) -> Path:
    """Every heavy package installed; each imports cleanly, so any import would stay visible in sys.modules."""
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    boom = "IMPORTED = True\n"
    add_fixture_dist(site, "vllm-0.31.0", module_code=boom)
    add_fixture_dist(site, "liger_kernel-0.8.5", modules=["liger_kernel"], module_code=boom)
    add_fixture_dist(site, "bitsandbytes-0.50.2", module_code=boom)
    add_dist(site, "kernels", "0.18.2", module_code=boom)
    add_dist(site, "deepspeed", "0.19.8", module_code=boom)
    add_dist(site, "flash-attn", "2.8.3", modules=["flash_attn"], module_code=boom)
    add_dist(site, "unsloth", "2026.7.1", module_code=boom)
    add_dist(site, "unsloth-zoo", "2026.7.1", modules=["unsloth_zoo"], module_code=boom)
    add_dist(site, "triton", "3.5.0", module_code=boom)
    for module in ("torch", "trl", "transformers", "accelerate", "peft", "datasets"):
        (site / module / "__init__.py").write_text(boom, encoding="utf-8")
    fake_nvidia_smi(tmp_path / "bin")
    fake_rocm_smi(tmp_path / "bin")
    config = tmp_path / "home" / ".cache" / "huggingface" / "accelerate" / "default_config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n", encoding="utf-8")
    return site


@pytest.mark.parametrize("args", [[], ["--json"], ["--verbose", "--require", "ddp"]], ids=["text", "json", "require"])
def test_default_run_opens_no_socket_writes_nothing_and_imports_no_backend(
    full_stack: Path, tmp_path: Path, args: List[str]
) -> None:
    result = audit_run(tmp_path, [full_stack], args)
    assert result["code"] in (0, None, 1)
    assert [e for e in result["events"] if e[0] != "allowed"] == []
    assert sorted({e[1] for e in result["events"]}) == ["nvidia-smi", "rocm-smi"]  # the allow-list was exercised
    assert result["heavy"] == []
    assert "Verdict" in result["stdout"] or '"verdict"' in result["stdout"]


def test_audit_harness_sees_probe_subprocesses(full_stack: Path, tmp_path: Path) -> None:
    """Control: the same hook does catch a subprocess that is not on the allow-list."""
    result = audit_run(tmp_path, [full_stack], ["--json", "--probe-imports=triton", "--timeout", "20"])
    assert any(e[0] == "popen" and e[1].startswith("python") for e in result["events"]), result["events"]
    assert result["heavy"] == []  # the probe imports in its own interpreter


# --- Python 3.9 - 3.13 ------------------------------------------------------------------------------------------------


def test_source_parses_as_python_3_9() -> None:
    modules = sorted(SCRIPT.parent.rglob("*.py"))
    assert len(modules) > 1
    for path in modules:
        source = path.read_text(encoding="utf-8")
        ast.parse(source, feature_version=(3, 9))
        assert not re.search(r"^\s*match .*:\s*$", source, re.MULTILINE), path.name


def test_no_bytecode_is_written_for_the_script_or_its_modules(tmp_path: Path) -> None:
    """A plain ``python3 scripts/check_optional_backends.py`` (or compare_nodes.py) leaves no __pycache__ next to any
    of its modules."""
    copy = tmp_path / "scripts"
    shutil.copytree(SCRIPT.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = ""
    for script, argv in ((SCRIPT.name, ["--json"]), (SCRIPT.name, ["--help"]), ("compare_nodes.py", ["--help"])):
        done = subprocess.run(
            [sys.executable, str(copy / script), *argv], capture_output=True, text=True, env=env, check=False
        )
        assert done.returncode == 0, done.stderr
    assert not list(copy.rglob("__pycache__")) and not list(copy.rglob("*.pyc"))


def _interpreter(minor: int) -> Optional[str]:
    """An interpreter for Python 3.<minor>: through pyenv when present, else python3.<minor> on PATH."""
    pyenv = shutil.which("pyenv")
    if pyenv:
        listing = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True, check=False)
        versions = [v.strip() for v in listing.stdout.splitlines() if re.fullmatch(rf"3\.{minor}\.\d+", v.strip())]
        for version in reversed(versions):
            env = {**os.environ, "PYENV_VERSION": version}
            found = subprocess.run(
                [pyenv, "which", f"python3.{minor}"], capture_output=True, text=True, env=env, check=False
            )
            if found.returncode == 0 and found.stdout.strip():
                return found.stdout.strip()
    candidate = shutil.which(f"python3.{minor}")
    if candidate:
        check = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[1])"], capture_output=True, text=True
        )
        if check.returncode == 0 and check.stdout.strip() == str(minor):
            return candidate
    return None


@pytest.mark.parametrize("minor", [9, 10, 11, 12, 13])
def test_runs_on_each_supported_python(minor: int, tmp_path: Path) -> None:
    python = _interpreter(minor)
    if python is None:
        pytest.skip(f"no Python 3.{minor} interpreter here")
    bare = run_script([], [], tmp=tmp_path, python=python, extra_flags=("-S", "-I"))
    assert bare.returncode == 0, bare.stderr
    assert bare.stderr == ""
    assert "none of the training stack is installed" in bare.stdout
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    add_fixture_dist(site, "vllm-0.33.0")
    fake_nvidia_smi(tmp_path / "bin")
    report_run = run_script(["--json"], [site], tmp=tmp_path, python=python)
    assert report_run.returncode == 0, report_run.stderr
    report = report_run.json()
    assert report["python"]["version"].startswith(f"3.{minor}.")
    [row] = [r for r in report["compatibility"] if r["subject"] == "vllm" and r["kind"] == "extra"]
    assert row["status"] == "outside"
    assert backend(report, "vllm-colocate")["status"] == "unavailable"
