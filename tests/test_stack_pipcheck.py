"""--check-with-pip end to end: the real pip (dry run) against a local find-links folder of tiny wheels with the
real names and versions (PIP_NO_INDEX, PIP_FIND_LINKS: no network), and the command it prints runs as printed."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Sequence

from stack.pipcheck import parse_report, targets

from stack_helpers import SCRIPT, write_report


def wheel(folder: Path, name: str, version: str, requires: Sequence[str] = (), extras: Sequence[str] = ()) -> None:
    """A py3-none-any wheel holding only its metadata."""
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Provides-Extra: {e}" for e in extras] + [f"Requires-Dist: {r}" for r in requires]
    files = {
        f"{info}/METADATA": "\n".join(meta) + "\n\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/RECORD": "",
    }
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)


def index(tmp_path: Path, with_vllm: bool = True) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    wheel(folder, "trl", "1.16.0", ["accelerate>=1.4.0", 'vllm>=0.22.0,<=0.31.0; extra == "vllm"'], ["vllm"])
    if with_vllm:
        wheel(folder, "vllm", "0.31.0", ["torch==2.13.0", "transformers>=5.10.4,<5.18.0"])
    for version in ("5.16.1", "5.17.0"):
        wheel(folder, "transformers", version)
    wheel(folder, "torch", "2.13.0")
    wheel(folder, "accelerate", "1.15.0")
    return folder


def run(args: List[str], cwd: Path, folder: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(folder), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PIP_INDEX_URL", None)
    return subprocess.run(
        [sys.executable, "-S", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, cwd=str(cwd), env=env
    )


def test_pip_resolves_the_first_option_from_a_local_index(tmp_path: Path) -> None:
    folder = index(tmp_path)
    path = write_report(tmp_path, "3.12.3", {})  # its interpreter is not on this machine: pip resolves for 3.12
    done = run(["--report", str(path), "--want", "vllm-server", "--check-with-pip", "--json"], tmp_path, folder)
    assert done.returncode == 0, done.stderr
    check = json.loads(done.stdout)["pip_check"]
    assert check["status"] == "agrees", check
    assert check["resolved"] == {
        "trl": "1.16.0",
        "vllm": "0.31.0",
        "transformers": "5.17.0",
        "torch": "2.13.0",
        "accelerate": "1.15.0",
    }
    words = shlex.split(check["command"])
    assert words[1:6] == ["-m", "pip", "install", "--dry-run", "--ignore-installed"]
    assert words[6:11] == ["--python-version", "3.12", "--only-binary=:all:", "--target", "./pip-dry-run-target"]
    assert words[11:] == ["trl[vllm]==1.16.0", "vllm==0.31.0", "transformers==5.17.0", "torch==2.13.0"]
    assert not (tmp_path / "pip-dry-run-target").exists()


FAKE_PIP = """#!/bin/sh
printf '%s\\n' "$@" > "$(dirname "$0")/argv.txt"
echo "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io" >&2
echo "second line" >&2
exit 1
"""


def test_the_report_interpreter_runs_pip_as_printed_and_a_failure_is_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(FAKE_PIP)
    fake.chmod(0o755)
    path = write_report(tmp_path, "3.12.3", {}, executable=str(fake))
    done = run(["--report", str(path), "--want", "vllm-server", "--check-with-pip"], tmp_path, tmp_path)
    assert done.returncode == 0, done.stderr
    failed = [line for line in done.stdout.splitlines() if "pip could not resolve it" in line]
    assert len(failed) == 1 and "ERROR: ResolutionImpossible" in failed[0] and "second line" not in done.stdout
    assert "pip's resolver checked option 1" in done.stdout
    done = run(["--report", str(path), "--want", "vllm-server", "--check-with-pip", "--json"], tmp_path, tmp_path)
    check = json.loads(done.stdout)["pip_check"]
    assert check["status"] == "failed" and check["error"].startswith("ERROR: ResolutionImpossible")
    ran = (tmp_path / "bin" / "argv.txt").read_text().split("\n")[:-1]
    at = ran.index("--report")
    assert ran[at + 2 : at + 4] == ["--quiet", "--disable-pip-version-check"]
    shown = shlex.split(check["command"])
    assert shown[0] == "./bin/python" and shown[1:] == ran[:at] + ran[at + 4 :]  # the same command, minus the report
    assert "--python-version" not in shown  # the report's own interpreter resolves for itself


def test_parse_report_and_targets() -> None:
    data: Dict[str, object] = {"install": [{"metadata": {"name": "Liger_Kernel", "version": "0.8.5"}}, {"x": 1}]}
    assert parse_report(data) == {"liger-kernel": "0.8.5"}
    assert parse_report([1]) == {}
    assert targets("'./my env/python' -m pip install 'trl[vllm]==1.16.0' vllm==0.31.0") == [
        "trl[vllm]==1.16.0",
        "vllm==0.31.0",
    ]
