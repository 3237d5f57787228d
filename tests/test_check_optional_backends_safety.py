"""check_optional_backends.py: the safety promise, the opt-in probes, and Python 3.9-3.13 compatibility."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

import diag_common
from diagnostic_helpers import (
    SCRIPT,
    add_dist,
    add_fixture_dist,
    add_stack,
    backend,
    base_env,
    fake_nvidia_smi,
    fake_rocm_smi,
    run_script,
)

# --- the safety promise, checked with an audit hook -------------------------------------------------------------------

AUDIT_HARNESS = r"""
import json, os, sys
script, heavy, allowed = sys.argv[1], json.loads(sys.argv[2]), set(json.loads(sys.argv[3]))
events = []
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

def hook(event, args):
    if event == "open":
        path, mode, flags = args
        if isinstance(path, int):  # wrapping an inherited or pipe file descriptor, not a file on disk
            return
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            mode is None and isinstance(flags, int) and flags & WRITE_FLAGS
        ):
            events.append(["write", str(path)])
    elif event == "import" and str(args[0]).split(".")[0] in heavy:  # attempts count, even failed ones
        events.append(["import", str(args[0])])
    elif event.startswith("socket."):
        events.append(["socket", event])
    elif event == "subprocess.Popen":
        executable, argv = args[0], args[1]
        name = os.path.basename(str(executable or (argv[0] if argv else "")))
        events.append(["popen", name] if name not in allowed else ["allowed", name])
    elif event in ("os.system", "os.exec", "os.spawn", "os.fork", "os.forkpty", "os.startfile"):
        events.append(["process", event])
    elif event == "os.posix_spawn":
        name = os.path.basename(str(args[0]))
        if name not in allowed:
            events.append(["process", name])

sys.addaudithook(hook)
import runpy
sys.argv = [script, *sys.argv[4:]]
code = 0
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as exit_:
    code = exit_.code
loaded = sorted(m for m in heavy if m in sys.modules)
sys.stderr.write("\n@@AUDIT@@" + json.dumps({"events": events, "heavy": loaded, "code": code}) + "\n")
"""


def audit_run(tmp_path: Path, sites: List[Path], args: List[str], env: Optional[Dict[str, str]] = None) -> dict:
    env = dict(env or base_env(tmp_path / "home", tmp_path / "bin"))
    env["PYTHONPATH"] = os.pathsep.join(str(s) for s in sites)
    command = [
        sys.executable,
        "-S",
        "-c",
        AUDIT_HARNESS,
        str(SCRIPT),
        json.dumps(list(diag_common.HEAVY_MODULES)),
        json.dumps(list(diag_common.ALLOWED_COMMANDS)),
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    marker = [line for line in done.stderr.splitlines() if line.startswith("@@AUDIT@@")]
    assert marker, done.stderr
    result = json.loads(marker[-1][len("@@AUDIT@@") :])
    result["stdout"] = done.stdout
    return result


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
    assert "verdict" in result["stdout"]


def test_audit_harness_sees_probe_subprocesses(full_stack: Path, tmp_path: Path) -> None:
    """Control: the same hook does catch a subprocess that is not on the allow-list."""
    result = audit_run(tmp_path, [full_stack], ["--json", "--probe-imports=triton", "--timeout", "20"])
    assert any(e[0] == "popen" and e[1].startswith("python") for e in result["events"]), result["events"]
    assert result["heavy"] == []  # the probe imports in its own interpreter


# --- Python 3.9 - 3.13 ------------------------------------------------------------------------------------------------


def test_source_parses_as_python_3_9() -> None:
    modules = [SCRIPT, *sorted(SCRIPT.parent.glob("diag_*.py"))]
    assert len(modules) > 1
    for path in modules:
        source = path.read_text(encoding="utf-8")
        ast.parse(source, feature_version=(3, 9))
        assert not re.search(r"^\s*match .*:\s*$", source, re.MULTILINE), path.name


def test_no_bytecode_is_written_for_the_script_or_its_modules(tmp_path: Path) -> None:
    """A plain ``python3 scripts/check_optional_backends.py`` leaves no __pycache__ next to any of its modules."""
    copy = tmp_path / "scripts"
    shutil.copytree(SCRIPT.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = ""
    for argv in (["--json"], ["--help"]):
        done = subprocess.run(
            [sys.executable, str(copy / SCRIPT.name), *argv], capture_output=True, text=True, env=env, check=False
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
