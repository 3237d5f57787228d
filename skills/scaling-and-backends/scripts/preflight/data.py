"""Data of the vLLM pre-flight: the routes it reads, upstream citations, what the user intends (Intent),
what a server published (Response, Snapshot) and what the rules conclude (Finding, Outcome)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from common.output import clip
from common.values import InvalidValue, NotJson, load_json, short

SCHEMA_VERSION = 1
TOOL = "check_vllm_server"

# The only requests this script ever makes: GET, in this order.
ROUTE_HEALTH = "/health"
ROUTE_VERSION = "/version"
ROUTE_MODELS = "/v1/models"
ROUTE_SERVER_INFO = "/server_info?config_format=json"
ROUTES = (ROUTE_HEALTH, ROUTE_VERSION, ROUTE_MODELS, ROUTE_SERVER_INFO)

# A transport failure (an error kind of preflight/fetch.py) as the report names it: its finding id and the server's
# headline. Only refused, dns, timeout, deadline, tls and other connection errors mean nothing answered there.
RESET_DETAIL = "connection reset by the server (it accepted the connection, then closed it)"
FAILURE_IDS = {
    "too-large": "body-too-long",
    "url-not-encodable": "url-not-encodable",
    "reset": "connection-reset",
    "protocol": "not-http",
}
FAILURE_HEADLINES = {
    "too-large": "body too long",
    "url-not-encodable": "URL not encodable",
    "reset": "connection reset by the server",
    "protocol": "something answered, but not in HTTP",
}

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
SRC_RECORDED = "scripts/stack/matrix.json (the registry's release list on its fetch date; tools/stack_matrix.py)"
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
    _parsed: Optional[Tuple[Optional[Any], Optional[str]]] = field(default=None, repr=False, compare=False)

    @property
    def transport_failed(self) -> bool:
        return self.error_kind is not None

    def json(self) -> Tuple[Optional[Any], Optional[str]]:
        """(parsed JSON, None) or (None, why not). Strict and bounded (common.values.load_json); parsed once."""
        if self._parsed is None:
            self._parsed = self._parse()
        return self._parsed

    def _parse(self) -> Tuple[Optional[Any], Optional[str]]:
        if self.body is None:
            return None, "no body"
        try:
            return load_json(self.body, "the body", max_bytes=MAX_BODY_BYTES), None
        except NotJson:
            return None, describe_non_json(self.body, self.content_type)
        except InvalidValue as error:
            return None, "JSON that " + str(error).split("the body ", 1)[-1]

    def shape_problem(self) -> Optional[str]:
        """Why this 200 answer cannot be vLLM's (a field of the wrong type or out of range), or None."""
        data, why = self.json()
        if why is not None or self.status != 200:
            return None
        return answer_shape_problem(self.path, data)


@dataclass
class Snapshot:
    """Everything one server published, parsed just enough for the rules."""

    url: str
    responses: Dict[str, Response] = field(default_factory=dict)
    unfinished: Optional[str] = None  # the route still in flight when the deadline struck
    done: bool = False  # the probe of this server ended (answered or failed) before the deadline

    def get(self, route: str) -> Optional[Response]:
        return self.responses.get(route)

    def ok_json(self, route: str) -> Optional[Any]:
        response = self.get(route)
        if response is None or response.transport_failed or response.status != 200:
            return None
        data, _ = response.json()
        if response.shape_problem() is not None:
            return None  # reported once as a finding; the rules see the route as unanswered
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


def describe_non_json(body: bytes, content_type: str) -> str:
    """What a non-JSON body is, with its first characters (scrubbed before they are cut, escaped)."""
    text = re.sub(r"\s+", " ", body[:400].decode("utf-8", errors="replace")).strip()
    snippet = clip(text, 60)
    kind = "an HTML page" if ("html" in content_type.lower() or text.startswith("<")) else "not JSON"
    ct = clip(content_type, 80) or "no Content-Type"
    return f"{kind} ({ct}; starts '{snippet}')" if snippet else f"an empty body ({ct})"


