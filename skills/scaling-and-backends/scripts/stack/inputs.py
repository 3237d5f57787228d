"""The planner's typed request: goals, constraints and the starting environment (the live interpreter's installed
metadata, or a diagnostic ``--json`` report), validated once. Nothing below this module sees argparse; a bad value
is a ``RequestError`` (exit 2) that names the flag.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

from common import versions
from common.diagnostic_report import ReportError, read_report
from common.values import short

from stack.goals import GOAL_IDS, NOT_PLANNED

MAX_KEEPS = 32
MAX_OPTIONS = 20
# Distributions read from the environment (PEP 503 names; nightly builds count as the package).
TRACKED = {
    "trl": "trl",
    "vllm": "vllm",
    "transformers": "transformers",
    "torch": "torch",
    "accelerate": "accelerate",
    "peft": "peft",
    "deepspeed": "deepspeed",
    "bitsandbytes": "bitsandbytes",
    "kernels": "kernels",
    "liger-kernel": "liger-kernel",
    "liger-kernel-nightly": "liger-kernel",
    "datasets": "datasets",
    "huggingface-hub": "huggingface-hub",
}
_KEEP_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*((?:===|==|!=|~=|<=|>=|<|>)[^;]*)?\s*$")
_PYTHON_RE = re.compile(r"^3\.(\d{1,2})(?:\.(\d{1,3}))?$")
_CUDA_RE = re.compile(r"^(\d{1,2})(?:\.(\d{1,2}|x))?$")


class RequestError(Exception):
    """A flag value or input file the planner cannot use (exit 2)."""


class Keep(NamedTuple):
    name: str  # PEP 503
    spec: str  # "" keeps the installed release
    text: str  # as given


class PlanRequest(NamedTuple):
    wants: Tuple[str, ...]
    keeps: Tuple[Keep, ...]
    python: str  # major.minor[.micro] the plan is for
    python_given: bool  # --python was passed (a constraint one can drop)
    cuda: Optional[str]  # "12" or "12.8"; None: no CUDA constraint
    installed: Dict[str, str]  # PEP 503 name -> release (local label dropped)
    interpreter: str  # shown in the pip line
    source: str  # "live environment" or "report FILE"
    as_json: bool
    options: int
    executable: Optional[str] = None  # the interpreter to run pip with (None: not runnable here, or another Python)
    check_with_pip: bool = False


def parse_wants(values: Sequence[str]) -> Tuple[str, ...]:
    wants = []
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            if part in NOT_PLANNED:
                raise RequestError(f"--want {part}: {NOT_PLANNED[part]}")
            if part not in GOAL_IDS:
                raise RequestError(f"--want: unknown goal {part!r}; valid: {', '.join(GOAL_IDS)}")
            if part not in wants:
                wants.append(part)
    return tuple(wants)


def parse_keeps(values: Sequence[str], known: Sequence[str]) -> Tuple[Keep, ...]:
    if len(values) > MAX_KEEPS:
        raise RequestError(f"--keep: at most {MAX_KEEPS} values")
    keeps = []
    for value in values:
        for part in (
            (p.strip() for p in value.split(",") if p.strip()) if "," in value and "==" not in value else [value]
        ):
            match = _KEEP_RE.match(part)
            if not match:
                raise RequestError(f"--keep {short(part)}: expected NAME, NAME==VERSION or NAME with a specifier")
            name = versions.normalize_name(match.group(1))
            name = TRACKED.get(name, name)
            if name not in known:
                known_list = ", ".join(known)
                raise RequestError(f"--keep {short(part)}: {name} is not in the stack matrix; known: {known_list}")
            spec = re.sub(r"\s+", "", match.group(2) or "")
            if spec and versions.oversized(spec):
                raise RequestError(
                    f"--keep {short(part)}: a version number of more than {versions.MAX_NUMBER_DIGITS} digits (or a "
                    f"specifier over {versions.MAX_VERSION_CHARS} characters) is no release"
                )
            if spec and versions.specifier_contains(spec, "0") is None:
                raise RequestError(f"--keep {short(part)}: {short(spec)} is not a version specifier")
            keeps.append(Keep(name, spec, part.strip()))
    return tuple(keeps)


def parse_python(value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    match = _PYTHON_RE.match(value.strip())
    if not match or not 6 <= int(match.group(1)) <= 20:
        raise RequestError(f"--python {value!r}: expected 3.MINOR or 3.MINOR.MICRO, e.g. 3.11")
    return value.strip()


def parse_cuda(value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    match = _CUDA_RE.match(value.strip().lower())
    if not match or not 10 <= int(match.group(1)) <= 20:
        raise RequestError(f"--cuda {value!r}: expected MAJOR, MAJOR.x or MAJOR.MINOR, e.g. 12.x or 12.8")
    minor = match.group(2)
    return match.group(1) if minor in (None, "x") else f"{match.group(1)}.{minor}"


def release_of(version: Optional[str]) -> Optional[str]:
    """The public release of an installed version (``2.9.0+cu128`` -> ``2.9.0``)."""
    if not version:
        return None
    text = version.strip().split("+", 1)[0]
    return text if versions.is_valid_version(text) else None


def live_environment(scan: Callable[[Sequence[str]], Dict[str, Any]]) -> Tuple[Dict[str, str], str, str]:
    """Installed stack releases of this interpreter (metadata only, no import), its version and path. ``scan`` is
    the metadata scan the command hands in (the diagnostic's, so both read an environment the same way)."""
    found = scan(sys.path)
    installed: Dict[str, str] = {}
    for dist, name in TRACKED.items():
        for record in found.get(dist, []):
            release = release_of(record.version() or record.folder_version)
            if release and name not in installed:
                installed[name] = release
    info = sys.version_info
    return installed, f"{info[0]}.{info[1]}.{info[2]}", sys.executable or "python3"


def report_environment(path: str) -> Tuple[Dict[str, str], str, str]:
    """Installed releases, Python version and interpreter as a diagnostic ``--json`` report states them."""
    try:
        data = read_report(path)
    except ReportError as error:
        raise RequestError(str(error)) from None
    packages = data.get("packages")
    python = data.get("python")
    if not isinstance(packages, dict) or not isinstance(python, dict):
        raise RequestError(f"--report {path}: the report has no packages/python sections")
    installed: Dict[str, str] = {}
    for pid, entry in packages.items():
        name = TRACKED.get(versions.normalize_name(str(pid)))
        if name and isinstance(entry, dict) and entry.get("installed"):
            release = release_of(entry.get("version") if isinstance(entry.get("version"), str) else None)
            if release:
                installed[name] = release
    version = python.get("version")
    if not isinstance(version, str) or not _PYTHON_RE.match(version.split()[0] if version else ""):
        raise RequestError(f"--report {path}: python.version is missing or not 3.MINOR[.MICRO]")
    interpreter = _report_interpreter(data, python)
    return installed, version.split()[0], interpreter


def _report_interpreter(data: Dict[str, Any], python: Dict[str, Any]) -> str:
    hint = data.get("interpreter")
    if isinstance(hint, dict) and isinstance(hint.get("suggested_python"), str) and hint["suggested_python"]:
        return hint["suggested_python"]
    executable = python.get("executable")
    return executable if isinstance(executable, str) and executable else "python3"


def shown_path(path: str, cwd: Optional[str] = None, home: Optional[str] = None) -> str:
    """A copyable short path: ``./x`` under the working folder, ``~/x`` under the home folder, else as is."""
    cwd = os.getcwd() if cwd is None else cwd
    home = os.path.expanduser("~") if home is None else home
    for base, shown in ((cwd, "."), (home, "~")):
        if base and base not in ("/", "~") and path.startswith(base.rstrip(os.sep) + os.sep):
            return f"{shown}/{path[len(base.rstrip(os.sep)) + 1 :]}"
    return path


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def build_request(
    want: Sequence[str],
    keep: Sequence[str],
    python: Optional[str],
    cuda: Optional[str],
    report: Optional[str],
    as_json: bool,
    options: int,
    known: Sequence[str],
    scan: Callable[[Sequence[str]], Dict[str, Any]],
    check_with_pip: bool = False,
) -> PlanRequest:
    """Validate every flag value and load the starting environment."""
    wants = parse_wants(want)
    keeps = parse_keeps(keep, known)
    if not wants and not any(k.spec for k in keeps):
        raise RequestError(
            f"--want: name at least one goal ({', '.join(GOAL_IDS)}), or --keep a release or specifier "
            "(NAME==VERSION, NAME>=VERSION) to keep the installed stack working with it"
        )
    python_flag = parse_python(python)
    cuda_value = parse_cuda(cuda)
    if not 1 <= options <= MAX_OPTIONS:
        raise RequestError(f"--options {options}: expected 1 to {MAX_OPTIONS}")
    if report is not None:
        installed, python_version, interpreter = report_environment(report)
        source = f"report {report}"
        runnable = os.path.isabs(interpreter) and os.path.isfile(interpreter) and os.access(interpreter, os.X_OK)
        executable: Optional[str] = interpreter if runnable else None
    else:
        installed, python_version, interpreter = live_environment(scan)
        source = "live environment"
        executable = interpreter
    for item in keeps:
        if not item.spec and item.name not in installed:
            raise RequestError(f"--keep {item.text}: {item.name} is not installed; name a release (NAME==VERSION)")
    if python_flag and _minor(python_flag) != _minor(python_version):
        interpreter = f"python{_minor(python_flag)}"  # the plan is for another interpreter than the one read
        executable = None
    return PlanRequest(
        wants=wants,
        keeps=keeps,
        python=python_flag or python_version,
        python_given=python_flag is not None,
        cuda=cuda_value,
        installed=installed,
        interpreter=shown_path(interpreter),
        source=source,
        as_json=as_json,
        options=options,
        executable=executable,
        check_with_pip=check_with_pip,
    )
