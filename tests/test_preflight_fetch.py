"""scripts/preflight/fetch.py: error classification, the parallel probe within its deadline, proxies (no network)."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
import urllib.error

import pytest
from preflight import data as vdata
from preflight import fetch as vfetch


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (urllib.error.URLError(socket.gaierror(-2, "Name or service not known")), "dns"),
        (urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")), "refused"),
        (urllib.error.URLError(socket.timeout("timed out")), "timeout"),
        (socket.timeout("timed out"), "timeout"),
        (urllib.error.URLError(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")), "tls"),
        (urllib.error.URLError(ssl.SSLCertVerificationError(1, "certificate verify failed")), "tls"),
        (vfetch.RedirectRefused(302, "http://evil:80"), "redirect"),
        (ConnectionResetError(104, "Connection reset by peer"), "reset"),
        (http.client.RemoteDisconnected("Remote end closed connection without response"), "reset"),
        (urllib.error.URLError(BrokenPipeError(32, "Broken pipe")), "reset"),
    ],
)
def test_classify_error(error, kind):
    assert vfetch.classify_error(error)[0] == kind


@pytest.mark.serial
def test_probe_all_returns_at_the_deadline_even_if_a_request_never_returns(monkeypatch):
    """A hung DNS lookup ignores socket timeouts; the total deadline must still hold (real threads, no network)."""
    release = threading.Event()

    def hanging_fetch(opener, base_url, route, headers, timeout_s, deadline):
        if "hung" in base_url:
            release.wait(30)
        return vdata.Response(route, status=200, body=b'{"version": "0.31.0"}')

    monkeypatch.setattr(vfetch, "fetch", hanging_fetch)
    started = time.monotonic()
    try:
        snaps = vfetch.probe_all(["http://hung:8000", "http://fine:8000"], {}, 0.2, 0.5)
    finally:
        release.set()
    assert time.monotonic() - started < 1.5
    hung, fine = snaps
    assert hung.responses[vdata.ROUTE_HEALTH].error_kind == "deadline"
    assert all(r.status == 200 for r in fine.responses.values()) and len(fine.responses) == 4


def test_proxy_for_follows_the_environment_and_hides_proxy_credentials(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert vfetch.proxy_for("http://replica-a:8000") is None
    monkeypatch.setenv("HTTP_PROXY", "http://user:pw@proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "replica-b")
    assert vfetch.proxy_for("http://replica-a:8000") == "http://proxy.example:3128"
    assert vfetch.proxy_for("http://replica-b:8000") is None
    assert vfetch.proxy_for("https://replica-a:8000") is None  # no HTTPS_PROXY
