"""Input stage of the vLLM pre-flight: the flags' values, checked, as one typed ``Request``.

The entry script parses the command line; ``load_request`` turns the values into a ``Request`` (base URLs
normalised, the training intent checked, the bearer token read from the variable ``--auth-env`` names and registered
with the output scrubber) or raises ``UsageError``. Nothing below this stage sees the command line.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence, Tuple

from common.output import SCRUBBER
from common.values import InvalidValue, integer

from preflight.data import Intent


@dataclass(frozen=True)
class Request:
    """What the pre-flight was asked to check, and how."""

    urls: Tuple[str, ...]  # normalised base URLs, without repeats
    intent: Intent
    timeout: float  # each request's connect and read
    deadline: float  # the whole run
    json: bool = False
    require: bool = False
    token: Optional[str] = field(default=None, repr=False)  # the bearer token; never shown


class UsageError(Exception):
    """A flag value the pre-flight cannot use; the message follows ``error: `` (exit 2) and never echoes a secret."""


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
    if not raw.strip().isascii():
        raise UsageError(
            "--vllm-url: URL not encodable: it holds non-ASCII characters; percent-encode the path and give the "
            "host's ASCII (IDNA) name"
        )
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port else host
    return urllib.parse.urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def parse_intent(
    *,
    trainer: str,
    lora_rank: str,
    max_staleness: int,
    max_length: Optional[int],
    model: Optional[str],
    adapters: Sequence[str],
    importance_sampling_correction: bool,
    auth_env: Optional[str],
) -> Intent:
    """What the user intends to train, from the flags' values; UsageError for a value out of range."""
    raw_rank = str(lora_rank).strip().lower()
    if raw_rank == "full":
        rank: Optional[int] = None
    else:
        try:
            rank = integer(raw_rank, "--lora-rank", 1, 1_000_000)
        except InvalidValue:
            raise UsageError("--lora-rank must be a whole number from 1 to 1000000, or 'full'") from None
    if max_staleness < 0:
        raise UsageError("--max-staleness must be >= 0")
    if max_length is not None and max_length < 1:
        raise UsageError("--max-length must be a positive number of tokens")
    if auth_env is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", auth_env):
        raise UsageError("--auth-env takes the NAME of an environment variable, not its value")
    return Intent(
        trainer=trainer,
        lora_rank=rank,
        max_staleness=max_staleness,
        max_length=max_length,
        model=model,
        adapters=tuple(dict.fromkeys(adapters)),
        importance_sampling_correction=importance_sampling_correction,
        auth_env=auth_env,
    )


_ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")


def auth_env_label(name: str) -> str:
    """How a message names the --auth-env argument: the name itself only when it reads as an env var name (a pasted
    token is never echoed)."""
    return f"--auth-env {name}" if _ENV_NAME_RE.match(name) else "the variable named by --auth-env"


def read_token(name: Optional[str], environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The bearer token from the environment variable ``name``; UsageError (never echoing the value) otherwise."""
    if name is None:
        return None
    value = (os.environ if environ is None else environ).get(name, "")
    if not value.strip():
        raise UsageError(f"{auth_env_label(name)}: that environment variable is not set or empty")
    token = value.strip()
    SCRUBBER.add(token)
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in token):
        raise UsageError(f"{auth_env_label(name)}: the token contains control characters")
    if not token.isascii():  # an HTTP header carries Latin-1 at most; bearer tokens are ASCII (RFC 6750 b64token)
        raise UsageError(f"{auth_env_label(name)}: the token contains characters outside printable ASCII")
    return token


def load_request(
    *,
    vllm_urls: Sequence[str],
    trainer: str,
    lora_rank: str,
    max_staleness: int,
    max_length: Optional[int],
    model: Optional[str],
    adapters: Sequence[str],
    importance_sampling_correction: bool,
    auth_env: Optional[str],
    timeout: float,
    deadline: float,
    json: bool = False,
    require: bool = False,
    environ: Optional[Mapping[str, str]] = None,
) -> Request:
    """The checked request; UsageError names the first unusable value (intent, then URLs, then the token)."""
    if auth_env is not None and not _ENV_NAME_RE.match(auth_env):
        SCRUBBER.add(auth_env)  # a value pasted where a name belongs is never printed
    intent = parse_intent(
        trainer=trainer,
        lora_rank=lora_rank,
        max_staleness=max_staleness,
        max_length=max_length,
        model=model,
        adapters=adapters,
        importance_sampling_correction=importance_sampling_correction,
        auth_env=auth_env,
    )
    if not timeout > 0 or not deadline > 0:
        raise UsageError("--timeout and --deadline must be positive")
    urls = tuple(dict.fromkeys(normalize_url(u) for u in vllm_urls))
    token = read_token(intent.auth_env, environ)
    return Request(urls, intent, timeout, deadline, json, require, token)
