#!/usr/bin/env python3
"""Regenerate ``tests/facts/upstream_facts.json`` from the pinned upstream releases, and
``tests/facts/release_history.json`` from every release in ``HISTORY``.

    python3 tools/refresh_upstream_facts.py                      # download what is missing, extract, write
    python3 tools/refresh_upstream_facts.py --wheel-dir DIR      # use (and fill) another archive cache
    python3 tools/refresh_upstream_facts.py --check              # exit 1 if the committed file is stale
    python3 tools/refresh_upstream_facts.py --diff vllm 0.31.0 0.33.0   # what changed between two pinned releases
    python3 tools/refresh_upstream_facts.py --diff trl 1.14.2 1.16.0    # ... or two releases of the release history

Each pinned release is fetched with ``pip download --no-deps`` (wheels for Linux x86-64; DeepSpeed ships only an
sdist) into a cache folder, its sha256 is checked against the one the committed facts file recorded for that same
version, and its Python sources are read as text and AST straight from the archive: nothing is imported, so torch is
never needed. The output is deterministic: sorted keys, no timestamps, so a rerun writes the same bytes.

Needs Python 3.11+ (the upstream sources use 3.10+ syntax) and PyYAML; 3.11, 3.12 and 3.13 write identical files.
To move to a new release, edit ``PINS`` (releases the text is checked against) and ``HISTORY`` (releases whose
facts are indexed for the scope checks); see docs/verification.md "Moving the bundle to a new TRL or vLLM
release". History releases are indexed one at a time into ``<wheel dir>/../history/`` and large wheels are
deleted once indexed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

TOOLS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parent
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

from facts import extract_accelerate, extract_hub, extract_misc, extract_trl, extract_vllm  # noqa: E402
from facts.archive import SourceArchive, sha256_of  # noqa: E402
from facts.delta import make_delta  # noqa: E402
from facts.history import build_history, flatten, history_extras  # noqa: E402
from facts.link import link_trl_cli  # noqa: E402

SCHEMA_VERSION = 1
DEFAULT_OUTPUT = REPO_ROOT / "tests" / "facts" / "upstream_facts.json"
HISTORY_OUTPUT_NAME = "release_history.json"  # written beside --output
HISTORY_CACHE_VERSION = 1  # bump when an extractor changes what it reads, to re-index every cached release
DEFAULT_WHEEL_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scaling-and-backends" / "wheels"
REFRESH_COMMAND = "python3 tools/refresh_upstream_facts.py"
# Wheels are fetched for this platform whatever the maintainer's machine is (vLLM publishes Linux wheels only).
PIP_PLATFORM_ARGS = [
    "--only-binary=:all:",
    "--platform",
    "manylinux_2_35_x86_64",
    "--platform",
    "manylinux_2_31_x86_64",
    "--platform",
    "manylinux_2_28_x86_64",
    "--platform",
    "manylinux_2_24_x86_64",
    "--platform",
    "manylinux2014_x86_64",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
]


@dataclass(frozen=True)
class Pin:
    """One pinned release. The first pin of a package is its primary version (the one the skill text is written
    for); later pins of the same package are stored as deltas against it."""

    package: str  # distribution name as pip spells it
    version: str
    extractor: Callable[[SourceArchive], Dict[str, object]]
    sdist: bool = False

    @property
    def file_prefix(self) -> str:
        return self.package.replace("-", "_").lower() + "-" + self.version


PINS: List[Pin] = [
    Pin("trl", "1.16.0", extract_trl.extract),
    Pin("vllm", "0.31.0", extract_vllm.extract),
    Pin("vllm", "0.27.1", extract_vllm.extract),  # the HF Jobs seed recipe's pin
    Pin("vllm", "0.33.0", extract_vllm.extract),  # newer than TRL 1.16 accepts
    Pin("vllm", "0.34.0", extract_vllm.extract),  # the newest on PyPI (2026-12-06), newer than TRL 1.16 accepts
    Pin("accelerate", "1.16.0", extract_accelerate.extract),
    Pin("peft", "0.21.2", extract_misc.extract_peft),
    Pin("transformers", "5.25.0", extract_misc.extract_transformers),
    Pin("deepspeed", "0.19.8", extract_misc.extract_deepspeed, sdist=True),
    Pin("bitsandbytes", "0.50.2", extract_misc.extract_small("bitsandbytes")),
    Pin("liger-kernel", "0.8.5", extract_misc.extract_small("liger_kernel")),
    Pin("kernels", "0.19.1", extract_misc.extract_small("kernels")),
    Pin("huggingface_hub", "2.4.0", extract_hub.extract),
]


# The releases indexed for the release history (tests/facts/release_history.json): the last patch of every TRL minor
# 1.0-1.16, the last patch of the TRL 0.x minors whose facts the text still cites, and the last patch of every vLLM
# minor that those TRL releases' ``vllm`` extra accepts (0.10.2 ... 0.31, read from each wheel's METADATA), plus the
# vLLM releases after that window that the text names (0.33.0, and 0.34.0, the newest on PyPI on 2026-12-06).
# Oldest first.
HISTORY: Dict[str, List[str]] = {
    "trl": [
        "0.19.1",
        "0.25.1",
        "0.29.1",
        "1.0.0",
        "1.1.0",
        "1.2.0",
        "1.3.0",
        "1.4.0",
        "1.5.1",
        "1.6.0",
        "1.7.1",
        "1.8.0",
        "1.9.2",
        "1.10.0",
        "1.11.0",
        "1.12.0",
        "1.13.0",
        "1.14.2",
        "1.15.0",
        "1.16.0",
    ],
    "vllm": [
        "0.10.2",
        "0.11.2",
        "0.12.0",
        "0.13.0",
        "0.14.1",
        "0.15.1",
        "0.16.0",
        "0.17.1",
        "0.18.1",
        "0.19.1",
        "0.20.2",
        "0.21.0",
        "0.22.1",
        "0.23.0",
        "0.24.0",
        "0.25.1",
        "0.26.0",
        "0.27.1",
        "0.28.0",
        "0.29.0",
        "0.30.0",
        "0.31.0",
        "0.33.0",
        "0.34.0",
    ],
}
HISTORY_EXTRACTORS: Dict[str, Callable[[SourceArchive], Dict[str, object]]] = {
    "trl": extract_trl.extract,
    "vllm": extract_vllm.extract,
}
# Packages whose wheels are large: fetched one at a time and deleted after indexing unless a pin keeps them.
LARGE_WHEELS = {"vllm"}


class RefreshError(Exception):
    """A problem the maintainer must fix (network, hash mismatch, upstream layout change)."""


# --------------------------------------------------------------------------------------------------------------------
# Archives
# --------------------------------------------------------------------------------------------------------------------


def find_archive(wheel_dir: Path, pin: Pin) -> Optional[Path]:
    """The cached wheel (or sdist) of ``pin`` in ``wheel_dir``, if present."""
    if not wheel_dir.is_dir():
        return None
    separator, suffix = (".", ".tar.gz") if pin.sdist else ("-", ".whl")
    matches = [
        p
        for p in wheel_dir.iterdir()
        if p.name.lower().startswith(pin.file_prefix + separator) and p.name.endswith(suffix)
    ]
    # Several platform wheels of one release: prefer a pure or Linux x86-64 one, then the name order.
    matches.sort(key=lambda p: (not p.name.endswith(("-any.whl", "x86_64.whl", ".tar.gz")), p.name))
    return matches[0] if matches else None


def download(wheel_dir: Path, pin: Pin, expected_sha256: Optional[str]) -> Path:
    """``pip download --no-deps`` one pinned release into ``wheel_dir`` (hash-checked by pip when known)."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    requirement = f"{pin.package}=={pin.version}"
    with tempfile.TemporaryDirectory() as tmp:
        req_file = Path(tmp) / "requirement.txt"
        line = requirement + (f" --hash=sha256:{expected_sha256}" if expected_sha256 else "")
        req_file.write_text(line + "\n", encoding="utf-8")
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
            "-d",
            str(wheel_dir),
            "-r",
            str(req_file),
        ]
        command += ["--no-binary=:all:"] if pin.sdist else PIP_PLATFORM_ARGS
        if expected_sha256:
            command.append("--require-hashes")
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RefreshError(f"pip download {requirement} failed:\n{result.stderr.strip()}")
    path = find_archive(wheel_dir, pin)
    if path is None:
        raise RefreshError(f"pip download {requirement} finished but no archive appeared in {wheel_dir}")
    return path


