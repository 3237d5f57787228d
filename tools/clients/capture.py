"""A loopback stand-in for a model API: it records what a client sends and answers every request with an error.

The server binds 127.0.0.1 only, answers at most ``max_requests`` requests (later ones get a 503 at once, so a client
that retries ends quickly), and stops when the ``with`` block ends. The answer is an HTTP 400 with a JSON error body,
which every client checked here treats as final for a one-shot prompt.
"""

from __future__ import annotations

import http.server
import json
import threading
from typing import NamedTuple, Optional

ERROR_BODY = json.dumps(
    {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "loopback stand-in: no model here", "code": 400},
    }
).encode()


class CapturedRequest(NamedTuple):
    method: str
    path: str
    body: str


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _CaptureServer

    def log_message(self, format: str, *args: object) -> None:
        return

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 32 * 1024 * 1024)) if length else b""
        accepted = self.server.record(CapturedRequest(self.command, self.path, body.decode("utf-8", "replace")))
        status = 400 if accepted else 503
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ERROR_BODY)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(ERROR_BODY)

    do_POST = _answer
    do_GET = _answer


class _CaptureServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, max_requests: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.max_requests = max_requests
        self.requests: list[CapturedRequest] = []
        self.refused = 0
        self._lock = threading.Lock()

    def record(self, request: CapturedRequest) -> bool:
        with self._lock:
            if len(self.requests) >= self.max_requests:
                self.refused += 1
                return False
            self.requests.append(request)
            return True


class ModelStandIn:
    """``with ModelStandIn() as api: ... api.url ... api.requests``."""

    def __init__(self, max_requests: int = 20) -> None:
        self._server = _CaptureServer(max_requests)
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[CapturedRequest]:
        return list(self._server.requests)

    def __enter__(self) -> ModelStandIn:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
