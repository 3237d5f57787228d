"""Compatibility derived from installed metadata (TRL's extras and its dependencies' requirements) and from the
version gates TRL and its dependencies state in code, read from the installed source when possible.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

from common import versions

from diagnostic.base import DIST_TO_ID, display_specifier, new_finding, read_text
from diagnostic.packages import DistRecord

# TRL extras that map to backends, in report order.
TRL_BACKEND_EXTRAS = ("vllm", "peft", "deepspeed", "quantization", "liger", "kernels")


def _unversioned(packages: Dict[str, Dict[str, Any]], dist_key: str) -> bool:
    pid = DIST_TO_ID.get(dist_key)
    return bool(pid and packages[pid]["installed"] and not packages[pid]["version"])


def _installed_version(packages: Dict[str, Dict[str, Any]], dist_key: str) -> Optional[str]:
    pid = DIST_TO_ID.get(dist_key)
    return packages[pid]["version"] if pid and packages[pid]["dist"] else None


def _compat_row(
    subject: str,
    specifier: str,
    required_by: str,
    installed: Optional[str],
    source: str,
    kind: str,
    extra: Optional[str] = None,
    status: Optional[str] = None,
    note: str = "",
    unversioned: bool = False,
) -> Dict[str, Any]:
    """One compatibility row; ``unversioned`` marks a subject that is importable but has no metadata."""
    if status is None:
        if installed is None:
            status = "missing"
        else:
            verdict = versions.specifier_contains(specifier, installed)
            status = "unknown" if verdict is None else ("ok" if verdict else "outside")
    if installed is None and unversioned:
        status, note = "unknown", note or "importable, but there is no metadata to read its version from"
    return {
        "subject": subject,
        "requirement": display_specifier(specifier),
        "required_by": required_by,
        "installed": installed,
        "status": status,
        "source": source,
        "kind": kind,
        "extra": extra,
        "note": note,
    }


def extra_requirements(record: DistRecord, extra: str) -> List[versions.Requirement]:
    """Requires-Dist lines active for ``extra`` but not for the base install."""
    wanted = versions.normalize_name(extra)
    result = []
    spellings = {extra, wanted, wanted.replace("-", "_")}
    for line in record.requires():
        marker = line.partition(";")[2]
        if not any(f'"{name}"' in marker or f"'{name}'" in marker for name in spellings):
            continue
        req = record.parsed(line)
        if req is None or wanted not in versions.marker_extras(req.marker):
            continue
        if req.applies(extra=wanted) and not req.applies(extra=None):
            result.append(req)
    return result


def compatibility(
    packages: Dict[str, Dict[str, Any]], chosen: Dict[str, DistRecord], findings: List[Dict[str, str]]
) -> List[Dict[str, Any]]:
    """Rows for TRL's backend extras (nested extras resolved), base pins of installed packages, and code gates."""
    rows: List[Dict[str, Any]] = []
    trl = chosen.get("trl")
    if trl is not None:
        trl_label = f"trl {packages['trl']['version']}"
        for extra in TRL_BACKEND_EXTRAS:
            if extra not in trl.provides_extras():
                findings.append(
                    new_finding("info", "extra_absent", f"{trl_label} declares no extra [{extra}] in its metadata")
                )
                continue
            _expand_extra(trl, trl_label, extra, extra, packages, chosen, rows, findings, depth=0)
    for pid, record in chosen.items():
        label = f"{pid} {packages[pid]['version']}"
        for line in record.requires():
            head = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
            if not head or versions.normalize_name(head.group(1)) not in DIST_TO_ID:
                continue
            req = record.parsed(line)
            if req is None or req.key not in DIST_TO_ID or req.applies(extra=None) is not True:
                continue
            rows.append(
                _compat_row(
                    req.key,
                    req.specifier,
                    label,
                    _installed_version(packages, req.key),
                    f"{record.folder}/METADATA Requires-Dist",
                    "dependency",
                    unversioned=_unversioned(packages, req.key),
                )
            )
    rows.extend(code_gates(packages))
    order = {"outside": 0, "missing": 1, "unknown": 2, "ok": 3}
    rows.sort(key=lambda r: (order.get(r["status"], 9), r["subject"], r["required_by"], r["requirement"]))
    return rows


