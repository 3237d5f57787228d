#!/usr/bin/env python3
"""Regenerate ``scripts/stack/matrix.json``: the recorded compatibility matrix of the training stack.

    python3 tools/stack_matrix.py            # fetch from the registry and write the matrix (minutes)
    python3 tools/stack_matrix.py --check    # exit 1 when the committed matrix is stale (no network)
    python3 tools/stack_matrix.py --stated-only   # rewrite the stated floors (STATED_FLOORS) and the skill text

For every release in the window (TRL 1.0-1.16 and the 0.x releases indexed in tests/facts/release_history.json,
vLLM 0.10.2-0.34.0, transformers 4.56-5.25, torch up to 2.15 (the releases those vLLMs pin and the ones the others
accept), and the accelerate, PEFT, DeepSpeed, bitsandbytes, kernels, liger-kernel, datasets and huggingface_hub
releases the others accept) the matrix records
Requires-Python, the Requires-Dist lines that name a stack package (extras and markers kept) and the upload date.

Metadata comes from pip itself (``pip install --dry-run --ignore-installed --no-deps --report``: no wheel is
downloaded), a few lookups at a time; the release list and dates from the registry's JSON API (one request per
package). Feature floors that live only in source are read from the TRL and transformers wheels of the window
(downloaded to a temporary folder, a few MB each, deleted afterwards), each with its file and release.

``--check`` needs no network: the committed file must be what this tool renders from its own content, cover every
release of the recorded index listing inside the window, agree with the requirements in the facts files, and carry
the window this tool declares.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

TOOLS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
SCRIPTS_DIR = SKILL_DIR / "scripts"
if str(SCRIPTS_DIR) not in sys.path:
    sys.path.insert(0, str(SCRIPTS_DIR))

from common import versions  # noqa: E402

DEFAULT_OUTPUT = SKILL_DIR / "scripts" / "stack" / "matrix.json"
SKILL_TEXT = SKILL_DIR / "troubleshooting" / "compatibility.md"
HISTORY = REPO_ROOT / "tests" / "facts" / "release_history.json"
COMMAND = "python3 tools/stack_matrix.py"
SCHEMA_VERSION = 1
WORKERS = 4
PIP_TIMEOUT = 180

# The stack the planner reasons about (PEP 503 names); requirements on anything else are not recorded.
STACK_NAMES = (
    "trl",
    "vllm",
    "transformers",
    "torch",
    "accelerate",
    "peft",
    "deepspeed",
    "bitsandbytes",
    "kernels",
    "liger-kernel",
    "datasets",
    "huggingface-hub",
)
# Declared windows; the accepted packages' windows start at the lowest floor any windowed release declares.
WINDOW = {
    "trl": ">=1.0.0,<1.17",
    "vllm": ">=0.10.2,<=0.34.0",
    "transformers": ">=4.56.0,<5.26",
}
PINNED_BY_VLLM = ("torch",)
ACCEPTED = ("accelerate", "peft", "deepspeed", "bitsandbytes", "kernels", "liger-kernel", "datasets", "huggingface-hub")
# torch: every release up to the newest minor on the registry when the window last moved. No vLLM of the window pins
# torch 2.15 (0.34.0 pins 2.14.0), but transformers (torch>=2.6) and accelerate (torch>=2.6.0) accept it, so it is
# what a training image without vLLM gets from pip: the matrix must know its Python floor and CUDA build.
ACCEPTED_CAP = {"torch": "<2.16"}

# Feature floors that the package metadata does not state. Each reader runs over one wheel's files and returns
# {"subject": ..., "spec": ..., "file": ...} records (or nothing) for that release.


def _read_trl(files: Dict[str, str], release: str) -> List[Dict[str, str]]:
    """Version gates in TRL's source: the vLLM range is_vllm_available() checks, the liger-kernel floor, the
    transformers range where use_kernels is refused, and the AsyncGRPO weight-transfer path."""
    found = []
    text = files.get("trl/import_utils.py", "")
    match = re.search(r'Version\("([0-9.]+)"\)\s*<=\s*_?vllm\w*\s*<=\s*Version\("([0-9.]+)"\)', text)
    if match:
        found.append(
            {
                "feature": "vllm",
                "subject": "vllm",
                "spec": f">={match.group(1)},<={match.group(2)}",
                "kind": "warns",
                "file": "trl/import_utils.py is_vllm_available",
            }
        )
    match = re.search(r'^LIGER_KERNEL_MIN_VERSION\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if match:
        found.append(
            {
                "feature": "liger",
                "subject": "liger-kernel",
                "spec": f">={match.group(1)}",
                "kind": "requires",
                "file": "trl/import_utils.py LIGER_KERNEL_MIN_VERSION",
            }
        )
    utils = files.get("trl/trainer/utils.py", "")
    match = re.search(
        r'use_kernels"\)\s*and\s*Version\("([^"]+)"\)\s*<=\s*Version\(transformers\.__version__\)\s*<\s*'
        r'Version\("([^"]+)"\)',
        utils,
    )
    if match:
        found.append(
            {
                "feature": "hub-kernels",
                "subject": "transformers",
                "spec": f"<{match.group(1)} or >={match.group(2)}",
                "kind": "requires",
                "file": "trl/trainer/utils.py create_model_from_path (use_kernels raises ValueError)",
            }
        )
    for path in sorted(p for p in files if p.startswith("trl/experimental/async_grpo/")):
        source = files[path]
        floors = set()
        for gate in re.finditer(r'(_HAS_\w+\s*=\s*)?is_vllm_available\(min_version="([^"]+)"\)', source):
            if gate.group(1):
                name = gate.group(1).split("=")[0].strip()
                found.append(
                    {
                        "feature": "async-grpo",
                        "subject": "vllm",
                        "spec": f">={gate.group(2)}",
                        "kind": "prefers",
                        "file": f"{path} {name}",
                    }
                )
            elif gate.group(2) not in floors:
                floors.add(gate.group(2))
                found.append(
                    {
                        "feature": "async-grpo",
                        "subject": "vllm",
                        "spec": f">={gate.group(2)}",
                        "kind": "requires",
                        "file": f"{path} is_vllm_available(min_version=...)",
                    }
                )
    if "trl/experimental/async_grpo/async_grpo_trainer.py" in files:
        found.append(
            {
                "feature": "async-grpo",
                "subject": "trl",
                "spec": "",
                "kind": "present",
                "file": "trl/experimental/async_grpo/async_grpo_trainer.py",
            }
        )
        if "load_lora_adapter" in files["trl/experimental/async_grpo/async_grpo_trainer.py"]:
            found.append(
                {
                    "feature": "async-grpo-lora",
                    "subject": "trl",
                    "spec": "",
                    "kind": "present",
                    "file": "trl/experimental/async_grpo/async_grpo_trainer.py load_lora_adapter",
                }
            )
    return found


def _read_transformers(files: Dict[str, str], release: str) -> List[Dict[str, str]]:
    """Version gates in transformers' source: the kernels range, the bitsandbytes floor."""
    found = []
    text = files.get("transformers/utils/import_utils.py", "")
    low = re.search(r'^KERNELS_MIN_VERSION\s*=\s*"([^"]+)"', text, re.MULTILINE)
    high = re.search(r'^KERNELS_MAX_VERSION\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if low:
        spec = f">={low.group(1)}" + (f",<{high.group(1)}" if high else "")
        found.append(
            {
                "feature": "hub-kernels",
                "subject": "kernels",
                "spec": spec,
                "kind": "requires",
                "file": "transformers/utils/import_utils.py KERNELS_MIN_VERSION/KERNELS_MAX_VERSION",
            }
        )
    else:
        match = re.search(r'is_kernels_available[\s\S]{0,600}?version\.parse\("([0-9.]+)"\)', text)
        if match:
            found.append(
                {
                    "feature": "hub-kernels",
                    "subject": "kernels",
                    "spec": f">={match.group(1)}",
                    "kind": "requires",
                    "file": "transformers/utils/import_utils.py is_kernels_available",
                }
            )
    match = re.search(r'^BITSANDBYTES_MIN_VERSION\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if match:
        found.append(
            {
                "feature": "qlora",
                "subject": "bitsandbytes",
                "spec": f">={match.group(1)}",
                "kind": "requires",
                "file": "transformers/utils/import_utils.py BITSANDBYTES_MIN_VERSION",
            }
        )
    return found


SOURCE_READERS = {
    "trl": (
        _read_trl,
        ("trl/import_utils.py", "trl/trainer/utils.py", "trl/experimental/async_grpo/"),
    ),
    "transformers": (_read_transformers, ("transformers/utils/import_utils.py",)),
}

# Floors stated in upstream source that this tool does not read per release (a wheel per accelerate/torch
# release would add GBs); each names the file and the release it was read from.
STATED_FLOORS = (
    {
        "feature": "fsdp2",
        "subject": "torch",
        "spec": ">=2.6.0",
        "kind": "requires",
        "owner": "accelerate",
        "owner_spec": ">=1.6.0",
        "file": "accelerate-1.15.0 accelerate/utils/constants.py FSDP2_PYTORCH_VERSION; accelerate-1.16.0 drops it and "
        "requires torch>=2.6.0 in its metadata",
    },
    {
        "feature": "context-parallel",
        "subject": "accelerate",
        "spec": ">=1.10.0",
        "kind": "requires",
        "owner": "trl",
        "owner_spec": ">=1.0.0",
        "file": "accelerate/parallelism_config.py ParallelismConfig.cp_size (first in accelerate-1.10.0, absent "
        "from 1.9.0)",
    },
    {
        "feature": "context-parallel",
        "subject": "torch",
        "spec": ">=2.6.0",
        "kind": "requires",
        "owner": "accelerate",
        "owner_spec": ">=1.10.0",
        "file": "accelerate-1.10.0 and 1.15.0 accelerate/utils/constants.py BETA_CP_AVAILABLE_PYTORCH_VERSION",
    },
    # FSDP + QLoRA (feature fsdp-qlora: the qlora and fsdp2 goals together): the 4-bit weights must be stored in a
    # float dtype for FSDP to shard them. Each floor was read in the wheel of the release named and is absent from
    # the release before it.
    {
        "feature": "fsdp-qlora",
        "subject": "bitsandbytes",
        "spec": ">=0.43.0",
        "kind": "requires",
        "owner": "trl",
        "owner_spec": ">=0.0",
        "file": "bitsandbytes-0.43.0 bitsandbytes/nn/modules.py Params4bit/Linear4bit quant_storage (absent from "
        "0.42.0)",
    },
    {
        "feature": "fsdp-qlora",
        "subject": "transformers",
        "spec": ">=4.39.0",
        "kind": "requires",
        "owner": "trl",
        "owner_spec": ">=0.0",
        "file": "transformers-4.39.0 transformers/utils/quantization_config.py BitsAndBytesConfig "
        "bnb_4bit_quant_storage (absent from 4.38.2)",
    },
    {
        "feature": "fsdp-qlora",
        "subject": "accelerate",
        "spec": ">=1.7.0",
        "kind": "requires",
        "owner": "trl",
        "owner_spec": ">=0.0",
        "file": "accelerate-1.7.0 accelerate/utils/fsdp_utils.py fsdp2_prepare_model: Params4bit skip the "
        "meta-device move of fsdp_cpu_ram_efficient_loading, on in TRL's fsdp2.yaml (absent from 1.6.0); FSDP1 "
        "needs 0.28.0 (FullyShardedDataParallelPlugin.set_mixed_precision override)",
    },
    {
        "feature": "fsdp-qlora",
        "subject": "peft",
        "spec": ">=0.10.0",
        "kind": "requires",
        "owner": "trl",
        "owner_spec": ">=0.0",
        "file": "peft-0.10.0 peft/utils/other.py prepare_model_for_kbit_training keeps Params4bit in their storage "
        "dtype (0.9.0 casts them to float32); binds where that runs (TRL's experimental KTO/BCO/ORPO/CPO, not "
        "SFTTrainer 1.x)",
    },
)


# --- registry access (generation only) ---


def index_listing(name: str) -> Dict[str, str]:
    """Every non-yanked final release of ``name`` with its first upload date (registry JSON API)."""
    url = f"https://pypi.org/pypi/{name}/json"
    with urllib.request.urlopen(url, timeout=60) as response:  # a fixed https URL
        data = json.load(response)
    listing = {}
    for version, files in data.get("releases", {}).items():
        live = [f for f in files if not f.get("yanked")]
        if not live or not versions.is_valid_version(version) or _is_pre(version):
            continue
        listing[version] = min(f["upload_time"] for f in live)[:10]
    return listing


def _is_pre(version: str) -> bool:
    return bool(re.search(r"(a|b|rc|dev|alpha|beta)\d*", version.split("+")[0]))


def pip_command(*args: str) -> List[str]:
    """pip with the machine's own config, find-links and constraints ignored (``--isolated``): a local wheel such
    as ``torch-2.13.0+cpu`` in a find-links folder would otherwise stand in for the registry's release. The CA
    bundle named by ``PIP_CERT`` is kept."""
    argv = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check", "--timeout", "60"]
    if os.environ.get("PIP_CERT"):
        argv += ["--cert", os.environ["PIP_CERT"]]
    return argv + list(args)


def pip_env() -> Dict[str, str]:
    """The environment for pip: ``--isolated`` skips the user's config but not the site-wide one (a global
    ``constraint = ...`` capping torch made torch 2.15.0 unreadable); ``PIP_CONFIG_FILE`` set to the null device
    makes pip load no config file at all."""
    return {**os.environ, "PIP_CONFIG_FILE": os.devnull}


CACHE: Optional[Path] = None  # --cache DIR: raw pip answers kept between runs (a rerun refetches nothing)


def pip_metadata(name: str, version: str) -> Dict[str, Any]:
    """Requires-Python and Requires-Dist of one release, as pip reads them (no wheel download)."""
    cached = CACHE / f"{name}-{version}.json" if CACHE else None
    if cached and cached.exists():
        return json.loads(cached.read_text(encoding="utf-8"))
    result = _pip_metadata(name, version)
    if cached:
        cached.write_text(json.dumps(result), encoding="utf-8")
    return result


def _pip_metadata(name: str, version: str) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        argv = pip_command(
            "install",
            "--quiet",
            "--dry-run",
            "--ignore-installed",
            "--no-deps",
            "--ignore-requires-python",
            "--report",
            str(report),
            f"{name}=={version}",
        )
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False, env=pip_env())
        if done.returncode != 0 or not report.exists():
            raise RuntimeError(f"pip could not read {name}=={version}: {done.stderr.strip()[-300:]}")
        (item,) = json.loads(report.read_text(encoding="utf-8"))["install"]
    meta = item["metadata"]
    return {"python": meta.get("requires_python") or "", "requires": list(meta.get("requires_dist") or [])}


def wheel_files(name: str, version: str, prefixes: Sequence[str]) -> Dict[str, str]:
    """The text of the files under ``prefixes`` in the release's wheel (downloaded to a temporary folder)."""
    cached = CACHE / f"{name}-{version}.src.json" if CACHE else None
    if cached and cached.exists():
        return json.loads(cached.read_text(encoding="utf-8"))
    result = _wheel_files(name, version, prefixes)
    if cached:
        cached.write_text(json.dumps(result), encoding="utf-8")
    return result


def _wheel_files(name: str, version: str, prefixes: Sequence[str]) -> Dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        argv = pip_command(
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--ignore-requires-python",
            "-d",
            tmp,
            f"{name}=={version}",
        )
        subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False, env=pip_env())
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise RuntimeError(f"no wheel for {name}=={version}")
        with zipfile.ZipFile(wheels[0]) as archive:
            return {
                member: io.TextIOWrapper(archive.open(member), encoding="utf-8", errors="replace").read()
                for member in archive.namelist()
                if member.endswith(".py") and any(member.startswith(p) for p in prefixes)
            }


