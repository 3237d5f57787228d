"""fixes/load.py: the gzip+json index, its tokens, the per-process cache and refusals of a bad file."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from fixes import load
from fixes.load import IndexUnreadable, load_index, parse, words

from fixes_helpers import tiny_bytes, tiny_raw


def test_words_split_identifiers_and_drop_noise() -> None:
    got = words("ZeRORuntimeException in use_liger_loss: DeepSpeedCPULion fixed 300000ms")
    assert {"zeroruntimeexception", "runtime", "exception", "use_liger_loss", "liger", "loss"} <= set(got)
    assert {"deep", "speed", "lion"} <= set(got)
    assert "fixed" not in got and "300000m" not in got and "300000ms" not in got


def test_parse_maps_releases_untagged_and_regressions() -> None:
    index = parse(tiny_bytes(tiny_raw()))
    by_pr = {c.pr: c for c in index.changes}
    assert by_pr[11].release == "1.1.0" and by_pr[11].paths == ("trainer/grpo_trainer", "extras/vllm_client")
    assert by_pr[13].release is None and by_pr[13].order == 3
    assert by_pr[102].broke == (100, "0.17.1")
    assert "grpotrainer" in by_pr[10].tokens and index.frequency["grpotrainer"] == 3


@pytest.mark.parametrize(
    "data",
    [b"", b"not gzip"] + [gzip.compress(text, mtime=0) for text in (b"[]", b'{"schema": 2}', b'{"schema": 1}')],
    ids=["empty", "not gzip", "a list", "another schema", "no packages"],
)
def test_a_bad_index_is_refused_in_one_message(data: bytes) -> None:
    with pytest.raises(IndexUnreadable):
        parse(data)


def test_load_reads_once_per_process_and_names_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "index.json.gz"
    path.write_bytes(tiny_bytes(tiny_raw()))
    first = load_index(str(path))
    path.write_bytes(b"changed")
    assert load_index(str(path)) is first
    load._CACHE.pop(str(path))
    with pytest.raises(IndexUnreadable):
        load_index(str(path))
    with pytest.raises(IndexUnreadable, match="missing"):
        load_index(str(tmp_path / "missing.json.gz"))


def test_the_shipped_index_loads_and_stays_small() -> None:
    index = load_index()
    assert {"trl", "accelerate", "peft", "deepspeed", "bitsandbytes", "liger-kernel", "kernels"} <= set(index.packages)
    assert len(index.changes) > 1000
    assert Path(load.INDEX_PATH).stat().st_size < 300_000
