"""Opt-in reachability check (``--probe-network HOST:PORT[,HOST:PORT]``): DNS resolution and one bounded TCP
connect per target, no payload. Off by default: the default run opens no socket.

Each target runs in its own daemon thread, so a resolver that never answers cannot hold the report past the
deadline (the thread is abandoned, the target reported as a DNS timeout).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from diagnostic.base import DEFAULT_NETWORK_TIMEOUT, new_finding

__all__ = [
    "DEFAULT_NETWORK_TIMEOUT",
    "network_findings",
    "network_text",
    "probe_network",
]


def blank_result(host: str, port: int) -> Dict[str, Any]:
    """The record of one target before anything is known (status ``unresolved``)."""
    return {
        "target": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
        "host": host,
        "port": port,
        "resolved": False,
        "addresses": [],
        "status": "unresolved",
        "error": None,
        "dns_seconds": None,
        "connect_seconds": None,
    }


def probe_target(host: str, port: int, timeout: float) -> Dict[str, Any]:
    """Resolve ``host`` and open one TCP connection to the first address, closed at once (nothing is sent)."""
    import socket

    result = blank_result(host, port)
    start = time.monotonic()
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as error:
        result["error"] = str(error) or type(error).__name__
        result["dns_seconds"] = round(time.monotonic() - start, 3)
        return result
    result["dns_seconds"] = round(time.monotonic() - start, 3)
    result["resolved"] = True
    result["addresses"] = list(dict.fromkeys(info[4][0] for info in infos))[:8]
    family, kind, proto, _, address = infos[0]
    remaining = max(0.05, timeout - (time.monotonic() - start))
    sock = socket.socket(family, kind, proto)
    sock.settimeout(remaining)
    connect_start = time.monotonic()
    try:
        sock.connect(address)
        result["status"] = "ok"
    except socket.timeout:
        result["status"] = "timeout"
        result["error"] = (
            f"no answer within {remaining:.1f} s (packets dropped: a firewall, a wrong route, or a full backlog)"
        )
    except ConnectionRefusedError:
        result["status"] = "refused"
        result["error"] = "connection refused: the host answers, nothing listens on that port (yet)"
    except OSError as error:
        result["status"] = "unreachable"
        result["error"] = str(error) or type(error).__name__
    finally:
        result["connect_seconds"] = round(time.monotonic() - connect_start, 3)
        sock.close()
    return result


def probe_network(targets: List[Tuple[str, int]], timeout: float) -> List[Dict[str, Any]]:
    """Every target at once, each in a daemon thread; returns within about ``timeout`` + 0.5 s."""
    results: List[Optional[Dict[str, Any]]] = [None] * len(targets)

    def work(index: int, host: str, port: int) -> None:
        try:
            results[index] = probe_target(host, port, timeout)
        except Exception as error:  # a probe must never take the report down
            results[index] = {**blank_result(host, port), "status": "error", "error": repr(error)}

    threads = []
    for index, (host, port) in enumerate(targets):
        thread = threading.Thread(target=work, args=(index, host, port), daemon=True)
        thread.start()
        threads.append(thread)
    deadline = time.monotonic() + timeout + 0.5
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    out = []
    for (host, port), result in zip(targets, results):
        if result is None:  # the resolver never answered
            result = {
                **blank_result(host, port),
                "status": "dns_timeout",
                "error": f"name resolution did not answer within {timeout:g} s",
            }
        out.append(result)
    return out


def network_findings(results: List[Dict[str, Any]]) -> List[Dict[str, str]]:
    """A finding per target that is not reachable; refused is a warning (nothing listens yet), the rest errors."""
    findings = []
    for result in results:
        status = result.get("status")
        if status == "ok":
            continue
        severity = "warning" if status == "refused" else "error"
        findings.append(
            new_finding(severity, f"network_{status}", f"probe network {result.get('target')}: {result.get('error')}")
        )
    return findings


def network_text(results: List[Dict[str, Any]]) -> List[str]:
    """Text lines: one per target."""
    lines = []
    for result in results:
        seconds = (result.get("dns_seconds") or 0) + (result.get("connect_seconds") or 0)
        addresses = ", ".join(result.get("addresses") or []) or "-"
        lines.append(f"probe network {result.get('target')}: {result.get('status')} ({addresses}; {seconds:.2f} s)")
    return lines