# --- shaping ---


def stack_requires(lines: Sequence[str]) -> List[str]:
    """The Requires-Dist lines that name a stack package, normalized (name lower-case, spaces trimmed), sorted."""
    kept = []
    for line in lines:
        req = versions.parse_requirement(line)
        if req is None or req.key not in STACK_NAMES:
            continue
        extras = f"[{','.join(req.extras)}]" if req.extras else ""
        spec = versions_display(req.specifier)
        kept.append(f"{req.key}{extras}{spec}" + (f"; {req.marker}" if req.marker else ""))
    return sorted(set(kept))


_CUDA_RUNTIME_RE = re.compile(r"^nvidia-cuda-runtime(?:-cu\d+)?\s*==\s*(\d+)\.(\d+)", re.IGNORECASE)
_CUDA_TOOLKIT_RE = re.compile(r"^cuda-toolkit(?:\[[^\]]*\])?\s*==\s*(\d+)\.(\d+)", re.IGNORECASE)


def cuda_of(lines: Sequence[str]) -> str:
    """The CUDA major.minor a release's Linux x86_64 wheel names in its Requires-Dist ("" when none)."""
    for line in lines:
        match = _CUDA_RUNTIME_RE.match(line) or _CUDA_TOOLKIT_RE.match(line)
        if match and "extra ==" not in line:
            return f"{match.group(1)}.{match.group(2)}"
    if any(re.search(r"\[cu13\]|-cu13\b", line) and "extra ==" not in line for line in lines):
        return "13"
    return ""


