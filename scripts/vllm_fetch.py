"""Fetchers of the vLLM pre-flight: GET only, same-origin redirects, verified TLS, bodies capped and read through
the shared ``safe_read.http_get``, every server probed in parallel within one total deadline."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional, Sequence, Tuple

from vllm_data import MAX_BODY_BYTES, MAX_SAME_ORIGIN_REDIRECTS, ROUTES, Response, Snapshot

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
