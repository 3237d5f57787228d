"""Builders for the check_optional_backends tests: fake site-packages trees, fake GPU tools, and a runner.

The script is always run in a real subprocess with ``python -S`` and ``PYTHONPATH`` set to the fake trees, so the
test venv's own packages never leak into the report. ``PATH`` holds only a folder of fake tools, so a real
``nvidia-smi`` on the test machine cannot change the outcome either.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

from diagnostic.base import ALLOWED_COMMANDS, HEAVY_MODULES

from conftest import with_bytecode_cache

REPO_ROOT = Path(__file__).resolve().parent.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
SCRIPT = SKILL_DIR / "scripts" / "check_optional_backends.py"
SCHEMA = SKILL_DIR / "scripts" / "check_optional_backends.schema.json"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "diagnostic"
METADATA_DIR = FIXTURES / "metadata"


def fixture_metadata(name: str) -> str:
    """Header section of an upstream METADATA file, e.g. ``fixture_metadata("trl-1.16.0")``."""
    return (METADATA_DIR / f"{name}.METADATA").read_text(encoding="utf-8")


def metadata_text(name: str, version: str, requires: Sequence[str] = (), extras: Sequence[str] = ()) -> str:
    """A minimal but valid METADATA file."""
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Provides-Extra: {extra}" for extra in extras]
    lines += [f"Requires-Dist: {req}" for req in requires]
    return "\n".join(lines) + "\n\nA fake package for tests.\n"


def add_dist(
    site: Path,
    name: str,
    version: str,
    *,
    modules: Optional[Sequence[str]] = None,
    metadata: Optional[str] = None,
    metadata_bytes: Optional[bytes] = None,
    requires: Sequence[str] = (),
    extras: Sequence[str] = (),
    module_code: str = "",
    files: Optional[Dict[str, str]] = None,
    with_module: bool = True,
    top_level: bool = True,
) -> Path:
    """Create ``<name>-<version>.dist-info`` (METADATA, RECORD, top_level.txt, INSTALLER) and the module folders.

    ``files`` maps paths relative to ``site`` to contents (extra source files such as ``trl/import_utils.py``).
    """
    site.mkdir(parents=True, exist_ok=True)
    folder_name = name.replace("-", "_")
    modules = list(modules) if modules is not None else [folder_name]
    dist_info = site / f"{folder_name}-{version}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    if metadata_bytes is not None:
        (dist_info / "METADATA").write_bytes(metadata_bytes)
    else:
        text = metadata if metadata is not None else metadata_text(name, version, requires, extras)
        (dist_info / "METADATA").write_text(text, encoding="utf-8")
    (dist_info / "INSTALLER").write_text("pip\n", encoding="utf-8")
    if top_level:
        (dist_info / "top_level.txt").write_text("".join(m + "\n" for m in modules), encoding="utf-8")
    record = [f"{dist_info.name}/METADATA,,", f"{dist_info.name}/RECORD,,"]
    if with_module:
        for module in modules:
            package = site / module
            package.mkdir(parents=True, exist_ok=True)
            code = module_code or f'__version__ = "{version}"\n'
            (package / "__init__.py").write_text(code, encoding="utf-8")
            record.append(f"{module}/__init__.py,,")
    for relative, content in (files or {}).items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content), encoding="utf-8")
        record.append(f"{relative},,")
    (dist_info / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")
    return dist_info


def add_fixture_dist(site: Path, fixture: str, *, modules: Optional[Sequence[str]] = None, **kwargs) -> Path:
    """A dist whose METADATA is the real upstream header from ``tests/fixtures/diagnostic/metadata``."""
    name, version = fixture.rsplit("-", 1)
    return add_dist(site, name, version, modules=modules, metadata=fixture_metadata(fixture), **kwargs)


TORCH_VERSION_PY = """\
from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '{version}'
debug = False
cuda: Optional[str] = {cuda!r}
git_version = 'cf30153c4c131c8164ee7798e5022d810682e2cb'
hip: Optional[str] = {hip!r}
rocm: Optional[str] = None
xpu: Optional[str] = None
"""


def add_torch(site: Path, version: str = "2.13.0", cuda: Optional[str] = None, hip: Optional[str] = None) -> Path:
    """A fake torch whose ``torch/version.py`` has the shape of the real one; importing it raises."""
    local = "+cpu" if not cuda and not hip else ""
    full = version + local if "+" not in version else version
    return add_dist(
        site,
        "torch",
        full,
        module_code="raise RuntimeError('the default run must not import torch')\n",
        files={"torch/version.py": TORCH_VERSION_PY.format(version=full, cuda=cuda, hip=hip)},
    )


TRL_IMPORT_UTILS = """\
# Shape of trl-1.16.0 trl/import_utils.py for the lines the diagnostic reads (abridged for the tests).
LIGER_KERNEL_MIN_VERSION = "{liger}"


