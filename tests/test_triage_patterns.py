"""What a log line is (``scripts/triage/patterns.py``): rank prefixes, timestamps, failures and echoes, OOM
figures, printed releases, shapes."""

from __future__ import annotations

import re
import time

import pytest
from triage import patterns


@pytest.mark.parametrize(
    ("line", "rank", "rest"),
    [
        ("[rank3]:ValueError: x", 3, "ValueError: x"),
        ("[default12]: hello", 12, "hello"),
        ("[1,5]<stderr>:boom", 5, "boom"),
        ("no prefix", None, "no prefix"),
    ],
)
def test_rank_prefixes(line: str, rank, rest: str) -> None:
    assert patterns.split_rank(line) == (rank, rest)


def test_timestamps_of_the_usual_formats_compare() -> None:
    iso = patterns.timestamp("2025-05-01 12:00:01,500 - INFO - x")
    glog = patterns.timestamp("[E0501 12:00:02.000000 1 ProcessGroupNCCL.cpp:616] x")
    vllm = patterns.timestamp("ERROR 05-01 12:00:03 [core.py:1] x")
    syslog = patterns.timestamp("May  1 12:00:04 node kernel: Out of memory")
    assert iso is not None and iso < glog < vllm < syslog
    assert iso % 1 == 0.5
    assert patterns.timestamp("step 12/100 [12:34<56:00]") is None


def test_failures_and_echoes() -> None:
    assert patterns.is_failure("torch.OutOfMemoryError: CUDA out of memory.")
    assert patterns.is_failure("2025-05-01 12:00 ERROR x RuntimeError: boom")
    assert not patterns.is_failure("UserWarning: something is deprecated")
    assert patterns.echo_kind("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)") == (
        "watchdog timeout"
    )
    assert patterns.echo_kind("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:") == (
        "launcher teardown"
    )
    assert patterns.echo_kind("BrokenPipeError: [Errno 32] Broken pipe") == "broken connection"
    assert patterns.echo_kind("ValueError: x") is None


def test_a_store_that_cannot_bind_its_port_is_a_root_cause_and_a_lost_peer_an_echo() -> None:
    lost = "torch.distributed.DistNetworkError: Connection reset by peer"
    bind = (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
        "port: 12345, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use"
    )
    assert patterns.echo_kind(lost) == "broken connection"
    assert patterns.echo_kind(bind) is None and patterns.is_failure(bind)


def test_oom_figures_new_and_old_wording() -> None:
    new = patterns.oom_figures(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 79.15 GiB of which 1.23 GiB "
        "is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use. Of the allocated memory "
        "75.00 GiB is allocated by PyTorch, and 1.50 GiB is reserved by PyTorch but unallocated."
    )
    assert new == {
        "tried_to_allocate": "2.00 GiB",
        "gpu": "5",
        "total": "79.15 GiB",
        "free": "1.23 GiB",
        "in_use": "77.90 GiB",
        "allocated": "75.00 GiB",
        "reserved": "1.50 GiB",
    }
    old = patterns.oom_figures(
        "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.50 GiB already "
        "allocated; 3.19 MiB free; 14.80 GiB reserved in total by PyTorch)"
    )
    assert old["total"] == "15.78 GiB" and old["free"] == "3.19 MiB" and old["reserved"] == "14.80 GiB"
    assert patterns.oom_figures("ValueError: x") == {}


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("- TRL version: 1.12.0", [("trl", "1.12.0")]),
        ("trl==1.16.0", [("trl", "1.16.0")]),
        ("INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.27.1", [("vllm", "0.27.1")]),
        ("a-trl==1.0 is another package", []),
    ],
)
def test_releases_in(line: str, found: list) -> None:
    assert patterns.releases_in(line) == found


def test_shape_and_rank_ranges() -> None:
    assert patterns.shape("[Rank 3] step 12 failed at 0x7f") == "[Rank # step # failed at #"
    assert patterns.ranks_text([0, 1, 2, 4, 6, 7]) == "0-2, 4, 6-7"


def _cpu(function, text: str) -> float:
    """The least CPU time of three calls of ``function(text)``."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        function(text)
        best = min(best, time.process_time() - start)
    return best


def _every_pattern():
    named = [(name, value) for name, value in vars(patterns).items() if isinstance(value, re.Pattern)]
    named += [(f"echo {name}", pattern) for name, pattern in patterns.ECHO_PATTERNS]
    named += [(f"failure {i}", pattern) for i, pattern in enumerate(patterns.FAILURE_PATTERNS)]
    named += [(f"release {name}", pattern) for name, pattern in patterns.RELEASE_PATTERNS]
    named += [(f"oom {name}", pattern) for name, pattern in patterns.OOM_FIGURES]
    return named


# Repeated pieces that made a pattern restart a long scan at every occurrence (quadratic in the line): a long word
# (the shape's digit search), a long number (OOM figures), "A ... B" patterns whose A repeats without B.
_UNITS = ("=", "a", "7", "1.0", "[PG ", "DistStoreError ", "DistNetworkError ", "Command '[", "Error",
          "subprocess.CalledProcessError ", "supports vLLM versions from ", "ERROR ", "[Rank ", "token=")  # fmt: skip


@pytest.mark.serial
def test_every_pattern_is_linear_in_the_line() -> None:
    """Cost at 4n characters stays near 4x the cost at n for every pattern and hostile line (quadratic is 16x)."""
    slow = []
    for name, pattern in _every_pattern():
        for unit in _UNITS:
            small, large = ((unit * (n // len(unit) + 1))[:n] for n in (2000, 8000))
            costs = [_cpu(lambda t, p=pattern: (p.search(t), p.sub("", t)), text) for text in (small, large)]
            if costs[1] > 8 * costs[0] + 0.003:
                slow.append((name, unit, costs))
    assert not slow


@pytest.mark.serial
def test_shape_of_a_long_word_is_linear() -> None:
    """1,000 lines of ``ERROR ====…`` (2 KB each) cost 30 CPU-s: the digit search backtracked over long words."""
    assert patterns.shape("ERROR " + "=" * 2000) == "ERROR " + "=" * 2000
    assert patterns.shape("a1b c d2 x") == "# c # x"
    small, large = (_cpu(patterns.shape, "ERROR " + "=" * n) for n in (4000, 16000))
    assert large < 8 * small + 0.003, (small, large)


def test_digits_other_than_ascii_are_no_rank_or_time() -> None:
    assert patterns.split_rank("[rank\u00b2]: x") == (None, "[rank\u00b2]: x")
    assert patterns.timestamp("2025-05-01 1\u0663:00:00") is None
    assert patterns.NCCL_PREFIX.match("host:1:2 [\u0663] NCCL WARN x") is None
