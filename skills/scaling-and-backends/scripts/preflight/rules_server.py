"""Rules of the vLLM pre-flight that judge one server snapshot against the intent (pure functions; each cites the
upstream code it reproduces)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from common.recorded import newer_than, phrase
from common.versions import base_version, compare_versions, specifier_contains

from preflight.data import (
    FAILURE_IDS,
    ROUTE_HEALTH,
    ROUTE_MODELS,
    ROUTE_SERVER_INFO,
    ROUTE_VERSION,
    ROUTES,
    SRC_ASYNC_LOGPROBS,
    SRC_ASYNC_REQUEST_MODEL,
    SRC_ASYNC_SERVER_INFO,
    SRC_ASYNC_TOKEN_BUDGET,
    SRC_ASYNC_WEIGHT_TRANSFER,
    SRC_AUTH,
    SRC_DEV_MODE,
    SRC_DP_BROADCAST,
    SRC_GRPO_LOGPROBS,
    SRC_GRPO_SERVER_INFO_404,
    SRC_GRPO_WEIGHT_TRANSFER,
    SRC_HEALTH,
    SRC_LOAD_404,
    SRC_MAX_MODEL_LEN,
    SRC_MODELS_FIRST,
    SRC_MODELS_LIST,
    SRC_NCCL_GATE,
    SRC_RECORDED,
    SRC_ROUND_RANK,
    SRC_RUNTIME_LORA_ENV,
    SRC_SELECT_DP,
    SRC_SELECT_LORA_NONE,
    SRC_SELECT_LORAS,
    SRC_SELECT_OK,
    SRC_SELECT_RANK,
    SRC_SELECT_VALIDATE,
    SRC_THIS,
    SRC_TRL_NO_AUTH,
    SRC_VERSION_RANGE,
    SRC_VLLM_LOGPROBS,
    TRL_POLICY_ADAPTER_RE,
    VLLM_LORA_RANKS,
    Finding,
    Intent,
    Outcome,
    Response,
    Snapshot,
)
from preflight.fetch import proxy_for

# --------------------------------------------------------------------------------------------------------------------
# Helpers for the rules
# --------------------------------------------------------------------------------------------------------------------


def round_lora_rank(adapter_rank: int) -> Optional[int]:
    """Smallest vLLM-accepted --max-lora-rank >= adapter_rank, or None above 512 (mirrors TRL's round_lora_rank)."""
    for rank in VLLM_LORA_RANKS:
        if rank >= adapter_rank:
            return rank
    return None


def fastapi_not_found(response: Response) -> bool:
    """True when a 404 carries FastAPI's default body for an unregistered route, i.e. vLLM itself answered."""
    data, _ = response.json()
    return data == {"detail": "Not Found"}


def policy_version(name: str) -> Optional[int]:
    """The step of a TRL policy adapter name (``trl-policy-v12``); None for any other name, and for a number of more
    than 40 digits (no training step; ``int()`` refuses 5,000 of them)."""
    match = TRL_POLICY_ADAPTER_RE.match(name)
    return int(match.group(1)) if match and len(match.group(1)) <= 40 else None


def sync_needs_nccl(intent: Intent, outcome: Outcome) -> bool:
    return outcome.mode in ("merged-fallback", "full-weights") or (
        outcome.mode == "unknown" and (intent.trainer == "grpo" or intent.lora_rank is None)
    )


# --------------------------------------------------------------------------------------------------------------------
# Rules: one server
# --------------------------------------------------------------------------------------------------------------------


def check_transport(snap: Snapshot, intent: Intent) -> List[Finding]:
    """Reachability, refused redirects, auth, and answers that are not vLLM's."""
    findings: List[Finding] = []
    for route in ROUTES:
        response = snap.get(route)
        if response is None:
            continue
        where = f"GET {route}"
        if response.error_kind == "redirect":
            findings.append(
                Finding(
                    "error",
                    "redirect-refused",
                    f"{where}: {response.error_detail}. The script never follows a redirect to another host, so "
                    "the auth header cannot leak; TRL's `requests` client would follow it.",
                    "pass the final server URL to --vllm-url (and to the trainer's vllm_server_base_url)",
                    SRC_THIS,
                    snap.url,
                )
            )
        elif response.error_kind == "redirect-loop":
            findings.append(
                Finding(
                    "error",
                    "redirect-loop",
                    f"{where}: {response.error_detail}. The server (or a proxy in front of it) redirects this "
                    "route back to itself; TRL's client would fail the same way.",
                    "fix the redirect rule on the server or proxy, or pass the final server URL to --vllm-url",
                    SRC_THIS,
                    snap.url,
                )
            )
        elif response.transport_failed:
            proxy = proxy_for(snap.url)
            fixes = {
                "refused": "start the server, or correct the host/port in --vllm-url",
                "dns": "correct the host name in --vllm-url (it must resolve from this machine)",
                "timeout": "check that the server is up and not overloaded, or raise --timeout",
                "deadline": "raise --deadline, or check why the server answers so slowly",
                "tls": "use the scheme the server speaks (http:// or https://); for a private CA set SSL_CERT_FILE",
                "too-large": "point --vllm-url at the vLLM server itself",
                "url-not-encodable": "percent-encode the URL's path; give the host's ASCII (IDNA) name",
                "reset": "check the server log: it accepted the connection and closed it without an answer",
                "encoded": "point --vllm-url at the vLLM server itself (it never compresses these answers)",
                "protocol": "point --vllm-url at the vLLM HTTP port",
                "connection": "check the network path to the server",
            }
            # Each failure says what it was: an over-long or endless body, a URL that cannot be sent, and a server
            # that took the connection and reset it or answered in something other than HTTP are not unreachable.
            finding_id = FAILURE_IDS.get(response.error_kind or "", "unreachable")
            label = {"too-large": "body too long: ", "reset": ""}.get(
                response.error_kind or "", f"{response.error_kind}: "
            )
            findings.append(
                Finding(
                    "error",
                    finding_id,
                    f"{where}: {label}{response.error_detail}"
                    + (f" (sent through the proxy {proxy} from the environment)" if proxy else ""),
                    fixes.get(response.error_kind or "", "check the server")
                    + (" (or add the host to NO_PROXY if the proxy is the problem)" if proxy else ""),
                    SRC_THIS,
                    snap.url,
                )
            )
        elif response.status in (401, 403):
            if intent.auth_env:
                message = (
                    f"{where}: HTTP {response.status}: the token in ${intent.auth_env} was refused. vLLM's "
                    "--api-key guards /v1/* only, so a 401 elsewhere comes from a proxy in front of it."
                )
                fix = f"set ${intent.auth_env} to a token this server accepts"
            else:
                message = f"{where}: HTTP {response.status}: the server wants a token and none was sent."
                fix = "pass --auth-env VAR, naming an environment variable that holds the token"
            findings.append(Finding("error", "auth-required", message, fix, SRC_AUTH, snap.url))
        elif route != ROUTE_SERVER_INFO and response.status == 404:
            findings.append(
                Finding(
                    "error",
                    "not-vllm",
                    f"{where}: HTTP 404. Every vLLM server registers {route}, so this base URL is not a vLLM "
                    f"server (a wrong port, or a proxy path prefix missing from --vllm-url): {NOT_VLLM}.",
                    "drop the trailing /v1 from --vllm-url (TRL's vllm_server_base_url is the server root, too)"
                    if snap.url.endswith("/v1")
                    else "point --vllm-url at the vLLM server's base URL",
                    SRC_MODELS_LIST if route == ROUTE_MODELS else SRC_HEALTH,
                    snap.url,
                )
            )
        elif response.status is not None and route == ROUTE_HEALTH and response.status != 200:
            findings.append(
                Finding(
                    "error",
                    "engine-unhealthy",
                    f"{where}: HTTP {response.status}. vLLM answers 503 on /health when its engine is dead.",
                    "restart the server and read its log for the engine error",
                    SRC_HEALTH,
                    snap.url,
                )
            )
        elif response.status is not None and route != ROUTE_HEALTH and response.status not in (200, 404):
            findings.append(
                Finding(
                    "error",
                    "http-error",
                    f"{where}: HTTP {response.status}.",
                    "read the server (or proxy) log for this request",
                    SRC_THIS,
                    snap.url,
                )
            )
        elif response.status == 200 and route != ROUTE_HEALTH:
            data, why = response.json()
            if why is not None:
                findings.append(
                    Finding(
                        "error",
                        "non-json",
                        f"{where}: expected JSON, got {why}. Something other than vLLM answered "
                        "(a login page, a proxy error page, or another service on that port).",
                        "point --vllm-url at the vLLM server itself (or through a proxy that passes JSON through)",
                        SRC_THIS,
                        snap.url,
                    )
                )
            elif response.shape_problem() is not None:
                findings.append(
                    Finding(
                        "error",
                        "malformed-answer",
                        f"{where}: {response.shape_problem()}. vLLM never answers like this, so the rules ignore "
                        "this answer for this server.",
                        "point --vllm-url at the vLLM server itself (or through a proxy that passes JSON unchanged)",
                        SRC_THIS,
                        snap.url,
                    )
                )
            elif route == ROUTE_SERVER_INFO and not (
                isinstance(data, dict) and isinstance(data.get("vllm_config"), dict)
            ):
                findings.append(
                    Finding(
                        "error",
                        "server-info-unparsed",
                        f"{where}: `vllm_config` is not a JSON object; TRL reads "
                        "`/server_info?config_format=json` as one and would fail on this answer.",
                        "run a vLLM release that TRL supports (it serves config_format=json)",
                        SRC_ASYNC_SERVER_INFO,
                        snap.url,
                    )
                )
    return merge_repeats(findings)


NOT_VLLM = "not vLLM, so these checks do not apply"


def answers_like_vllm(snap: Snapshot) -> bool:
    """Whether the server answered what only vLLM answers: ``/version`` as ``{"version": "<text>"}``, or
    ``/v1/models`` as an OpenAI model list (``"object": "list"`` with a ``data`` list). A service that answers
    ``200 {}`` (or 404) everywhere is not vLLM, whatever else it says."""
    for route, shape in ((ROUTE_VERSION, _vllm_version_shape), (ROUTE_MODELS, _model_list_shape)):
        response = snap.get(route)
        if response is None or response.transport_failed or response.status != 200:
            continue
        data, why = response.json()
        if why is None and shape(data):
            return True
    return False


def _vllm_version_shape(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("version"), str) and bool(data["version"].strip())


def _model_list_shape(data: Any) -> bool:
    return isinstance(data, dict) and data.get("object") == "list" and isinstance(data.get("data"), list)


def not_vllm_findings(snap: Snapshot, found: List[Finding]) -> List[Finding]:
    """One ``not-vllm`` finding for a server that answers but not as vLLM (none when a token was refused: vLLM
    behind a proxy that wants one cannot be told apart). No vLLM setting is suggested to such a server."""
    if any(f.id in ("not-vllm", "auth-required") for f in found):
        return []
    return [
        Finding(
            "error",
            "not-vllm",
            f"the server answers, but not as vLLM does (no /version with a version string, no /v1/models model "
            f"list): {NOT_VLLM}.",
            "point --vllm-url at the vLLM server's base URL",
            SRC_THIS,
            snap.url,
        )
    ]


def merge_repeats(findings: List[Finding]) -> List[Finding]:
    """One finding per id: a proxy that answers every route the same way gives one line, not four."""
    merged: Dict[str, Finding] = {}
    routes: Dict[str, List[str]] = {}
    for finding in findings:
        route = finding.message.split(":", 1)[0]
        if finding.id in merged:
            routes[finding.id].append(route)
        else:
            merged[finding.id] = finding
            routes[finding.id] = []
    for finding_id, others in routes.items():
        if others:
            merged[finding_id].message += f" Same on {', '.join(others)}."
    return list(merged.values())


def check_version(
    snap: Snapshot, trl_range: Dict[str, Any], local_vllm: Optional[str], intent: Intent, outcome: Outcome
) -> List[Finding]:
    """The server's vLLM against the range the installed TRL accepts, and against the trainer-side vLLM."""
    version = snap.version
    if version is None:
        answered = snap.get(ROUTE_VERSION)
        if answered is not None and answered.status == 200 and answered.json()[1] is None:
            return [
                Finding(
                    "warning",
                    "vllm-version-unknown",
                    "GET /version did not give a version, so the TRL range cannot be checked.",
                    None,
                    SRC_VERSION_RANGE,
                    snap.url,
                )
            ]
        return []
    findings: List[Finding] = []
    spec = trl_range["vllm_spec"]
    # TRL's runtime check compares the release part only (`Version(v).base_version`, trl/import_utils.py:104-107).
    release = base_version(version) or version
    inside = specifier_contains(spec, release) if spec else None
    if inside is False:
        findings.append(
            Finding(
                "warning",
                "vllm-outside-trl-range",
                f"vLLM {version} is outside the range TRL {trl_range['trl_version']} supports ({spec}). TRL only "
                "warns at import, but its client calls and weight-transfer code are written for that range.",
                f"run a vLLM inside {spec} on the server (e.g. pip install 'vllm{spec}')",
                trl_range["source"],
                snap.url,
            )
        )
    known = trl_range.get("recorded_vllm")
    if isinstance(known, dict) and newer_than(version, known.get("newest")):
        findings.append(
            Finding(
                "warning",
                "vllm-newer-than-recorded",
                f"vLLM {version} is {phrase(str(known.get('fetched')))}; newest recorded {known['newest']}: no "
                "route, flag or rule of this check was read in it, so each verdict below is unverified for it.",
                f"re-check each verdict by hand, or serve vLLM {known['newest']} (the newest release recorded)",
                SRC_RECORDED,
                snap.url,
            )
        )
    if local_vllm and sync_needs_nccl(intent, outcome):
        local_release = base_version(local_vllm) or local_vllm
        gate = "0.28.0"
        server_new = compare_versions(release, gate)
        local_new = compare_versions(local_release, gate)
        if server_new is not None and local_new is not None and (server_new >= 0) != (local_new >= 0):
            findings.append(
                Finding(
                    "warning",
                    "trainer-vllm-differs",
                    f"the trainer side has vLLM {local_vllm} and the server {version}: TRL picks its NCCL "
                    "weight-transfer code from the trainer-side version (>= 0.28.0 or not), so the two sides "
                    "would speak different weight-transfer protocols.",
                    f"install vLLM {release} on the trainer side too",
                    SRC_NCCL_GATE,
                    snap.url,
                )
            )
    return findings


def check_models(snap: Snapshot, intent: Intent) -> List[Finding]:
    """Served model name, max_model_len against prompt + completion, and required adapters."""
    cards = snap.model_cards
    if cards is None:
        return []
    findings: List[Finding] = []
    bases = snap.base_models
    if not bases:
        findings.append(
            Finding(
                "error",
                "no-base-model",
                "GET /v1/models lists no base model; TRL takes the first entry as the model to generate with.",
                "check the server's --model / --served-model-name",
                SRC_MODELS_FIRST,
                snap.url,
            )
        )
    if intent.model and bases and intent.model not in bases:
        if intent.trainer == "async-grpo":
            why = (
                "AsyncGRPO sends the trainer model's name as `model` in every generation request, and vLLM "
                f"refuses names it does not serve (`The model `{intent.model}` does not exist.`)"
            )
            source = SRC_ASYNC_REQUEST_MODEL
        else:
            why = "GRPO generates with whatever /v1/models lists first, so it would sample from another model"
            source = SRC_MODELS_FIRST
        findings.append(
            Finding(
                "error",
                "model-mismatch",
                f"the server serves {', '.join(bases)}, not {intent.model}: {why}.",
                f"start the server with `vllm serve {intent.model}`, or add `--served-model-name {intent.model}` "
                "if it already runs that checkpoint under another name",
                source,
                snap.url,
            )
        )
    max_model_len = snap.max_model_len
    if intent.max_length is not None and max_model_len is not None and max_model_len < intent.max_length:
        findings.append(
            Finding(
                "error",
                "max-model-len-too-low",
                f"max_model_len is {max_model_len} but prompt + completion can reach {intent.max_length} tokens: "
                "vLLM rejects such requests (`This model's maximum context length is …`)"
                + (
                    ", and AsyncGRPO also uses max_model_len as its default token_budget."
                    if intent.trainer == "async-grpo"
                    else "."
                ),
                f"--max-model-len {intent.max_length}",
                SRC_MAX_MODEL_LEN + ("; " + SRC_ASYNC_TOKEN_BUDGET if intent.trainer == "async-grpo" else ""),
                snap.url,
            )
        )
    for adapter in intent.adapters:
        if adapter in bases:
            findings.append(
                Finding(
                    "error",
                    "base-served-as-adapter",
                    f"`{adapter}` is served as a base model, not as a LoRA adapter: requests for it get the base "
                    "weights without any trained delta.",
                    f"drop `{adapter}` from --served-model-name and load the adapter under that name",
                    SRC_MODELS_LIST,
                    snap.url,
                )
            )
        elif adapter not in snap.adapters:
            findings.append(
                Finding(
                    "error",
                    "adapter-not-loaded",
                    f"adapter `{adapter}` is not loaded on this server (loaded: "
                    f"{', '.join(snap.adapters) or 'none'}); requests naming it fail here.",
                    f"load `{adapter}` on this server too (every /v1/load_lora_adapter must reach every replica)",
                    SRC_MODELS_LIST,
                    snap.url,
                )
            )
    return findings


def check_dev_mode(snap: Snapshot, intent: Intent) -> List[Finding]:
    """`/server_info` exists only with VLLM_SERVER_DEV_MODE=1; both trainers need it (and /pause, /update_weights)."""
    response = snap.get(ROUTE_SERVER_INFO)
    if response is None or response.transport_failed or response.status != 404:
        return []
    if fastapi_not_found(response):
        detail = 'HTTP 404 with FastAPI\'s {"detail":"Not Found"}: the dev routes are not registered'
    else:
        detail = "HTTP 404 (not FastAPI's body: a proxy may also be hiding the route)"
    trl = (
        "GRPO raises `does not expose its development endpoints` at start-up"
        if intent.trainer == "grpo"
        else "AsyncGRPO's /server_info and /pause calls fail with HTTP 404 at start-up"
    )
    return [
        Finding(
            "error",
            "dev-mode-off",
            f"GET {ROUTE_SERVER_INFO}: {detail}; {trl}. The LoRA, weight-transfer and logprobs checks need this "
            "route and were skipped.",
            "VLLM_SERVER_DEV_MODE=1",
            f"{SRC_DEV_MODE}; {SRC_GRPO_SERVER_INFO_404 if intent.trainer == 'grpo' else SRC_ASYNC_SERVER_INFO}",
            snap.url,
        )
    ]


def predict_outcome(snap: Snapshot, intent: Intent) -> Tuple[Outcome, List[Finding]]:
    """Which weight-sync path TRL 1.16 takes with this server, reproducing ``select_adapter_sync``.

    Order and thresholds follow trl/experimental/async_grpo/async_grpo_trainer.py:839-907 @1.16.0:
    lora_config None -> merged fallback (warning); data_parallel_size > 1 -> merged fallback (warning);
    adapter config not servable -> merged fallback (warning); max_lora_rank < r -> ValueError;
    max_loras < max_staleness + 2 -> ValueError; otherwise adapter-only.
    """
    findings: List[Finding] = []
    if snap.dev_mode is False:
        if intent.trainer == "grpo":
            says = (
                f"RuntimeError: The vLLM server at {snap.url} does not expose its development endpoints, which TRL "
                "uses to synchronize weights. Restart it with `VLLM_SERVER_DEV_MODE=1` in its environment."
            )
            source = SRC_GRPO_SERVER_INFO_404
        else:
            says = f"requests.HTTPError: 404 Client Error: Not Found for url: {snap.url}/server_info?config_format=json"
            source = SRC_ASYNC_SERVER_INFO
        return Outcome("startup-error", says, source), findings
    config = snap.vllm_config
    if config is None:
        return Outcome("unknown", None, SRC_THIS), findings

    if intent.trainer == "grpo" or intent.lora_rank is None:
        if intent.trainer == "grpo" and intent.lora_rank is not None:
            findings.append(
                Finding(
                    "info",
                    "grpo-lora-merged",
                    "GRPOTrainer has no adapter-only sync: it merges the LoRA adapter, pushes the full weights over "
                    "NCCL, then unmerges. The server's LoRA settings do not matter for it.",
                    None,
                    "trl/generation/vllm_generation.py:448-469 @1.16.0 (merge, push, unmerge)",
                    snap.url,
                )
            )
        return Outcome(
            "full-weights", None, SRC_GRPO_WEIGHT_TRANSFER if intent.trainer == "grpo" else SRC_ASYNC_WEIGHT_TRANSFER
        ), findings

    rank = intent.lora_rank
    lora = config.get("lora_config")
    if lora is None:
        says = (
            "Training a PEFT model against a vLLM server started without `--enable-lora`: every weight sync has to "
            "merge the adapter into the base model and push the full weights. Restart the server with "
            "`--enable-lora --max-lora-rank <r>` and `VLLM_ALLOW_RUNTIME_LORA_UPDATING=1` in its environment to push "
            "only the adapter instead (~1% of the bytes)."
        )
        served_rank = round_lora_rank(rank) or 512
        findings.append(
            Finding(
                "warning",
                "lora-disabled",
                "lora_config is null (no --enable-lora): TRL falls back to merged-weight sync, pushing the full "
                "weights over NCCL every sync instead of the adapter.",
                f"--enable-lora --max-lora-rank {served_rank} --max-loras {intent.max_staleness + 2} "
                "and VLLM_ALLOW_RUNTIME_LORA_UPDATING=1",
                SRC_SELECT_LORA_NONE,
                snap.url,
            )
        )
        return Outcome("merged-fallback", says, SRC_SELECT_LORA_NONE), findings
    if not isinstance(lora, dict):
        return Outcome("unknown", None, SRC_THIS), findings

    parallel = snap.section("parallel_config") or {}
    dp = parallel.get("data_parallel_size")
    if isinstance(dp, int) and dp > 1:
        says = (
            "Falling back to merged-weight vLLM sync: the server runs with `--data-parallel-size > 1`, where a loaded "
            "adapter reaches only the replica that received the request."
        )
        findings.append(
            Finding(
                "warning",
                "lora-data-parallel",
                f"data_parallel_size is {dp}: TRL 1.16 falls back to merged-weight sync for any "
                "data-parallel server (see the dp-adapter-reach note for what vLLM itself does).",
                "--data-parallel-size 1 (run one server per replica and put the replicas behind the proxy)",
                SRC_SELECT_DP,
                snap.url,
            )
        )
        findings.extend(check_dp_reach(snap, dp))
        return Outcome("merged-fallback", says, SRC_SELECT_DP), findings

    first_error: Optional[Outcome] = None
    max_rank = lora.get("max_lora_rank")
    target = round_lora_rank(rank)
    if isinstance(max_rank, int) and max_rank < rank and target is None:
        says = (
            f"ValueError: LoRA rank {rank} is larger than the largest rank vLLM can serve (512). Lower `r` (and "
            "`rank_pattern`) to sync the adapter to vLLM, or sync merged weights instead."
        )
        findings.append(
            Finding(
                "error",
                "lora-rank-unservable",
                f"adapter rank {rank} exceeds 512, the largest --max-lora-rank vLLM accepts "
                f"({', '.join(map(str, VLLM_LORA_RANKS))}).",
                "lower the adapter rank r (and rank_pattern) to 512 or less",
                SRC_ROUND_RANK,
                snap.url,
            )
        )
        first_error = first_error or Outcome("startup-error", says, SRC_ROUND_RANK)
    elif isinstance(max_rank, int) and max_rank < rank:
        says = (
            f"ValueError: The adapter has rank {rank}, but the vLLM server was started with `--max-lora-rank "
            f"{max_rank}`. Restart it with `--max-lora-rank {target}`."
        )
        findings.append(
            Finding(
                "error",
                "lora-rank-too-low",
                f"max_lora_rank is {max_rank}, below the adapter rank {rank}; TRL raises at start-up. vLLM accepts "
                f"only {', '.join(map(str, VLLM_LORA_RANKS))}, so {target} is the smallest that fits.",
                f"--max-lora-rank {target}",
                f"{SRC_SELECT_RANK}; vllm/config/lora.py:27 @0.31.0 (MaxLoRARanks)",
                snap.url,
            )
        )
        first_error = first_error or Outcome("startup-error", says, SRC_SELECT_RANK)

    max_loras = lora.get("max_loras")
    min_loras = intent.max_staleness + 2
    if isinstance(max_loras, int) and max_loras < min_loras:
        says = (
            f"ValueError: The vLLM server was started with `--max-loras {max_loras}`, but "
            f"`max_staleness={intent.max_staleness}` lets requests still name {min_loras - 1} distinct policy "
            "versions, and each sync loads the next one before unloading the oldest. Restart the server with "
            f"`--max-loras {min_loras}`, or lower `max_staleness`."
        )
        findings.append(
            Finding(
                "error",
                "lora-slots-too-few",
                f"max_loras is {max_loras} but max_staleness {intent.max_staleness} needs {min_loras} "
                "(max_staleness + 1 servable versions, plus the one loaded before the oldest is unloaded); "
                "TRL raises at start-up. Left alone, vLLM would silently evict a still-servable adapter.",
                f"--max-loras {min_loras}",
                SRC_SELECT_LORAS,
                snap.url,
            )
        )
        first_error = first_error or Outcome("startup-error", says, SRC_SELECT_LORAS)
    if first_error is not None:  # every LoRA-limit problem is listed at once; TRL raises on the first
        return first_error, findings

    return Outcome("adapter-only", None, SRC_SELECT_OK), findings


def check_dp_reach(snap: Snapshot, dp: int) -> List[Finding]:
    """What vLLM really does with /v1/load_lora_adapter on a data-parallel server (TRL assumes one replica only)."""
    parallel = snap.section("parallel_config") or {}
    external = bool(parallel.get("data_parallel_external_lb"))
    hybrid = bool(parallel.get("data_parallel_hybrid_lb"))
    local = parallel.get("data_parallel_size_local")
    runtime = snap.vllm_env.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING")
    if external:
        reach = (
            "this server runs in external load-balancing mode (one API server per DP rank), so a load through "
            "this URL reaches only this rank: TRL's assumption holds here."
        )
    elif hybrid:
        reach = (
            f"this server runs in hybrid load-balancing mode, so a load reaches the {local} DP engine(s) on this "
            "node but not the other nodes' engines."
        )
    else:
        reach = (
            "this server balances internally; with VLLM_ALLOW_RUNTIME_LORA_UPDATING on, vLLM refuses to start "
            "with --api-server-count > 1, so its single API server broadcasts add_lora to every DP engine: "
            "vLLM itself would serve the adapter on all replicas, unlike TRL's assumption."
        )
        if runtime is False:
            reach += " (runtime LoRA updating is off on this server, so the load route does not exist yet.)"
    return [
        Finding(
            "info",
            "dp-adapter-reach",
            f"data_parallel_size {dp}: {reach} TRL 1.16 decides from data_parallel_size alone.",
            None,
            f"{SRC_DP_BROADCAST}; {SRC_SELECT_DP}",
            snap.url,
        )
    ]


def check_runtime_lora(snap: Snapshot, outcome: Outcome) -> List[Finding]:
    """Adapter-only sync loads each version through /v1/load_lora_adapter, which needs runtime LoRA updating."""
    if outcome.mode != "adapter-only":
        return []
    value = snap.vllm_env.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING")
    if value is True:
        return []
    if value is None:
        return [
            Finding(
                "warning",
                "runtime-lora-unknown",
                "vllm_env in /server_info does not show VLLM_ALLOW_RUNTIME_LORA_UPDATING; adapter-only sync needs "
                "it, or the first sync fails on /v1/load_lora_adapter with HTTP 404.",
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING=1",
                f"{SRC_LOAD_404}; {SRC_RUNTIME_LORA_ENV}",
                snap.url,
            )
        ]
    return [
        Finding(
            "error",
            "runtime-lora-off",
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING is off: /v1/load_lora_adapter is not registered, so TRL starts in "
            "adapter-only mode and then fails at the first weight sync (`does not expose "
            "`/v1/load_lora_adapter``).",
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING=1",
            f"{SRC_LOAD_404}; {SRC_RUNTIME_LORA_ENV}",
            snap.url,
        )
    ]


def check_weight_transfer(snap: Snapshot, intent: Intent, outcome: Outcome) -> List[Finding]:
    """Full-weight and merged sync go through vLLM's NCCL weight-transfer engine."""
    config = snap.vllm_config
    if config is None or outcome.mode not in ("merged-fallback", "full-weights"):
        return []
    transfer = config.get("weight_transfer_config")
    if transfer is None:
        kind = "merged" if outcome.mode == "merged-fallback" else "full"
        if intent.trainer == "grpo":
            what = "GRPO raises `has no weight-transfer engine` at start-up"
            source = SRC_GRPO_WEIGHT_TRANSFER
        else:
            what = "AsyncGRPO fails to set up the NCCL weight-transfer group when training starts"
            source = SRC_ASYNC_WEIGHT_TRANSFER
        return [
            Finding(
                "error",
                "weight-transfer-missing",
                f"weight_transfer_config is null but this run syncs {kind} weights over NCCL: {what}.",
                '--weight-transfer-config \'{"backend": "nccl"}\'',
                source,
                snap.url,
            )
        ]
    backend = transfer.get("backend") if isinstance(transfer, dict) else None
    if backend not in (None, "nccl"):
        return [
            Finding(
                "warning",
                "weight-transfer-backend",
                f"weight_transfer_config backend is {backend!r}; TRL 1.16's trainer side speaks vLLM's plain NCCL "
                "engine.",
                '--weight-transfer-config \'{"backend": "nccl"}\'',
                SRC_NCCL_GATE,
                snap.url,
            )
        ]
    return []


def check_logprobs_mode(snap: Snapshot, intent: Intent) -> List[Finding]:
    """The importance-sampling correction needs logprobs after temperature and logit processing."""
    model_config = snap.section("model_config")
    if model_config is None:
        return []
    mode = model_config.get("logprobs_mode")
    if mode == "processed_logprobs":
        return []
    if intent.trainer == "grpo":
        if not intent.importance_sampling_correction:
            return [
                Finding(
                    "info",
                    "logprobs-mode",
                    f"logprobs_mode is {mode!r}; ignored because the importance-sampling correction is off.",
                    None,
                    SRC_GRPO_LOGPROBS,
                    snap.url,
                )
            ]
        return [
            Finding(
                "warning",
                "logprobs-mode",
                f"logprobs_mode is {mode!r} (vLLM's default is raw_logprobs): GRPO's importance-sampling correction "
                "(on by default) compares them with the trainer's processed log-probs, so TRL warns that the "
                "correction is biased.",
                "--logprobs-mode processed_logprobs",
                f"{SRC_GRPO_LOGPROBS}; {SRC_VLLM_LOGPROBS}",
                snap.url,
            )
        ]
    return [
        Finding(
            "warning",
            "logprobs-mode",
            f"logprobs_mode is {mode!r}: AsyncGRPO uses the server's sampled log-probs as the old-policy "
            "log-probs in its clipped ratio while the trainer computes them after temperature; they agree only at "
            "temperature 1 without top-k/top-p/min-p. TRL does not check this for AsyncGRPO.",
            "--logprobs-mode processed_logprobs",
            f"{SRC_ASYNC_LOGPROBS}; {SRC_VLLM_LOGPROBS}",
            snap.url,
        )
    ]


def global_notes(snaps: Sequence[Snapshot], intent: Intent, outcomes: Sequence[Outcome]) -> List[Finding]:
    """Notes that hold for the run as a whole, printed once."""
    notes: List[Finding] = []
    # Shown when TRL would reach validate_lora_for_vllm_sync: adapter-only, or a rank/slot error raised after it.
    reached = (SRC_SELECT_OK, SRC_SELECT_RANK, SRC_SELECT_LORAS, SRC_ROUND_RANK)
    if intent.trainer == "async-grpo" and intent.lora_rank is not None and any(o.source in reached for o in outcomes):
        notes.append(
            Finding(
                "info",
                "adapter-config-unseen",
                "TRL also falls back to merged sync when the PEFT model has more than one active adapter, "
                "modules_to_save, DoRA, bias other than 'none', target_parameters, or lm_head/embed_tokens targets; "
                "this script cannot see your PEFT config. Pass the highest rank (rank_pattern included) as "
                "--lora-rank.",
                None,
                SRC_SELECT_VALIDATE,
            )
        )
    if intent.auth_env and any(s.reachable for s in snaps):
        notes.append(
            Finding(
                "info",
                "trl-sends-no-token",
                "TRL 1.16's HTTP clients send no Authorization header: if a server needs the token, the trainer "
                "must reach it through a path that does not (vLLM's --api-key guards /v1/* only).",
                None,
                f"{SRC_TRL_NO_AUTH}; {SRC_AUTH}",
            )
        )
    return notes


def judge_server(
    snap: Snapshot, intent: Intent, trl_range: Dict[str, Any], local_vllm: Optional[str]
) -> Tuple[Outcome, List[Finding]]:
    """All single-server rules, in reading order."""
    findings = check_transport(snap, intent)
    if not snap.reachable:
        return Outcome("unknown", None, SRC_THIS), findings
    if not answers_like_vllm(snap):
        return Outcome("unknown", None, SRC_THIS), findings + not_vllm_findings(snap, findings)
    outcome, outcome_findings = predict_outcome(snap, intent)
    findings += check_version(snap, trl_range, local_vllm, intent, outcome)
    findings += check_models(snap, intent)
    findings += check_dev_mode(snap, intent)
    findings += outcome_findings
    findings += check_runtime_lora(snap, outcome)
    findings += check_weight_transfer(snap, intent, outcome)
    findings += check_logprobs_mode(snap, intent)
    if intent.max_length is None and snap.max_model_len is not None:
        findings.append(
            Finding(
                "info",
                "max-length-unchecked",
                f"max_model_len is {snap.max_model_len}; pass --max-length (prompt + completion tokens) to check it.",
                None,
                SRC_MAX_MODEL_LEN,
                snap.url,
            )
        )
    return outcome, findings