def versions_display(spec: str) -> str:
    """Specifier clauses sorted (lower bounds first) so equal ranges compare equal."""
    order = {">=": 0, ">": 1, "~=": 2, "==": 3, "===": 3, "!=": 4, "<=": 5, "<": 6}
    clauses = [c.strip() for c in (spec or "").split(",") if c.strip()]

    def rank(clause: str) -> Tuple[int, Tuple[Any, ...], str]:
        match = re.match(r"(===|==|!=|~=|<=|>=|<|>)\s*(.*)", clause)
        op, target = (match.group(1), match.group(2)) if match else ("", clause)
        key = tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.*]", target) if p)
        return (order.get(op, 9), key, clause)

    return ",".join(re.sub(r"\s+", "", c) for c in sorted(clauses, key=rank))


def in_window(version: str, spec: str) -> bool:
    return bool(versions.specifier_contains(spec, version, allow_prereleases=False))


def lowest_floor(matrix: Dict[str, Dict[str, Any]], subject: str) -> Optional[str]:
    """The lowest ``>=`` floor any recorded release declares for ``subject`` (None when none does)."""
    floors = []
    for package in matrix.values():
        for release in package["releases"].values():
            for line in package["sets"][release["requires"]]:
                req = versions.parse_requirement(line)
                if req is None or req.key != subject:
                    continue
                for clause in req.specifier.split(","):
                    match = re.match(r"\s*(>=|==|~=)\s*([0-9][0-9.]*)", clause)
                    if match:
                        floors.append(match.group(2))
    if not floors:
        return None
    best = floors[0]
    for floor in floors[1:]:
        if (versions.compare_versions(floor, best) or 0) < 0:
            best = floor
    return best


