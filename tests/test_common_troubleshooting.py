"""The shared troubleshooting index (``scripts/common/troubleshooting.py``), the one matcher of the log triage and the
lookup: every quoted message of the troubleshooting text and every upstream message of the facts index, the variant
of an entry for a release, and the releases of flags and a diagnostic report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import troubleshooting as match

from conftest import REPORT_HEAD


@pytest.fixture(scope="module")
def index() -> match.Index:
    return match.load_index()


def _instance(fragments, filler: str = "x9") -> str:
    """A log line that holds a message: its fragments joined by a value where the text varies."""
    return f"[rank2]:ERROR 05-01 12:00:00 {filler} " + f" {filler} ".join(fragments) + f" {filler}"


def test_every_quoted_message_is_recognised_as_its_own_entry(index: match.Index) -> None:
    wrong = []
    for e, entry in enumerate(index.entries):
        for quote in entry["quotes"]:
            found = index.matches(_instance(quote["fragments"]))
            best = [m for m in found if m.message.kind == "entry"]
            texts = {index.entries[m.message.ref]["quotes"][m.message.quote]["text"] for m in best[:1]}
            same = [m for m in best if m.score == best[0].score] if best else []
            if not best or (not any(m.message.ref == e for m in same) and quote["text"] not in texts):
                wrong.append(f"{entry['file']}:{quote['line']}: {quote['text'][:60]}")
    assert not wrong, wrong


def test_every_upstream_message_is_recognised(index: match.Index) -> None:
    missed = [
        " … ".join(m["fragments"])[:80]
        for u, m in enumerate(index.upstream)
        if not any(x.message.kind == "upstream" and index.upstream[x.message.ref]["fragments"] == m["fragments"]
                   for x in index.matches(_instance(m["fragments"])))
    ]  # fmt: skip
    assert not missed, missed[:10]


def test_a_line_without_the_message_matches_nothing_of_it(index: match.Index) -> None:
    found = index.matches("{'loss': 0.25, 'grad_norm': 1.5, 'learning_rate': 1e-06, 'epoch': 0.1}")
    assert [m for m in found if m.message.kind == "entry"] == []


def test_the_longer_quote_wins_over_a_shorter_one_it_contains(index: match.Index) -> None:
    line = (
        "ValueError: The vLLM server at http://10.1.2.3:8000 does not expose its development endpoints, which TRL "
        "uses to synchronize weights. Restart it with VLLM_SERVER_DEV_MODE=1"
    )
    best = next(m for m in index.matches(line) if m.message.kind == "entry")
    entry = index.entries[best.message.ref]
    assert entry["file"] == "troubleshooting/vllm.md" and entry["heading"] == "Server lacks dev mode"


def _entry(index: match.Index, file: str, heading: str) -> dict:
    return next(e for e in index.entries if e["file"] == file and e["heading"] == heading)


@pytest.mark.parametrize(
    ("releases", "status", "says"),
    [
        ({"trl": "1.12.0"}, "variant", "TRL 1.11–1.15"),
        ({"trl": "1.16.0", "vllm": "0.31.0"}, "holds", "TRL 1.11–1.16"),
        ({"trl": "1.5.1"}, "outside", "release-history.md"),
        ({}, "unknown", ""),
    ],
)
def test_the_variant_follows_the_release(index: match.Index, releases: dict, status: str, says: str) -> None:
    entry = _entry(index, "troubleshooting/vllm.md", "Server lacks dev mode")
    verdict = match.variant_for(entry, entry["quotes"][0], releases)
    assert verdict.status == status
    assert says in verdict.label + verdict.text


def _entry_headings(index: match.Index, line: str) -> list:
    return [index.entries[m.message.ref]["heading"] for m in index.matches(line) if m.message.kind == "entry"]


def test_the_first_sentence_of_a_long_refusal_alone_is_recognised(index: match.Index) -> None:
    line = "ValueError: When `padding_free=True` without packing, `max_length` is not enforced."
    assert _entry_headings(index, line)[:1] == ["SFT padding-free without packing (TRL ≥ 1.0)"]


def test_a_short_start_that_stops_before_the_first_sentence_ends_is_not_enough(index: match.Index) -> None:
    # Cut inside the first sentence, and not at a clause end either: nothing of the refusal.
    assert "SFT padding-free without packing (TRL ≥ 1.0)" not in _entry_headings(index, "When `padding_free=True` is")
    assert _entry_headings(index, "No available memory") == []


def test_a_line_that_is_only_the_leading_clause_of_a_quote_is_recognised(index: match.Index) -> None:
    heading = "Liger fused loss under ZeRO-3 (TRL ≤ 1.8)"
    assert _entry_headings(index, "size mismatch")[:1] == [heading]
    assert _entry_headings(index, "RuntimeError: size mismatch")[:1] == [heading]


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: Error(s) in loading state_dict: size mismatch for lm_head.weight: copying a param with shape",
        "size mismatch for model.embed_tokens.weight",
        "Vocabulary size mismatch after resizing: tokenizer vocab size is 3, but model embedding size is 4.",
        "ValueError: Hidden size mismatch: X has 4096, W has 2048",
        "the batch had a size mismatch, got input of the wrong length",
    ],
)
def test_other_text_that_holds_a_leading_clause_is_not_that_entry(index: match.Index, line: str) -> None:
    assert "Liger fused loss under ZeRO-3 (TRL ≤ 1.8)" not in _entry_headings(index, line)


def test_a_leading_clause_of_an_upstream_message_alone_is_not_recognised(index: match.Index) -> None:
    # Upstream messages start with generic clauses ("Internal error, …"); only the text's own quotes get this rule.
    assert [m for m in index.matches("Internal error") if m.message.kind == "upstream"] == []


def test_the_leading_part_is_where_the_lookup_anchors(index: match.Index) -> None:
    assert match.leading(["size mismatch, got input", "vec"]) == "size mismatch"
    # The first MIN_PARTIAL characters, to a word end: a partial match holds at least those.
    assert match.leading(["No available memory for the cache blocks. Try increasing"]) == (
        "No available memory for the cache"
    )
    assert match.leading(["short", "rest"]) == "short"


def test_release_values_and_a_report(tmp_path: Path) -> None:
    assert match.release_value(" v1.12.0", "--trl") == "1.12.0" and match.release_value(None, "--trl") is None
    with pytest.raises(match.ReleaseError, match="--vllm must be a release number"):
        match.release_value("0.31; rm -rf /", "--vllm")
    report = tmp_path / "r.json"
    report.write_text(
        json.dumps({**REPORT_HEAD, "packages": {"trl": {"version": "1.13.2"}, "torch": {"version": "2.9.1"}}})
    )
    assert match.report_releases(str(report)) == {"trl": "1.13.2"}
    assert match.report_releases(str(report), ("trl", "torch", "peft")) == {"trl": "1.13.2", "torch": "2.9.1"}
    report.write_text("[]")
    with pytest.raises(match.ReleaseError, match=r"not a check_optional_backends\.py --json report"):
        match.report_releases(str(report))


def test_search_words_read_a_glued_stage_as_the_text_writes_it() -> None:
    """A user types ``zero3`` or ``fsdp2``; the entries write ``ZeRO-3`` and ``FSDP2``."""
    words = match.search_words("grpo hangs with zero3 and fsdp2")
    assert {"zero3", "zero-3", "zero", "fsdp2", "fsdp"} <= set(words)
    assert "v1" not in match.search_words("on v1.12.0")


def test_the_stored_anchors_are_the_ones_a_run_would_compute() -> None:
    """index.json carries each message's anchor word (tools/triage_index.py), so no run computes them (~80 ms);
    an index without them, or with a list of the wrong length, gets them computed: the same lookup either way."""
    data = json.loads(Path(match.INDEX_PATH).read_text(encoding="utf-8"))
    assert data["anchors"] == match.message_anchors(match.index_fragments(data))
    shipped = match.Index(data).by_word
    without = {key: value for key, value in data.items() if key != "anchors"}
    assert match.Index(without).by_word == shipped
    assert match.Index({**data, "anchors": data["anchors"][:-1]}).by_word == shipped
