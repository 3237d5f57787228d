"""A loopback HTTP server that answers like vLLM 0.27-0.31, for the tests of ``scripts/check_vllm_server.py``.

Every response shape follows the vLLM source of the pinned releases (0.27.1 and 0.31.0 agree on all of them):

- ``GET /health``: 200 with an empty body; 503 with an empty body when the engine is dead.
  ``vllm/entrypoints/serve/instrumentator/health.py:22-33`` @0.27.1 and @0.31.0.
- ``GET /version``: ``{"version": vllm.__version__}``.
  ``vllm/entrypoints/serve/instrumentator/basic.py:53-56`` @0.27.1 and @0.31.0.
- ``GET /v1/models``: ``ModelList.model_dump()``: base-model cards first (with ``max_model_len``), then one card
  per loaded LoRA adapter (``parent`` = base name, ``max_model_len`` null).
  ``vllm/entrypoints/openai/models/serving.py:64-77,149-165`` (both versions); the ``ModelCard`` and
  ``ModelPermission`` fields are from ``vllm/entrypoints/openai/engine/protocol.py:74-102`` @0.27.1 and
  ``vllm/entrypoints/serve/engine/protocol.py:90-118`` @0.31.0.
- ``GET /server_info?config_format=json``: ``{"vllm_config": <VllmConfig as JSON>, "vllm_env": {...},
  "system_env": {...}}``; registered only with ``VLLM_SERVER_DEV_MODE=1``.
  ``vllm/entrypoints/serve/dev/server_info/api_router.py:43-58`` @0.27.1 and @0.31.0; the bodies are
  ``fixtures/vllm_server/server_info_<version>.json`` (see the README there for how they were built).
- An unregistered route (``/server_info`` without dev mode): 404 with FastAPI's default ``{"detail":"Not Found"}``.
- ``--api-key``: 401 ``{"error":"Unauthorized"}`` on paths under ``/v1`` (and ``/v2``, ``/inference``, ``/cohere``)
  only; ``vllm/entrypoints/serve/utils/server_utils.py:42,90-91`` @0.27.1,
  ``vllm/entrypoints/serve/middleware/authenticate.py:11,59-61`` @0.31.0.

Misbehaviours used by the tests (a slow server, a dripping body, HTML instead of JSON, redirects) are switches on
:class:`Scenario`. Every request is recorded with its method, path and whether it carried an Authorization header, so
tests can assert that the checker only ever sent GETs to the four routes.

Run by hand: ``python tests/fake_vllm_server.py [--port 8000] [--version 0.31.0]`` serves the good scenario.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "vllm_server"
BASE_MODEL = "Qwen/Qwen3-0.6B"
GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")  # vLLM's AuthenticationMiddleware
NOT_FOUND = {"detail": "Not Found"}  # FastAPI's default 404 body
HTML_PAGE = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please sign in</body></html>"


def server_info(version: str = "0.31.0") -> Dict[str, Any]:
    """A fresh copy of the good /server_info body for ``version`` (0.27.1 or 0.31.0)."""
    return json.loads((FIXTURES / f"server_info_{version}.json").read_text())


def model_card(model_id: str, *, root: str, parent: Optional[str], max_model_len: Optional[int]) -> Dict[str, Any]:
    """One ``ModelCard.model_dump()``, permission list included, as vLLM builds it."""
    now = 1767225600
    return {
        "id": model_id,
        "object": "model",
        "created": now,
        "owned_by": "vllm",
        "root": root,
        "parent": parent,
        "max_model_len": max_model_len,
        "permission": [
            {
                "id": "modelperm-8f0c2a3b4d5e6f708192a3b4c5d6e7f8",
                "object": "model_permission",
                "created": now,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }


def model_list(
    adapters: Tuple[str, ...] = (),
    *,
    base: str = BASE_MODEL,
    max_model_len: int = 8192,
    served_names: Optional[Tuple[str, ...]] = None,
) -> Dict[str, Any]:
    """``/v1/models``: one base card per served name, then one card per adapter (``<output_dir>/.vllm_lora/<name>``)."""
    names = served_names or (base,)
    cards = [model_card(name, root=base, parent=None, max_model_len=max_model_len) for name in names]
    cards += [
        model_card(name, root=f"/shared/run/.vllm_lora/{name}", parent=names[0], max_model_len=None)
        for name in adapters
    ]
    return {"object": "list", "data": cards}


@dataclass
class Scenario:
    """What one fake server answers."""

    version: str = "0.31.0"
    info: Optional[Dict[str, Any]] = None  # /server_info body; None with dev_mode=False gives the 404
    dev_mode: bool = True
    models: Optional[Dict[str, Any]] = None
    api_key: Optional[str] = None
    health_status: int = 200
    delay_s: float = 0.0  # wait this long before answering anything
    drip_s: float = 0.0  # send a long body one byte per drip_s seconds
    html: bool = False  # answer every route with a sign-in page
    redirect_host: Optional[str] = None  # 302 every request to this scheme://host:port
    same_origin_redirects: Dict[str, str] = field(default_factory=dict)  # path -> new path on this server

    @classmethod
    def good(cls, version: str = "0.31.0", adapters: Tuple[str, ...] = ("trl-policy-v3",)) -> Scenario:
        """A server started the way TRL's AsyncGRPO adapter-only sync wants it (rank 16, 6 slots, dev mode)."""
        info = server_info(version)
        return cls(version=version, info=info, models=model_list(adapters))

    def body_for(self, path: str) -> Tuple[int, str, bytes]:
        route, _, query = path.partition("?")
        if route == "/health":
            return self.health_status, "text/plain", b""
        if route == "/version":
            return 200, "application/json", json.dumps({"version": self.version}).encode()
        if route == "/v1/models":
            return 200, "application/json", json.dumps(self.models or model_list()).encode()
        if route == "/server_info" and self.dev_mode:
            info = copy.deepcopy(self.info if self.info is not None else server_info(self.version))
            if "config_format=json" not in query:
                info["vllm_config"] = "model='Qwen/Qwen3-0.6B', ..."  # config_format=text gives str(vllm_config)
            return 200, "application/json", json.dumps(info).encode()
        return 404, "application/json", json.dumps(NOT_FOUND).encode()


