#!/usr/bin/env python3
"""Read-only pre-flight of running vLLM servers for TRL GRPO server mode and AsyncGRPO.

It sends only GET requests to four routes of each server (``/health``, ``/version``, ``/v1/models``,
``/server_info?config_format=json``), judges what the servers publish against what the user intends to
train, and predicts what TRL 1.16 will do at start-up: adapter-only LoRA sync, a merged fallback with a
warning, full-weight sync, or an error. It never loads, unloads, pauses or writes anything.

Layout: fetchers (urllib, bounded by per-request timeouts and one total deadline), pure rule functions
that judge one parsed server snapshot or all of them (each cites the upstream file it reproduces), and
renderers (text, JSON). Standard library only; Python 3.9+.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from versions import base_version, compare_versions, normalize_name, parse_requirement, specifier_contains

SCHEMA_VERSION = 1
TOOL = "check_vllm_server"

# The only requests this script ever makes: GET, in this order.
ROUTE_HEALTH = "/health"
ROUTE_VERSION = "/version"
ROUTE_MODELS = "/v1/models"
ROUTE_SERVER_INFO = "/server_info?config_format=json"
ROUTES = (ROUTE_HEALTH, ROUTE_VERSION, ROUTE_MODELS, ROUTE_SERVER_INFO)

DEFAULT_TIMEOUT_S = 3.0
DEFAULT_DEADLINE_S = 10.0
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_SAME_ORIGIN_REDIRECTS = 3

# AsyncGRPOConfig.max_staleness default (trl/experimental/async_grpo/async_grpo_config.py:360-361 @1.16.0).
ASYNC_GRPO_DEFAULT_MAX_STALENESS = 4
# The values vLLM accepts for --max-lora-rank: `MaxLoRARanks` in vllm/config/lora.py:27 (@0.27.1 and @0.31.0),
# copied by TRL as VLLM_LORA_RANKS (trl/experimental/async_grpo/async_grpo_trainer.py:693 @1.16.0).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# TRL names each synced policy adapter `trl-policy-v{N}` (async_grpo_trainer.py:1306 and 1845 @1.16.0).
TRL_POLICY_ADAPTER_RE = re.compile(r"^trl-policy-v(\d+)$")

# Used only when TRL is not installed here: TRL 1.16.0's own vLLM range.
TRL_FALLBACK_VERSION = "1.16.0"
TRL_FALLBACK_VLLM_SPEC = ">=0.22.0,<=0.31.0"
TRL_FALLBACK_SOURCE = (
    'trl-1.16.0.dist-info/METADATA: Requires-Dist: vllm<=0.31.0,>=0.22.0; extra == "vllm" '
    "(runtime check: trl/import_utils.py:107 @1.16.0)"
)

# Upstream citations (file:line @version) used by findings.
SRC_SELECT_LORA_NONE = "trl/experimental/async_grpo/async_grpo_trainer.py:861-870 @1.16.0 (select_adapter_sync)"
SRC_SELECT_DP = "trl/experimental/async_grpo/async_grpo_trainer.py:872-879 @1.16.0 (select_adapter_sync)"
SRC_SELECT_VALIDATE = "trl/experimental/async_grpo/async_grpo_trainer.py:726-787,881-885 @1.16.0"
SRC_SELECT_RANK = "trl/experimental/async_grpo/async_grpo_trainer.py:887-894 @1.16.0 (select_adapter_sync)"
SRC_ROUND_RANK = "trl/experimental/async_grpo/async_grpo_trainer.py:696-723 @1.16.0 (round_lora_rank)"
SRC_SELECT_LORAS = "trl/experimental/async_grpo/async_grpo_trainer.py:895-906 @1.16.0 (select_adapter_sync)"
SRC_SELECT_OK = "trl/experimental/async_grpo/async_grpo_trainer.py:907,1408-1417 @1.16.0"
SRC_LOAD_404 = "trl/experimental/async_grpo/vllm_client.py:109-120 @1.16.0 (load_lora_adapter)"
SRC_RUNTIME_LORA_ENV = "vllm/envs.py:1200-1203 @0.31.0; vllm/entrypoints/serve/lora/api_router.py:30 @0.31.0"
SRC_GRPO_SERVER_INFO_404 = "trl/generation/vllm_client.py:303-318 @1.16.0 (get_server_info)"
SRC_ASYNC_SERVER_INFO = "trl/experimental/async_grpo/vllm_client.py:81-97 @1.16.0 (get_dtype, get_server_info)"
SRC_DEV_MODE = (
    "vllm/entrypoints/launchers/api_server/routers.py:34-37 @0.31.0; "
    "vllm/entrypoints/openai/api_server.py:230-233 @0.27.1"
)
SRC_GRPO_WEIGHT_TRANSFER = "trl/generation/vllm_client.py:735-740 @1.16.0 (init_communicator)"
SRC_ASYNC_WEIGHT_TRANSFER = "trl/experimental/async_grpo/weight_transfer.py:78-127 @1.16.0 (init_weight_transfer)"
SRC_GRPO_LOGPROBS = "trl/trainer/grpo_trainer.py:1141-1153 @1.16.0; trl/trainer/grpo_config.py:925 @1.16.0"
SRC_ASYNC_LOGPROBS = "trl/experimental/async_grpo/async_grpo_trainer.py:1131,1504,1527-1528 @1.16.0 (compute_loss)"
SRC_VLLM_LOGPROBS = "vllm/config/model.py:100-102,259 @0.31.0 (LogprobsMode, default raw_logprobs)"
SRC_MAX_MODEL_LEN = "vllm/renderers/params.py:485-510 @0.31.0 (_token_len_check)"
SRC_ASYNC_TOKEN_BUDGET = "trl/experimental/async_grpo/async_grpo_trainer.py:1434-1440 @1.16.0"
SRC_MODELS_FIRST = (
    "trl/experimental/async_grpo/vllm_client.py:75-79 @1.16.0; trl/generation/vllm_client.py:253 @1.16.0; "
    "vllm/entrypoints/openai/models/serving.py:149-165 @0.31.0"
)
SRC_ASYNC_REQUEST_MODEL = "trl/experimental/async_grpo/async_rollout_worker.py:494-501,1000-1001 @1.16.0"
SRC_HEALTH = "vllm/entrypoints/serve/instrumentator/health.py:22-32 @0.31.0"
SRC_VERSION_RANGE = "trl/import_utils.py:101-112 @1.16.0 (is_vllm_available)"
SRC_NCCL_GATE = "trl/experimental/async_grpo/weight_transfer.py:29-37 @1.16.0; trl/generation/vllm_client.py:45-48"
SRC_DP_BROADCAST = (
    "vllm/v1/engine/core_client.py:156-166,1642-1651 @0.31.0 (DPLBAsyncMPClient.call_utility_async); "
    "vllm/entrypoints/cli/serve.py:304-307 @0.31.0; vllm/config/parallel.py:610-614 @0.31.0"
)
SRC_AUTH = "vllm/entrypoints/serve/middleware/authenticate.py:11,59-61 @0.31.0 (GUARDED_PREFIX)"
SRC_TRL_NO_AUTH = "trl/experimental/async_grpo/vllm_client.py, trl/generation/vllm_client.py @1.16.0 (no auth header)"
SRC_ADAPTER_NAMES = "trl/experimental/async_grpo/async_grpo_trainer.py:1306,1802-1858 @1.16.0 (_sync_weight_lora)"
SRC_MODELS_LIST = "vllm/entrypoints/openai/models/serving.py:149-165 @0.31.0 (show_available_models)"
SRC_THIS = "scripts/check_vllm_server.py"

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


# --------------------------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class Intent:
    """What the user is about to train."""

    trainer: str  # "async-grpo" or "grpo"
    lora_rank: Optional[int]  # None: full fine-tuning
    max_staleness: int
    max_length: Optional[int]
    model: Optional[str]
    adapters: Tuple[str, ...]
    importance_sampling_correction: bool
    auth_env: Optional[str]


@dataclass
class Finding:
    severity: str  # error | warning | info
    id: str
    message: str
    fix: Optional[str]
    source: str
    server: Optional[str] = None  # None: about all servers together

    def as_dict(self) -> Dict[str, Any]:
        return {
            "severity": self.severity,
            "id": self.id,
            "server": self.server,
            "message": self.message,
            "fix": self.fix,
            "source": self.source,
        }


@dataclass
class Outcome:
    """What TRL 1.16 will do with this server at start-up."""

    mode: str  # adapter-only | merged-fallback | full-weights | startup-error | unknown
    trl_says: Optional[str]  # the warning TRL logs or the error it raises, when there is one
    source: str

    def as_dict(self) -> Dict[str, Any]:
        return {"mode": self.mode, "trl_says": self.trl_says, "source": self.source}


@dataclass
class Response:
    """One GET and what came of it."""

    path: str
    status: Optional[int] = None
    body: Optional[bytes] = None
    content_type: str = ""
    error_kind: Optional[str] = None  # refused dns timeout tls redirect connection protocol deadline too-large
    error_detail: str = ""
    elapsed_s: float = 0.0

    @property
    def transport_failed(self) -> bool:
        return self.error_kind is not None

    def json(self) -> Tuple[Optional[Any], Optional[str]]:
        """(parsed JSON, None) or (None, why not)."""
        if self.body is None:
            return None, "no body"
        try:
            return json.loads(self.body.decode("utf-8")), None
        except (UnicodeDecodeError, ValueError):
            return None, describe_non_json(self.body, self.content_type)


@dataclass
class Snapshot:
    """Everything one server published, parsed just enough for the rules."""

    url: str
    responses: Dict[str, Response] = field(default_factory=dict)
    unfinished: Optional[str] = None  # the route still in flight when the deadline struck

    def get(self, route: str) -> Optional[Response]:
        return self.responses.get(route)

    def ok_json(self, route: str) -> Optional[Any]:
        response = self.get(route)
        if response is None or response.transport_failed or response.status != 200:
            return None
        data, _ = response.json()
        return data

    # --- parsed views -------------------------------------------------------------------------------------------
    @property
    def version(self) -> Optional[str]:
        data = self.ok_json(ROUTE_VERSION)
        if isinstance(data, dict) and isinstance(data.get("version"), str):
            return data["version"]
        return None

    @property
    def model_cards(self) -> Optional[List[Dict[str, Any]]]:
        data = self.ok_json(ROUTE_MODELS)
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            return [card for card in data["data"] if isinstance(card, dict)]
        return None

    @property
    def base_models(self) -> List[str]:
        """Base-model card ids, in served order (vLLM lists them first; adapter cards carry a `parent`)."""
        return [str(card.get("id")) for card in self.model_cards or [] if not card.get("parent")]

    @property
    def adapters(self) -> List[str]:
        return [str(card.get("id")) for card in self.model_cards or [] if card.get("parent")]

    @property
    def max_model_len(self) -> Optional[int]:
        # TRL reads data[0]["max_model_len"]; vLLM sets it on base cards only.
        cards = self.model_cards or []
        if cards and isinstance(cards[0].get("max_model_len"), int):
            return cards[0]["max_model_len"]
        config = self.vllm_config
        if config and isinstance((config.get("model_config") or {}).get("max_model_len"), int):
            return config["model_config"]["max_model_len"]
        return None

    @property
    def server_info(self) -> Optional[Dict[str, Any]]:
        data = self.ok_json(ROUTE_SERVER_INFO)
        return data if isinstance(data, dict) else None

    @property
    def vllm_config(self) -> Optional[Dict[str, Any]]:
        info = self.server_info
        if info and isinstance(info.get("vllm_config"), dict):
            return info["vllm_config"]
        return None

    @property
    def vllm_env(self) -> Dict[str, Any]:
        info = self.server_info or {}
        env = info.get("vllm_env")
        return env if isinstance(env, dict) else {}

    @property
    def dev_mode(self) -> Optional[bool]:
        """True: /server_info answered; False: 404 (route not registered); None: unknown."""
        response = self.get(ROUTE_SERVER_INFO)
        if response is None or response.transport_failed:
            return None
        if response.status == 200:
            return True if self.server_info is not None else None  # a 200 that is not JSON proves nothing
        if response.status == 404:
            return False
        return None

    def section(self, name: str) -> Optional[Dict[str, Any]]:
        config = self.vllm_config
        if config is None:
            return None
        value = config.get(name)
        return value if isinstance(value, dict) else None

    @property
    def reachable(self) -> bool:
        return any(r.status is not None for r in self.responses.values())


# --------------------------------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------------------------------


class Redactor:
    """Removes the auth token from any text before it leaves the process (defence in depth)."""

    def __init__(self, secret: Optional[str]):
        self._secret = secret if secret and len(secret) >= 4 else None

    def __call__(self, text: str) -> str:
        if self._secret and self._secret in text:
            return text.replace(self._secret, "<redacted>")
        return text


# --------------------------------------------------------------------------------------------------------------------
# Fetchers
# --------------------------------------------------------------------------------------------------------------------


class RedirectRefused(Exception):
    """A redirect to another scheme, host or port; never followed."""

    def __init__(self, code: int, target: str):
        super().__init__(f"HTTP {code} redirect to {target} refused (another host)")
        self.code = code
        self.target = target


def origin(url: str) -> Tuple[str, str, int]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return scheme, (parts.hostname or "").lower(), port


def display_origin(url: str) -> str:
    """scheme://host:port only: a redirect target's path or query may carry secrets."""
    try:
        scheme, host, port = origin(url)
    except ValueError:
        return "<unparsable URL>"
    return f"{scheme}://{host}:{port}"