def _expand_extra(
    record: DistRecord,
    owner_label: str,
    extra: str,
    trl_extra: str,
    packages: Dict[str, Dict[str, Any]],
    chosen: Dict[str, DistRecord],
    rows: List[Dict[str, Any]],
    findings: List[Dict[str, str]],
    depth: int,
) -> None:
    for req in extra_requirements(record, extra):
        installed = _installed_version(packages, req.key)
        rows.append(
            _compat_row(
                req.key,
                req.specifier,
                f"{owner_label} [{extra}]",
                installed,
                f"{record.folder}/METADATA Requires-Dist",
                "extra",
                extra=trl_extra,
                unversioned=_unversioned(packages, req.key),
            )
        )
        if not req.extras or depth > 2:
            continue
        nested = chosen.get(DIST_TO_ID.get(req.key, ""))
        if nested is None:
            continue
        nested_label = f"{DIST_TO_ID[req.key]} {installed}"
        for sub_extra in req.extras:
            if versions.normalize_name(sub_extra) not in nested.provides_extras():
                findings.append(
                    new_finding(
                        "info",
                        "nested_extra_absent",
                        f"{owner_label} [{extra}] asks for {req.key}[{sub_extra}], but {nested_label} declares no "
                        f"such extra; pip ignores it",
                    )
                )
                continue
            _expand_extra(nested, nested_label, sub_extra, trl_extra, packages, chosen, rows, findings, depth + 1)


# Gates stated in code, read from the installed file when possible. Each has the upstream file and the version
# the regular expression was written against; the fallback applies only to exactly that owner version.
CODE_GATES: Tuple[Dict[str, Any], ...] = (
    {
        "owner": "trl",
        "file": "import_utils.py",
        "pattern": r'Version\("([^"]+)"\)\s*<=\s*_vllm_base_version\s*<=\s*Version\("([^"]+)"\)',
        "subject": "vllm",
        "build": lambda g: f">={g[0]},<={g[1]}",
        "compare_base": True,
        "purpose": "runtime range check (warns outside it)",
        "fallback": {
            "1.16.0": (">=0.22.0,<=0.31.0",),
            "1.14.0": (">=0.20.0,<=0.30.0",),
            "1.10.0": (">=0.17.0,<=0.26.0",),
        },
        "checked": "trl-1.16.0 trl/import_utils.py is_vllm_available",
    },
    {
        "owner": "trl",
        "file": "import_utils.py",
        "pattern": r'^LIGER_KERNEL_MIN_VERSION\s*=\s*"([^"]+)"',
        "subject": "liger-kernel",
        "build": lambda g: f">={g[0]}",
        "purpose": "is_liger_kernel_available(): older liger-kernel counts as not available",
        "fallback": {"1.16.0": (">=0.8.2",), "1.14.0": (">=0.8.2",), "1.10.0": (">=0.8.0",)},
        "checked": "trl-1.16.0 trl/import_utils.py LIGER_KERNEL_MIN_VERSION",
    },
    {
        "owner": "trl",
        "file": "trainer/utils.py",
        "pattern": r'use_kernels"\)\s*and\s*Version\("([^"]+)"\)\s*<=\s*Version\(transformers\.__version__\)\s*<\s*'
        r'Version\("([^"]+)"\)',
        "subject": "transformers",
        "build": lambda g: f"<{g[0]} or >={g[1]}",
        "purpose": "use_kernels=True raises ValueError inside this range",
        "fallback": {"1.16.0": ("<5.2.0 or >=5.4.0",)},
        "checked": "trl-1.16.0 trl/trainer/utils.py create_model_from_path",
    },
    {
        "owner": "transformers",
        "file": "utils/import_utils.py",
        "pattern": r'^BITSANDBYTES_MIN_VERSION\s*=\s*"([^"]+)"',
        "subject": "bitsandbytes",
        "build": lambda g: f">={g[0]}",
        "purpose": "is_bitsandbytes_available(): older bitsandbytes counts as not available",
        "fallback": {"5.24.0": (">=0.46.1",)},
        "checked": "transformers-5.24.0 transformers/utils/import_utils.py BITSANDBYTES_MIN_VERSION",
    },
    {
        "owner": "transformers",
        "file": "utils/import_utils.py",
        "pattern": r'^KERNELS_MIN_VERSION\s*=\s*"([^"]+)"\s*\n\s*KERNELS_MAX_VERSION\s*=\s*"([^"]+)"',
        "subject": "kernels",
        "build": lambda g: f">={g[0]},<{g[1]}",
        "purpose": "is_kernels_available(): Hub kernels are used only inside this range",
        "fallback": {"5.24.0": (">=0.18.2,<0.19.0",)},
        "checked": "transformers-5.24.0 transformers/utils/import_utils.py KERNELS_MIN_VERSION/KERNELS_MAX_VERSION",
    },
    {
        "owner": "transformers",
        "file": "utils/import_utils.py",
        "pattern": r"def is_flash_attn_2_available[\s\S]{0,1200}?version\.parse\(flash_attn_version\)\s*>=\s*"
        r'version\.parse\("([^"]+)"\)',
        "subject": "flash-attn",
        "build": lambda g: f">={g[0]}",
        "purpose": "is_flash_attn_2_available(): older flash-attn counts as not available",
        "fallback": {"5.24.0": (">=2.3.3",)},
        "checked": "transformers-5.24.0 transformers/utils/import_utils.py is_flash_attn_2_available",
    },
    {
        "owner": "accelerate",
        "file": "utils/constants.py",
        "pattern": r'^FSDP2_PYTORCH_VERSION\s*=\s*"([^"]+)"',
        "subject": "torch",
        "build": lambda g: f">={g[0]}",
        "purpose": "FSDP2 (fsdp_version: 2) raises ImportError on older torch",
        "fallback": {"1.15.0": (">=2.6.0",)},
        "checked": "accelerate-1.15.0 accelerate/utils/constants.py FSDP2_PYTORCH_VERSION",
    },
)