def torch_pins(matrix: Dict[str, Dict[str, Any]]) -> List[str]:
    pins = set()
    vllm = matrix["vllm"]
    for release in vllm["releases"].values():
        for line in vllm["sets"][release["requires"]]:
            match = re.match(r"torch==([0-9.]+)(;|$)", line)
            if match:
                pins.add(match.group(1))
    return sorted(pins, key=lambda v: tuple(int(p) for p in v.split(".")))


_HISTORY: Dict[str, Any] = {}


def _history() -> Dict[str, Any]:
    if not _HISTORY:
        _HISTORY.update(json.loads(HISTORY.read_text(encoding="utf-8")))
    return _HISTORY


def history_releases(package: str) -> List[str]:
    data = _history()
    return [r["version"] for r in data["packages"].get(package, {}).get("releases", [])]


# --- generation ---


def fetch_package(name: str, wanted: Sequence[str], listing: Dict[str, str], log: Any) -> Dict[str, Any]:
    """Metadata of ``wanted`` releases of ``name`` (pip, a few at a time), deduplicated into requirement sets."""
    results: Dict[str, Dict[str, Any]] = {}
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        futures = {pool.submit(pip_metadata, name, v): v for v in wanted}
        for future in concurrent.futures.as_completed(futures):
            try:
                results[futures[future]] = future.result()
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                log(f"{name} {futures[future]}: skipped ({str(error).splitlines()[0][:120]})")
    log(f"{name}: {len(results)} releases")
    shaped = shape_package(
        {v: {"date": listing.get(v, ""), **results[v]} for v in wanted if v in results},
        sorted(listing, key=versions.version_key),
    )
    shaped["unreadable"] = [v for v in wanted if v not in results]
    return shaped