class SameOriginRedirectHandler(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the same scheme, host and port, so the auth header never reaches another host."""

    max_redirections = MAX_SAME_ORIGIN_REDIRECTS

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if origin(newurl) != origin(req.full_url):
            fp.close()
            raise RedirectRefused(code, display_origin(newurl))
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def build_opener() -> urllib.request.OpenerDirector:
    """urllib opener: env proxies honoured as urllib does, same-origin redirects only, verified TLS."""
    return urllib.request.build_opener(
        SameOriginRedirectHandler(),
        urllib.request.HTTPSHandler(context=ssl.create_default_context()),
    )


def proxy_for(url: str) -> Optional[str]:
    """The proxy urllib will use for ``url`` (from HTTP_PROXY/HTTPS_PROXY, minus NO_PROXY), as scheme://host:port."""
    try:
        parts = urllib.parse.urlsplit(url)
        proxy = urllib.request.getproxies().get(parts.scheme.lower())
        if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
            return None
        return display_origin(proxy if "://" in proxy else f"http://{proxy}")
    except Exception:
        return None


def classify_error(exc: BaseException) -> Tuple[str, str]:
    """(kind, detail) for a failed request: refused, dns, timeout, tls, redirect, connection, protocol."""
    if isinstance(exc, RedirectRefused):
        return "redirect", str(exc)
    reason: Any = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, RedirectRefused):
        return "redirect", str(reason)
    if isinstance(reason, socket.timeout) or (isinstance(reason, str) and "timed out" in reason):
        return "timeout", "no answer within the per-request timeout"
    if isinstance(reason, (ssl.SSLError, ssl.CertificateError)):
        return "tls", str(reason)
    if isinstance(reason, socket.gaierror):
        return "dns", f"host name did not resolve ({reason})"
    if isinstance(reason, ConnectionRefusedError):
        return "refused", "connection refused: nothing listens on that host and port"
    if isinstance(reason, http.client.HTTPException):
        return "protocol", f"not an HTTP response ({type(reason).__name__}: {reason})"
    if isinstance(reason, OSError):
        return "connection", f"{type(reason).__name__}: {reason}"
    return "connection", f"{type(reason).__name__}: {reason}"


