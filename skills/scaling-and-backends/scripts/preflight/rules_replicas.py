"""Rules of the vLLM pre-flight that compare all replicas (pure functions)."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from preflight.data import (
    SRC_ADAPTER_NAMES,
    SRC_MAX_MODEL_LEN,
    SRC_MODELS_FIRST,
    SRC_MODELS_LIST,
    SRC_SELECT_OK,
    SRC_SELECT_RANK,
    SRC_VERSION_RANGE,
    SRC_VLLM_LOGPROBS,
    Finding,
    Intent,
    Outcome,
    Snapshot,
)
from preflight.rules_server import policy_version

# --------------------------------------------------------------------------------------------------------------------
# Rules: across replicas
# --------------------------------------------------------------------------------------------------------------------


def _lora_limits(snap: Snapshot) -> Optional[str]:
    config = snap.vllm_config
    if config is None:
        return None
    lora = config.get("lora_config")
    if lora is None:
        return "LoRA off"
    if not isinstance(lora, dict):
        return None
    return f"max_lora_rank {lora.get('max_lora_rank')}, max_loras {lora.get('max_loras')}"


def check_replicas(snaps: Sequence[Snapshot], outcomes: Sequence[Outcome], intent: Intent) -> List[Finding]:
    """Every replica must agree: base model, vLLM version, LoRA limits, loaded adapters."""
    findings: List[Finding] = []
    live = [s for s in snaps if s.model_cards is not None or s.vllm_config is not None or s.version is not None]
    if len(snaps) < 2 or len(live) < 2:
        return findings

    def compare(label: str, values: Dict[str, Optional[str]], severity: str, fix: str, source: str, fid: str) -> None:
        known = {url: value for url, value in values.items() if value is not None}
        if len(set(known.values())) > 1:
            detail = "; ".join(f"{url}: {value}" for url, value in known.items())
            findings.append(
                Finding(
                    severity,
                    fid,
                    f"replicas disagree on {label} ({detail}). TRL probes one replica and applies its answer to "
                    "every request the proxy spreads.",
                    fix,
                    source,
                )
            )

    compare(
        "the base model",
        {s.url: (s.base_models[0] if s.base_models else None) for s in live},
        "error",
        "start every replica with the same model and --served-model-name",
        SRC_MODELS_FIRST,
        "replica-model-mismatch",
    )
    compare(
        "the vLLM version",
        {s.url: s.version for s in live},
        "warning",
        "install the same vLLM release on every replica",
        SRC_VERSION_RANGE,
        "replica-version-mismatch",
    )
    compare(
        "LoRA limits",
        {s.url: _lora_limits(s) for s in live},
        "error",
        "start every replica with the same --enable-lora --max-lora-rank --max-loras",
        SRC_SELECT_RANK,
        "replica-lora-mismatch",
    )
    compare(
        "max_model_len",
        {s.url: (str(s.max_model_len) if s.max_model_len is not None else None) for s in live},
        "warning",
        "start every replica with the same --max-model-len",
        SRC_MAX_MODEL_LEN,
        "replica-max-model-len-mismatch",
    )
    compare(
        "logprobs_mode",
        {s.url: (s.section("model_config") or {}).get("logprobs_mode") for s in live},
        "warning",
        "--logprobs-mode processed_logprobs on every replica",
        SRC_VLLM_LOGPROBS,
        "replica-logprobs-mismatch",
    )
    if not any(f.id == "replica-lora-mismatch" for f in findings):
        compare(
            "TRL's predicted sync path",
            {s.url: (o.mode if o.mode != "unknown" else None) for s, o in zip(snaps, outcomes) if s in live},
            "error",
            "fix the per-replica findings above until every replica predicts the same path",
            SRC_SELECT_OK,
            "replica-outcome-mismatch",
        )

    # Adapters: a name loaded on one replica and missing on another fails (or serves stale weights) whenever the
    # proxy routes a request for it to the replica without it.
    with_models = [s for s in live if s.model_cards is not None]
    if len(with_models) >= 2:
        union = sorted({name for s in with_models for name in s.adapters})
        versions = [v for v in (policy_version(n) for n in union) if v is not None]
        current = f"trl-policy-v{max(versions)}" if versions else None
        newest = max(versions) if versions else None

        def still_requested(name: str) -> bool:
            # TRL unloads trl-policy-v(N - max_staleness - 1) after loading vN (async_grpo_trainer.py:1847-1849), so
            # older policy versions are never requested again and may differ between replicas harmlessly.
            number = policy_version(name)
            return number is None or newest is None or number >= newest - intent.max_staleness

        for snap in with_models:
            missing = [
                name
                for name in union
                if name not in snap.adapters and name not in intent.adapters and still_requested(name)
            ]
            if missing:
                others = [m for m in missing if m != current]
                shown = ", ".join(f"`{m}`" for m in others[:6]) + (" …" if len(others) > 6 else "")
                if current in missing:
                    lead = f"the current policy adapter `{current}`" + (f" and {shown}" if others else "")
                else:
                    lead = f"adapter(s) {shown}"
                findings.append(
                    Finding(
                        "error",
                        "adapter-missing-on-replica",
                        f"{lead} {'is' if len(missing) == 1 else 'are'} loaded on other replicas but not here: a "
                        "request the proxy sends here for them fails, or is served by other weights than the policy "
                        "that produced the rest.",
                        "load every adapter on every replica (the proxy must fan each /v1/load_lora_adapter out to "
                        "all replicas)",
                        f"{SRC_ADAPTER_NAMES}; {SRC_MODELS_LIST}",
                        snap.url,
                    )
                )
            shadowed = [name for name in snap.base_models if name in union]
            if shadowed:
                findings.append(
                    Finding(
                        "error",
                        "base-served-as-adapter",
                        f"this replica serves its base model as `{shadowed[0]}`, a name other replicas use for a "
                        "LoRA adapter: requests for it silently get the base weights here.",
                        f"drop `{shadowed[0]}` from this replica's --served-model-name",
                        SRC_MODELS_LIST,
                        snap.url,
                    )
                )
    if intent.trainer == "async-grpo" and all(o.mode == "adapter-only" for o in outcomes):
        findings.append(
            Finding(
                "info",
                "proxy-fanout",
                "TRL sends each /v1/load_lora_adapter to vllm_server_base_url only: with several replicas behind a "
                "proxy, the proxy must send it to every replica. Re-run this check during training with "
                "--adapter trl-policy-v<N> to confirm every replica holds the current policy.",
                None,
                SRC_ADAPTER_NAMES,
            )
        )
    return findings