def is_vllm_available(min_version=None):
    _vllm_available, _vllm_version = _is_package_available("vllm", return_version=True)
    if _vllm_available:
        _vllm_base_version = Version(Version(_vllm_version).base_version)
        if not (Version("{low}") <= _vllm_base_version <= Version("{high}")):
            warnings.warn("outside the supported range")
    return _vllm_available
"""

TRL_BASE_CONFIG = """\
# Shape of trl-1.16.0 trl/trainer/base_config.py (abridged).
class _BaseConfig:
    use_liger_kernel: bool = field(
        default=False,
        metadata={"help": "Enable Liger Kernel optimizations. Deprecated in SFTTrainer and will be removed."},
    )
"""

TRL_ASYNC_GRPO = """\
# Shape of trl-1.16.0 trl/experimental/async_grpo/async_grpo_trainer.py (abridged).
def select_adapter_sync(server_info, model, args):
    return True
"""


def add_trl(site: Path, fixture: str = "trl-1.16.0", low: str = "0.22.0", high: str = "0.31.0", liger: str = "0.8.2"):
    """trl with its real METADATA and the source lines that hold its code gates."""
    return add_fixture_dist(
        site,
        fixture,
        module_code="raise RuntimeError('the default run must not import trl')\n",
        files={
            "trl/import_utils.py": TRL_IMPORT_UTILS.format(low=low, high=high, liger=liger),
            "trl/trainer/base_config.py": TRL_BASE_CONFIG,
            "trl/experimental/async_grpo/async_grpo_trainer.py": TRL_ASYNC_GRPO,
        },
    )


def add_stack(site: Path, torch_cuda: Optional[str] = None) -> None:
    """torch + transformers + accelerate + trl + peft with upstream metadata (the bench-venv shape)."""
    add_torch(site, cuda=torch_cuda)
    add_fixture_dist(site, "transformers-5.24.0")
    add_fixture_dist(
        site, "accelerate-1.15.0", files={"accelerate/utils/constants.py": 'FSDP2_PYTORCH_VERSION = "2.6.0"\n'}
    )
    add_trl(site)
    add_fixture_dist(site, "peft-0.21.2")
    add_fixture_dist(site, "huggingface_hub-2.4.0", modules=["huggingface_hub"])
    add_dist(site, "datasets", "5.2.0")
    add_dist(site, "safetensors", "0.8.0")


# --- fake GPU tools ---------------------------------------------------------------------------------------------------

H100_CSV = (
    "0, GPU-5c1e7c3a-0f5b-6a6e-8a6e-3b1c1d2e4f01, NVIDIA H100 80GB HBM3, 81559, 4, 81004, 550.54.15, 9.0\n"
    "1, GPU-8d2f9a41-7c3b-4e55-9f10-aa2b3c4d5e02, NVIDIA H100 80GB HBM3, 81559, 70000, 11004, 550.54.15, 9.0\n"
    "2, GPU-8d2f1111-2222-3333-4444-555566667703, NVIDIA H100 80GB HBM3, 81559, 4, 81004, 550.54.15, 9.0\n"
    "3, GPU-e07b2c11-1d2e-3f4a-5b6c-7d8e9fa0b104, NVIDIA H100 80GB HBM3, 81559, 4, 81004, 550.54.15, 9.0\n"
)
T4_CSV = "0, GPU-11111111-2222-3333-4444-555555555555, Tesla T4, 15360, 0, 14930, 535.104.05, 7.5\n"
DRIVER_FAILURE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
    "NVIDIA driver is installed and running.\n"
)
NVIDIA_SMI_L = (
    "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-aaaaaaaa-1111-2222-3333-444444444444)\n"
    "  MIG 3g.40gb     Device  0: (UUID: MIG-bbbbbbbb-5555-6666-7777-888888888888)\n"
    "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-cccccccc-1111-2222-3333-444444444444)\n"
    "  MIG 3g.40gb     Device  0: (UUID: MIG-dddddddd-5555-6666-7777-888888888888)\n"
)
ROCM_JSON = {
    "card0": {
        "Card Series": "AMD Instinct MI300X",
        "Card Model": "0x74a1",
        "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
        "GFX Version": "gfx942",
        "VRAM Total Memory (B)": "205822885888",
        "VRAM Total Used Memory (B)": "293994496",
        "Unique ID": "0x18f68e602b8a790f",
    },
    "card1": {
        "Card Series": "AMD Instinct MI300X",
        "Card Model": "0x74a1",
        "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
        "GFX Version": "gfx942",
        "VRAM Total Memory (B)": "205822885888",
        "VRAM Total Used Memory (B)": "293994496",
        "Unique ID": "0x2a3b4c5d6e7f8091",
    },
    "system": {"Driver version": "6.7.0"},
}


def write_tool(bin_dir: Path, name: str, body: str) -> Path:
    """An executable ``/bin/sh`` script called ``name`` in ``bin_dir``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


