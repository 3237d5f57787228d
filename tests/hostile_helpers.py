"""Machinery of the hostile-input suite (tests/test_hostile_inputs.py): cases, a parallel runner that measures each
child's time and peak memory, and a loopback HTTP server that misbehaves on purpose.

Every input is generated at test time in a temporary folder; nothing large is committed. Each case runs the real
script in its own subprocess (its own session, an address-space limit of 2 GiB as a guard for the machine, started
through tests/measured_spawn.py so the peak memory is the script's own and not the pytest worker's) and is
judged on: exit code, no traceback, time within the case's timeout plus one second, peak RSS under 256 MB, no
planted secret or fragment of one in stdout or stderr, and, on exit 2, a one-line message that names the input.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from conftest import with_bytecode_cache

REPO_ROOT = Path(__file__).resolve().parent.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
SPAWNER = Path(__file__).resolve().parent / "measured_spawn.py"
SCRIPTS = {
    "diag": SKILL_DIR / "scripts" / "check_optional_backends.py",
    "plan": SKILL_DIR / "scripts" / "plan_training.py",
    "vllm": SKILL_DIR / "scripts" / "check_vllm_server.py",
    "nodes": SKILL_DIR / "scripts" / "compare_nodes.py",
    "install": SKILL_DIR / "scripts" / "plan_install.py",
    "triage": SKILL_DIR / "scripts" / "triage_log.py",
}
PROG = {key: path.name for key, path in SCRIPTS.items()}
MAX_RSS_BYTES = 256 * 1024 * 1024
ADDRESS_SPACE_LIMIT = 2 * 1024**3
OUTPUT_CAP = 4 * 1024 * 1024
FRAGMENT = 8  # a planted secret must not appear in any run of this many characters


@dataclass
class Case:
    """One hostile input against one script. ``args``/``env`` may hold ``{tmp}`` and ``{url}`` placeholders."""

    id: str
    script: str
    args: Sequence[str]
    timeout: float = 8.0
    env: Dict[str, str] = field(default_factory=dict)
    setup: Optional[Callable[[Path], None]] = None  # builds the input files under the case's folder
    secrets: Sequence[str] = ()
    names: Optional[str] = None  # on exit 2, the message must contain this (the input's name)
    codes: Tuple[int, ...] = (0, 1, 2)
    check: Optional[Callable[[Result], Optional[str]]] = None  # extra assertion: returns a problem or None
    xfail: Optional[str] = None  # reason, while the script is not hardened against this input


@dataclass
class Result:
    case: Case
    returncode: Optional[int]
    stdout: str
    stderr: str
    seconds: float
    max_rss: int  # bytes
    timed_out: bool


def _measured_rss(path: Path, fallback: int) -> int:
    """The command's own peak RSS as tests/measured_spawn.py wrote it; ``fallback`` when it was killed first."""
    try:
        return int(path.read_text(encoding="ascii"))
    except (OSError, ValueError):
        return fallback


def _drain(stream: Any, sink: List[bytes]) -> None:
    size = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            return
        if size < OUTPUT_CAP:
            sink.append(chunk)
            size += len(chunk)


def run_case(case: Case, root: Path, url: str, python: str = sys.executable) -> Result:
    """Run one case in its own folder under ``root``; never raises for the script's behaviour."""
    folder = root / case.id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "home").mkdir(exist_ok=True)
    (folder / "bin").mkdir(exist_ok=True)
    if case.setup is not None:
        case.setup(folder)

    def fill(text: str) -> str:
        return text.replace("{tmp}", str(folder)).replace("{url}", url)

    env = {
        "HOME": str(folder / "home"),
        "PATH": str(folder / "bin"),
        "LANG": "C.UTF-8",
        "NO_PROXY": "*",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update({name: fill(value) for name, value in case.env.items()})
    env = with_bytecode_cache(env, python)
    rss_file = root / f"{case.id}.rss"
    rss_file.unlink(missing_ok=True)
    argv = [python, "-S", str(SCRIPTS[case.script]), *(fill(a) for a in case.args)]
    argv = [python, "-S", "-I", str(SPAWNER), str(rss_file), str(ADDRESS_SPACE_LIMIT), *argv]
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(folder),
        start_new_session=True,
    )
    out: List[bytes] = []
    err: List[bytes] = []
    readers = [
        threading.Thread(target=_drain, args=(process.stdout, out), daemon=True),
        threading.Thread(target=_drain, args=(process.stderr, err), daemon=True),
    ]
    for reader in readers:
        reader.start()
    limit = case.timeout + 1.0
    timed_out = False
    status = 0
    while True:
        pid, status, _ = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > limit:
            timed_out = True
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            _, status, _ = os.wait4(process.pid, 0)
            break
        time.sleep(0.01)
    seconds = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)  # grandchildren left behind
    for reader in readers:
        reader.join(2.0)
    return Result(
        case=case,
        returncode=None if timed_out else process.returncode,
        stdout=b"".join(out).decode("utf-8", errors="replace"),
        stderr=b"".join(err).decode("utf-8", errors="replace"),
        seconds=seconds,
        max_rss=_measured_rss(rss_file, 0),
        timed_out=timed_out,
    )


