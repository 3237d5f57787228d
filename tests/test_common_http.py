"""scripts/common/http.py: one GET against a loopback server, its body capped, deadlined and never
decompressed; a redirect loop named; a silent listener cannot outlast the deadline."""

from __future__ import annotations

import contextlib
import gzip
import socket
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from common.http import http_get


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path == "/big":
            self.send_response(200)
            self.end_headers()
            with contextlib.suppress(ConnectionError):  # the client stops reading at its limit and hangs up
                for _ in range(100):
                    self.wfile.write(b"x" * 65536)
        elif self.path == "/gzip":
            body = gzip.compress(b'{"a": 1}')
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/drip":
            self.send_response(200)
            self.end_headers()
            for _ in range(50):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.2)
        elif self.path == "/loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            body = b'{"ok": true}'
            self.send_response(404 if self.path == "/missing" else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _get(url: str, timeout: float = 5.0, deadline_s: float = 5.0, limit: int = 1_000_000):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return http_get(opener, url, {}, timeout, time.monotonic() + deadline_s, limit)


def test_http_answers_and_statuses(server: str) -> None:
    ok = _get(server + "/")
    assert (ok.status, ok.body, ok.error_kind) == (200, b'{"ok": true}', None)
    missing = _get(server + "/missing")
    assert (missing.status, missing.error_kind) == (404, None)


def test_http_body_cap(server: str) -> None:
    result = _get(server + "/big", limit=100_000)
    assert result.error_kind == "too-large" and result.body is None


def test_http_compressed_body_is_not_inflated(server: str) -> None:
    result = _get(server + "/gzip")
    assert result.error_kind == "encoded" and result.body is not None and result.body.startswith(b"\x1f\x8b")


@pytest.mark.serial
def test_http_drip_stops_at_the_total_deadline(server: str) -> None:
    started = time.monotonic()
    result = _get(server + "/drip", timeout=5.0, deadline_s=0.5)
    assert result.error_kind == "deadline"
    assert time.monotonic() - started < 1.5


def test_http_redirect_loop_is_named(server: str) -> None:
    result = _get(server + "/loop")
    assert result.error_kind == "redirect-loop" and result.status == 302


@pytest.mark.serial
def test_http_silent_listener_respects_the_deadline() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        started = time.monotonic()
        result = _get(f"http://127.0.0.1:{listener.getsockname()[1]}/", timeout=5.0, deadline_s=0.5)
        assert result.error_kind == "deadline" and time.monotonic() - started < 1.5
        past = _get(f"http://127.0.0.1:{listener.getsockname()[1]}/", deadline_s=-1)
        assert past.error_kind == "deadline"
    finally:
        listener.close()
