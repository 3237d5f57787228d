"""One bounded HTTP GET for the bundle's scripts (the reading discipline of :mod:`common.read`, for a server).

:func:`http_get` sends one GET with a byte cap on the body, a per-read timeout that never passes the total
deadline, and no decompression (``Accept-Encoding: identity``; an encoded body is reported, never inflated). Only
the commands that talk to a server import this module (the default diagnostic never does).

Standard library only.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, List, Mapping, Optional

__all__ = ["HttpResult", "http_get"]

_CHUNK = 65536


class HttpResult:
    """One GET. ``error_kind`` is None for an answer (any status), else one of: deadline, too-large (body over the
    cap), encoded (a compressed body, never inflated), redirect-loop (urllib gave up following redirects), or
    exception (``exception`` holds it, for the caller to classify). Filled in as the request goes."""

    __slots__ = (
        "body",
        "content_encoding",
        "content_type",
        "elapsed_s",
        "error_detail",
        "error_kind",
        "exception",
        "status",
    )

    def __init__(self) -> None:
        self.status: Optional[int] = None
        self.content_type = ""
        self.content_encoding = ""
        self.body: Optional[bytes] = None
        self.error_kind: Optional[str] = None
        self.error_detail = ""
        self.exception: Optional[BaseException] = None
        self.elapsed_s = 0.0


def _socket_of(response: Any) -> Any:
    """The socket under an ``http.client.HTTPResponse`` (or an ``HTTPError`` wrapping one), if reachable."""
    for path in (("fp", "raw", "_sock"), ("fp", "fp", "raw", "_sock"), ("fp", "fp", "fp", "raw", "_sock")):
        node = response
        for name in path:
            node = getattr(node, name, None)
            if node is None:
                break
        if node is not None and hasattr(node, "settimeout"):
            return node
    return None


def _is_timeout(exc: BaseException) -> bool:
    import socket

    reason = getattr(exc, "reason", exc)
    return isinstance(reason, (socket.timeout, TimeoutError)) or "timed out" in str(reason)


def http_get(
    opener: Any,
    url: str,
    headers: Mapping[str, str],
    timeout_s: float,
    deadline: float,
    limit: int,
) -> HttpResult:
    """GET ``url`` through ``opener`` (a ``urllib.request.OpenerDirector``): every socket wait is bounded by
    ``timeout_s`` and by the monotonic ``deadline``; at most ``limit`` body bytes are read; nothing is decoded."""
    import urllib.error
    import urllib.request

    result = HttpResult()
    started = time.monotonic()
    remaining = deadline - started
    if remaining <= 0:
        result.error_kind, result.error_detail = "deadline", "total deadline reached before this request"
        return result
    request = urllib.request.Request(url, method="GET")
    for name, value in headers.items():
        request.add_header(name, value)
    request.add_header("Accept-encoding", "identity")
    response: Any = None
    try:
        try:
            response = opener.open(request, timeout=max(0.001, min(timeout_s, remaining)))
        except urllib.error.HTTPError as error:  # a status >= 400 is an answer, not a failure to connect
            response = error
            if 300 <= error.code < 400:
                result.status = error.code
                result.error_kind = "redirect-loop"
                result.error_detail = f"HTTP {error.code}: redirects did not end (a loop, or more than urllib follows)"
                return result
        result.status = int(getattr(response, "code", None) or response.status)
        header_map = response.headers
        result.content_type = str(header_map.get("Content-Type", "") if header_map else "")[:200]
        result.content_encoding = str(header_map.get("Content-Encoding", "") if header_map else "")[:100].strip()
        if getattr(response, "fp", True) is None:  # an HTTPError without a body
            result.body = b""
            return result
        sock = _socket_of(response)
        # read1 returns after one socket read, so a server that drips bytes cannot outlast the deadline check.
        read = getattr(response, "read1", None) or response.read
        chunks: List[bytes] = []
        size = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                result.error_kind, result.error_detail = "deadline", "total deadline reached while reading the body"
                return result
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.settimeout(max(0.001, min(timeout_s, remaining)))
            chunk = read(_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                result.error_kind, result.error_detail = "too-large", f"body larger than {limit:,} bytes"
                return result
            chunks.append(chunk)
        result.body = b"".join(chunks)
        if result.content_encoding.lower() not in ("", "identity"):
            result.error_kind = "encoded"
            result.error_detail = "a compressed body (Content-Encoding) that this reader never decompresses"
    except Exception as exc:  # every failure is handed back for the caller to classify
        if time.monotonic() >= deadline - 0.005 and _is_timeout(exc):
            result.error_kind, result.error_detail = "deadline", "total deadline reached while waiting for the server"
        else:
            result.error_kind, result.exception = "exception", exc
    finally:
        result.elapsed_s = round(time.monotonic() - started, 3)
        if response is not None:
            with contextlib.suppress(Exception):
                response.close()
    return result
