"""Finding the root failure (``scripts/triage/find.py``): first failure in time across ranks and servers, echoes
apart from it, torchelastic's table, and the order when logs carry no timestamps."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence

import pytest
from common import troubleshooting as match
from triage import find, patterns, read
from triage.read import SourceStats

from triage_helpers import OOM, interleave, watchdog


@pytest.fixture(scope="module")
def index() -> match.Index:
    return match.load_index()


def triage_files(paths: Sequence[Path], index: match.Index) -> find.Choice:
    sources = read.make_sources([str(p) for p in paths])
    stats: List[SourceStats] = []
    scanner = read.scanner(index.scan_tokens(patterns.SCAN_TOKENS))
    hits = read.iter_hits(sources, scanner, find.wants_context, 1 << 30, stats)
    findings = find.collect(hits, sources)
    known = {
        shape
        for shape, group in findings.groups.items()
        if any(m.message.kind == "entry" for m in index.matches(group.text))
    }
    return find.choose_root(findings, known, len(sources)), findings


def test_interleaved_ranks_the_oom_is_the_root_and_watchdogs_are_echoes(tmp_path: Path, index) -> None:
    per_rank: Dict[int, List[str]] = {r: [watchdog(r), f"[Rank {r}] Broken pipe"] for r in range(8) if r != 5}
    per_rank[5] = ["2025-05-01 13:00:00,000 - INFO - step 9", "Traceback (most recent call last):", "  File x", OOM]
    path = tmp_path / "job.log"
    path.write_text(interleave(per_rank, noise_lines=400), encoding="utf-8")
    choice, findings = triage_files([path], index)
    assert choice.root is not None and "out of memory" in choice.root.text
    assert choice.root.ranks == {5}
    kinds = {g.echo for g in choice.echoes}
    assert kinds == {"watchdog timeout", "broken connection"}
    assert set().union(*(g.ranks for g in choice.echoes)) == {0, 1, 2, 3, 4, 6, 7}
    assert findings.ranks == set(range(8))


def test_the_earlier_failure_in_another_file_wins(tmp_path: Path, index) -> None:
    later = tmp_path / "rank0.log"
    later.write_text("2025-05-01 12:10:00,000 INFO x\n2025-05-01 12:10:05,000 ValueError: later one\n", "utf-8")
    server = tmp_path / "vllm-server.log"
    server.write_text(
        "INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.27.1\n"
        "ERROR 05-01 12:05:00 [core.py:9] RuntimeError: CUDA error: an illegal memory access was encountered\n",
        "utf-8",
    )
    choice, findings = triage_files([later, server], index)
    assert "illegal memory access" in choice.root.text
    assert [g.text for g in choice.failures] == ["2025-05-01 12:10:05,000 ValueError: later one"]
    assert choice.order == "time"
    assert findings.releases["vllm"][0] == "0.27.1"


def test_without_timestamps_the_order_is_the_line_order(tmp_path: Path, index) -> None:
    path = tmp_path / "x.log"
    path.write_text("KeyError: 'prompt'\nnoise\nRuntimeError: second\n", "utf-8")
    choice, _ = triage_files([path], index)
    assert choice.root.text == "KeyError: 'prompt'" and choice.order == "line"
    other = tmp_path / "y.log"
    other.write_text("ValueError: elsewhere\n", "utf-8")
    assert triage_files([path, other], index)[0].order == "unknown"


def test_an_echo_is_the_root_only_when_nothing_else_failed(tmp_path: Path, index) -> None:
    path = tmp_path / "x.log"
    path.write_text("\n".join(f"[rank{r}]:{watchdog(r)}" for r in range(4)) + "\n", "utf-8")
    choice, _ = triage_files([path], index)
    assert choice.root is not None and choice.root.kind == find.ECHO and choice.root.ranks == {0, 1, 2, 3}


def test_a_generic_error_line_yields_to_an_exception(tmp_path: Path, index) -> None:
    path = tmp_path / "x.log"
    path.write_text("ERROR: wandb could not sync\nValueError: the real one\n", "utf-8")
    choice, _ = triage_files([path], index)
    assert choice.root.text == "ValueError: the real one"


def test_torchelastic_root_cause_is_read(index) -> None:
    fixture = Path(__file__).parent / "fixtures" / "triage" / "oom-8-ranks.log"
    choice, findings = triage_files([fixture], index)
    roots = [r for r in findings.elastic if r.root]
    assert [(r.rank, r.host, r.exitcode.split(" ")[0]) for r in roots] == [(5, "node-1", "1")]
    assert choice.root.ranks == {5} and "out of memory" in choice.root.text


def test_a_known_warning_is_a_note_not_the_root(tmp_path: Path, index) -> None:
    path = tmp_path / "x.log"
    path.write_text(
        "Falling back to merged-weight vLLM sync: the server runs with data_parallel_size=2, where a loaded adapter "
        "reaches only the replica that received the request.\nValueError: later\n",
        "utf-8",
    )
    choice, _ = triage_files([path], index)
    assert choice.root.text == "ValueError: later"
    assert [g.text[:12] for g in choice.notes] == ["Falling back"]


def test_distinct_messages_keep_memory_bounded_and_the_root(tmp_path: Path, index, monkeypatch) -> None:
    """Memory grew with the number of distinct messages (1.7 GB for 50 MB): groups, ranks and hosts are bounded,
    and a failure worth more takes the place of the least kept group."""
    monkeypatch.setattr(find, "MAX_GROUPS", 50)
    monkeypatch.setattr(find, "MAX_SEEN", 40)
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta"]
    lines = [f"[rank{i}]:ERROR {words[i % 8]} {words[i // 8 % 8]} {words[i // 64 % 8]} x" for i in range(500)]
    lines += [f"host{i}:1:2 [{i}] NCCL INFO retry failed {words[i % 8]} {words[i // 8 % 8]}" for i in range(100)]
    lines.append("Traceback (most recent call last):")
    lines.append("ZeroDivisionError: division by zero in the reward function")
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    choice, findings = triage_files([path], index)
    assert len(findings.groups) <= 50 and findings.dropped > 0
    assert (
        len(findings.ranks) + len(findings.hosts) + sum(len(g.ranks) + len(g.hosts) for g in findings.groups.values())
        <= 40
    )
    assert choice.root is not None and "ZeroDivisionError" in choice.root.text


def test_a_superscript_rank_in_torchelastics_table_is_no_rank(tmp_path: Path, index) -> None:
    """``rank : ²`` passed str.isdigit() and failed int(): an internal error."""
    path = tmp_path / "x.log"
    path.write_text(
        "Root Cause (first observed failure):\n[0]:\n  time      : 2025-05-01_13:00:00\n  host      : node-1\n"
        "  rank      : \u00b2 (local_rank: 5)\n  exitcode  : 1 (pid: 1)\n==========\nValueError: x\n",
        encoding="utf-8",
    )
    _, findings = triage_files([path], index)
    assert [(r.rank, r.host) for r in findings.elastic] == [(None, "node-1")]
