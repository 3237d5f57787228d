"""Reading logs (``scripts/triage/read.py``): bounded streaming, line numbers as ``grep -n`` counts them across
piece boundaries, progress-bar carriage returns, very long lines, standard input and refused inputs."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import List

import pytest
from triage import read
from triage.read import Hit, Source, SourceStats


def _hits(path: Path, tokens=(b"Error",), context=lambda text: "", limit: int = 1 << 30) -> List[Hit]:
    stats: List[SourceStats] = []
    source = Source(str(path), str(path), None)
    return list(read.scan(0, source, read.scanner(list(tokens)), context, limit, stats)), stats


def test_line_numbers_match_grep_across_piece_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read, "CHUNK", 64)
    lines = [f"ValueError: boom {i}" if i % 7 == 0 else f"noise line number {i} here" for i in range(300)]
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    hits, stats = _hits(path)
    assert [h.line for h in hits] == [i + 1 for i in range(300) if i % 7 == 0]
    assert [h.text for h in hits] == [lines[i] for i in range(300) if i % 7 == 0]
    assert stats == [SourceStats(str(path), 300, path.stat().st_size, False)]


def test_context_before_and_after(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("a\nTraceback (most recent call last):\n  File x\nValueError: bad\nnext\n", encoding="utf-8")
    hits, _ = _hits(path, (b"Error",), lambda text: "before")
    assert hits[0].before == ((1, "a"), (2, "Traceback (most recent call last):"), (3, "  File x"))
    hits, _ = _hits(path, (b"Traceback",), lambda text: "after")
    assert hits[0].after == ((3, "  File x"), (4, "ValueError: bad"), (5, "next"))


def test_carriage_returns_keep_the_screen_with_the_token(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"10%|#\r20%|##\rRuntimeError: CUDA error: boom\r30%|###\nok\n")
    hits, _ = _hits(path)
    assert [(h.line, h.text) for h in hits] == [(1, "RuntimeError: CUDA error: boom")]


def test_a_line_without_newline_is_cut_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read, "CHUNK", 1024)
    monkeypatch.setattr(read, "MAX_CARRY", 4096)
    path = tmp_path / "x.log"
    path.write_bytes(b"x" * 100_000 + b" Error: late")
    hits, _ = _hits(path)
    assert [h.line for h in hits] == [1] and hits[0].text.endswith("Error: late")
    assert len(hits[0].text) <= read.MAX_LINE_CHARS


def test_the_byte_limit_truncates_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("Error one\n" * 100, encoding="utf-8")
    hits, stats = _hits(path, limit=95)
    assert len(hits) <= 10 and stats[0].truncated and stats[0].bytes == 95


def test_rank_from_file_name() -> None:
    sources = read.make_sources(["logs/rank3.log", "node1-worker_12.txt", "server.log", "-"])
    assert [s.rank for s in sources] == [3, 12, None, None]
    assert sources[-1].path is None and sources[-1].label == "<stdin>"


def test_a_fifo_or_directory_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for bad in (fifo, tmp_path, tmp_path / "missing.log"):
        with pytest.raises(read.InputError):
            read.check_sources(read.make_sources([str(bad)]))


def test_the_scanner_finds_every_token_capital_or_not() -> None:
    scanner = read.scanner([b"Traceback", b"The adapter", b"The vLLM", b"Err", b"Error", b"failed", b"timed out"])
    text = b"x Error y\nThe vLLM z\nnothing\nit failed\nThe adapter\nTraceback\nok timed out failed\n"
    lines = {text.count(b"\n", 0, at) + 1 for at in scanner.positions(text, 0, len(text))}
    assert lines == {1, 2, 4, 5, 6, 7}
    assert scanner.single == [b"timed out", b"failed"]


def test_a_message_past_the_cut_of_its_line_is_judged(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("[rank2]:" + "x" * 3000 + " ValueError: late message\nok\n", encoding="utf-8")
    hits, _ = _hits(path)
    assert len(hits) == 1 and hits[0].line == 1
    assert hits[0].text.startswith("[rank2]:xxx") and "ValueError: late message" in hits[0].text
    assert len(hits[0].text) <= read.MAX_LINE_CHARS + 10


def test_a_long_line_is_scrubbed_whole_before_it_is_cut(tmp_path: Path) -> None:
    """A key that crosses the cut at 2,000 characters is redacted whole; its head never survives the cut."""
    token = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7xY"
    for before in (1990, 1995, 2000 - len(read.GAP) - 3):
        path = tmp_path / f"x{before}.log"
        path.write_text("ValueError: " + "y " * (before // 2 - 6) + token + " z" * 500 + "\n", encoding="utf-8")
        hits, _ = _hits(path)
        text = " ".join(h.text for h in hits) + " ".join(t for h in hits for _, t in h.before)
        assert "hf_a" not in text and token[3:11] not in text, before
    context = tmp_path / "c.log"
    context.write_text("a " * 195 + token + " b\nValueError: boom\n", encoding="utf-8")
    hits, _ = _hits(context, context=lambda text: "before")
    assert hits[0].before and token[:8] not in hits[0].before[0][1] and "<redacted>" in hits[0].before[0][1]


@pytest.mark.parametrize(
    ("encoding", "bom"),
    [
        ("utf-16-le", b"\xff\xfe"),
        ("utf-16-be", b"\xfe\xff"),
        ("utf-8", b"\xef\xbb\xbf"),
        ("utf-16-le", b""),
    ],
)
def test_utf16_and_byte_order_marks_are_decoded(tmp_path: Path, encoding: str, bom: bytes) -> None:
    """PowerShell's ``>`` writes UTF-16 LE with a mark; without one, the NUL bytes of its start give it away."""
    path = tmp_path / "x.log"
    path.write_bytes(bom + "ValueError: caf\u00e9 boom\nnoise\nRuntimeError: two\n".encode(encoding))
    hits, stats = _hits(path)
    assert [(h.line, h.text) for h in hits] == [(1, "ValueError: caf\u00e9 boom"), (3, "RuntimeError: two")]
    assert stats[0].bytes == path.stat().st_size


def test_the_line_budget_stops_an_endless_input_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("ERROR again\n" * 5000, encoding="utf-8")
    stats: List[SourceStats] = []
    sources = read.make_sources([str(path), str(path)])
    budget = read.Budget(seconds=60, lines=300)
    hits = list(read.iter_hits(sources, read.scanner([b"ERROR"]), lambda text: "", 1 << 30, stats, budget))
    assert len(hits) == 300
    assert [(s.truncated, s.stopped) for s in stats] == [(True, "lines"), (True, "lines")] and stats[1].bytes == 0
    budget = read.Budget(seconds=0.0)
    time.sleep(0.01)
    assert list(read.scan(0, sources[0], read.scanner([b"ERROR"]), lambda text: "", 1 << 30, stats, budget)) == []
    assert stats[-1].stopped == "time"


def _scan_cpu(path: Path) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        _hits(path)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.serial
def test_a_long_line_full_of_tokens_costs_its_length(tmp_path: Path) -> None:
    """A 16 MB line cost 12.6 CPU-s: every token in it looked back to the line's start. Cost at 4n stays near 4x
    the cost at n (quadratic is 16x)."""
    costs = []
    for size in (64 * 1024, 256 * 1024):
        path = tmp_path / f"{size}.log"
        path.write_bytes(b"ab1 Error " * (size // 10) + b"\nValueError: end\n")
        costs.append(_scan_cpu(path))
    assert costs[1] < 8 * costs[0] + 0.02, costs