def run_all(cases: Sequence[Case], root: Path, url: str, workers: int = 4) -> Dict[str, Result]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda case: run_case(case, root, url), cases))
    return {result.case.id: result for result in results}


def fragments(secret: str, size: int = FRAGMENT) -> List[str]:
    forms = {secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]}
    found = set()
    for form in forms:
        if len(form) < size:
            found.add(form)
            continue
        found.update(form[i : i + size] for i in range(len(form) - size + 1))
    return sorted(found)


def problems(result: Result) -> List[str]:
    """Everything wrong with one run, as readable sentences (empty: the case held)."""
    case = result.case
    found: List[str] = []
    both = result.stdout + "\n" + result.stderr
    if result.timed_out:
        found.append(f"still running after {case.timeout + 1:.0f} s (killed)")
    elif result.returncode not in case.codes:
        found.append(f"exit code {result.returncode}, expected one of {case.codes}")
    elif result.seconds > case.timeout + 1.0:
        found.append(f"took {result.seconds:.1f} s, limit {case.timeout + 1:.0f} s")
    if "Traceback (most recent call last)" in both:
        found.append("printed a traceback: " + result.stderr.strip().splitlines()[-1][:200])
    if result.max_rss > MAX_RSS_BYTES:
        found.append(f"peak memory {result.max_rss / 2**20:.0f} MB")
    for secret in case.secrets:
        leaked = [piece for piece in fragments(secret) if piece in both]
        if leaked:
            found.append(f"printed a fragment of a planted secret: {leaked[0]!r}")
    if result.returncode == 2 and not result.timed_out:
        lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith(("usage:", " "))]
        prog = PROG[case.script]
        if not lines or not lines[-1].startswith(prog + ":"):
            found.append(f"exit 2 without a one-line '{prog}: ...' message: {result.stderr.strip()[-200:]!r}")
        elif case.names and case.names not in lines[-1]:
            found.append(f"exit-2 message does not name {case.names!r}: {lines[-1][:200]!r}")
    if case.check is not None and not found:
        extra = case.check(result)
        if extra:
            found.append(extra)
    return found


# --------------------------------------------------------------------------------------------------------------
# A loopback server that misbehaves: the first path segment picks the behaviour, the rest is the vLLM route.
# --------------------------------------------------------------------------------------------------------------

Behaviour = Callable[[BaseHTTPRequestHandler, str], None]


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str = "application/json", **hdr):
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in hdr.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()
    with contextlib.suppress(OSError):
        handler.wfile.write(body)


def _json(handler: BaseHTTPRequestHandler, value: Any, status: int = 200) -> None:
    _send(handler, status, json.dumps(value).encode())


