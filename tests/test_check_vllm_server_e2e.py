"""scripts/check_vllm_server.py end to end: a real subprocess against real HTTP servers on 127.0.0.1.

The servers (tests/fake_vllm_server.py) answer with vLLM 0.27.1 / 0.31.0 shapes; the file and line each shape follows
is in that module's docstring and in tests/fixtures/vllm_server/README.md. Every server records each request, and
every test checks that the script only ever sent GETs to the four documented routes.

The script runs with ``python -S`` (no site-packages: no TRL, no vLLM, no ``packaging``), so the version logic is the
standard-library fallback and the TRL range is the built-in TRL 1.16.0 one, unless a test puts a fake ``trl``
distribution on PYTHONPATH.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

from conftest import SCRIPTS_DIR, with_bytecode_cache
from fake_vllm_server import FakeVLLMServer, Scenario, model_list, server_info

SCRIPT = SCRIPTS_DIR / "check_vllm_server.py"
ALLOWED_PATHS = {"/health", "/version", "/v1/models", "/server_info?config_format=json"}
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
# Python start-up plus report rendering, on top of the bound the script promises; wide enough that these deadline
# tests hold beside the other pytest-xdist worker, so they are not marked serial.
STARTUP_SLACK_S = 2.0


class Servers:
    """Starts fake servers for one test and checks, at the end, that each only ever saw GETs to the four routes."""

    def __init__(self) -> None:
        self.started: List[FakeVLLMServer] = []
        self.allowed_extra: Sequence[str] = ()

    def start(self, scenario: Scenario) -> FakeVLLMServer:
        server = FakeVLLMServer(scenario).__enter__()
        self.started.append(server)
        return server

    def close(self) -> None:
        for server in self.started:
            server.__exit__(None, None, None)

    def assert_read_only(self) -> None:
        for server in self.started:
            for request in server.log:
                assert request["method"] == "GET", request
                assert request["path"] in ALLOWED_PATHS | set(self.allowed_extra), request


@pytest.fixture
def servers():
    group = Servers()
    try:
        yield group
        group.assert_read_only()
    finally:
        group.close()


def run_check(
    *args: str,
    env: Optional[Dict[str, str]] = None,
    python: Sequence[str] = (sys.executable, "-S"),
    pythonpath: Optional[Path] = None,
) -> Tuple[subprocess.CompletedProcess, float]:
    clean = {k: v for k, v in os.environ.items() if k not in PROXY_VARS and k != "PYTHONPATH"}
    clean["NO_PROXY"] = clean["no_proxy"] = "127.0.0.1,localhost"
    if pythonpath is not None:
        clean["PYTHONPATH"] = str(pythonpath)
    clean.update(env or {})
    clean = with_bytecode_cache(clean, python[0])
    started = time.monotonic()
    proc = subprocess.run(
        [*python, str(SCRIPT), *args], capture_output=True, text=True, env=clean, timeout=60, check=False
    )
    return proc, time.monotonic() - started


def run_json(*args: str, **kwargs: Any) -> Tuple[Dict[str, Any], subprocess.CompletedProcess, float]:
    proc, elapsed = run_check(*args, "--json", **kwargs)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout), proc, elapsed


def finding_ids(report: Dict[str, Any], severity: Optional[str] = None) -> List[str]:
    return [f["id"] for f in report["findings"] if severity is None or f["severity"] == severity]


def finding(report: Dict[str, Any], finding_id: str, server: Optional[str] = None) -> Dict[str, Any]:
    matches = [f for f in report["findings"] if f["id"] == finding_id and (server is None or f["server"] == server)]
    assert len(matches) == 1, (finding_id, finding_ids(report))
    return matches[0]


def free_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


ASYNC_LORA = ("--trainer", "async-grpo", "--lora-rank", "16", "--max-staleness", "4", "--max-length", "4096")


# --- the good server ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.27.1", "0.31.0"])
def test_good_server_is_ok_and_passes_require(servers, version):
    server = servers.start(Scenario.good(version))
    report, proc, _ = run_json("--vllm-url", server.url, *ASYNC_LORA, "--require")
    assert proc.returncode == 0
    assert report["schema_version"] == 1 and report["verdict"] == "ok"
    assert report["trl_outcome"] == "adapter-only"
    entry = report["servers"][0]
    assert entry["vllm_version"] == version and entry["vllm_version_in_trl_range"] is True
    assert entry["dev_mode"] is True and entry["lora_config"] == {
        "max_lora_rank": 16,
        "max_loras": 6,
        "max_cpu_loras": 6,
    }
    assert entry["served_models"] == ["Qwen/Qwen3-0.6B"] and entry["adapters"] == ["trl-policy-v3"]
    assert [r["method"] for r in entry["requests"]] == ["GET"] * 4
    assert [request["path"] for request in server.log] == [
        "/health",
        "/version",
        "/v1/models",
        "/server_info?config_format=json",
    ]


def test_good_server_text_report_for_grpo_full_finetuning(servers):
    server = servers.start(Scenario.good())
    proc, _ = run_check("--vllm-url", server.url, "--trainer", "grpo", "--max-length", "4096")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("vLLM server pre-flight: OK  (grpo, full fine-tuning, max length 4096)")
    assert "TRL outcome: full-weights" in proc.stdout
    assert "TRL is not installed here; built-in range of TRL 1.16.0" in proc.stdout


def test_good_server_with_packaging_available(servers):
    server = servers.start(Scenario.good())
    proc, _ = run_check("--vllm-url", server.url, *ASYNC_LORA, "--require", python=(sys.executable,))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- each misconfiguration gives its verdict and its exact fix ------------------------------------------------------


def test_dev_mode_off(servers):
    scenario = Scenario.good()
    scenario.dev_mode = False
    server = servers.start(scenario)
    report, proc, _ = run_json("--vllm-url", server.url, *ASYNC_LORA, "--require")
    assert proc.returncode == 1 and report["verdict"] == "fail"
    assert report["servers"][0]["dev_mode"] is False
    assert report["servers"][0]["trl_outcome"]["mode"] == "startup-error"
    assert finding(report, "dev-mode-off")["fix"] == "VLLM_SERVER_DEV_MODE=1"
    text, _ = run_check("--vllm-url", server.url, *ASYNC_LORA)
    assert text.returncode == 0  # without --require a report is success
    assert "fix: VLLM_SERVER_DEV_MODE=1" in text.stdout


def test_lora_config_null_is_merged_fallback(servers):
    scenario = Scenario.good()
    scenario.info["vllm_config"]["lora_config"] = None
    server = servers.start(scenario)
    report, proc, _ = run_json("--vllm-url", server.url, *ASYNC_LORA, "--require")
    assert proc.returncode == 1 and report["verdict"] == "warn"
    assert report["trl_outcome"] == "merged-fallback"
    assert "started without `--enable-lora`" in report["servers"][0]["trl_outcome"]["trl_says"]
    assert finding(report, "lora-disabled")["fix"].startswith("--enable-lora --max-lora-rank 16 --max-loras 6")


def test_max_loras_5_with_max_staleness_4(servers):
    scenario = Scenario.good()
    scenario.info["vllm_config"]["lora_config"]["max_loras"] = 5
    server = servers.start(scenario)
    report, proc, _ = run_json("--vllm-url", server.url, *ASYNC_LORA, "--require")
    assert proc.returncode == 1 and report["verdict"] == "fail"
    assert report["trl_outcome"] == "startup-error"
    assert finding(report, "lora-slots-too-few")["fix"] == "--max-loras 6"
    assert report["fixes"][0]["fix"] == "--max-loras 6"


def test_rank_too_low(servers):
    scenario = Scenario.good()
    scenario.info["vllm_config"]["lora_config"]["max_lora_rank"] = 8
    server = servers.start(scenario)
    proc, _ = run_check("--vllm-url", server.url, "--lora-rank", "20", "--require")
    assert proc.returncode == 1
    assert "fix: --max-lora-rank 32" in proc.stdout
    assert "TRL outcome: startup-error -- TRL says: ValueError: The adapter has rank 20" in proc.stdout


def test_data_parallel_2(servers):
    scenario = Scenario.good()
    scenario.info["vllm_config"]["parallel_config"].update(data_parallel_size=2, data_parallel_size_local=2)
    server = servers.start(scenario)
    report, proc, _ = run_json("--vllm-url", server.url, *ASYNC_LORA)
    assert proc.returncode == 0 and report["verdict"] == "warn"
    assert report["trl_outcome"] == "merged-fallback"
    assert finding(report, "lora-data-parallel")["severity"] == "warning"
    assert "broadcasts add_lora to every DP engine" in finding(report, "dp-adapter-reach")["message"]


def test_two_replicas_one_lacks_the_current_adapter(servers):
    a = servers.start(Scenario.good(adapters=("trl-policy-v6", "trl-policy-v7")))
    b = servers.start(Scenario.good(adapters=("trl-policy-v6",)))
    report, proc, _ = run_json("--vllm-url", a.url, "--vllm-url", b.url, *ASYNC_LORA, "--require")
    assert proc.returncode == 1 and report["verdict"] == "fail"
    missing = finding(report, "adapter-missing-on-replica", server=b.url)
    assert "current policy adapter `trl-policy-v7`" in missing["message"]
    assert [s["verdict"] for s in report["servers"]] == ["ok", "fail"]
    # The same check, pinned to one adapter name.
    report, _, _ = run_json("--vllm-url", a.url, "--vllm-url", b.url, *ASYNC_LORA, "--adapter", "trl-policy-v7")
    assert finding(report, "adapter-not-loaded")["server"] == b.url


def test_max_model_len_below_the_intended_length(servers):
    server = servers.start(Scenario.good())
    report, _, _ = run_json("--vllm-url", server.url, "--lora-rank", "16", "--max-length", "12000")
    assert finding(report, "max-model-len-too-low")["fix"] == "--max-model-len 12000"


def test_grpo_without_weight_transfer_and_with_raw_logprobs(servers):
    scenario = Scenario.good()
    scenario.info["vllm_config"]["weight_transfer_config"] = None
    scenario.info["vllm_config"]["model_config"]["logprobs_mode"] = "raw_logprobs"
    server = servers.start(scenario)
    report, _, _ = run_json("--vllm-url", server.url, "--trainer", "grpo")
    assert finding(report, "weight-transfer-missing")["fix"] == '--weight-transfer-config \'{"backend": "nccl"}\''
    assert finding(report, "logprobs-mode")["fix"] == "--logprobs-mode processed_logprobs"


def test_installed_trl_range_comes_from_its_metadata(servers, tmp_path):
    dist = tmp_path / "trl-1.14.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: trl\nVersion: 1.14.0\nProvides-Extra: vllm\n"
        'Requires-Dist: vllm<=0.27.1,>=0.22.0; extra == "vllm"\nRequires-Dist: requests; extra == "vllm"\n'
    )
    server = servers.start(Scenario.good("0.31.0"))
    report, _, _ = run_json("--vllm-url", server.url, *ASYNC_LORA, pythonpath=tmp_path)
    assert report["trl"]["trl_installed"] is True and report["trl"]["trl_version"] == "1.14.0"
    assert finding(report, "vllm-outside-trl-range")["severity"] == "warning"
    assert report["servers"][0]["vllm_version_in_trl_range"] is False


# --- transport failures, within the stated bound ---------------------------------------------------------------------


def test_refused_port_returns_fast(servers):
    url = f"http://127.0.0.1:{free_port()}"
    report, proc, elapsed = run_json("--vllm-url", url, "--deadline", "5", "--require")
    assert proc.returncode == 1 and report["verdict"] == "fail"
    assert report["servers"][0]["requests"][0]["error"] == "refused"
    assert "refused" in finding(report, "unreachable")["message"]
    assert elapsed < 5


class _Dropper:
    """A loopback listener that accepts each connection, reads the request, then resets it (SO_LINGER 0: an RST) or
    closes it without a byte of answer."""

    def __init__(self, reset: bool) -> None:
        import struct
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.linger = struct.pack("ii", 1, 0) if reset else None
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    conn.recv(4096)
                if self.linger:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, self.linger)


def test_a_reset_or_a_close_without_answer_is_connection_reset_not_unreachable():
    """Issue 27: something listened and took the connection; only a refused port (nothing listens) is unreachable."""
    droppers = [_Dropper(reset=True), _Dropper(reset=False)]
    refused = f"http://127.0.0.1:{free_port()}"
    try:
        args = [arg for d in droppers for arg in ("--vllm-url", d.url)]
        report, _proc, _ = run_json(*args, "--vllm-url", refused, "--timeout", "3")
        text, _ = run_check(*args, "--timeout", "3")
    finally:
        for dropper in droppers:
            dropper.sock.close()
    for dropper in droppers:
        message = finding(report, "connection-reset", dropper.url)["message"]
        assert "connection reset by the server (it accepted the connection, then closed it)" in message
        assert f"{dropper.url}  FAIL: connection reset by the server" in text.stdout
    assert finding(report, "unreachable", refused)["server"] == refused
    assert "unreachable" not in " ".join(f["id"] for f in report["findings"] if f["server"] != refused)


def test_slow_server_is_cut_at_the_request_timeout(servers):
    scenario = Scenario.good()
    scenario.delay_s = 30
    server = servers.start(scenario)
    report, _, elapsed = run_json("--vllm-url", server.url, "--timeout", "0.5", "--deadline", "3")
    assert report["servers"][0]["requests"][0]["error"] == "timeout"
    assert elapsed < 3 + STARTUP_SLACK_S


def test_dripping_server_is_cut_at_the_total_deadline(servers):
    scenario = Scenario.good()
    scenario.drip_s = 0.1  # a byte every 0.1 s keeps every single read under --timeout
    server = servers.start(scenario)
    report, _, elapsed = run_json("--vllm-url", server.url, "--timeout", "1", "--deadline", "1.5")
    assert report["servers"][0]["requests"][0]["error"] == "deadline"
    assert elapsed < 1.5 + STARTUP_SLACK_S


def test_one_slow_replica_does_not_hold_up_the_other(servers):
    slow = Scenario.good()
    slow.delay_s = 30
    a = servers.start(Scenario.good())
    b = servers.start(slow)
    report, _, elapsed = run_json("--vllm-url", a.url, "--vllm-url", b.url, "--timeout", "0.5", "--deadline", "2")
    assert [s["reachable"] for s in report["servers"]] == [True, False]
    assert report["servers"][0]["verdict"] == "ok"
    assert elapsed < 2 + STARTUP_SLACK_S


def test_html_instead_of_json(servers):
    scenario = Scenario.good()
    scenario.html = True
    server = servers.start(scenario)
    report, _, _ = run_json("--vllm-url", server.url)
    messages = [f["message"] for f in report["findings"] if f["id"] == "non-json"]
    assert messages and all("an HTML page" in m for m in messages)
    assert report["verdict"] == "fail"


def test_https_against_a_plain_http_server_is_a_tls_error(servers):
    server = servers.start(Scenario.good())
    url = server.url.replace("http://", "https://")
    report, _, _ = run_json("--vllm-url", url, "--timeout", "2")
    assert report["servers"][0]["requests"][0]["error"] == "tls"
    assert "SSL_CERT_FILE" in finding(report, "unreachable")["fix"]


def test_redirect_to_another_host_is_refused_and_reported(servers):
    token = "tok-" + secrets.token_hex(16)
    other = servers.start(Scenario.good())
    port = other.server_address[1]
    redirecting = Scenario.good()
    redirecting.redirect_host = f"http://localhost:{port}"  # same port, another host name: another origin
    server = servers.start(redirecting)
    report, proc, _ = run_json("--vllm-url", server.url, "--auth-env", "CHECK_TOKEN", env={"CHECK_TOKEN": token})
    assert finding(report, "redirect-refused")["severity"] == "error"
    assert f"http://localhost:{port}" in finding(report, "redirect-refused")["message"]
    assert other.log == []  # nothing, and so no token, reached the other host
    assert token not in proc.stdout + proc.stderr


def test_redirect_on_the_same_host_is_followed(servers):
    scenario = Scenario.good()
    scenario.same_origin_redirects = {"/version": "/version-moved"}
    server = servers.start(scenario)
    report, _, _ = run_json("--vllm-url", server.url, *ASYNC_LORA)
    assert report["servers"][0]["vllm_version"] == "0.31.0" and report["verdict"] == "ok"
    assert [r["path"] for r in server.log][1:3] == ["/version", "/version-moved"]
    servers.allowed_extra = ["/version-moved"]


# --- the token ------------------------------------------------------------------------------------------------------


def test_401_without_token_then_200_with_it_and_the_token_never_shows(servers):
    token = "sk-" + secrets.token_hex(24)
    scenario = Scenario.good()
    scenario.api_key = token
    server = servers.start(scenario)

    report, proc, _ = run_json("--vllm-url", server.url, *ASYNC_LORA)
    assert report["verdict"] == "fail"
    assert finding(report, "auth-required")["fix"].startswith("pass --auth-env VAR")

    outputs = []
    for extra in ((), ("--json",)):
        proc, _ = run_check(
            "--vllm-url", server.url, *ASYNC_LORA, "--auth-env", "MY_VLLM_TOKEN", *extra, env={"MY_VLLM_TOKEN": token}
        )
        assert proc.returncode == 0, proc.stdout
        outputs.append(proc.stdout + proc.stderr)
    report = json.loads(proc.stdout)
    assert report["verdict"] == "ok" and report["intent"]["auth_env"] == "MY_VLLM_TOKEN"
    assert "trl-sends-no-token" in finding_ids(report, "info")
    assert f"Bearer {token}" in {r["authorization"] for r in server.log}

    proc, _ = run_check("--vllm-url", server.url, "--auth-env", "MY_VLLM_TOKEN", env={"MY_VLLM_TOKEN": token + "x"})
    assert "was refused" in proc.stdout
    outputs.append(proc.stdout + proc.stderr)
    for output in outputs:
        assert token not in output
        assert token[3:20] not in output


def test_token_problems_are_usage_errors_that_never_echo_the_value():
    token = "sk-" + secrets.token_hex(24)
    proc, _ = run_check("--vllm-url", "http://127.0.0.1:9", "--auth-env", "UNSET_VAR_FOR_TEST")
    assert proc.returncode == 2 and "UNSET_VAR_FOR_TEST" in proc.stderr
    proc, _ = run_check("--vllm-url", "http://127.0.0.1:9", "--auth-env", "T", env={"T": token + "\nInjected: 1"})
    assert proc.returncode == 2 and "control characters" in proc.stderr
    assert token not in proc.stdout + proc.stderr
    proc, _ = run_check("--vllm-url", f"http://user:{token}@127.0.0.1:9")
    assert proc.returncode == 2 and token not in proc.stdout + proc.stderr


# --- usage ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("--vllm-url", "ftp://127.0.0.1:9"),
        ("--vllm-url", "http://127.0.0.1:9", "--lora-rank", "abc"),
        ("--vllm-url", "http://127.0.0.1:9", "--timeout", "0"),
        ("--vllm-url", "http://127.0.0.1:9", "--trainer", "ppo"),
        (),
    ],
)
def test_usage_errors_exit_2_without_a_traceback(args):
    proc, _ = run_check(*args)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "error" in proc.stderr


def test_help_is_complete():
    proc, _ = run_check("--help")
    assert proc.returncode == 0
    for text in ("/server_info?config_format=json", "GET only", "exit codes", "--require", "--auth-env", "deadline"):
        assert text in proc.stdout


# --- other interpreters ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("minor", ["3.9", "3.13"])
def test_runs_on_other_python_versions_when_present(servers, minor):
    exe = shutil.which(f"python{minor}")
    if exe is None:
        pytest.skip(f"python{minor} not on PATH")
    pyenv = {"PYENV_VERSION": os.environ.get("PYENV_VERSION", minor)}  # harmless where pyenv is not used
    probe = subprocess.run(
        [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **pyenv},
    )
    if probe.returncode != 0 or probe.stdout.strip() != minor:
        pytest.skip(f"python{minor} on PATH is not usable here")
    scenario = Scenario.good()
    scenario.info["vllm_config"]["lora_config"]["max_loras"] = 5
    server = servers.start(scenario)
    report, proc, _ = run_json("--vllm-url", server.url, *ASYNC_LORA, python=(exe, "-S"), env=pyenv)
    assert proc.returncode == 0 and finding(report, "lora-slots-too-few")["fix"] == "--max-loras 6"


def test_fixture_bodies_carry_what_trl_reads():
    """The /server_info fixtures have every key TRL 1.16 indexes (select_adapter_sync, init_communicator, GRPO)."""
    for version in ("0.27.1", "0.31.0"):
        config = server_info(version)["vllm_config"]
        assert {"max_lora_rank", "max_loras"} <= set(config["lora_config"])
        assert "data_parallel_size" in config["parallel_config"]
        assert "logprobs_mode" in config["model_config"] and "dtype" in config["model_config"]
        assert "weight_transfer_config" in config
    assert model_list(("x",))["data"][1]["parent"] == "Qwen/Qwen3-0.6B"
