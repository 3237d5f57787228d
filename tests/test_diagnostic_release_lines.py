"""The release-differences section as text (``scripts/diagnostic/release_lines.py``): grouped by topic and by
the first release, within 100 columns and the line budget, true for the installed release; compiled only for a
text report with differences to show."""

from __future__ import annotations

import re

import pytest
from diagnostic import release_diff as rdiff
from diagnostic import release_lines as rlines

_VLLM_OF = {"1.5.1": "0.19.1", "1.9.2": "0.25.1", "1.12.0": "0.27.1"}


@pytest.mark.parametrize("version", sorted(_VLLM_OF))
def test_the_section_reads_well_for_an_older_release(version: str) -> None:
    section = rdiff.release_differences(
        {"trl": {"installed": True, "version": version}, "vllm": {"installed": True, "version": _VLLM_OF[version]}}
    )
    lines = rlines.render_lines(section)
    assert len(lines) <= 22 and all(len(line) <= 100 for line in lines), lines
    installed = tuple(int(p) for p in version.split(".")[:2])
    for line in lines:
        first = re.match(r"^    (?:[\w ]+:)?\s+(TRL|vLLM) (\d+)\.(\d+)\+ \(", line)
        if first:  # every group names a release newer than the installed one (the claim does not hold here)
            package_version = (
                installed if first.group(1) == "TRL" else tuple(int(p) for p in _VLLM_OF[version].split(".")[:2])
            )
            assert (int(first.group(2)), int(first.group(3))) > package_version, line
    text = "\n".join(lines)
    trl_part = text.split("  vLLM ")[0]
    assert "--weight-transfer-config" not in trl_part and "--enable-scale-out" not in trl_part
    if installed < (1, 11):  # the server protocol switch reaches a TRL <= 1.10 user through its row
        verbose = "\n".join(rlines.render_lines(section, verbose=True))
        assert "(row TRL 1.11)" in verbose and "server protocol switch" in verbose
    assert "more line(s): --verbose" in text or len(rlines.render_lines(section, verbose=True)) == len(lines)
    topics = re.findall(r"^    (\w[\w ]*):\s+(?:TRL|vLLM) ", text, re.M)
    assert topics and all(topic in rlines.TOPICS for topic in topics)
    assert sum(bool(re.match(r"^    (?:[\w ]+:)?\s+(?:TRL|vLLM) \d", line)) for line in lines) >= 4


def test_what_shows_instead_follows_the_installed_release() -> None:
    section = rdiff.release_differences({"trl": {"installed": True, "version": "1.12.0"}})
    text = "\n".join(rlines.render_lines(section, verbose=True))
    assert 'Request failed: 404, {"detail":"Not Found"}' in text  # the 1.11-1.15 row of the history's table
    older = rdiff.release_differences({"trl": {"installed": True, "version": "1.9.2"}})
    assert "on TRL 1.9.2: Request failed" not in "\n".join(rlines.render_lines(older, verbose=True))


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (None, False),
        ({"packages": [{"package": "trl", "status": "baseline"}]}, False),
        ({"packages": [{"package": "trl", "status": "baseline"}, {"package": "vllm", "status": "indexed"}]}, True),
        ({"packages": [{"package": "trl", "status": "unverified"}]}, True),
        ({"packages": "damaged"}, False),
    ],
)
def test_only_a_section_with_a_non_baseline_release_has_text(section: object, expected: bool) -> None:
    assert rdiff.has_differences(section) is expected
    if section is not None and expected is False and isinstance(section.get("packages"), list):
        assert rlines.render_lines(section) == []  # the renderer agrees: nothing to show for baselines alone