def shape_package(raw: Dict[str, Dict[str, Any]], index: Sequence[str]) -> Dict[str, Any]:
    """``raw``: release -> {date, python, requires}; requirement sets are stored once and referenced by index."""
    sets: List[List[str]] = []
    releases = {}
    for version in sorted(raw, key=versions.version_key):
        requires = stack_requires(raw[version]["requires"])
        if requires not in sets:
            sets.append(requires)
        releases[version] = {
            "date": raw[version]["date"],
            "python": versions_display(raw[version]["python"]),
            "requires": sets.index(requires),
        }
        cuda = cuda_of(raw[version]["requires"])
        if cuda:
            releases[version]["cuda"] = cuda
    return {"index": list(index), "releases": releases, "sets": sets}


def read_floors(name: str, releases: Sequence[str], log: Any) -> Dict[str, List[Dict[str, str]]]:
    reader, prefixes = SOURCE_READERS[name]

    def one(version: str) -> List[Dict[str, str]]:
        return reader(wheel_files(name, version, prefixes), version)

    found: Dict[str, List[Dict[str, str]]] = {}
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        futures = {pool.submit(one, v): v for v in releases}
        for future in concurrent.futures.as_completed(futures):
            found[futures[future]] = future.result()
    log(f"{name}: source floors read from {len(found)} wheels")
    return {v: found[v] for v in sorted(found, key=versions.version_key)}


def compact_floors(per_release: Dict[str, Dict[str, List[Dict[str, str]]]]) -> List[Dict[str, Any]]:
    """One record per (owner, feature, subject, spec, kind, file), with the owner releases where it holds."""
    records: Dict[Tuple[str, ...], List[str]] = {}
    for owner, releases in per_release.items():
        for release, found in releases.items():
            for item in found:
                key = (owner, item["feature"], item["subject"], item["spec"], item["kind"], item["file"])
                records.setdefault(key, []).append(release)
    out = []
    for (owner, feature, subject, spec, kind, file), owner_releases in sorted(records.items()):
        out.append(
            {
                "owner": owner,
                "releases": owner_releases,
                "feature": feature,
                "subject": subject,
                "spec": spec,
                "kind": kind,
                "file": file,
            }
        )
    return out


def build(log: Any = print) -> Dict[str, Any]:
    """Fetch the whole matrix from the registry (network; minutes)."""
    matrix: Dict[str, Dict[str, Any]] = {}
    listings = {}
    for name in ("trl", "vllm", "transformers"):
        listings[name] = index_listing(name)
        wanted = [v for v in listings[name] if in_window(v, WINDOW[name])]
        if name == "trl":
            wanted += [v for v in history_releases("trl") if v in listings[name] and v not in wanted]
        matrix[name] = fetch_package(name, sorted(wanted, key=versions.version_key), listings[name], log)
    listings["torch"] = index_listing("torch")
    torch_wanted = [v for v in torch_pins(matrix) if v in listings["torch"]]
    floor = lowest_floor({k: matrix[k] for k in ("trl",)}, "torch") or "2.4.0"
    torch_wanted += [v for v in listings["torch"] if in_window(v, f">={floor},{ACCEPTED_CAP['torch']}")]
    matrix["torch"] = fetch_package(
        "torch", sorted(set(torch_wanted), key=versions.version_key), listings["torch"], log
    )
    for name in ACCEPTED:
        listings[name] = index_listing(name)
        floor = lowest_floor({"trl": matrix["trl"]}, name) or "0"
        wanted = [v for v in listings[name] if in_window(v, f">={floor}")]
        matrix[name] = fetch_package(name, sorted(wanted, key=versions.version_key), listings[name], log)
    floors = {name: read_floors(name, list(matrix[name]["releases"]), log) for name in SOURCE_READERS}
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_by": COMMAND,
        "fetched": datetime.date.today().isoformat(),
        "window": dict(WINDOW),
        "packages": {name: matrix[name] for name in STACK_NAMES},
        "floors": compact_floors(floors) + stated_floors(),
    }


