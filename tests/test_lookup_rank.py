"""The lookup's ranking (``scripts/lookup/rank.py``): every troubleshooting entry is found from a user's version of
its message or symptom, among the first three; the failure-report corpus's real error lines find their entries; a
quoted message goes first through the triage's matcher; rarity-weighted words rank the rest."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from common import troubleshooting
from common.troubleshooting import search_words
from lookup.rank import Ranker

FIXTURES = Path(__file__).parent / "fixtures"
PARAPHRASES = json.loads((FIXTURES / "lookup" / "paraphrases.json").read_text(encoding="utf-8"))
# A symptom case's query (tests/fixtures/symptom_cases/) is a user's phrasing of its entry too.
for _case in sorted((FIXTURES / "symptom_cases").glob("*.json")):
    _data = json.loads(_case.read_text(encoding="utf-8"))
    _phrasings = PARAPHRASES.setdefault(f"{_data['entry']['file']}#{_data['entry']['heading']}", [])
    _phrasings.append(_data["query"])
CORPUS = FIXTURES / "failure_reports"
INDEX = troubleshooting.load_index()
RANKER = Ranker(INDEX)


def _top(text: str, releases: Dict[str, str] = {}) -> List[Tuple[str, str]]:  # noqa: B006
    ranked = RANKER.rank(text, search_words(text), releases)
    return [(_item(h.kind, h.ref)["file"], _item(h.kind, h.ref)["heading"]) for h in ranked.hits]


def _item(kind: str, ref: int) -> Dict[str, Any]:
    return INDEX.entries[ref] if kind == "entry" else INDEX.rows[ref]


def _varied(quote: Dict[str, Any]) -> str:
    """The quote as another user's log prints it: its example values (hosts, ports, sizes, timeouts) with other
    digits, a value where the entry writes '…', a rank prefix."""
    text = quote["text"]
    for value in quote.get("values", ()):
        text = text.replace(value, re.sub(r"\d", lambda m: str((int(m.group(0)) + 3) % 10), value))
    return "[rank1]: " + text.replace("…", "Qwen3-8B")


QUOTED_BY: Dict[str, int] = {}
for _entry in INDEX.entries:
    for _text in {q["text"] for q in _entry["quotes"]}:
        QUOTED_BY[_text] = QUOTED_BY.get(_text, 0) + 1


def _key(entry: Dict[str, Any]) -> str:
    return f"{entry['file']}#{entry['heading']}"


def _entry_cases() -> List[Any]:
    """Per entry: its first two quotes, varied, unless more than three entries quote the same line (a generic one,
    such as a bare HTTP 404: the entry's paraphrases stand for it), and its paraphrases."""
    cases = []
    for entry in INDEX.entries:
        quotes = [q for q in entry["quotes"] if QUOTED_BY[q["text"]] <= 3][:2]
        texts = [_varied(q) for q in quotes] + PARAPHRASES.get(_key(entry), [])
        for number, text in enumerate(texts):
            cases.append(pytest.param(entry, text, id=f"{_key(entry)}-{number}"))
    return cases


def _answers(entry: Dict[str, Any]) -> List[Tuple[str, str]]:
    """The entry, and for an entry of the README's frequent failures the topic file's entries that quote the same
    message (the lookup shows the topic file's, which says more)."""
    found = [(entry["file"], entry["heading"])]
    if entry["file"].endswith("/README.md"):
        quotes = {q["text"] for q in entry["quotes"]}
        found += [(e["file"], e["heading"]) for e in INDEX.entries if quotes & {q["text"] for q in e["quotes"]}]
    return found


def test_every_entry_without_a_message_has_user_phrasings() -> None:
    missing = [
        f"{e['file']}#{e['heading']}"
        for e in INDEX.entries
        if not e["quotes"] and f"{e['file']}#{e['heading']}" not in PARAPHRASES
    ]
    assert not missing, missing
    stale = [
        k
        for k in PARAPHRASES
        if not k.startswith("_") and k not in {f"{e['file']}#{e['heading']}" for e in INDEX.entries}
    ]
    assert not stale, stale
    copied = [
        t
        for k, texts in PARAPHRASES.items()
        if not k.startswith("_")
        for t in texts
        if k.split("#", 1)[1].lower() in t.lower()
    ]
    assert not copied, copied


@pytest.mark.parametrize(("entry", "text"), _entry_cases())
def test_every_entry_is_found_from_a_users_words(entry: Dict[str, Any], text: str) -> None:
    top = _top(text)
    assert set(_answers(entry)) & set(top), (text, top)


def _corpus_cases() -> List[Any]:
    return [pytest.param(json.loads(p.read_text(encoding="utf-8")), id=p.stem) for p in sorted(CORPUS.glob("*.json"))]


@pytest.mark.parametrize("case", _corpus_cases())
def test_the_failure_reports_error_text_finds_its_entry(case: Dict[str, Any]) -> None:
    wanted = (case["entry"]["file"], case["entry"]["heading"])
    assert wanted in _top(case["error_text"], case["releases"]), (case["thread"], _top(case["error_text"]))


def test_a_pasted_message_goes_first_through_the_triage_matcher() -> None:
    text = "host-b:77:80 [0] NCCL WARN socketStartConnect: Connect to 172.16.0.9<40211> failed : Connection refused"
    ranked = RANKER.rank(text, search_words(text), {"trl": "1.12.0"})
    best = ranked.hits[0]
    assert ranked.found and best.how == "message" and best.kind == "entry"
    assert INDEX.entries[best.ref]["heading"] == "Weight sync cannot connect between trainer and server hosts"


def test_words_without_an_answer_give_suggestions_not_a_match() -> None:
    text = "banana smoothie recipe"
    ranked = RANKER.rank(text, search_words(text), {})
    assert not ranked.found and all(h.how == "words" for h in ranked.hits)


def test_a_config_key_named_exactly_counts_more_than_its_words() -> None:
    text = "what does vllm_group_port do when two jobs share a host"
    best = RANKER.rank(text, search_words(text), {}).hits[0]
    assert "vllm_group_port" in best.matched


def test_the_users_release_favours_its_release_history_row() -> None:
    text = "TRL vllm floor raised only"
    row = next(i for i, r in enumerate(INDEX.rows) if r["cells"][0] == "TRL 1.3")

    def score(releases: Dict[str, str]) -> float:
        hits = RANKER._words(text, search_words(text), releases)
        return next(h.score for h in hits if h.kind == "row" and h.ref == row)

    assert score({"trl": "1.3.0"}) > score({}) > score({"trl": "1.12.0"})
