"""common/recorded.py: one wording for a release newer than the recorded matrix, and which releases are."""

from __future__ import annotations

import json
from pathlib import Path

from common import recorded

MATRIX = {
    "fetched": "2026-12-06",
    "packages": {
        "vllm": {"index": ["0.10.2", "0.34.0", "0.33.0"]},
        "trl": {"index": ["1.16.0"]},
        "torch": {"index": []},
    },
}


def test_the_phrase_names_the_fetch_date() -> None:
    assert recorded.phrase("2026-12-06") == "newer than the recorded matrix (2026-12-06)"


def test_newest_is_the_highest_listed_release_not_the_last() -> None:
    known = recorded.from_matrix(MATRIX)
    assert known == recorded.Recorded("2026-12-06", {"vllm": "0.34.0", "trl": "1.16.0"})
    assert recorded.from_matrix({"packages": []}) is None
    assert recorded.from_matrix({"packages": {}}).fetched == "date unknown"


def test_only_a_release_past_the_newest_is_beyond() -> None:
    known = recorded.from_matrix(MATRIX)
    assert recorded.beyond("vllm", "0.35.0", known) == (
        "vLLM 0.35.0 is newer than the recorded matrix (2026-12-06); newest recorded 0.34.0"
    )
    assert recorded.beyond("TRL", "1.17.0rc1", known).startswith("TRL 1.17.0rc1 is newer than the recorded matrix")
    for package, version in (("vllm", "0.34.0+cu129"), ("vllm", "0.33.0"), ("vllm", "garbage"), ("torch", "9.0")):
        assert recorded.beyond(package, version, known) is None
    assert recorded.beyond("peft", "9.9.9", known) is None  # a package the matrix does not list


def test_the_shipped_matrix_loads_and_a_broken_one_is_none(tmp_path: Path) -> None:
    shipped = recorded.load()
    assert shipped is not None and shipped.fetched == json.loads(Path(recorded.MATRIX_PATH).read_text())["fetched"]
    assert {"trl", "vllm", "transformers", "torch", "accelerate"} <= set(shipped.newest)
    broken = tmp_path / "matrix.json"
    broken.write_text("{not json", encoding="utf-8")
    assert recorded.load(str(broken)) is None
    assert recorded.load(str(tmp_path / "absent.json")) is None