def fake_nvidia_smi(bin_dir: Path, csv: str = H100_CSV, listing: str = NVIDIA_SMI_L) -> Path:
    """nvidia-smi that prints ``csv`` for --query-gpu and ``listing`` for -L."""
    (bin_dir / "nvidia-smi.csv").parent.mkdir(parents=True, exist_ok=True)
    (bin_dir / "nvidia-smi.csv").write_text(csv, encoding="utf-8")
    (bin_dir / "nvidia-smi.L").write_text(listing, encoding="utf-8")
    here = str(bin_dir)
    return write_tool(
        bin_dir,
        "nvidia-smi",
        f'if [ "$1" = "-L" ]; then exec {cat()} "{here}/nvidia-smi.L"; fi\nexec {cat()} "{here}/nvidia-smi.csv"\n',
    )


def fake_rocm_smi(bin_dir: Path, payload: Optional[dict] = None) -> Path:
    path = bin_dir / "rocm-smi.json"
    bin_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload if payload is not None else ROCM_JSON), encoding="utf-8")
    return write_tool(bin_dir, "rocm-smi", f'exec {cat()} "{path}"\n')


def cat() -> str:
    return shutil.which("cat") or "/bin/cat"


def sleep() -> str:
    return shutil.which("sleep") or "/bin/sleep"


# --- running the script -----------------------------------------------------------------------------------------------


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> dict:
        return json.loads(self.stdout)


def packaging_dir(tmp: Path) -> Path:
    """A folder that holds only ``packaging`` (linked from the test venv), to opt into exact PEP 440 semantics."""
    import packaging

    target = tmp / "with-packaging"
    if not target.exists():
        target.mkdir(parents=True)
        (target / "packaging").symlink_to(Path(packaging.__file__).resolve().parent)
    return target


def base_env(home: Path, bin_dir: Path) -> Dict[str, str]:
    """A minimal environment: a fake HOME, PATH with only the fake tools, no inherited CUDA/HF variables."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "PATH": str(bin_dir), "LANG": "C.UTF-8"}
    for name in ("SYSTEMROOT", "PYENV_VERSION", "PYENV_ROOT"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def run_script(
    args: Sequence[str],
    sites: Iterable[Path] = (),
    *,
    env: Optional[Dict[str, str]] = None,
    tmp: Path,
    with_packaging: bool = False,
    python: Optional[str] = None,
    timeout: float = 120,
    extra_flags: Sequence[str] = ("-S",),
) -> Run:
    """Run the script in a subprocess that sees only ``sites`` (and optionally ``packaging``)."""
    paths = [str(p) for p in sites]
    if with_packaging:
        paths.append(str(packaging_dir(tmp)))
    run_env = dict(env) if env is not None else base_env(tmp / "home", tmp / "bin")
    if paths:
        run_env["PYTHONPATH"] = os.pathsep.join(paths)
    # DIAGNOSTIC_TEST_PYTHON runs every scenario under another interpreter (e.g. a Python 3.9 check by hand).
    command = [python or os.environ.get("DIAGNOSTIC_TEST_PYTHON") or sys.executable, *extra_flags, str(SCRIPT), *args]
    run_env = with_bytecode_cache(run_env, command[0])
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=run_env, timeout=timeout, check=False)
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - start)


def compat_rows(report: dict, subject: str, **match) -> List[dict]:
    """Compatibility rows for ``subject`` matching every ``key=value`` given."""
    return [
        row
        for row in report["compatibility"]
        if row["subject"] == subject and all(row.get(key) == value for key, value in match.items())
    ]


def backend(report: dict, backend_id: str) -> dict:
    return next(b for b in report["backends"] if b["id"] == backend_id)


# --- a tiny JSON Schema checker (the subset the schema file uses) -----------------------------------------------------

_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def schema_errors(value, schema: dict, path: str = "$") -> List[str]:
    """Errors of ``value`` against a JSON Schema subset: type, properties, required, additionalProperties, items,
    enum, const, minimum, $defs/$ref (local)."""
    root = schema
    return _check(value, schema, path, root)


def _type_ok(value, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def _check(value, schema: dict, path: str, root: dict) -> List[str]:
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return _check(value, target, path, root)
    errors: List[str] = []
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_type_ok(value, name) for name in names):
            return [f"{path}: expected {expected}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: {value!r} != {schema['const']!r}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        errors.append(f"{path}: {value} < {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: missing required key {key!r}")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                errors.extend(_check(item, properties[key], f"{path}.{key}", root))
            elif extra is False:
                errors.append(f"{path}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                errors.extend(_check(item, extra, f"{path}.{key}", root))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            errors.extend(_check(item, schema["items"], f"{path}[{index}]", root))
    return errors


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
        json.dumps(list(HEAVY_MODULES)),
        json.dumps(list(ALLOWED_COMMANDS)),
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    marker = [line for line in done.stderr.splitlines() if line.startswith("@@AUDIT@@")]
    assert marker, done.stderr
    result = json.loads(marker[-1][len("@@AUDIT@@") :])
    result["stdout"] = done.stdout
    return result
