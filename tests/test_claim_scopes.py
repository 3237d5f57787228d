"""Release scopes in the skill text (``tools/claim_scopes.py``), checked against ``tests/facts/release_history.json``.

Each planted error kind fails in every scope form, naming the file, the line and the releases where the fact really
holds; the same claims with true scopes pass.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Tuple

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import claim_scopes as cs  # noqa: E402
import skill_claims as sc  # noqa: E402

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "claims" / "scopes"
HISTORY_PATH = REPO_ROOT / "tests" / "facts" / "release_history.json"
DEV_ENDPOINTS = (
    "> `The vLLM server at http://10.0.0.5:8000 does not expose its development endpoints, which TRL uses to "
    "synchronize weights. Restart it with …`"
)
WINDOW = "\n## Versions (time-sensitive)\n\n**Unless marked:** TRL 1.14–1.16, vLLM 0.22–0.31.\n"


def _scope_failures(tmp_path: Path, text: str) -> List[sc.Failure]:
    path = tmp_path / "doc.md"
    path.write_text(text, encoding="utf-8")
    failures, _ = sc.check_paths([path], root=tmp_path, allowlist_path=None)
    return [f for f in failures if f.kind.startswith("scope")]


def _line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


# ---- the grammar ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "form", "lo", "hi"),
    [
        ("TRL ≥ 1.14", "atleast", (1, 14), None),
        ("TRL >= 1.14", "atleast", (1, 14), None),
        ("TRL 1.14+", "plus", (1, 14), None),
        ("since TRL 1.14", "since", (1, 14), None),
        ("from TRL 1.14", "since", (1, 14), None),
        ("added in TRL 1.14", "added", (1, 14), None),
        ("TRL ≤ 1.10", "atmost", None, (1, 10)),
        ("TRL <= 1.10", "atmost", None, (1, 10)),
        ("until TRL 1.10", "until", None, (1, 10)),
        ("TRL 1.11–1.13", "range", (1, 11), (1, 13)),
        ("TRL 1.11-1.13", "range", (1, 11), (1, 13)),
        ("TRL 1.11 to 1.13", "range", (1, 11), (1, 13)),
        ("TRL 1.16", "single", (1, 16), (1, 16)),
        ("removed in TRL 1.8", "removed", (1, 8), None),
        ("deprecated in TRL 1.15", "deprecated", (1, 15), None),
        ("vLLM ≥ 0.22", "atleast", (0, 22), None),
        ("vLLM 0.27–0.31", "range", (0, 27), (0, 31)),
        ("vLLM <= 0.26", "atmost", None, (0, 26)),
    ],
)
def test_every_scope_form_parses(text: str, form: str, lo, hi) -> None:
    (scope,) = cs.parse_scopes(f"Holds for {text}, not otherwise.")
    assert (scope.form, scope.lo, scope.hi) == (form, lo, hi)
    assert scope.package == ("vllm" if "vLLM" in text else "trl")


@pytest.mark.parametrize("text", ["TRL 1.14–1.16, vLLM 0.22–0.31.", "Holds for TRL 1.11-1.13. Next sentence."])
def test_a_range_that_ends_a_sentence_stays_a_range(text: str) -> None:
    # SCOPES.md's own window example ends with a period after the range.
    assert [scope.form for scope in cs.parse_scopes(text)] == ["range"] * text.count("–") + ["range"] * text.count("-")


def test_scope_ranges_resolve_to_indexed_releases() -> None:
    history = cs.History.load(HISTORY_PATH)

    def versions(text: str) -> List[str]:
        (scope,) = cs.parse_scopes(text)
        indices = history.scope_indices(scope)
        assert indices is not None
        return [history.releases[scope.package][i] for i in indices]

    assert versions("TRL ≤ 1.1") == ["1.0.0", "1.1.0"]  # open scopes start at 1.0, not at the indexed 0.x
    assert versions("TRL ≥ 1.15") == ["1.15.0", "1.16.0"]
    assert versions("removed in TRL 1.2") == ["1.0.0", "1.1.0"]
    assert versions("TRL 0.25–1.0") == ["0.25.1", "0.29.1", "1.0.0"]
    assert versions("vLLM ≥ 0.30")[-1] == "0.31.0"  # 0.33.0 is outside every TRL release's extra
    assert versions("vLLM 0.33") == ["0.33.0"]
    (unindexed,) = cs.parse_scopes("TRL 0.21–1.0")
    assert history.scope_indices(unindexed) is None  # a 0.x minor the facts do not hold: not checked


# ---- fixtures ------------------------------------------------------------------------------------------------------


def test_true_scopes_pass_and_are_checked() -> None:
    failures, checker = sc.check_paths([FIXTURES / "good.md"], root=FIXTURES, allowlist_path=None)
    assert [f.format() for f in failures] == []
    kinds = {kind for _, _, kind, _ in checker.claims}
    assert {"message", "flag", "env", "identifier"} <= kinds


EXPECTED_BAD: List[Tuple[str, str, str]] = [
    # (needle on the line, failure kind, what the failure must say)
    ("TRL 1.11–1.16:", "scope", "it holds in TRL 1.16"),  # the quote under it (defect: server-mode messages)
    ("has no weight-transfer engine", "scope", "it holds in TRL 1.16"),
    ("Since TRL 1.11 the trainer", "scope", "it holds in TRL 1.16"),
    ("Since TRL 1.11 the trainer", "scope-added", "in TRL 1.16"),
    ("TRL 0.19–1.10 raises", "scope", "it holds in TRL 0.25–1.10"),  # defect: same-CUDA-device message
    ("where vLLM has it", "scope", "it holds in TRL 1.14–1.16"),  # defect: --enable-scale-out in a 1.11-1.16 row
    ("Added in TRL 1.12", "scope", "it holds in TRL 1.14–1.16"),
    ("Added in TRL 1.12", "scope-added", "'--enable-scale-out' in TRL 1.14–1.16"),
    ("max_prompt_length", "scope", "it holds in TRL 0.19–0.25"),  # a removed field presented as current
    ("until TRL 1.12", "scope", "it holds in TRL 0.19–1.10"),
    ("until TRL 1.12", "scope-until", "'VLLM_DP_RANK' in TRL 0.19–1.10"),
    ("removed in TRL 1.10", "scope-removed", "'VLLM_DP_RANK' in TRL 0.19–1.10"),
    ("deprecated; use the Hub", "scope-deprecated", "warns in TRL 1.15–1.16"),  # defect: use_liger_kernel
    ("deprecated in TRL 1.14", "scope-deprecated", "warned in TRL 1.15–1.16"),
    ("accepts `vllm<=0.31.0", "scope-extra", "vllm<=0.30.0,>=0.20.0"),
    ("`lm_head` in `target_modules`", "scope-refused", "AsyncGRPOTrainer refuses it in TRL 1.14–1.16"),  # defect 5
]


def test_every_planted_scope_error_fails_with_file_line_and_real_releases() -> None:
    path = FIXTURES / "bad.md"
    failures, _ = sc.check_paths([path], root=FIXTURES, allowlist_path=None)
    got = {(f.line, f.kind): f.format() for f in failures}
    expected = set()
    for needle, kind, says in EXPECTED_BAD:
        line = _line_of(path, needle) + (2 if needle.endswith(":") else 0)
        expected.add((line, kind))
        assert (line, kind) in got, f"{needle!r}: no {kind} failure on line {line}; got {sorted(got)}"
        assert got[(line, kind)].startswith(f"bad.md:{line}: [{kind}]")
        assert says in got[(line, kind)], got[(line, kind)]
    scope_kinds = {key for key in got if key[1].startswith("scope")}
    assert scope_kinds == expected, sorted(scope_kinds - expected)


# ---- each error kind in every scope form and unit ------------------------------------------------------------------

WIDE_FORMS = [
    "TRL 1.11–1.16",
    "TRL 1.11-1.16",
    "TRL 1.11 to 1.16",
    "TRL ≥ 1.11",
    "TRL >= 1.11",
    "TRL 1.11+",
    "since TRL 1.11",
    "from TRL 1.11",
    "added in TRL 1.11",
    "TRL ≤ 1.16",
    "TRL <= 1.16",
    "until TRL 1.16",
]


@pytest.mark.parametrize("form", WIDE_FORMS)
@pytest.mark.parametrize("unit", ["quote", "row", "item", "sentence", "heading"])
def test_a_116_only_message_scoped_wider_fails_in_every_form_and_unit(tmp_path: Path, form: str, unit: str) -> None:
    quote = "The vLLM server at http://x does not expose its development endpoints, which TRL uses to synchronize"
    text = {
        "quote": f"# T\n\n{form}:\n\n{DEV_ENDPOINTS}\n",
        "row": f'# T\n\n| {form} | the trainer stops with "{quote}" |\n|---|---|\n',
        "item": f'# T\n\n- On {form} the trainer stops with "{quote}".\n',
        "sentence": f'# T\n\nThat is fine. On {form} the trainer stops with "{quote}". Fine.\n',
        "heading": f'# T\n\n## Server mode ({form})\n\nThe trainer stops with "{quote}".\n',
    }[unit] + WINDOW
    failures = [f for f in _scope_failures(tmp_path, text) if f.kind == "scope"]
    assert len(failures) == 1, [f.format() for f in failures]
    assert "it holds in TRL 1.16" in failures[0].format()
    assert failures[0].format().startswith("doc.md:")


@pytest.mark.parametrize("form", ["added in TRL 1.12", "since TRL 1.12", "from TRL 1.12", "Added in TRL 1.12"])
def test_added_in_a_release_before_the_fact_fails(tmp_path: Path, form: str) -> None:
    text = f"# T\n\n- {form[0].upper() + form[1:]}: `trl vllm-serve` passes `--enable-scale-out` on.\n" + WINDOW
    kinds = {f.kind: f.format() for f in _scope_failures(tmp_path, text)}
    assert "scope-added" in kinds and "TRL 1.14–1.16" in kinds["scope-added"]
    fixed = text.replace("1.12", "1.14")
    assert _scope_failures(tmp_path, fixed) == []


@pytest.mark.parametrize("window", ["TRL 1.14–1.16", "TRL 1.14-1.16", "TRL 1.14 to 1.16", "TRL ≥ 1.14", "TRL 1.14+"])
def test_a_removed_field_presented_as_current_fails_under_every_window_form(tmp_path: Path, window: str) -> None:
    text = "# T\n\nSet `GRPOConfig.max_prompt_length` to cap prompts.\n\n## Versions (time-sensitive)\n\n"
    text += f"**Unless marked:** {window}.\n"
    (failure,) = _scope_failures(tmp_path, text)
    assert failure.kind == "scope" and "it holds in TRL 0.19–0.25" in failure.format()
    assert "file window" in failure.format()
    scoped = text.replace("to cap prompts", "to cap prompts (TRL 0.19–0.25)")
    assert _scope_failures(tmp_path, scoped) == []


@pytest.mark.parametrize("form", ["until TRL 1.12", "TRL ≤ 1.12", "TRL <= 1.12"])
def test_a_removed_env_var_scoped_past_its_last_release_fails(tmp_path: Path, form: str) -> None:
    text = f"# T\n\n- TRL's own server sets `VLLM_DP_RANK` ({form}).\n" + WINDOW
    failures = _scope_failures(tmp_path, text)
    assert any(f.kind == "scope" and "TRL 0.19–1.10" in f.format() for f in failures), failures
    assert _scope_failures(tmp_path, text.replace("1.12", "1.10")) == []


def test_a_scope_after_the_quote_on_its_line_scopes_it(tmp_path: Path) -> None:
    text = f"# T\n\n{DEV_ENDPOINTS} (TRL ≥ 1.11)\n" + WINDOW
    failures, _ = sc.check_paths([_write(tmp_path, text)], root=tmp_path, allowlist_path=None)
    assert [(f.line, f.kind) for f in failures] == [(3, "scope")], [f.format() for f in failures]
    fixed = text.replace("TRL ≥ 1.11", "TRL 1.16")
    assert sc.check_paths([_write(tmp_path, fixed)], root=tmp_path, allowlist_path=None)[0] == []


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "doc.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_scope_only_blockquote_line_scopes_the_quote_under_it(tmp_path: Path) -> None:
    text = f"# T\n\n> TRL 1.11–1.16:\n{DEV_ENDPOINTS}\n" + WINDOW
    (failure,) = _scope_failures(tmp_path, text)
    assert failure.line == 4


@pytest.mark.parametrize(
    "form",
    [
        "vLLM ≥ 0.20",
        "vLLM >= 0.20",
        "vLLM 0.20+",
        "since vLLM 0.20",
        "from vLLM 0.20",
        "vLLM 0.20–0.31",
        "vLLM 0.20-0.31",
        "vLLM 0.20 to 0.31",
    ],
)
def test_vllm_scopes_check_vllm_facts_in_every_form(tmp_path: Path, form: str) -> None:
    history = cs.History.load(HISTORY_PATH)
    table = history.facts["vllm"]["flag"]
    first_22 = history.index_of("vllm", (0, 22))
    newer = sorted(
        flag
        for flag, mask in table.items()
        if mask >> first_22 & 1 and not mask >> (first_22 - 1) & 1 and all(mask >> i & 1 for i in range(first_22, 22))
    )
    assert newer, "no vllm serve flag first appears in 0.22"
    flag = newer[0]
    bad = f"# T\n\n- `vllm serve {flag} x` works on {form}.\n" + WINDOW
    failures = [f for f in _scope_failures(tmp_path, bad) if f.kind == "scope"]
    assert failures and "it holds in vLLM 0.22" in failures[0].format(), [f.format() for f in failures]
    assert _scope_failures(tmp_path, bad.replace("0.20", "0.22")) == []


def test_a_file_without_a_window_is_checked_against_the_baseline_release(tmp_path: Path) -> None:
    text = "# T\n\nSet `GRPOConfig.max_prompt_length` to cap prompts.\n"
    (failure,) = _scope_failures(tmp_path, text)
    assert "no window" in failure.format()


def test_check_markers_exempt_their_block_from_scopes(tmp_path: Path) -> None:
    text = f"# T\n\n<!-- check: trl==1.16.0 -->\n{DEV_ENDPOINTS}\n" + WINDOW.replace("1.14", "1.11")
    assert _scope_failures(tmp_path, text) == []


@pytest.mark.parametrize(
    ("sentence", "fails"),
    [
        ("TRL 1.16.0 declares `vllm<=0.31.0,>=0.22.0`; TRL 1.16 is the baseline.", False),
        ("TRL 1.16.0 declares `vllm<=0.31.0,>=0.21.0`; TRL 1.16 is the baseline.", True),
        ("TRL 1.16.0 declares `vllm>=0.22.0,<=0.31.0`.", False),
        ("| TRL 1.15 | `vllm<=0.31.0,>=0.22.0` |", True),
    ],
)
def test_a_quoted_vllm_extra_range_must_be_that_releases_metadata(tmp_path: Path, sentence: str, fails: bool) -> None:
    failures = [f for f in _scope_failures(tmp_path, f"# T\n\n{sentence}\n" + WINDOW) if f.kind == "scope-extra"]
    assert bool(failures) == fails, [f.format() for f in failures]


def test_a_message_quoted_in_prose_across_lines_is_checked(tmp_path: Path) -> None:
    text = '# T\n\n- A shared GPU raises "Attempting to use the same CUDA\n  device" at start-up.\n' + WINDOW
    (failure,) = _scope_failures(tmp_path, text)
    assert failure.line == 3 and "it holds in TRL 0.25–1.10" in failure.format()
    assert _scope_failures(tmp_path, text.replace("at start-up", "at start-up (TRL 0.25–1.10)")) == []


def test_cli_lists_each_scope_checked_claim(capsys) -> None:
    assert sc.main(["--root", str(FIXTURES), str(FIXTURES / "good.md"), "--allowlist", "", "--scopes"]) == 0
    out = capsys.readouterr().out
    assert "good.md:" in out and "[flag] --enable-scale-out stated for TRL 1.14–1.16; holds in TRL 1.14–1.16" in out


# ---- messages quoted in backticks inside prose ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prose", "kind", "holds"),
    [
        (
            "With TRL 1.11–1.13 the trainer stops with `…does not expose its development endpoints…`.",
            "scope",
            "it holds in TRL 1.16",
        ),
        (
            "Adapter-only sync was added in TRL 1.12; the log says `Adapter-only vLLM sync enabled`.",
            "scope",
            "it holds in TRL 1.14–1.16",
        ),
    ],
)
@pytest.mark.parametrize("container", ["paragraph", "list item", "second sentence of a list item"])
def test_a_message_in_backticks_inside_prose_is_a_scoped_claim(
    tmp_path: Path, prose: str, kind: str, holds: str, container: str
) -> None:
    body = {
        "paragraph": prose,
        "list item": f"- {prose}",
        "second sentence of a list item": f"- Server mode needs dev mode on TRL ≥ 1.11. {prose}",
    }[container]
    failures = _scope_failures(tmp_path, f"# T\n\n{body}\n" + WINDOW.replace("1.14–1.16", "1.11–1.16"))
    assert any(f.kind == kind and holds in f.format() for f in failures), [f.format() for f in failures]


@pytest.mark.parametrize(
    "prose",
    [
        "On TRL 1.16 the trainer stops with `…does not expose its development endpoints…`.",
        "Adapter-only sync was added in TRL 1.14; the log says `Adapter-only vLLM sync enabled`.",
        "- Server mode needs dev mode on TRL ≥ 1.11. On TRL 1.16 the trainer says `…does not expose its development "
        "endpoints…`.",
    ],
)
def test_a_backticked_message_with_a_true_scope_passes(tmp_path: Path, prose: str) -> None:
    failures = _scope_failures(tmp_path, f"# T\n\n{prose}\n" + WINDOW.replace("1.14–1.16", "1.11–1.16"))
    assert failures == [], [f.format() for f in failures]


@pytest.mark.parametrize(
    "span",
    [
        "`vllm_tensor_parallel_size`",
        "`--logprobs-mode processed_logprobs`",
        '`model_init_kwargs={"use_kernels": True}`',
    ],
)
def test_names_flags_and_commands_in_backticks_are_not_messages(span: str) -> None:
    assert not cs._looks_like_message(span.strip("`"))