def render(matrix: Dict[str, Any]) -> str:
    """Canonical text: one release or requirement set per line, so a diff shows what moved."""
    lines = ["{"]
    head = {k: matrix[k] for k in ("schema_version", "generated_by", "fetched", "window")}
    for key, value in head.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True)},")
    lines.append('  "packages": {')
    names = list(matrix["packages"])
    for number, name in enumerate(names):
        package = matrix["packages"][name]
        lines.append(f"    {json.dumps(name)}: {{")
        lines.append(f'      "index": {json.dumps(package["index"])},')
        lines.append(f'      "unreadable": {json.dumps(package.get("unreadable", []))},')
        lines.append('      "releases": {')
        rel = list(package["releases"].items())
        for i, (version, record) in enumerate(rel):
            comma = "," if i < len(rel) - 1 else ""
            lines.append(f"        {json.dumps(version)}: {json.dumps(record, sort_keys=True)}{comma}")
        lines.append("      },")
        lines.append('      "sets": [')
        for i, item in enumerate(package["sets"]):
            comma = "," if i < len(package["sets"]) - 1 else ""
            lines.append(f"        {json.dumps(item)}{comma}")
        lines.append("      ]")
        lines.append("    }" + ("," if number < len(names) - 1 else ""))
    lines.append("  },")
    lines.append('  "floors": [')
    for i, floor in enumerate(matrix["floors"]):
        comma = "," if i < len(matrix["floors"]) - 1 else ""
        lines.append(f"    {json.dumps(floor, sort_keys=True)}{comma}")
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --- the generated skill section ---


def _releases(matrix: Dict[str, Any], name: str) -> List[Tuple[str, Dict[str, Any], List[str]]]:
    package = matrix["packages"][name]
    return [(v, r, package["sets"][r["requires"]]) for v, r in package["releases"].items()]


def _spec(lines: Sequence[str], subject: str, extra: Optional[str] = None) -> str:
    """The specifier ``lines`` give ``subject`` (base install, or the one ``extra`` adds); "-" when none."""
    found = []
    for line in lines:
        req = versions.parse_requirement(line)
        if req is None or req.key != subject:
            continue
        named = versions.marker_extras(req.marker)
        if (extra is None and not named) or (extra is not None and named == (extra,)):
            found.append(versions_display(req.specifier) or "any")
    return " ".join(f"`{s}`" for s in dict.fromkeys(found)) or "-"


def _newest_per_minor(rows: List[Tuple[str, Dict[str, Any], List[str]]]) -> List[Tuple[str, Dict[str, Any], List[str]]]:
    by_minor: Dict[str, Tuple[str, Dict[str, Any], List[str]]] = {}
    for row in rows:
        by_minor[".".join(row[0].split(".")[:2])] = row  # releases are sorted: the last of a minor wins
    return list(by_minor.values())


def _floor_text(matrix: Dict[str, Any], owner: str, version: str, feature: str, subject: str) -> str:
    specs = [
        f["spec"]
        for f in matrix["floors"]
        if f["owner"] == owner
        and version in f["releases"]
        and f["feature"] == feature
        and f["subject"] == subject
        and f["kind"] in ("requires", "warns")
    ]
    floors = [s for s in specs if re.fullmatch(r">=[0-9.]+", s)]
    if len(floors) > 1:  # several gates on one path: the highest floor is the one that binds
        highest = max(floors, key=lambda s: versions.version_key(s[2:]) or (0,))  # type: ignore[arg-type,return-value]
        specs = [highest] + [s for s in specs if s not in floors]
    return " ".join(f"`{s}`" for s in dict.fromkeys(specs)) or "-"


def _window_minors(matrix: Dict[str, Any], name: str) -> str:
    """``1.0-1.16``: the minors of the oldest and newest recorded releases inside the declared window."""
    inside = [v for v in matrix["packages"][name]["releases"] if in_window(v, matrix["window"][name])]
    inside.sort(key=versions.version_key)  # type: ignore[arg-type]
    return "-".join(".".join(v.split(".")[:2]) for v in (inside[0], inside[-1])) if inside else "?"


