"""Reading logs (``scripts/triage/read.py``): bounded streaming, line numbers as ``grep -n`` counts them across
piece boundaries, progress-bar carriage returns, very long lines, standard input and refused inputs."""

from __future__ import annotations

import os
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