# --------------------------------------------------------------------------------------------------------------------
# Shapes: what the fields the rules read must look like in an answer from vLLM
# --------------------------------------------------------------------------------------------------------------------

_VERSION_RE = re.compile(r"^[0-9A-Za-z.+!_-]{1,64}$")
_BIG = 2**40
# (section, field) -> allowed type(s) and, for ints, the range. None is always allowed.
_INT = ("int", 0, _BIG)
_STR = ("str", 256)
_FLAG = ("bool",)
_SECTION_FIELDS: Dict[str, Dict[str, Tuple[Any, ...]]] = {
    "model_config": {"max_model_len": _INT, "logprobs_mode": _STR, "dtype": _STR, "model": ("str", 4096)},
    "parallel_config": {
        "tensor_parallel_size": _INT,
        "pipeline_parallel_size": _INT,
        "data_parallel_size": _INT,
        "data_parallel_size_local": _INT,
        "data_parallel_external_lb": _FLAG,
        "data_parallel_hybrid_lb": _FLAG,
    },
    "lora_config": {"max_lora_rank": _INT, "max_loras": _INT, "max_cpu_loras": _INT},
    "weight_transfer_config": {"backend": _STR},
}


def _field_problem(where: str, value: Any, rule: Tuple[Any, ...]) -> Optional[str]:
    if value is None:
        return None
    kind = rule[0]
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{where} is {type(value).__name__}, not an integer"
        if not rule[1] <= value <= rule[2]:
            return f"{where} is out of range ({short(value)})"
    elif kind == "str":
        if not isinstance(value, str):
            return f"{where} is {type(value).__name__}, not a string"
        if len(value) > rule[1]:
            return f"{where} is a string of {len(value):,} characters"
    elif kind == "bool" and not isinstance(value, bool):
        return f"{where} is {type(value).__name__}, not true/false"
    return None


def answer_shape_problem(route: str, data: Any) -> Optional[str]:
    """The first field (of those the rules read) whose type or range vLLM would never send, or None."""
    if not isinstance(data, dict):
        return f"the answer is a JSON {type(data).__name__}, not an object"
    if route == ROUTE_VERSION:
        version = data.get("version")
        if version is not None and (not isinstance(version, str) or not _VERSION_RE.match(version)):
            return f"`version` is not a version string ({short(version)})"
    elif route == ROUTE_MODELS:
        cards = data.get("data")
        if cards is None:
            return None
        if not isinstance(cards, list):
            return f"`data` is {type(cards).__name__}, not a list"
        if len(cards) > 100_000:
            return f"`data` lists {len(cards):,} models"
        for index, card in enumerate(cards):
            if not isinstance(card, dict):
                return f"`data[{index}]` is {type(card).__name__}, not an object"
            for name, rule in (("id", ("str", 4096)), ("parent", ("str", 4096)), ("max_model_len", _INT)):
                problem = _field_problem(f"`data[{index}].{name}`", card.get(name), rule)
                if problem:
                    return problem
            if not isinstance(card.get("id"), str):
                return f"`data[{index}].id` is missing"
    elif route == ROUTE_SERVER_INFO:
        config = data.get("vllm_config")
        if isinstance(config, dict):
            for section, fields in _SECTION_FIELDS.items():
                value = config.get(section)
                if value is None:
                    continue
                if not isinstance(value, dict):
                    return f"`vllm_config.{section}` is {type(value).__name__}, not an object"
                for name, rule in fields.items():
                    problem = _field_problem(f"`vllm_config.{section}.{name}`", value.get(name), rule)
                    if problem:
                        return problem
        env = data.get("vllm_env")
        if env is not None and not isinstance(env, dict):
            return f"`vllm_env` is {type(env).__name__}, not an object"
        flag = (env or {}).get("VLLM_ALLOW_RUNTIME_LORA_UPDATING")
        if flag is not None and not isinstance(flag, (str, bool, int)):
            return f"`vllm_env.VLLM_ALLOW_RUNTIME_LORA_UPDATING` is {type(flag).__name__}"
    return None
