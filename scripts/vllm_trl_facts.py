"""TRL facts of the vLLM pre-flight, read from this machine's installed metadata (no import of TRL)."""

from __future__ import annotations

from typing import Any, Dict, Optional

from versions import normalize_name, parse_requirement
from vllm_data import TRL_FALLBACK_SOURCE, TRL_FALLBACK_VERSION, TRL_FALLBACK_VLLM_SPEC

# --------------------------------------------------------------------------------------------------------------------
# TRL facts from this machine
# --------------------------------------------------------------------------------------------------------------------


def trl_vllm_range() -> Dict[str, Any]:
    """The vLLM range the installed TRL declares (its `vllm` extra), or TRL 1.16.0's when TRL is not installed."""
    import importlib.metadata as metadata

    try:
        dist = metadata.distribution("trl")
        version = dist.version
        requires = dist.requires or []
    except Exception:
        return {
            "trl_installed": False,
            "trl_version": TRL_FALLBACK_VERSION,
            "vllm_spec": TRL_FALLBACK_VLLM_SPEC,
            "source": f"TRL is not installed here; built-in range of TRL {TRL_FALLBACK_VERSION}: {TRL_FALLBACK_SOURCE}",
        }
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
    import importlib.metadata as metadata

    try:
        return metadata.version("vllm")
    except Exception:
        return None
