"""``--check-with-pip``: pip's own resolver, in dry-run mode, on the plan's first option. It contacts the package
index (or whatever index pip is configured with: ``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``); nothing
is installed. The command runs through ``common.read.run_capped`` (output capped, process group killed on timeout)
and pip's ``--report`` JSON is read back bounded.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from typing import Any, Dict, List, Optional, Sequence

from common import versions
from common.read import InputError, read_bytes, run_capped

TIMEOUT_S = 300.0
REPORT_LIMIT = 8_000_000  # bytes; a dry-run report of a training stack is a few hundred kB


def targets(pip_line: str) -> List[str]:
    """The requirement words of the option's ``<python> -m pip install ...`` line."""
    words = shlex.split(pip_line)
    return words[words.index("install") + 1 :] if "install" in words else []


TARGET = "./pip-dry-run-target"  # pip needs --target with --python-version; a dry run writes nothing there


def command(python: str, pins: Sequence[str], python_version: Optional[str], target: str = TARGET) -> List[str]:
    """``<python> -m pip install --dry-run --ignore-installed [--python-version X.Y --only-binary=:all: --target
    DIR] <pins>``."""
    argv = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
    if python_version:
        argv += ["--python-version", python_version, "--only-binary=:all:", "--target", target]
    return argv + list(pins)


def parse_report(data: Any) -> Dict[str, str]:
    """PEP 503 name -> version of what pip's ``--report`` says it would install."""
    found: Dict[str, str] = {}
    items = data.get("install") if isinstance(data, dict) else None
    for item in items if isinstance(items, list) else []:
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
            found[versions.normalize_name(metadata["name"])] = str(metadata.get("version", ""))
    return found


def _error_line(stderr: str, status: str, returncode: Optional[int]) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    text = (errors or lines or [f"pip ended with {status} (exit {returncode})"])[0]
    return text[:300]


def check(
    pip_line: str,
    chosen: Dict[str, str],
    run_python: str,
    shown_python: str,
    python_version: Optional[str],
    timeout: float = TIMEOUT_S,
) -> Dict[str, Any]:
    """Run pip's resolver on the option's pins (``pip_line``) with ``run_python`` (``python_version``: plan for
    another Python) and compare its picks with the option's set ``chosen``. ``shown_python`` is how the printed
    command names the interpreter."""
    pins = targets(pip_line)
    shown = " ".join(shlex.quote(w) for w in command(shown_python, pins, python_version))
    result: Dict[str, Any] = {"command": shown, "status": "failed", "resolved": {}, "differs": [], "error": ""}
    with tempfile.TemporaryDirectory(prefix="plan_install_pip_") as folder:
        report = os.path.join(folder, "report.json")
        argv = command(run_python, pins, python_version, os.path.join(folder, "target"))
        argv[4:4] = ["--report", report, "--quiet", "--disable-pip-version-check"]
        done = run_capped(argv, timeout)
        if done.status != "ok":
            reason = "timed out" if done.status == "timeout" else ""
            result["error"] = reason or _error_line(done.stderr, done.status, done.returncode)
            return result
        try:
            read = read_bytes(report, REPORT_LIMIT)
            data = json.loads(read.text())
        except (InputError, ValueError) as error:
            result["error"] = f"pip's --report could not be read ({type(error).__name__})"
            return result
    resolved = parse_report(data)
    result["resolved"] = resolved
    result["differs"] = [
        f"{name}: plan {version}, pip {resolved.get(name, 'nothing')}"
        for name, version in chosen.items()
        if resolved.get(name) != version
    ]
    result["status"] = "differs" if result["differs"] else "agrees"
    return result
