"""What a log line is (``scripts/triage/patterns.py``): rank prefixes, timestamps, failures and echoes, OOM
figures, printed releases, shapes."""

from __future__ import annotations

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
