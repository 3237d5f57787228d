"""tools/claims/check_ranges.py: a declared range quoted beside one TRL minor must be what that minor declares."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Tuple

TOOLS_DIR = Path(__file__).resolve().parent.parent / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

from claims.check_ranges import RangeChecks, range_claims  # noqa: E402


class _Probe(RangeChecks):
    def __init__(self) -> None:
        self.failures: List[Tuple[int, str, Tuple[str, ...]]] = []
        self.claims: List[Tuple[int, str]] = []

    def fail(self, path, line, kind, identifier, where, candidates=(), note=""):
        self.failures.append((line, identifier, tuple(candidates)))

    def record(self, path, line, kind, identifier):
        self.claims.append((line, identifier))


def _check(text: str, rel: str = "troubleshooting/example.md") -> _Probe:
    probe = _Probe()
    probe.check_ranges(rel, text)
    return probe


def test_the_release_s_own_range_passes_in_either_clause_order() -> None:
    probe = _check("| TRL 1.16 | `vllm<=0.31.0,>=0.22.0` |\nTRL 1.8: `vllm>=0.16.0,<=0.23.0`\n")
    assert probe.failures == [] and [c[1] for c in probe.claims] == ["vllm<=0.31.0,>=0.22.0", "vllm>=0.16.0,<=0.23.0"]


def test_a_stale_range_fails_and_names_the_declared_one() -> None:
    probe = _check("| TRL 1.16 | `vllm<=0.30.0,>=0.22.0` |\n")
    assert len(probe.failures) == 1
    line, identifier, nearest = probe.failures[0]
    assert (line, identifier) == (1, "vllm<=0.30.0,>=0.22.0")
    assert "vllm<=0.31.0,>=0.22.0" in nearest


def test_lines_naming_several_releases_or_a_span_of_them_are_not_judged() -> None:
    assert range_claims("TRL 1.0 and TRL 1.16: `vllm<=0.17.1,>=0.10.2`") == []
    assert range_claims("TRL 1.11–1.16 accept `vllm<=0.17.1`") == []


def test_advice_pins_and_the_generated_section_are_left_alone() -> None:
    assert _check("TRL 1.16 with `deepspeed!=0.19.2` or `requests>=2.32.2`").failures == []
    assert _check("| TRL 1.16 | `vllm<=0.30.0` |", rel="troubleshooting/compatibility.md").failures == []
