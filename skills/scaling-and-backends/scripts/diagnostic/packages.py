"""Installed packages: the same lookup ``importlib.metadata`` performs, done with one directory listing per
``sys.path`` entry, plus install-consistency facts (module location, competing providers, direct URL, git commit).
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from common import versions
from common.read import InputError, read_bytes
from common.values import InvalidValue, load_json

from diagnostic.base import STACK, first_line, read_text


class DistRecord:
    """One ``*.dist-info`` / ``*.egg-info`` folder found on sys.path."""

    def __init__(self, key: str, site: str, folder: str, path_order: int) -> None:
        self.key = key  # PEP 503 name from the folder name
        self.site = site
        self.folder = folder
        self.path = os.path.join(site, folder)
        self.path_order = path_order
        self._headers: Optional[Dict[str, List[str]]] = None
        self.problems: List[Dict[str, str]] = []

    @property
    def folder_version(self) -> Optional[str]:
        stem = re.sub(r"\.(dist|egg)-info$", "", self.folder)
        parts = stem.split("-")
        return parts[1] if len(parts) > 1 and parts[1] else None

    def headers(self) -> Dict[str, List[str]]:
        """Parsed METADATA headers (lower-case keys); problems are recorded, never raised."""
        if self._headers is None:
            self._headers = self._read_headers()
        return self._headers

    def _read_headers(self) -> Dict[str, List[str]]:
        if os.path.isfile(self.path):  # a legacy single-file egg-info
            candidates = [self.path]
        else:
            name = "METADATA" if self.folder.endswith(".dist-info") else "PKG-INFO"
            candidates = [os.path.join(self.path, name)]
        try:
            read = read_bytes(candidates[0], 4_000_000)
            raw = read.data
            if read.truncated:  # a huge description: keep whole lines so the cut is not a decode error
                raw = raw[: raw.rfind(b"\n") + 1]
        except InputError as error:
            self.problems.append(
                {
                    "code": "metadata_unreadable",
                    "message": f"{self.folder}: metadata file unreadable ({error.reason})",
                }
            )
            return {}
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            self.problems.append(
                {
                    "code": "metadata_not_utf8",
                    "message": (
                        f"{self.folder}/METADATA is not UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start}); "
                        "importlib.metadata raises on it, so libraries that read this version can crash at import"
                    ),
                }
            )
            text = raw.decode("utf-8", errors="replace")
        headers = parse_metadata_headers(text)
        if not headers.get("version"):
            self.problems.append(
                {"code": "metadata_corrupt", "message": f"{self.folder}/METADATA has no Version field (corrupt file?)"}
            )
        return headers

    def version(self) -> Optional[str]:
        """The Version header; one over 64 characters is no version (PEP 440 ones are short) and comes back cut,
        marked, so that no comparison parses it and no line of the report is filled with it."""
        values = self.headers().get("version")
        if not values:
            return None
        value = values[0].strip()
        return value if len(value) <= 64 else f"{value[:24]}... ({len(value):,} characters)"

    def requires(self) -> List[str]:
        return self.headers().get("requires-dist", [])

    def parsed(self, line: str) -> Optional[versions.Requirement]:
        """``versions.parse_requirement`` with a per-record cache (transformers lists ~200 lines)."""
        cache = self.__dict__.setdefault("_parsed", {})
        if line not in cache:
            cache[line] = versions.parse_requirement(line)
        return cache[line]

    def provides_extras(self) -> List[str]:
        return [versions.normalize_name(e) for e in self.headers().get("provides-extra", [])]


def parse_metadata_headers(text: str) -> Dict[str, List[str]]:
    """RFC 822 style headers of a METADATA file, up to the first blank line (lower-case keys)."""
    headers: Dict[str, List[str]] = {}
    last_key = None
    for line in text.splitlines():
        if not line.strip():
            break
        if line[0] in " \t" and last_key:
            headers[last_key][-1] += "\n" + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        last_key = key.strip().lower()
        headers.setdefault(last_key, []).append(value.strip())
    return headers


def scan_distributions(path_entries: Sequence[str]) -> Dict[str, List[DistRecord]]:
    """Map PEP 503 names to every metadata folder on ``path_entries``, in sys.path order."""
    found: Dict[str, List[DistRecord]] = {}
    seen_dirs = set()
    for order, entry in enumerate(path_entries):
        site = entry or os.getcwd()
        try:
            real = os.path.realpath(site)
        except OSError:
            continue
        if real in seen_dirs:
            continue
        seen_dirs.add(real)
        try:
            names = sorted(os.listdir(site))  # sorted: stable output when one folder holds two versions
        except OSError:
            continue
        for folder in names:
            if not (folder.endswith(".dist-info") or folder.endswith(".egg-info")):
                continue
            stem = folder.rsplit(".", 1)[0]
            key = versions.normalize_name(stem.split("-", 1)[0])
            found.setdefault(key, []).append(DistRecord(key, site, folder, order))
    return found


def zip_path_distributions(path_entries: Sequence[str], keys: Sequence[str]) -> Dict[str, List[str]]:
    """Versions of our packages inside zip files on sys.path, through importlib.metadata (rarely needed)."""
    zips = [p for p in path_entries if p and os.path.isfile(p)]
    if not zips:
        return {}
    result: Dict[str, List[str]] = {}
    try:
        import importlib.metadata as metadata

        for dist in metadata.distributions(path=zips):
            key = versions.normalize_name(dist.metadata.get("Name") or "")
            if key in keys:
                result.setdefault(key, []).append(dist.version)
    except Exception:
        return result
    return result


def find_module(name: str) -> Dict[str, Any]:
    """``importlib.util.find_spec`` for a top-level module, without importing it."""
    import importlib.util

    info: Dict[str, Any] = {"found": False, "location": None, "namespace": False, "error": None}
    try:
        spec = importlib.util.find_spec(name)
    except Exception as error:
        info["error"] = f"{type(error).__name__}: {first_line(str(error))}"
        return info
    if spec is None:
        return info
    info["found"] = True
    origin = spec.origin
    locations = list(spec.submodule_search_locations or [])
    if origin in (None, "namespace") and locations:
        info["namespace"] = True
        info["location"] = locations[0]
    elif origin and origin not in ("built-in", "frozen"):
        base = os.path.basename(origin)
        info["location"] = os.path.dirname(origin) if base.startswith("__init__.") else origin
    return info


def module_root(location: str) -> str:
    """The sys.path directory a module location was found under."""
    return os.path.dirname(location.rstrip(os.sep))


def providers_in_site(site: str, module: str) -> List[str]:
    """Distributions in ``site`` whose top_level.txt or RECORD names ``module`` (only used for odd installs)."""
    found = []
    try:
        names = sorted(os.listdir(site))
    except OSError:
        return found
    for folder in names:
        if not folder.endswith(".dist-info"):
            continue
        top = read_text(os.path.join(site, folder, "top_level.txt"), limit=100_000)
        if top is not None:
            if module in [line.strip() for line in top.splitlines()]:
                found.append(folder)
            continue
        record = read_text(os.path.join(site, folder, "RECORD"), limit=20_000_000) or ""
        if ("\n" + record).find(f"\n{module}/") >= 0 or ("\n" + record).find(f"\n{module}.py,") >= 0:
            found.append(folder)
    return found


def read_direct_url(record: DistRecord) -> Dict[str, Any]:
    """PEP 610 direct_url.json (editable flag, VCS commit), or {}."""
    text = read_text(os.path.join(record.path, "direct_url.json"), limit=100_000)
    if not text:
        return {}
    try:
        data = load_json(text, "direct_url.json", max_bytes=100_000, max_depth=16)
    except InvalidValue:
        return {}
    if not isinstance(data, dict):
        return {}
    # PEP 610 shapes; a field of another type is dropped, never trusted.
    dir_info = data.get("dir_info")
    vcs_info = data.get("vcs_info")
    clean: Dict[str, Any] = {}
    if isinstance(dir_info, dict) and isinstance(dir_info.get("editable"), bool):
        clean["dir_info"] = {"editable": dir_info["editable"]}
    if isinstance(vcs_info, dict) and isinstance(vcs_info.get("commit_id"), str):
        commit = vcs_info["commit_id"]
        if re.fullmatch(r"[0-9a-fA-F]{7,64}", commit):
            clean["vcs_info"] = {"commit_id": commit}
    return clean


def git_commit_near(location: Optional[str]) -> Optional[str]:
    """The commit of a git checkout that holds a package (what ``trl env`` prints), read from .git as text."""
    if not location:
        return None
    git_dir = os.path.join(os.path.dirname(location.rstrip(os.sep)), ".git")
    head = read_text(os.path.join(git_dir, "HEAD"), limit=1000)
    if not head:
        return None
    head = head.strip()
    if not head.startswith("ref:"):
        return head if re.fullmatch(r"[0-9a-f]{40}", head) else None
    ref = head[4:].strip()
    direct = read_text(os.path.join(git_dir, ref), limit=1000)
    if direct and re.fullmatch(r"[0-9a-f]{40}", direct.strip()):
        return direct.strip()
    for line in (read_text(os.path.join(git_dir, "packed-refs"), limit=5_000_000) or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == ref:
            return parts[0]
    return None


def gather_packages(
    path_entries: Sequence[str], dists: Dict[str, List[DistRecord]]
) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, DistRecord]]:
    """Facts per stack package, plus the metadata record chosen for each installed package."""
    zipped = zip_path_distributions(path_entries, [d for _, ds, _ in STACK for d in ds])
    packages: Dict[str, Dict[str, Any]] = {}
    chosen: Dict[str, DistRecord] = {}
    for pid, dist_names, modules in STACK:
        records = [r for name in dist_names for r in dists.get(name, [])]
        module_name, module = modules[0], find_module(modules[0])
        for candidate in modules[1:]:
            if module["found"]:
                break
            alternative = find_module(candidate)
            if alternative["found"]:
                module_name, module = candidate, alternative
        entry: Dict[str, Any] = {
            "dist": None,
            "version": None,
            "location": module["location"],
            "metadata_path": None,
            "module": module_name,
            "module_found": module["found"],
            "installed": False,
            "version_source": None,
            "editable": False,
            "git_commit": None,
            "other_distributions": [],
            "problems": [],
        }
        problems: List[Dict[str, str]] = entry["problems"]
        if module["error"]:
            problems.append(
                {"code": "find_spec_error", "message": f"find_spec({module_name!r}) raised {module['error']}"}
            )
        primary = None
        if records:
            # importlib.metadata semantics: candidate order first, then sys.path order.
            primary = records[0]
            chosen[pid] = primary
            entry["dist"] = primary.key
            entry["version"] = primary.version() or primary.folder_version
            entry["metadata_path"] = primary.path
            problems.extend(primary.problems)
            entry["version_source"] = "metadata" if primary.version() else "folder name" if entry["version"] else None
            direct = read_direct_url(primary)
            entry["editable"] = bool((direct.get("dir_info") or {}).get("editable"))
            commit = (direct.get("vcs_info") or {}).get("commit_id")
            if commit:
                entry["git_commit"] = commit
            if len(records) > 1:
                listing = ", ".join(f"{r.key} {r.version() or r.folder_version or '?'} ({r.folder})" for r in records)
                problems.append(
                    {
                        "code": "multiple_distributions",
                        "message": f"{len(records)} distributions provide {module_name}: {listing}; the "
                        "first is reported here, and which one importlib.metadata returns depends on path order",
                    }
                )
                entry["other_distributions"] = [
                    {"dist": r.key, "version": r.version() or r.folder_version, "metadata_path": r.path}
                    for r in records[1:]
                ]
        elif any(d in zipped for d in dist_names):
            for name in dist_names:
                if zipped.get(name):
                    entry["dist"], entry["version"] = name, zipped[name][0]
        entry["installed"] = bool(entry["dist"]) or module["found"]
        if module["namespace"] and not records:
            entry["installed"] = False
            problems.append(
                {
                    "code": "namespace_leftover",
                    "message": f"{module_name} resolves to a directory without __init__.py and no metadata "
                    "(leftover of an uninstall?)",
                }
            )
        elif module["found"] and not records and not entry["dist"]:
            providers = providers_in_site(module_root(module["location"]), module_name) if module["location"] else []
            detail = f" (files listed by {', '.join(providers)})" if providers else ""
            problems.append(
                {
                    "code": "module_without_metadata",
                    "message": f"{module_name} is importable but has no {dist_names[0]} metadata{detail}; "
                    "version checks that read metadata will not see it",
                }
            )
            entry["installed"] = True
        elif records and not module["found"]:
            problems.append(
                {
                    "code": "metadata_without_module",
                    "message": f"{entry['dist']} {entry['version'] or ''} metadata is present but module "
                    f"{module_name} is not importable (broken or partial install)".replace("  ", " "),
                }
            )
        elif records and module["found"] and module["location"] and not entry["editable"]:
            site_of_module = os.path.realpath(module_root(module["location"]))
            if site_of_module != os.path.realpath(primary.site):
                problems.append(
                    {
                        "code": "shadowed",
                        "message": f"{module_name} imports from {module['location']} but its metadata "
                        f"({entry['version']}) is in {primary.site}",
                    }
                )
        if pid == "trl" and module["location"] and not entry["git_commit"]:
            commit = git_commit_near(module["location"])
            if commit:
                entry["git_commit"] = commit
        packages[pid] = entry
    return packages, chosen