def _range_exclusion_check(spec: str, installed: str) -> Optional[bool]:
    """Evaluate ``<A or >=B`` (a range exclusion that one PEP 440 specifier cannot state)."""
    results = [versions.specifier_contains(part.strip(), installed) for part in spec.split(" or ")]
    if any(r is True for r in results):
        return True
    return None if any(r is None for r in results) else False


def code_gates(packages: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Rows for version gates that upstream states only in code (see CODE_GATES)."""
    rows = []
    sources: Dict[str, Optional[str]] = {}
    for gate in CODE_GATES:
        owner = packages[gate["owner"]]
        if not owner["installed"] or not owner["location"]:
            continue
        path = os.path.join(owner["location"], gate["file"])
        if path not in sources:
            sources[path] = read_text(path)
        text = sources[path]
        match = re.search(gate["pattern"], text or "", re.MULTILINE)
        owner_version = owner["version"] or "?"
        if match:
            spec = gate["build"](match.groups())
            source = f"{gate['owner']}/{gate['file']} (installed source; written against {gate['checked']})"
        elif versions.base_version(owner_version or "") in gate["fallback"]:
            spec = gate["fallback"][versions.base_version(owner_version)][0]
            source = f"table: {gate['checked']}"
        else:
            continue
        subject_pid = DIST_TO_ID[gate["subject"]]
        installed = packages[subject_pid]["version"] if packages[subject_pid]["installed"] else None
        compared = installed
        if installed and gate.get("compare_base"):
            compared = versions.base_version(installed) or installed
        status = None
        if installed is not None and " or " in spec:
            verdict = _range_exclusion_check(spec, compared or "")
            status = "unknown" if verdict is None else ("ok" if verdict else "outside")
        elif installed is not None:
            verdict = versions.specifier_contains(spec, compared or "")
            status = "unknown" if verdict is None else ("ok" if verdict else "outside")
        row = _compat_row(
            gate["subject"],
            spec,
            f"{gate['owner']} {owner_version} (code)",
            installed,
            source,
            "gate",
            status=status,
            note=gate["purpose"],
            unversioned=_unversioned(packages, gate["subject"]),
        )
        if " or " in spec:
            row["requirement"] = spec
        rows.append(row)
    return rows
