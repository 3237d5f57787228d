"""Recognising messages (``scripts/triage/match.py``): every quoted message of the troubleshooting text and every
upstream message of the facts index, the variant of an entry for a release, and the next command."""

from __future__ import annotations

import re

import pytest
from triage import match


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


def test_next_command_fills_the_server_address(index: match.Index) -> None:
    entry = _entry(index, "troubleshooting/vllm.md", "Trainer cannot reach the server")
    command = match.next_command(entry, "The vLLM server can't be reached at http://10.9.8.7:8000 after 240.0 s")
    assert "http://10.9.8.7:8000/health" in command
    assert match.next_command(None, "anything") == "python3 scripts/check_optional_backends.py"


def test_grep_command_takes_a_plain_run_of_the_message() -> None:
    command = match.grep_command("RuntimeError: Expected all tensors to be on the same device, but found cuda:0")
    assert command == 'grep -rn -F "Expected all tensors to be on the same device" troubleshooting/'
    assert re.fullmatch(r'grep -rn -F "[^"$`\\]+" troubleshooting/', command)
    assert match.grep_command("E 1 2 3") == ""