def render_skill_text(matrix: Dict[str, Any]) -> str:
    """troubleshooting/compatibility.md: per vLLM release, per TRL minor and per transformers minor."""
    out = [
        "# Which releases go together (generated)",
        "",
        "Back to [README.md](README.md). Generated by `python3 tools/stack_matrix.py` from the recorded matrix",
        "(`scripts/stack/matrix.json`): every range below is the release's own Requires-Dist as pip reads it, every",
        "floor is read from the wheel's source. Do not edit by hand. For a concrete environment, do not combine rows",
        "yourself: run `python3 scripts/plan_install.py --want <backend> --keep <pkg>==<ver>`, which checks every",
        "pair and prints the pip line.",
        "",
        "## Versions (time-sensitive)",
        "",
        f"Recorded from the registry on {matrix['fetched']}. Each row carries its own release.",
        "",
        f"**Unless marked:** TRL {_window_minors(matrix, 'trl')}, vLLM {_window_minors(matrix, 'vllm')}.",
        "",
        "### vLLM releases",
        "",
        "The torch pin decides the CUDA build: the PyPI wheel of vLLM is built against its torch pin, so a",
        "server image and a trainer image on different vLLM releases differ in torch too.",
        "",
        "| vLLM | date | Python | torch | CUDA of that torch's PyPI wheel | transformers | huggingface_hub |",
        "|---|---|---|---|---|---|---|",
    ]
    torch = {v: r for v, r, _ in _releases(matrix, "torch")}
    for version, record, lines in _releases(matrix, "vllm"):
        pin = _spec(lines, "torch")
        pinned = pin.strip("`").lstrip("=")
        cuda = torch.get(pinned, {}).get("cuda", "") or record.get("cuda") or "?"
        out.append(
            f"| vLLM {version} | {record['date']} | `{record['python']}` | {pin} | {cuda} | "
            f"{_spec(lines, 'transformers')} | {_spec(lines, 'huggingface-hub')} |"
        )
    out += [
        "",
        "### TRL releases: what each backend needs",
        "",
        'Newest patch of each minor. Extras columns are the ranges `pip install "trl[<extra>]"` adds; the last',
        "columns are floors from source: the vLLM range `is_vllm_available()` accepts without a warning, and the",
        "vLLM floor of `AsyncGRPOTrainer`'s weight transfer.",
        "",
        "| TRL | Python | transformers | accelerate | datasets | `vllm` extra | `peft` | `deepspeed` | "
        "`quantization` (bitsandbytes) | `liger` | vLLM without warning | AsyncGRPO vLLM |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for version, record, lines in _newest_per_minor(_releases(matrix, "trl")):
        out.append(
            f"| TRL {version} | `{record['python']}` | {_spec(lines, 'transformers')} | {_spec(lines, 'accelerate')} | "
            f"{_spec(lines, 'datasets')} | {_spec(lines, 'vllm', 'vllm').replace('`', '`vllm', 1)} | "
            f"{_spec(lines, 'peft', 'peft')} | "
            f"{_spec(lines, 'deepspeed', 'deepspeed')} | {_spec(lines, 'bitsandbytes', 'quantization')} | "
            f"{_spec(lines, 'liger-kernel', 'liger')} | {_floor_text(matrix, 'trl', version, 'vllm', 'vllm')} | "
            f"{_floor_text(matrix, 'trl', version, 'async-grpo', 'vllm')} |"
        )
    kernels_index = matrix["packages"]["kernels"]["index"]
    out += [
        "",
        "### transformers releases: Hub kernels and the hub client",
        "",
        "Hub kernels work only inside the kernels range each transformers release accepts (read from",
        "`transformers/utils/import_utils.py`); `trl[kernels]` cannot resolve where PyPI has no kernels release in",
        f"that range (newest kernels on PyPI: {kernels_index[-1] if kernels_index else '?'}).",
        "",
        "| transformers | Python | torch | huggingface_hub | kernels (hub-kernels) |",
        "|---|---|---|---|---|",
    ]
    for version, record, lines in _newest_per_minor(_releases(matrix, "transformers")):
        kernels = _floor_text(matrix, "transformers", version, "hub-kernels", "kernels")
        if kernels == "-":
            kernels = _spec(lines, "kernels", "hub-kernels")
        out.append(
            f"| transformers {version} | `{record['python']}` | {_spec(lines, 'torch', 'torch')} | "
            f"{_spec(lines, 'huggingface-hub')} | {kernels} |"
        )
    out += [
        "",
        "### Floors read in source, for every release in the window",
        "",
        "Declared in no metadata; each holds for the owner releases named (an owner without a range: every release).",
        "`fsdp-qlora` is QLoRA sharded by FSDP2 (`--want qlora,fsdp2`).",
        "",
        "| feature | owner | needs | read in |",
        "|---|---|---|---|",
    ]
    for floor in matrix["floors"]:
        if floor.get("releases") or floor["kind"] != "requires":
            continue
        owner = floor["owner"] + (f" {floor['owner_spec']}" if floor.get("owner_spec", ">=0.0") != ">=0.0" else "")
        out.append(f"| {floor['feature']} | {owner} | {floor['subject']} `{floor['spec']}` | {floor['file']} |")
    return "\n".join(out) + "\n"


# --- staleness (no network) ---


def problems(matrix: Dict[str, Any], text: str) -> List[str]:
    """Why the committed matrix is stale or incomplete (empty when current)."""
    found = []
    if render(matrix) != text:
        found.append("the file is not in the tool's canonical form")
    if not SKILL_TEXT.exists() or SKILL_TEXT.read_text(encoding="utf-8") != render_skill_text(matrix):
        found.append(f"{SKILL_TEXT.relative_to(REPO_ROOT)} is not what the matrix renders")
    if matrix.get("window") != WINDOW:
        found.append(f"window {matrix.get('window')} differs from the tool's {WINDOW}")
    packages = matrix.get("packages", {})
    missing_names = [n for n in STACK_NAMES if n not in packages]
    if missing_names:
        found.append(f"packages missing: {', '.join(missing_names)}")
        return found
    for name, spec in WINDOW.items():
        recorded = packages[name]["releases"]
        gone = [
            v
            for v in packages[name]["index"]
            if in_window(v, spec) and v not in recorded and v not in packages[name].get("unreadable", [])
        ]
        if gone:
            found.append(f"{name}: releases in the window but not recorded: {', '.join(gone)}")
    for name in ("trl", "vllm"):
        for version in history_releases(name):
            if version not in packages[name]["releases"]:
                found.append(f"{name} {version} is indexed in the release history but missing here")
    for pin in torch_pins(packages):
        if pin not in packages["torch"]["releases"]:
            found.append(f"torch {pin} is pinned by a recorded vLLM but missing here")
    for name in ACCEPTED:
        floor = lowest_floor({"trl": packages["trl"]}, name)
        recorded = packages[name]["releases"]
        skipped = packages[name].get("unreadable", [])
        gone = [
            v
            for v in packages[name]["index"]
            if floor and in_window(v, f">={floor}") and v not in recorded and v not in skipped
        ]
        if gone:
            found.append(f"{name}: accepted releases not recorded: {', '.join(gone[:8])}")
    found.extend(history_disagreements(packages))
    if [f for f in matrix.get("floors", []) if not f.get("releases")] != stated_floors():
        found.append("the stated floors differ from the tool's STATED_FLOORS (rewrite them with --stated-only)")
    return found


def stated_floors() -> List[Dict[str, Any]]:
    """STATED_FLOORS as the matrix records them (every owner release: no release list)."""
    return [dict(f, releases=[]) for f in STATED_FLOORS]


def with_stated_floors(matrix: Dict[str, Any]) -> Dict[str, Any]:
    """``matrix`` with its stated floors replaced by the tool's (the floors read per release are kept)."""
    read = [f for f in matrix["floors"] if f.get("releases")]
    return {**matrix, "floors": read + stated_floors()}


def history_disagreements(packages: Dict[str, Any]) -> List[str]:
    """Requirement lines of the indexed TRL/vLLM releases that the facts record but the matrix lacks."""
    data = _history()
    found = []
    for name in ("trl", "vllm"):
        entry = data["packages"][name]
        order = [r["version"] for r in entry["releases"]]
        for mask, lines in entry["facts"].get("requires", {}).items():
            for line in lines:
                shaped = stack_requires([line])
                if not shaped:
                    continue
                (wanted,) = shaped
                for position, bit in enumerate(mask):
                    if bit != "1" or order[position] not in packages[name]["releases"]:
                        continue
                    release = packages[name]["releases"][order[position]]
                    if wanted not in packages[name]["sets"][release["requires"]]:
                        found.append(f"{name} {order[position]}: facts record {wanted!r}, the matrix does not")
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed matrix is stale")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where to write the matrix")
    parser.add_argument("--cache", type=Path, default=None, help="keep raw pip answers here between runs")
    parser.add_argument("--text-only", action="store_true", help="rewrite only the skill text from the matrix")
    parser.add_argument(
        "--stated-only",
        action="store_true",
        help="rewrite the matrix's stated floors from STATED_FLOORS, and the skill text (no network)",
    )
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.check:
        text = args.output.read_text(encoding="utf-8")
        found = problems(json.loads(text), text)
        for line in found:
            print(f"stale: {line}", file=sys.stderr)
        if found:
            print(f"regenerate with: {COMMAND}", file=sys.stderr)
        return 1 if found else 0
    if args.stated_only:
        matrix = with_stated_floors(json.loads(args.output.read_text(encoding="utf-8")))
        args.output.write_text(render(matrix), encoding="utf-8")
        SKILL_TEXT.write_text(render_skill_text(matrix), encoding="utf-8")
        return 0
    if args.text_only:
        SKILL_TEXT.write_text(render_skill_text(json.loads(args.output.read_text(encoding="utf-8"))), encoding="utf-8")
        return 0
    global CACHE
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
        CACHE = args.cache
    matrix = build(log=lambda line: print(line, file=sys.stderr))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render(matrix), encoding="utf-8")
    SKILL_TEXT.write_text(render_skill_text(matrix), encoding="utf-8")
    print(f"wrote {args.output.relative_to(REPO_ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
