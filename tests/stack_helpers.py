"""Builders for the plan_install tests: a diagnostic --json report as the planner reads it, and a runner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
SCRIPT = SKILL_DIR / "scripts" / "plan_install.py"


def report(python: str, packages: Dict[str, str], executable: str = "/env/bin/python") -> Dict[str, Any]:
    """The parts of a check_optional_backends.py --json report the planner reads."""
    return {
        "tool": "check_optional_backends",
        "schema_version": 1,
        "python": {"version": python, "executable": executable},
        "packages": {name: {"installed": True, "version": version} for name, version in packages.items()},
        "interpreter": {"suggested_python": None},
    }


def write_report(folder: Path, python: str, packages: Dict[str, str], **kwargs: Any) -> Path:
    path = folder / "report.json"
    path.write_text(json.dumps(report(python, packages, **kwargs)), encoding="utf-8")
    return path


def run(args: Sequence[str], cwd: Path) -> Tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-S", str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=str(cwd)
    )
    return done.returncode, done.stdout, done.stderr


def run_json(args: Sequence[str], cwd: Path) -> Tuple[int, Dict[str, Any]]:
    code, out, err = run([*args, "--json"], cwd)
    assert err == "" or "Traceback" not in err, err
    return code, json.loads(out)


# A trainer image on TRL 1.16 with transformers 5.24 and the newest torch (no vLLM yet).
TRL_116 = {
    "trl": "1.16.0",
    "transformers": "5.24.0",
    "torch": "2.14.0",
    "accelerate": "1.15.0",
    "datasets": "4.8.0",
    "huggingface-hub": "1.33.0",
}
# An older image: TRL 1.8 with vLLM 0.19.1.
TRL_18 = {
    "trl": "1.8.0",
    "transformers": "5.10.0",
    "torch": "2.10.0",
    "accelerate": "1.12.0",
    "vllm": "0.19.1",
    "datasets": "4.7.0",
    "huggingface-hub": "1.3.0",
}
# An older stack for QLoRA with FSDP: TRL 1.0 on transformers 4.x and Python 3.10.
TRL_10 = {
    "trl": "1.0.0",
    "transformers": "4.56.2",
    "torch": "2.8.0",
    "accelerate": "1.10.1",
    "datasets": "4.7.0",
    "huggingface-hub": "0.35.0",
}
ENVIRONMENTS: Dict[str, Tuple[str, Dict[str, str]]] = {
    "trl116": ("3.12.3", TRL_116),
    "trl18": ("3.11.9", TRL_18),
    "trl10": ("3.10.12", TRL_10),
}


def pins(pip_line: str) -> List[str]:
    """The requirement words of a ``<python> -m pip install ...`` line."""
    words = pip_line.replace("'", "").split()
    return words[words.index("install") + 1 :]