class _Handler(BaseHTTPRequestHandler):
    server: FakeVLLMServer  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _record(self) -> None:
        self.server.log.append(
            {
                "method": self.command,
                "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "host": self.headers.get("Host"),
            }
        )

    def _send(self, status: int, content_type: str, body: bytes, extra: Optional[Dict[str, str]] = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _wait(self, seconds: float) -> bool:
        """Sleep in small steps; False when the server is shutting down."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.server.stopping.is_set():
                return False
            time.sleep(0.02)
        return True

    def do_GET(self) -> None:
        self._record()
        scenario = self.server.scenario
        if scenario.delay_s and not self._wait(scenario.delay_s):
            return
        if scenario.redirect_host:
            self._send(302, "text/plain", b"", {"Location": scenario.redirect_host + self.path})
            return
        route = self.path.partition("?")[0]
        if route in scenario.same_origin_redirects:
            self._send(307, "text/plain", b"", {"Location": scenario.same_origin_redirects[route]})
            return
        # A same-origin redirect target is served as the route it stands for.
        moved = {new: old for old, new in scenario.same_origin_redirects.items()}
        route_path = moved.get(route, self.path)
        authorized = self.headers.get("Authorization") == f"Bearer {scenario.api_key}"
        if scenario.api_key and route.startswith(GUARDED_PREFIX) and not authorized:
            self._send(401, "application/json", json.dumps({"error": "Unauthorized"}).encode())
            return
        if scenario.html:
            self._send(200, "text/html; charset=utf-8", HTML_PAGE)
            return
        if scenario.drip_s:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for _ in range(100000):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    if not self._wait(scenario.drip_s):
                        return
            except OSError:
                return
            return
        self._send(*scenario.body_for(route_path))

    def _refuse(self) -> None:
        self._record()
        self._send(405, "application/json", json.dumps({"detail": "Method Not Allowed"}).encode())

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _refuse


class FakeVLLMServer(ThreadingHTTPServer):
    """``with FakeVLLMServer(scenario) as server: server.url``; ``server.log`` lists every request."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, scenario: Scenario, host: str = "127.0.0.1", port: int = 0):
        super().__init__((host, port), _Handler)
        self.scenario = scenario
        self.log: List[Dict[str, Any]] = []
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeVLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)


if __name__ == "__main__":  # manual use only
    import argparse

    parser = argparse.ArgumentParser(description="Serve a fake vLLM (good scenario) on loopback.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--version", default="0.31.0", choices=("0.27.1", "0.31.0"))
    cli = parser.parse_args()
    with FakeVLLMServer(Scenario.good(cli.version), port=cli.port) as fake:
        print(fake.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
