"""TRL facts of the vLLM pre-flight, read from this machine's installed metadata (no import of TRL)."""

from __future__ import annotations

import email.parser
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from common import recorded
from common.read import read_text_or_none
from common.versions import normalize_name, parse_requirement

from preflight.data import TRL_FALLBACK_SOURCE, TRL_FALLBACK_VERSION, TRL_FALLBACK_VLLM_SPEC

# --------------------------------------------------------------------------------------------------------------------
# TRL facts from this machine
# --------------------------------------------------------------------------------------------------------------------


def installed_metadata(name: str, path_entries: Optional[Sequence[str]] = None) -> Optional[Tuple[str, List[str]]]:
    """(version, Requires-Dist lines) of the first installed distribution ``name`` on ``sys.path``, read through
    common.read (a FIFO or a huge METADATA file cannot hang or flood this), or None."""
    key = normalize_name(name)
    for entry in path_entries if path_entries is not None else sys.path:
        try:
            children = sorted(os.listdir(entry or "."))
        except (OSError, ValueError):
            continue
        for child in children:
            stem, dot, suffix = child.rpartition(".")
            if not dot or suffix not in ("dist-info", "egg-info") or normalize_name(stem.split("-")[0]) != key:
                continue
            for meta in ("METADATA", "PKG-INFO"):
                text = read_text_or_none(os.path.join(entry or ".", child, meta), limit=2_000_000)
                if text is None:
                    continue
                headers = email.parser.HeaderParser().parsestr(text.split("\n\n", 1)[0] + "\n")
                version = str(headers.get("Version") or "").strip()
                if not version or len(version) > 64:
                    continue
                return version, [str(line) for line in headers.get_all("Requires-Dist") or []]
    return None


def trl_vllm_range() -> Dict[str, Any]:
    """The vLLM range the installed TRL declares (its `vllm` extra), or TRL 1.16.0's when TRL is not installed, with
    the newest vLLM the recorded matrix lists (``recorded_vllm``: a server past it is reported as such)."""
    found = _declared_range()
    matrix = recorded.load()
    newest = matrix.newest.get("vllm") if matrix else None
    found["recorded_vllm"] = {"fetched": matrix.fetched, "newest": newest} if matrix and newest else None
    return found


def _declared_range() -> Dict[str, Any]:
    found = installed_metadata("trl")
    if found is None:
        return {
            "trl_installed": False,
            "trl_version": TRL_FALLBACK_VERSION,
            "vllm_spec": TRL_FALLBACK_VLLM_SPEC,
            "source": f"TRL is not installed here; built-in range of TRL {TRL_FALLBACK_VERSION}: {TRL_FALLBACK_SOURCE}",
        }
    version, requires = found
    for line in requires:
        requirement = parse_requirement(line)
        if requirement is None or requirement.key != normalize_name("vllm"):
            continue
        if requirement.applies(extra="vllm") and not requirement.applies(extra=None):
            return {
                "trl_installed": True,
                "trl_version": version,
                "vllm_spec": requirement.specifier,
                "source": f"installed trl {version} metadata: Requires-Dist: {requirement.raw}",
            }
    return {
        "trl_installed": True,
        "trl_version": version,
        "vllm_spec": TRL_FALLBACK_VLLM_SPEC,
        "source": f"installed trl {version} declares no vllm extra; built-in range of TRL "
        f"{TRL_FALLBACK_VERSION}: {TRL_FALLBACK_SOURCE}",
    }


def local_vllm_version() -> Optional[str]:
    found = installed_metadata("vllm")
    return found[0] if found else None
