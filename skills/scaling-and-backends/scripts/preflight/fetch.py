"""Fetchers of the vLLM pre-flight: GET only, same-origin redirects, verified TLS, bodies capped and read through
the shared ``common.http.http_get``, every server probed in parallel within one total deadline."""

from __future__ import annotations

import collections
import functools
import http.client
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional, Sequence, Tuple

from common.http import http_get
from common.output import clip

from preflight.data import MAX_BODY_BYTES, MAX_SAME_ORIGIN_REDIRECTS, RESET_DETAIL, ROUTES, Response, Snapshot

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


def _proxies() -> Dict[str, str]:
    """urllib's proxies from the environment, computed once per distinct set of *_proxy variables."""
    key = tuple(sorted((k, v) for k, v in os.environ.items() if k.lower().endswith("_proxy")))
    return _proxies_for(key)


@functools.lru_cache(maxsize=4)
def _proxies_for(key: Tuple[Tuple[str, str], ...]) -> Dict[str, str]:
    return dict(urllib.request.getproxies())


def proxy_for(url: str) -> Optional[str]:
    """The proxy urllib will use for ``url`` (from HTTP_PROXY/HTTPS_PROXY, minus NO_PROXY), as scheme://host:port."""
    try:
        parts = urllib.parse.urlsplit(url)
        proxy = _proxies().get(parts.scheme.lower())
        if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
            return None
        return display_origin(proxy if "://" in proxy else f"http://{proxy}")
    except Exception:
        return None


def classify_error(exc: BaseException) -> Tuple[str, str]:
    """(kind, detail) for a failed request: refused, dns, timeout, tls, redirect, connection, protocol.
    The detail is clipped, escaped and scrubbed: an error message can quote what the server sent."""
    kind, detail = _classify(exc)
    return kind, clip(detail, 200)


def _classify(exc: BaseException) -> Tuple[str, str]:
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
    if isinstance(reason, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):  # RemoteDisconnected too
        # However the race between the reset and the request falls (a reset, a broken pipe or an empty status
        # line), it is one outcome: the server took the connection and dropped it without an answer.
        return "reset", RESET_DETAIL
    if isinstance(reason, http.client.BadStatusLine) and not str(getattr(reason, "line", "") or "").strip(" \r\n'\""):
        return "reset", RESET_DETAIL  # an empty status line: the connection closed before any answer
    if isinstance(reason, UnicodeError):
        return "url-not-encodable", "URL not encodable (a character outside ASCII)"
    if isinstance(reason, http.client.HTTPException):
        return "protocol", f"not an HTTP response ({type(reason).__name__}: {reason})"
    return "connection", f"{type(reason).__name__}: {reason}"


def fetch(
    opener: urllib.request.OpenerDirector,
    base_url: str,
    route: str,
    headers: Dict[str, str],
    timeout_s: float,
    deadline: float,
) -> Response:
    """GET base_url + route through the shared bounded reader (body cap, no decompression, total deadline)."""
    got = http_get(opener, base_url + route, headers, timeout_s, deadline, MAX_BODY_BYTES)
    result = Response(path=route, status=got.status, body=got.body, elapsed_s=got.elapsed_s)
    result.content_type = got.content_type
    if got.error_kind == "exception" and got.exception is not None:
        result.status = None
        result.error_kind, result.error_detail = classify_error(got.exception)
    elif got.error_kind is not None:
        result.error_kind, result.error_detail = got.error_kind, got.error_detail
        if got.error_kind != "redirect-loop":
            result.status = None if got.error_kind == "deadline" else result.status
    return result


MAX_WORKERS = 16  # parallel probes; more threads only fight over the GIL (300 threads took 10 s just to start)


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
    try:
        for route in ROUTES:
            with lock:
                snapshot.unfinished = route
            result = fetch(opener, url, route, headers, timeout_s, deadline)
            with lock:
                snapshot.responses[route] = result
                snapshot.unfinished = None
            if result.transport_failed:
                return
    finally:
        with lock:
            snapshot.done = True


def probe_all(
    urls: Sequence[str], headers: Dict[str, str], timeout_s: float, deadline_s: float, workers: int = MAX_WORKERS
) -> List[Snapshot]:
    """Probe every server in parallel (a bounded pool of threads); return within ``deadline_s`` even if DNS or a
    socket hangs. A server not finished by then is reported with error kind 'deadline'."""
    deadline = time.monotonic() + deadline_s
    snapshots = [Snapshot(url=url) for url in urls]
    locks = [threading.Lock() for _ in urls]
    pending = collections.deque(range(len(urls)))
    pending_lock = threading.Lock()

    def worker() -> None:
        while time.monotonic() < deadline:
            with pending_lock:
                if not pending:
                    return
                index = pending.popleft()
            probe_server(urls[index], headers, timeout_s, deadline, snapshots[index], locks[index])

    threads = []
    for number in range(min(workers, len(urls))):
        # daemon: an abandoned probe (hung DNS) must not keep the process alive
        thread = threading.Thread(target=worker, name=f"probe-{number}", daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    frozen = []
    for snapshot, lock in zip(snapshots, locks):
        with lock:  # copy under the lock: an abandoned probe may still write afterwards
            copy = Snapshot(url=snapshot.url, responses=dict(snapshot.responses), unfinished=snapshot.unfinished)
            done = snapshot.done
        if not done:
            route = copy.unfinished or next((r for r in ROUTES if r not in copy.responses), ROUTES[-1])
            copy.responses[route] = Response(
                path=route, error_kind="deadline", error_detail=f"no answer before the {deadline_s:g} s deadline"
            )
        frozen.append(copy)
    return frozen
