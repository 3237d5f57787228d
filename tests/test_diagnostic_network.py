"""diag_network (check_optional_backends.py --probe-network): DNS and one bounded TCP connect per target, against
real loopback listeners: one that accepts, a closed port, and one that never accepts (its backlog filled)."""

from __future__ import annotations

import contextlib
import socket
import time
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
from diagnostic import network as diag_network

from diagnostic_helpers import audit_run, run_script


@pytest.fixture
def listeners() -> Iterator[Tuple[int, int, int]]:
    """(open port, closed port, never-accepting port) on 127.0.0.1."""
    opened: List[socket.socket] = []
    open_listener = socket.socket()
    open_listener.bind(("127.0.0.1", 0))
    open_listener.listen(16)
    opened.append(open_listener)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: the kernel answers with a reset
    stuck = socket.socket()
    stuck.bind(("127.0.0.1", 0))
    stuck.listen(0)  # never accept(); fill the accept queue so further handshakes get no answer
    opened.append(stuck)
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(stuck.getsockname())
        opened.append(filler)
    time.sleep(0.2)
    try:
        yield open_listener.getsockname()[1], closed_port, stuck.getsockname()[1]
    finally:
        for item in opened:
            item.close()


@pytest.mark.serial
def test_probe_network_reports_open_closed_and_never_accepting_listeners(
    listeners: Tuple[int, int, int], tmp_path: Path
) -> None:
    open_port, closed_port, stuck_port = listeners
    targets = f"127.0.0.1:{open_port},localhost:{closed_port},127.0.0.1:{stuck_port}"
    run = run_script(["--json", "--probe-network", targets, "--timeout", "1"], [], tmp=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.seconds < 8, run.seconds  # the 1 s connect bound held (plus interpreter start)
    report = run.json()
    results = {r["port"]: r for r in report["probes"]["network"]}
    assert results[open_port]["status"] == "ok" and results[open_port]["resolved"] is True
    assert results[open_port]["addresses"] == ["127.0.0.1"]
    assert results[closed_port]["status"] == "refused" and results[closed_port]["resolved"] is True
    stuck = results[stuck_port]
    assert stuck["status"] == "timeout"
    assert 0.8 <= stuck["connect_seconds"] <= 2.0, stuck
    severities = {f["code"]: f["severity"] for f in report["findings"] if f["code"].startswith("network_")}
    assert severities == {"network_refused": "warning", "network_timeout": "error"}
    quick = f"127.0.0.1:{open_port},localhost:{closed_port}"  # the stuck target's 1 s wait is proven above
    text = run_script(["--probe-network", quick, "--timeout", "1"], [], tmp=tmp_path).stdout
    assert f"probe network 127.0.0.1:{open_port}: ok (127.0.0.1;" in text
    assert f"probe network localhost:{closed_port}: refused" in text


@pytest.mark.serial
def test_unresolvable_host_is_reported_within_the_bound() -> None:
    start = time.monotonic()
    [result] = diag_network.probe_network([("no-such-host.invalid", 29500)], 1.0)
    assert time.monotonic() - start < 2.0
    assert result["status"] in ("unresolved", "dns_timeout")  # no resolver answering counts as a timeout
    assert result["resolved"] is False and result["error"]


@pytest.mark.parametrize("value", ["node1", "node1:0", "node1:70000", "", ",", "[::1]", "a b:1", "h:1:2"])
def test_bad_probe_network_values_are_usage_errors(value: str, tmp_path: Path) -> None:
    run = run_script([f"--probe-network={value}"], [], tmp=tmp_path)
    assert run.returncode == 2
    assert "--probe-network" in run.stderr and "Traceback" not in run.stderr


def test_only_probe_network_opens_sockets(listeners: Tuple[int, int, int], tmp_path: Path) -> None:
    """Control for the safety test: the audit hook sees the probe's sockets, and nothing else changes."""
    result = audit_run(tmp_path, [], ["--json", "--probe-network", f"127.0.0.1:{listeners[0]}", "--timeout", "1"])
    kinds = {e[0] for e in result["events"]}
    assert "socket" in kinds
    assert not {"write", "popen", "process", "import"} & kinds
    assert result["code"] in (0, None)
