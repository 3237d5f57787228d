"""The lookup's report and text (``scripts/lookup/render.py``): verdict first, within 100 columns and the size
bound, the variant for the user's releases, the upstream-fixes section when the seam returns any."""

from __future__ import annotations

from common import troubleshooting
from common.troubleshooting import search_words
from lookup.rank import Ranker
from lookup.render import MAX_CHARS, build_report, render_text

INDEX = troubleshooting.load_index()
RANKER = Ranker(INDEX)


def _report(text: str, releases: dict, fixes: list = []) -> dict:  # noqa: B006
    ranked = RANKER.rank(text, search_words(text), releases)
    return build_report(ranked, INDEX, releases, {p: "--trl" for p in releases}, fixes, 0.01)


def test_the_best_entry_comes_first_with_its_variant() -> None:
    line = "NCCL WARN socketStartConnect: Connect to 10.1.1.1<33333> failed : Connection timed out"
    report = _report(line, {"trl": "1.9.0"})
    best = report["results"][0]
    assert report["verdict"] == "found" and best["how"] == "message"
    assert best["variant"]["label"] == "TRL ≤ 1.10" and "trainer connects" in best["variant"]["text"]
    text = render_text(report)
    assert text.startswith("find_fix: best match: troubleshooting/multi-node.md:")
    assert "Your releases (TRL ≤ 1.10)" in text and "How it knows: the quoted message" in text


def test_every_output_fits_the_width_and_the_size_bound() -> None:
    for text in ("weight sync hangs", "zero3 adapter saved empty", "socket timeout group port", "liger", "oom"):
        for releases in ({}, {"trl": "1.12.0", "vllm": "0.27.1"}):
            out = render_text(_report(text, releases))
            assert len(out) <= MAX_CHARS and all(len(line) <= 100 for line in out.splitlines()), text


def test_no_match_lists_the_nearest_entries_and_where_to_look() -> None:
    report = _report("banana smoothie recipe", {})
    assert report["verdict"] == "no_match" and report["results"] == []
    text = render_text(report)
    assert "no entry matches" in text and "troubleshooting/README.md" in text and "triage_log.py" in text


def test_upstream_fixes_have_a_section_and_a_key() -> None:
    fixes = {
        "fixes": [{"package": "trl", "release": "1.13.0", "pr": 1, "title": "name the weight-sync failure"}],
        "moves": [],
        "lines": ["  trl 1.13.0: name the weight-sync failure (#1)"],
    }
    report = _report("weight sync failed", {"trl": "1.12.0"}, fixes)
    assert report["upstream_fixes"] == fixes
    assert (
        "after your release (index of merged changes by release):\n  trl 1.13.0: name the weight-sync failure (#1)"
        in (render_text(report))
    )
    assert _report("weight sync failed", {"trl": "1.12.0"}, None)["upstream_fixes"] is None