def obtain(wheel_dir: Path, pin: Pin, expected_sha256: Optional[str], offline: bool) -> Path:
    path = find_archive(wheel_dir, pin)
    if path is None:
        if offline:
            raise RefreshError(f"{pin.package}=={pin.version} is not in {wheel_dir} and --offline was given")
        path = download(wheel_dir, pin, expected_sha256)
    actual = sha256_of(path)
    if expected_sha256 and actual != expected_sha256:
        raise RefreshError(
            f"{path.name}: sha256 {actual} differs from {expected_sha256} recorded in the facts file; delete the "
            "cached file to download it again, or pass --accept-new-hashes if the release was really re-uploaded"
        )
    return path


# --------------------------------------------------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------------------------------------------------


def _recorded_packages(path: Path) -> Dict[str, dict]:
    """The ``packages`` object of an existing facts file, or ``{}`` when there is none or it cannot be read."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    packages = data.get("packages") if isinstance(data, dict) else None
    return packages if isinstance(packages, dict) else {}


def previous_hashes(output: Path) -> Dict[str, Dict[str, str]]:
    """``{package: {version: sha256}}`` of the pins in an existing facts file (empty when there is none)."""
    out: Dict[str, Dict[str, str]] = {}
    for package, entry in _recorded_packages(output).items():
        for version, facts in entry.get("versions", {}).items():
            if isinstance(facts, dict) and isinstance(facts.get("sha256"), str):
                out.setdefault(package, {})[version] = facts["sha256"]
    return out


def extract_all(
    archives: Dict[Pin, Path], pins: Sequence[Pin], log: Callable[[str], None]
) -> Dict[str, Dict[str, object]]:
    """``{package: {version: facts}}`` for every pin, before linking and delta encoding."""
    raw: Dict[str, Dict[str, object]] = {}
    for pin in pins:
        path = archives[pin]
        log(f"extracting {path.name}")
        with SourceArchive(path) as archive:
            facts = pin.extractor(archive)
        facts["file"] = path.name
        facts["sha256"] = sha256_of(path)
        raw.setdefault(pin.package, {})[pin.version] = facts
    return raw


def build_document(raw: Dict[str, Dict[str, object]], pins: Sequence[Pin]) -> Dict[str, object]:
    """Link cross-package facts, then store every non-primary version as a delta against its primary."""
    link_trl_cli(raw)
    packages: Dict[str, object] = {}
    for package in sorted(raw):
        versions = raw[package]
        primary = next(p.version for p in pins if p.package == package)
        stored: Dict[str, object] = {primary: versions[primary]}
        for version, facts in versions.items():
            if version == primary:
                continue
            base = dict(versions[primary])  # type: ignore[arg-type]
            stored[version] = {
                "file": facts["file"],  # type: ignore[index]
                "sha256": facts["sha256"],  # type: ignore[index]
                "delta_from": primary,
                "delta": make_delta(
                    {k: v for k, v in base.items() if k not in ("file", "sha256")},
                    {k: v for k, v in facts.items() if k not in ("file", "sha256")},  # type: ignore[union-attr]
                ),
            }
        packages[package] = {"primary": primary, "versions": stored}
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_by": REFRESH_COMMAND,
        "packages": packages,
    }


def render(document: Dict[str, object]) -> str:
    # One item per line without indentation: line-based diffs stay readable and the file stays small.
    return json.dumps(document, indent=0, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def refresh(
    wheel_dir: Path,
    output: Path,
    offline: bool = False,
    accept_new_hashes: bool = False,
    log: Callable[[str], None] = lambda message: None,
    pins: Sequence[Pin] = tuple(PINS),
) -> str:
    """Obtain every pinned archive, extract and render the facts file text."""
    known = {} if accept_new_hashes else previous_hashes(output)
    archives: Dict[Pin, Path] = {}
    for pin in pins:
        archives[pin] = obtain(wheel_dir, pin, known.get(pin.package, {}).get(pin.version), offline)
    return render(build_document(extract_all(archives, pins, log), pins))


# --------------------------------------------------------------------------------------------------------------------
# Release history
# --------------------------------------------------------------------------------------------------------------------


def history_cache_dir(wheel_dir: Path) -> Path:
    return wheel_dir.parent / "history"


def previous_history_hashes(path: Path) -> Dict[str, Dict[str, str]]:
    """``{package: {version: sha256}}`` of the releases in an existing release-history file."""
    out: Dict[str, Dict[str, str]] = {}
    for package, entry in _recorded_packages(path).items():
        for release in entry.get("releases", []):
            out.setdefault(package, {})[release["version"]] = release["sha256"]
    return out


def index_release(
    wheel_dir: Path,
    package: str,
    version: str,
    expected_sha256: Optional[str],
    offline: bool,
    pinned: bool,
    log: Callable[[str], None],
) -> Dict[str, object]:
    """The extracted facts of one release, from the index cache or from its wheel (downloaded when missing; a large
    wheel that no pin keeps is deleted once indexed). Returns ``{"file", "sha256", "raw"}``."""
    cache = history_cache_dir(wheel_dir) / f"{package}-{version}.json.gz"
    if cache.is_file():
        try:
            stored = json.loads(gzip.decompress(cache.read_bytes()).decode("utf-8"))
        except (OSError, ValueError):
            stored = {}
        if stored.get("cache_version") == HISTORY_CACHE_VERSION and (
            expected_sha256 is None or stored.get("sha256") == expected_sha256
        ):
            return stored
    pin = Pin(package, version, HISTORY_EXTRACTORS[package])
    existed = find_archive(wheel_dir, pin) is not None
    path = obtain(wheel_dir, pin, expected_sha256, offline)
    log(f"indexing {path.name}")
    try:
        with SourceArchive(path) as archive:
            raw = pin.extractor(archive)
            raw.update(history_extras(package, archive))
        record = {"cache_version": HISTORY_CACHE_VERSION, "file": path.name, "sha256": sha256_of(path), "raw": raw}
    finally:
        if package in LARGE_WHEELS and not pinned and not existed:
            path.unlink(missing_ok=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    cache.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    return record


def refresh_history(
    wheel_dir: Path,
    output: Path,
    offline: bool = False,
    accept_new_hashes: bool = False,
    log: Callable[[str], None] = lambda message: None,
    history: Optional[Mapping[str, Sequence[str]]] = None,
    pins: Sequence[Pin] = tuple(PINS),
) -> str:
    """Index every release of ``history`` and render the release-history file text."""
    history = HISTORY if history is None else history
    known = {} if accept_new_hashes else previous_history_hashes(output)
    pinned = {(p.package, p.version) for p in pins}
    releases: Dict[str, List[Dict[str, object]]] = {}
    for package, versions in history.items():
        for version in versions:
            record = index_release(
                wheel_dir,
                package,
                version,
                known.get(package, {}).get(version),
                offline,
                (package, version) in pinned,
                log,
            )
            releases.setdefault(package, []).append(
                {
                    "version": version,
                    "file": record["file"],
                    "sha256": record["sha256"],
                    "flat": flatten(package, record["raw"]),  # type: ignore[arg-type]
                }
            )
    document = build_history(releases)
    document["generated_by"] = REFRESH_COMMAND
    return render(document)


# --------------------------------------------------------------------------------------------------------------------
# Diff between two stored versions
# --------------------------------------------------------------------------------------------------------------------


def version_diff(facts_path: Path, package: str, old: str, new: str) -> str:
    """Human-readable differences in flags, routes, env vars and config fields between two stored versions."""
    if str(TOOLS_DIR) not in sys.path:
        sys.path.insert(0, str(TOOLS_DIR))
    from skill_claims import Facts  # the checker's loader applies the deltas

    facts = Facts.load(facts_path)
    stored = facts.data["packages"].get(package, {}).get("versions", {})
    if old not in stored or new not in stored:
        return history_diff(facts_path.parent / HISTORY_OUTPUT_NAME, package, old, new)
    a = facts.version_facts(package, old)
    b = facts.version_facts(package, new)
    lines: List[str] = [f"{package} {old} -> {new}"]

    def report(title: str, before: Sequence[str], after: Sequence[str]) -> None:
        added = sorted(set(after) - set(before))
        removed = sorted(set(before) - set(after))
        lines.append(f"{title}: +{len(added)} -{len(removed)}")
        lines.extend(f"  + {item}" for item in added)
        lines.extend(f"  - {item}" for item in removed)

    for cli in sorted(set(a.get("clis", {})) | set(b.get("clis", {}))):
        report(
            f"{cli} flags",
            list(a.get("clis", {}).get(cli, {}).get("flags", {})),
            list(b.get("clis", {}).get(cli, {}).get("flags", {})),
        )
    report("routes", list(a.get("routes", {})), list(b.get("routes", {})))
    gate_lines = []
    for route in sorted(set(a.get("routes", {})) & set(b.get("routes", {}))):
        if a["routes"][route] != b["routes"][route]:
            gate_lines.append(f"  ~ {route}: {json.dumps(b['routes'][route], sort_keys=True)}")
    lines.append(f"routes whose gates or modules changed: {len(gate_lines)}")
    lines.extend(gate_lines)
    report("env vars", list(a.get("env_vars", {})), list(b.get("env_vars", {})))
    fields_a = [f"{c.rsplit('.', 1)[-1]}.{f}" for c, r in a.get("classes", {}).items() for f in r.get("fields", {})]
    fields_b = [f"{c.rsplit('.', 1)[-1]}.{f}" for c, r in b.get("classes", {}).items() for f in r.get("fields", {})]
    report("config fields", fields_a, fields_b)
    report("requires_dist", a.get("requires_dist", []), b.get("requires_dist", []))
    return "\n".join(lines) + "\n"


def history_diff(history_path: Path, package: str, old: str, new: str) -> str:
    """What changed between two releases of the release history (for releases that are not pins)."""
    data = json.loads(history_path.read_text(encoding="utf-8"))
    entry = data["packages"][package]
    versions = [r["version"] for r in entry["releases"]]
    if old not in versions or new not in versions:
        raise KeyError(f"{package} {old} or {new} is neither a pin nor in {history_path.name}")
    i, j = versions.index(old), versions.index(new)
    lines = [f"{package} {old} -> {new} (release history)"]
    for kind in sorted(entry["facts"]):
        added, removed = [], []
        for bits, keys in entry["facts"][kind].items():
            if bits[j] == "1" and bits[i] == "0":
                added += keys
            elif bits[i] == "1" and bits[j] == "0":
                removed += keys
        lines.append(f"{kind}: +{len(added)} -{len(removed)}")
        if kind != "message":  # message templates are long; their count says enough
            lines.extend(f"  + {key}" for key in sorted(added))
            lines.extend(f"  - {key}" for key in sorted(removed))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument(
        "--wheel-dir", type=Path, default=DEFAULT_WHEEL_DIR, help=f"archive cache folder (default: {DEFAULT_WHEEL_DIR})"
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="facts file to write")
    parser.add_argument("--offline", action="store_true", help="never download; every archive must be cached")
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"do not write; exit 1 if --output or the {HISTORY_OUTPUT_NAME} beside it is stale",
    )
    parser.add_argument(
        "--accept-new-hashes",
        action="store_true",
        help="do not compare archive hashes with the ones the current facts file records",
    )
    parser.add_argument(
        "--diff",
        nargs=3,
        metavar=("PACKAGE", "OLD", "NEW"),
        help="print what changed between two stored versions (pins, or releases of the release history), then exit",
    )
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.diff:
        try:
            sys.stdout.write(version_diff(args.output, *args.diff))
        except (KeyError, OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if sys.version_info < (3, 11):
        print("error: run the refresh with Python 3.11 or newer (upstream sources use 3.10+ syntax)", file=sys.stderr)
        return 2
    try:
        text = refresh(
            args.wheel_dir,
            args.output,
            args.offline,
            args.accept_new_hashes,
            log=lambda message: print(message, file=sys.stderr),
        )
    except (RefreshError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    history_output = args.output.parent / HISTORY_OUTPUT_NAME
    try:
        history_text = refresh_history(
            args.wheel_dir,
            history_output,
            args.offline,
            args.accept_new_hashes,
            log=lambda message: print(message, file=sys.stderr),
        )
    except (RefreshError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    outputs = [(args.output, text), (history_output, history_text)]
    if args.check:
        stale = False
        for path, new_text in outputs:
            current = path.read_text(encoding="utf-8") if path.is_file() else ""
            if current != new_text:
                print(f"{path} is stale: run {REFRESH_COMMAND}", file=sys.stderr)
                stale = True
            else:
                print(f"{path} is up to date", file=sys.stderr)
        return 1 if stale else 0
    for path, new_text in outputs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(new_text, encoding="utf-8")
        print(f"wrote {path} ({len(new_text.encode('utf-8'))} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