class HostileServer:
    """ThreadingHTTPServer on 127.0.0.1 whose behaviours are registered by name (``/<name>/<route>``)."""

    def __init__(self) -> None:
        self.behaviours: Dict[str, Behaviour] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                name, _, rest = self.path.lstrip("/").partition("/")
                behaviour = outer.behaviours.get(name)
                if behaviour is None:
                    _send(self, 404, b'{"detail":"Not Found"}')
                    return
                with contextlib.suppress(OSError):
                    behaviour(self, "/" + rest)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HostileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def silent_listener() -> Tuple[socket.socket, str]:
    """A socket that accepts connections into its backlog and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}"


def vllm_like(route: str, overrides: Optional[Dict[str, Any]] = None) -> Tuple[int, Any]:
    """A minimal healthy vLLM 0.31.0 answer for ``route``, with ``overrides`` (route -> body) applied."""
    from fake_vllm_server import model_list, server_info

    overrides = overrides or {}
    if route in overrides:
        return 200, overrides[route]
    if route == "/health":
        return 200, None
    if route == "/version":
        return 200, {"version": "0.31.0"}
    if route == "/v1/models":
        return 200, model_list([])
    if route.startswith("/server_info"):
        return 200, server_info("0.31.0")
    return 404, {"detail": "Not Found"}


def serve_vllm_like(overrides: Optional[Dict[str, Any]] = None) -> Behaviour:
    def behaviour(handler: BaseHTTPRequestHandler, route: str) -> None:
        status, body = vllm_like(route.split("?")[0] if not route.startswith("/server_info") else route, overrides)
        if body is None:
            _send(handler, status, b"")
        elif isinstance(body, bytes):
            _send(handler, status, body, "text/plain")
        else:
            _send(handler, status, json.dumps(body).encode())

    return behaviour


def check_all(results: Dict[str, Result], ids: Sequence[str]) -> Dict[str, List[str]]:
    return {case_id: problems(results[case_id]) for case_id in ids}


def text_width_problem(text: str, width: int = 100) -> Optional[str]:
    wide = [line for line in text.splitlines() if len(line) > width]
    return f"{len(wide)} line(s) over {width} columns, e.g. {wide[0][:120]!r}" if wide else None


# --------------------------------------------------------------------------------------------------------------
# Secret forms (issue 27, round 3): a secret in every place and shape a hostile review found printed whole.
# --------------------------------------------------------------------------------------------------------------


def _key_like(seed: str, tag: str, size: int = 24) -> str:
    """A key-like value of its own for (seed, tag): mixed case, digits, no character a shape rule would stop at."""
    digest = hashlib.sha256(f"{seed}/{tag}".encode()).hexdigest()
    return "".join(c.upper() if i % 3 == 0 else c for i, c in enumerate(digest))[:size]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def secret_forms(seed: str) -> List[Tuple[str, List[str]]]:
    """(text, secrets in it) for each form: a NAME=value after a ``label: `` prefix, quoted values, the next item of
    a command list, --token X and --password=X, an AWS secret access key that starts with "/", a value holding
    ";", a JWT after "-" or "_", a carriage return inside URL credentials. Values differ with ``seed``."""
    v = {tag: _key_like(seed, tag) for tag in "abcdefghijklmnopqrs"}
    aws = "/" + base64.b64encode(hashlib.sha256(f"{seed}/aws".encode()).digest() * 2).decode()[:39]
    aws2 = "/" + base64.b64encode(hashlib.sha256(f"{seed}/aws2".encode()).digest() * 2).decode()[:39]
    header = _b64url(b'{"alg":"HS256","typ":"JWT"}')
    payload = _b64url(json.dumps({"sub": seed, "n": v["q"]}).encode())
    jwt = f"{header}.{payload}.{_b64url(hashlib.sha256(seed.encode()).digest())}"
    return [
        (f"ERROR: password={v['a']}", [v["a"]]),
        (f"ValueError: WANDB_API_KEY={v['b']}", [v["b"]]),
        (f'export HF_TOKEN="{v["c"]}"', [v["c"]]),
        (f'{{"api_key": "{v["d"]}", "n": 1}}', [v["d"]]),
        (f'password="{v["e"]} {v["f"]}" next', [v["e"], v["f"]]),
        (f"Command '['vllm', 'serve', 'm', '--api-key', '{v['g']}']' returned non-zero exit status 1.", [v["g"]]),
        (f"vllm serve m --token {v['h']} --port 8000", [v["h"]]),
        (f"run --password={v['i']} --x", [v["i"]]),
        (f"AWS_SECRET_ACCESS_KEY={aws}", [aws[1:]]),
        (f"aws_secret_access_key = {aws2}", [aws2[1:]]),
        (f"password={v['j']};{v['k']}", [v["j"], v["k"]]),
        (f"x-{jwt}", [payload, jwt.rsplit(".", 1)[1]]),
        (f"tok_{jwt}", [payload, jwt.rsplit(".", 1)[1]]),
        (f"https://user:{v['l']}\r{v['m']}@host.example:8443/x", [v["l"], v["m"]]),
    ]


def planted(forms: List[Tuple[str, List[str]]]) -> List[str]:
    return [secret for _, secrets in forms for secret in secrets]