def fetch(
    opener: urllib.request.OpenerDirector,
    base_url: str,
    route: str,
    headers: Dict[str, str],
    timeout_s: float,
    deadline: float,
) -> Response:
    """GET base_url + route with a per-request timeout, never reading past the total deadline."""
    result = Response(path=route)
    started = time.monotonic()
    remaining = deadline - started
    if remaining <= 0:
        result.error_kind, result.error_detail = "deadline", "total deadline reached before this request"
        return result
    request = urllib.request.Request(base_url + route, method="GET")
    for name, value in headers.items():
        request.add_header(name, value)
    response: Any = None
    try:
        try:
            response = opener.open(request, timeout=min(timeout_s, remaining))
        except urllib.error.HTTPError as error:  # a status >= 400 is an answer, not a failure to connect
            response = error
        result.status = int(getattr(response, "code", None) or response.status)
        result.content_type = response.headers.get("Content-Type", "") if response.headers else ""
        if getattr(response, "fp", True) is None:  # an HTTPError without a body
            result.body = b""
            return result
        # read1 returns after one socket read, so a server that drips bytes cannot outlast the deadline check.
        read = getattr(response, "read1", None) or response.read
        chunks: List[bytes] = []
        size = 0
        while True:
            if time.monotonic() >= deadline:
                result.error_kind, result.error_detail = "deadline", "total deadline reached while reading the body"
                return result
            chunk = read(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                result.error_kind = "too-large"
                result.error_detail = f"body larger than {MAX_BODY_BYTES} bytes"
                return result
            chunks.append(chunk)
        result.body = b"".join(chunks)
    except Exception as exc:  # every failure becomes a classified, printable result
        result.error_kind, result.error_detail = classify_error(exc)
    finally:
        result.elapsed_s = round(time.monotonic() - started, 3)
        if response is not None:
            with contextlib.suppress(Exception):
                response.close()
    return result


def probe_server(
    url: str,
    headers: Dict[str, str],
    timeout_s: float,
    deadline: float,
    snapshot: Snapshot,
    lock: threading.Lock,
) -> None:
    """Fill ``snapshot`` route by route; stop at the first transport failure (the rest would fail the same way)."""
    opener = build_opener()
    for route in ROUTES:
        with lock:
            snapshot.unfinished = route
        result = fetch(opener, url, route, headers, timeout_s, deadline)
        with lock:
            snapshot.responses[route] = result
            snapshot.unfinished = None
        if result.transport_failed:
            return


def probe_all(urls: Sequence[str], headers: Dict[str, str], timeout_s: float, deadline_s: float) -> List[Snapshot]:
    """Probe every server in parallel; return within ``deadline_s`` even if DNS or a socket hangs."""
    deadline = time.monotonic() + deadline_s
    snapshots = [Snapshot(url=url) for url in urls]
    locks = [threading.Lock() for _ in urls]
    threads = []
    for snapshot, lock in zip(snapshots, locks):
        thread = threading.Thread(
            target=probe_server,
            args=(snapshot.url, headers, timeout_s, deadline, snapshot, lock),
            name=f"probe {snapshot.url}",
            daemon=True,  # an abandoned probe (hung DNS) must not keep the process alive
        )
        thread.start()
        threads.append(thread)
    frozen = []
    for snapshot, lock, thread in zip(snapshots, locks, threads):
        thread.join(max(0.0, deadline - time.monotonic()))
        with lock:  # copy under the lock: an abandoned probe may still write afterwards
            copy = Snapshot(url=snapshot.url, responses=dict(snapshot.responses), unfinished=snapshot.unfinished)
        if thread.is_alive():
            route = copy.unfinished or next((r for r in ROUTES if r not in copy.responses), ROUTES[-1])
            copy.responses[route] = Response(
                path=route, error_kind="deadline", error_detail=f"no answer before the {deadline_s:g} s deadline"
            )
        frozen.append(copy)
    return frozen


# --------------------------------------------------------------------------------------------------------------------
# Helpers for the rules
# --------------------------------------------------------------------------------------------------------------------


def describe_non_json(body: bytes, content_type: str) -> str:
    text = body[:400].decode("utf-8", errors="replace")
    snippet = re.sub(r"\s+", " ", "".join(ch for ch in text if ch.isprintable() or ch.isspace())).strip()[:60]
    kind = "an HTML page" if ("html" in content_type.lower() or snippet.lstrip().startswith("<")) else "not JSON"
    ct = content_type or "no Content-Type"
    return f"{kind} ({ct}; starts {snippet!r})" if snippet else f"an empty body ({ct})"


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
    match = TRL_POLICY_ADAPTER_RE.match(name)
    return int(match.group(1)) if match else None


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
        elif response.transport_failed:
            proxy = proxy_for(snap.url)
            fixes = {
                "refused": "start the server, or correct the host/port in --vllm-url",
                "dns": "correct the host name in --vllm-url (it must resolve from this machine)",
                "timeout": "check that the server is up and not overloaded, or raise --timeout",
                "deadline": "raise --deadline, or check why the server answers so slowly",
                "tls": "use the scheme the server speaks (http:// or https://); for a private CA set SSL_CERT_FILE",
                "too-large": "point --vllm-url at the vLLM server itself",
                "protocol": "point --vllm-url at the vLLM HTTP port",
                "connection": "check the network path to the server",
            }
            findings.append(
                Finding(
                    "error",
                    "unreachable",
                    f"{where}: {response.error_kind}: {response.error_detail}"
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
                    "server (a wrong port, or a proxy path prefix missing from --vllm-url).",
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
            elif route == ROUTE_SERVER_INFO and not isinstance((data or {}).get("vllm_config"), dict):
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

    max_rank = lora.get("max_lora_rank")
    if isinstance(max_rank, int) and max_rank < rank:
        target = round_lora_rank(rank)
        if target is None:
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
            return Outcome("startup-error", says, SRC_ROUND_RANK), findings
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
        return Outcome("startup-error", says, SRC_SELECT_RANK), findings

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
        return Outcome("startup-error", says, SRC_SELECT_LORAS), findings

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


# --------------------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------------------


def verdict_of(findings: Sequence[Finding]) -> str:
    if any(f.severity == "error" for f in findings):
        return "fail"
    if any(f.severity == "warning" for f in findings):
        return "warn"
    return "ok"


def build_report(
    snaps: Sequence[Snapshot], intent: Intent, trl_range: Dict[str, Any], local_vllm: Optional[str]
) -> Dict[str, Any]:
    """Judge every server, then all of them together; return the JSON-ready report."""
    servers = []
    outcomes: List[Outcome] = []
    all_findings: List[Finding] = []
    for snap in snaps:
        outcome, findings = judge_server(snap, intent, trl_range, local_vllm)
        outcomes.append(outcome)
        all_findings += findings
        parallel = snap.section("parallel_config") or {}
        lora = (snap.vllm_config or {}).get("lora_config")
        transfer = (snap.vllm_config or {}).get("weight_transfer_config")
        version = snap.version
        servers.append(
            {
                "url": snap.url,
                "verdict": verdict_of(findings),
                "reachable": snap.reachable,
                "proxy": proxy_for(snap.url),
                "requests": [
                    {
                        "method": "GET",
                        "path": r.path,
                        "status": r.status,
                        "error": r.error_kind,
                        "detail": r.error_detail or None,
                        "elapsed_s": r.elapsed_s,
                    }
                    for r in (snap.responses[route] for route in ROUTES if route in snap.responses)
                ],
                "vllm_version": version,
                "vllm_version_in_trl_range": (
                    specifier_contains(trl_range["vllm_spec"], base_version(version) or version) if version else None
                ),
                "dev_mode": snap.dev_mode,
                "served_models": snap.base_models if snap.model_cards is not None else None,
                "adapters": snap.adapters if snap.model_cards is not None else None,
                "max_model_len": snap.max_model_len,
                "logprobs_mode": (snap.section("model_config") or {}).get("logprobs_mode"),
                "dtype": (snap.section("model_config") or {}).get("dtype"),
                "weight_transfer_config": transfer if snap.vllm_config is not None else None,
                "lora_config": (
                    {k: lora.get(k) for k in ("max_lora_rank", "max_loras", "max_cpu_loras")}
                    if isinstance(lora, dict)
                    else None
                ),
                "lora_enabled": (lora is not None) if snap.vllm_config is not None else None,
                "parallel": {
                    k: parallel.get(k)
                    for k in (
                        "tensor_parallel_size",
                        "pipeline_parallel_size",
                        "data_parallel_size",
                        "data_parallel_size_local",
                        "data_parallel_external_lb",
                        "data_parallel_hybrid_lb",
                    )
                }
                if parallel
                else None,
                "runtime_lora_updating": snap.vllm_env.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING"),
                "trl_outcome": outcome.as_dict(),
            }
        )
    all_findings += check_replicas(snaps, outcomes, intent)
    all_findings += global_notes(snaps, intent, outcomes)
    for server in servers:
        server["verdict"] = verdict_of([f for f in all_findings if f.server == server["url"]])
    order = {snap.url: index for index, snap in enumerate(snaps)}
    all_findings.sort(key=lambda f: (order.get(f.server or "", len(order)), SEVERITY_ORDER[f.severity]))
    modes = {o.mode for o in outcomes}
    fixes: List[Dict[str, Any]] = []
    for finding in all_findings:
        if finding.fix and finding.severity != "info":
            entry = {"fix": finding.fix, "servers": [finding.server] if finding.server else [], "ids": [finding.id]}
            existing = next((e for e in fixes if e["fix"] == finding.fix), None)
            if existing is None:
                fixes.append(entry)
            else:
                if finding.server and finding.server not in existing["servers"]:
                    existing["servers"].append(finding.server)
                if finding.id not in existing["ids"]:
                    existing["ids"].append(finding.id)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": TOOL,
        "verdict": verdict_of(all_findings),
        "intent": {
            "trainer": intent.trainer,
            "lora_rank": intent.lora_rank,
            "full_finetuning": intent.lora_rank is None,
            "max_staleness": intent.max_staleness,
            "min_max_loras": intent.max_staleness + 2 if intent.lora_rank is not None else None,
            "max_length": intent.max_length,
            "model": intent.model,
            "adapters": list(intent.adapters),
            "importance_sampling_correction": intent.importance_sampling_correction,
            "auth_env": intent.auth_env,
        },
        "trl": trl_range,
        "trainer_side_vllm": local_vllm,
        "trl_outcome": modes.pop() if len(modes) == 1 else "inconsistent",
        "servers": servers,
        "findings": [f.as_dict() for f in all_findings],
        "fixes": fixes,
        "counts": {sev: sum(1 for f in all_findings if f.severity == sev) for sev in ("error", "warning", "info")},
    }


def render_text(report: Dict[str, Any]) -> str:
    intent = report["intent"]
    rank = "full fine-tuning" if intent["full_finetuning"] else f"LoRA r={intent['lora_rank']}"
    what = f"{intent['trainer']}, {rank}"
    if intent["trainer"] == "async-grpo" and not intent["full_finetuning"]:
        what += f", max_staleness {intent['max_staleness']}"
    if intent["max_length"]:
        what += f", max length {intent['max_length']}"
    lines = [f"vLLM server pre-flight: {report['verdict'].upper()}  ({what})"]
    trl = report["trl"]
    lines.append(f"TRL vLLM range: {trl['vllm_spec']}  [{trl['source']}]")
    by_server: Dict[Optional[str], List[Dict[str, Any]]] = {}
    for finding in report["findings"]:
        by_server.setdefault(finding["server"], []).append(finding)
    for index, server in enumerate(report["servers"], 1):
        lines.append("")
        if server["reachable"]:
            facts = [f"vLLM {server['vllm_version'] or '?'}"]
            if server["vllm_version_in_trl_range"] is False:
                facts[-1] += " (outside TRL range)"
            if server["served_models"]:
                facts.append(f"model {server['served_models'][0]}")
            if server["max_model_len"] is not None:
                facts.append(f"max_model_len {server['max_model_len']}")
            facts.append({True: "dev mode on", False: "dev mode off", None: "dev mode ?"}[server["dev_mode"]])
            if server["lora_config"]:
                lc = server["lora_config"]
                facts.append(f"LoRA rank<={lc['max_lora_rank']} slots {lc['max_loras']}")
            elif server["lora_enabled"] is False:
                facts.append("LoRA off")
            if server["parallel"] and (server["parallel"].get("data_parallel_size") or 1) > 1:
                facts.append(f"DP {server['parallel']['data_parallel_size']}")
            if server["adapters"]:
                facts.append(
                    f"adapters {', '.join(server['adapters'][:4])}" + (" …" if len(server["adapters"]) > 4 else "")
                )
            lines.append(f"[{index}] {server['url']}  {server['verdict'].upper()}: " + "; ".join(facts))
        else:
            via = f" (via proxy {server['proxy']})" if server["proxy"] else ""
            lines.append(f"[{index}] {server['url']}  {server['verdict'].upper()}: unreachable{via}")
        outcome = server["trl_outcome"]
        if outcome["mode"] != "unknown":
            line = f"    TRL outcome: {outcome['mode']}"
            if outcome["trl_says"]:
                line += f" -- TRL says: {outcome['trl_says']}"
            lines.append(line)
        for finding in by_server.get(server["url"], []):
            lines.extend(_render_finding(finding))
    if None in by_server:
        lines.append("")
        lines.append("Across servers:")
        for finding in by_server[None]:
            lines.extend(_render_finding(finding))
    lines.append("")
    counts = report["counts"]
    lines.append(
        f"Verdict: {report['verdict'].upper()} ({counts['error']} error(s), {counts['warning']} warning(s)); "
        f"TRL outcome: {report['trl_outcome']}"
    )
    if report["fixes"]:
        lines.append("Change on the server(s):")
        for entry in report["fixes"]:
            where = ", ".join(entry["servers"]) if entry["servers"] else "all servers"
            lines.append(f"  {entry['fix']}    ({where}: {', '.join(entry['ids'])})")
    return "\n".join(lines) + "\n"


def _render_finding(finding: Dict[str, Any]) -> List[str]:
    out = [f"    {finding['severity'].upper():7} {finding['id']}: {finding['message']}"]
    if finding["fix"]:
        out.append(f"            fix: {finding['fix']}")
    out.append(f"            source: {finding['source']}")
    return out


# --------------------------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------------------------

EPILOG = f"""\
what it reads (GET only, nothing else, ever):
  /health  /version  /v1/models  /server_info?config_format=json
  /server_info exists only when the server runs with VLLM_SERVER_DEV_MODE=1; a 404 there means dev mode is off.
  It never sends POST, never loads, unloads, pauses or resumes anything, and never starts a server.

what it checks, per server and across servers:
  reachability (refused, dns, timeout, tls, redirect, 401/403, 404, non-JSON), vLLM version against the range the
  installed TRL declares (TRL {TRL_FALLBACK_VERSION}'s >=0.22.0,<=0.31.0 when TRL is not installed), served model,
  max_model_len against --max-length, weight_transfer_config where the sync path uses NCCL, logprobs_mode,
  LoRA (lora_config, max_lora_rank against the adapter rank, max_loras against max_staleness + 2,
  data_parallel_size, VLLM_ALLOW_RUNTIME_LORA_UPDATING), and across replicas: base model, vLLM version,
  LoRA limits, max_model_len, logprobs_mode and loaded adapter names.
  It predicts TRL 1.16's start-up outcome per server (trl_outcome): adapter-only, merged-fallback (TRL warns),
  full-weights (GRPO, or AsyncGRPO full fine-tuning), startup-error (TRL raises), or unknown.

verdict and exit codes:
  verdict ok: no error and no warning; warn: warnings only; fail: at least one error (unreachable counts).
  0  report produced (without --require, whatever the verdict)
  1  --require given and the verdict is not ok (any error or warning; info lines never count)
  2  usage error or unusable input (bad URL, unset --auth-env variable, bad number)

JSON (--json), schema_version 1:
  verdict, trl_outcome (one mode, or 'inconsistent' across servers), intent, trl (vllm_spec and its source),
  trainer_side_vllm, servers[] (url, verdict, reachable, proxy, requests[] with status/error per GET, vllm_version,
  vllm_version_in_trl_range, dev_mode, served_models, adapters, max_model_len, logprobs_mode, dtype,
  weight_transfer_config, lora_config, parallel, runtime_lora_updating, trl_outcome (mode, trl_says, source)),
  findings[] (severity error|warning|info, id, server or null for cross-server, message, fix, source),
  fixes[] (each distinct fix with the servers and finding ids it resolves), counts.

network behaviour:
  --timeout bounds each request's connect and each read; --deadline bounds the whole run (servers are probed in
  parallel; a server still unanswered then is reported with error kind 'deadline').
  HTTP(S)_PROXY / NO_PROXY are honoured as Python's urllib honours them (as TRL's requests client does).
  Redirects are followed only to the same scheme, host and port; a redirect elsewhere is refused and reported.
  TLS certificates are verified (set SSL_CERT_FILE for a private CA); there is no switch to turn that off.
  The token named by --auth-env is sent as 'Authorization: Bearer <token>' to the given hosts only (an HTTP proxy
  on a plain http:// URL relays it, as with any client; servers[].proxy shows the proxy used) and is never
  printed, logged or written to the JSON.

examples:
  # two AsyncGRPO replicas behind a proxy, LoRA rank 16, prompt + completion up to 4096 tokens
  python3 scripts/check_vllm_server.py --vllm-url http://replica-a:8000 --vllm-url http://replica-b:8000 \\
      --trainer async-grpo --lora-rank 16 --max-staleness 4 --max-length 4096
  # GRPO server mode, full fine-tuning, as a CI gate with JSON output
  python3 scripts/check_vllm_server.py --vllm-url http://localhost:8000 --trainer grpo --max-length 2560 \\
      --json --require
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="check_vllm_server.py",
        description=(
            "Read-only pre-flight of running vLLM servers before a TRL GRPO (server mode) or AsyncGRPO run: "
            "says in seconds whether TRL 1.16 will sync adapter-only, fall back to merged weights, or fail at "
            "start-up, and which server flag or env var to change."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--vllm-url",
        action="append",
        required=True,
        metavar="URL",
        help="base URL of a vLLM server (http:// or https://, optional path prefix); repeat for each replica",
    )
    parser.add_argument(
        "--trainer",
        choices=("async-grpo", "grpo"),
        default="async-grpo",
        help="async-grpo: AsyncGRPOTrainer; grpo: GRPOTrainer with vllm_mode='server' (default: %(default)s)",
    )
    parser.add_argument(
        "--lora-rank",
        default="full",
        metavar="R|full",
        help="LoRA rank r of the adapter you train (the highest, rank_pattern included), or 'full' for full "
        "fine-tuning (default: %(default)s)",
    )
    parser.add_argument(
        "--max-staleness",
        type=int,
        default=ASYNC_GRPO_DEFAULT_MAX_STALENESS,
        metavar="N",
        help="AsyncGRPOConfig.max_staleness; the server needs --max-loras >= N + 2 (default: %(default)s, "
        "AsyncGRPOConfig's default)",
    )
    parser.add_argument(
        "--max-length",
        type=int,
        metavar="TOKENS",
        help="longest prompt + completion in tokens (e.g. max prompt length + max_completion_length); "
        "checked against max_model_len",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="the model the trainer loads (its name or path as given to the trainer); must be served under that name",
    )
    parser.add_argument(
        "--adapter",
        action="append",
        default=[],
        metavar="NAME",
        help="an adapter that must be loaded on every server (e.g. trl-policy-v12); repeatable. Without it, "
        "adapter names are compared across servers",
    )
    parser.add_argument(
        "--no-importance-sampling-correction",
        dest="importance_sampling_correction",
        action="store_false",
        help="GRPO only: you set vllm_importance_sampling_correction=False, so logprobs_mode is informational",
    )
    parser.add_argument(
        "--auth-env",
        metavar="VAR",
        help="name of an environment variable holding a bearer token for the servers (the value is never printed)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="per-request connect/read timeout (default: %(default)s)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=DEFAULT_DEADLINE_S,
        metavar="SECONDS",
        help="bound on the whole run, all servers together (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of text")
    parser.add_argument(
        "--require",
        action="store_true",
        help="exit 1 unless the verdict is ok (no error and no warning), for CI and scripted gates",
    )
    return parser


class UsageError(Exception):
    pass


def normalize_url(raw: str) -> str:
    """Validate a base URL; return it without a trailing slash. Never echoes credentials."""
    try:
        parts = urllib.parse.urlsplit(raw.strip())
        port = parts.port
    except ValueError:
        raise UsageError("a --vllm-url is not a valid URL (check the port)") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise UsageError("--vllm-url must start with http:// or https://")
    if not parts.hostname:
        raise UsageError("--vllm-url has no host")
    if parts.username is not None or parts.password is not None:
        raise UsageError("--vllm-url must not carry credentials; put the token in an env var and pass --auth-env")
    if parts.query or parts.fragment:
        raise UsageError("--vllm-url must be a base URL without ?query or #fragment")
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port else host
    return urllib.parse.urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def parse_intent(args: argparse.Namespace) -> Intent:
    raw_rank = str(args.lora_rank).strip().lower()
    if raw_rank == "full":
        rank: Optional[int] = None
    else:
        try:
            rank = int(raw_rank)
        except ValueError:
            raise UsageError("--lora-rank must be a positive integer or 'full'") from None
        if rank < 1:
            raise UsageError("--lora-rank must be a positive integer or 'full'")
    if args.max_staleness < 0:
        raise UsageError("--max-staleness must be >= 0")
    if args.max_length is not None and args.max_length < 1:
        raise UsageError("--max-length must be a positive number of tokens")
    if not args.timeout > 0 or not args.deadline > 0:
        raise UsageError("--timeout and --deadline must be positive")
    if args.auth_env is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", args.auth_env):
        raise UsageError("--auth-env takes the NAME of an environment variable, not its value")
    return Intent(
        trainer=args.trainer,
        lora_rank=rank,
        max_staleness=args.max_staleness,
        max_length=args.max_length,
        model=args.model,
        adapters=tuple(dict.fromkeys(args.adapter)),
        importance_sampling_correction=args.importance_sampling_correction,
        auth_env=args.auth_env,
    )


def read_token(name: Optional[str]) -> Optional[str]:
    if name is None:
        return None
    value = os.environ.get(name, "")
    if not value.strip():
        raise UsageError(f"--auth-env {name}: that environment variable is not set or empty")
    token = value.strip()
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in token):
        raise UsageError(f"--auth-env {name}: the token contains control characters")
    return token


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    redact = Redactor(None)
    try:
        intent = parse_intent(args)
        urls = list(dict.fromkeys(normalize_url(u) for u in args.vllm_url))
        token = read_token(intent.auth_env)
        redact = Redactor(token)
        headers = {"Accept": "application/json", "User-Agent": f"{TOOL}/{SCHEMA_VERSION} (read-only pre-flight)"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        timeout = min(args.timeout, args.deadline)
        snaps = probe_all(urls, headers, timeout, args.deadline)
        headers.clear()
        report = build_report(snaps, intent, trl_vllm_range(), local_vllm_version())
        output = json.dumps(report, indent=2) + "\n" if args.json else render_text(report)
    except UsageError as error:
        sys.stderr.write(redact(f"{parser.prog}: error: {error}\n"))
        return 2
    except Exception as error:  # never a traceback; never the token
        sys.stderr.write(redact(f"{parser.prog}: internal error: {type(error).__name__}: {error}\n"))
        return 2
    sys.stdout.write(redact(output))
    sys.stdout.flush()
    if args.require and report["verdict"] != "ok":
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
