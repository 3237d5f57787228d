"""The release history (``tests/facts/release_history.json``, built by ``tools/facts/history.py`` through
``tools/refresh_upstream_facts.py``): which indexed release each fact appears in."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import claim_scopes as cs  # noqa: E402
import refresh_upstream_facts as refresh  # noqa: E402
from facts import history  # noqa: E402

HISTORY_PATH = REPO_ROOT / "tests" / "facts" / "release_history.json"


def _raw(fields: dict, messages: list, flags: list, requires: list) -> dict:
    return {
        "classes": {
            "trl.trainer.base_config._BaseConfig": {"bases": [], "fields": {"seed": {"default": "42"}}},
            "trl.trainer.grpo_config.GRPOConfig": {
                "bases": ["trl.trainer.base_config._BaseConfig"],
                "fields": fields,
            },
        },
        "clis": {"trl vllm-serve": {"flags": flags}},
        "env_vars": {"TRL_X": {}},
        "messages": messages,
        "identifiers": ["helper_fn"],
        "requires_dist": requires,
        "option_literals": ["--enable-scale-out"] if "--enable-scale-out" in flags else [],
    }


def test_flatten_reads_inherited_fields_defaults_flags_and_deprecations() -> None:
    raw = _raw(
        {"use_liger_kernel": {"default": "False"}, "vllm_mode": {"default": "'colocate'"}},
        ["`use_liger_kernel=True` is deprecated and will be removed in v2.0.0.", "Plain message {}."],
        ["--vllm_mode"],
        ['vllm<=0.31.0,>=0.22.0; extra == "vllm"'],
    )
    flat = history.flatten("trl", raw)
    assert {"GRPOConfig.seed", "GRPOConfig.use_liger_kernel"} <= flat["field"]
    assert "GRPOConfig.vllm_mode='colocate'" in flat["default"]
    assert {"--vllm-mode", "--use-liger-kernel", "--seed"} <= flat["flag"]  # dash form; config fields are trl flags
    assert flat["deprecated"] == {"use_liger_kernel"}
    assert "helper_fn" in flat["name"] and "GRPOConfig" in flat["class"]
    assert cs.vllm_extra_spec(sorted(flat["requires"])) == "<=0.31.0,>=0.22.0"


def test_build_history_groups_keys_by_release_bitmap_deterministically() -> None:
    old = history.flatten("trl", _raw({"a_field": {}}, ["Old message."], ["--x"], []))
    new = history.flatten("trl", _raw({"b_field": {}}, ["Old message.", "New message."], ["--x"], []))
    releases = {
        "trl": [
            {"version": "1.0.0", "file": "trl-1.0.0-py3-none-any.whl", "sha256": "0" * 64, "flat": old},
            {"version": "1.1.0", "file": "trl-1.1.0-py3-none-any.whl", "sha256": "1" * 64, "flat": new},
        ]
    }
    doc = history.build_history(releases)
    messages = doc["packages"]["trl"]["facts"]["message"]
    assert messages == {"01": ["New message."], "11": ["Old message."]}
    assert doc["packages"]["trl"]["facts"]["field"]["10"] == ["GRPOConfig.a_field"]
    assert refresh.render(doc) == refresh.render(history.build_history(releases))
    loaded = cs.History(json.loads(refresh.render(doc)))
    assert loaded.lookup("trl", "field", "GRPOConfig.b_field") == 0b10
    assert loaded.label("trl", [0, 1]) == "TRL 1.0–1.1"


def test_history_indexes_every_release_the_refresh_names_with_hashes() -> None:
    data = json.loads(HISTORY_PATH.read_text(encoding="utf-8"))
    for package, versions in refresh.HISTORY.items():
        releases = data["packages"][package]["releases"]
        assert [r["version"] for r in releases] == versions
        assert all(len(r["sha256"]) == 64 and r["file"].endswith(".whl") for r in releases)


def test_history_vllm_releases_cover_every_minor_the_trl_extras_accept() -> None:
    history = cs.History.load(HISTORY_PATH)
    indexed = set(history.minors("vllm"))
    for version in history.releases["trl"]:
        if not version.startswith("1."):
            continue
        spec = cs.vllm_extra_spec(history.requires["trl"][version])
        assert spec is not None, version
        bounds = sorted(cs.minor_of(part.lstrip("<>=")) for part in spec.split(","))
        low, high = bounds[0], bounds[-1]
        assert all((0, m) in indexed for m in range(low[1], high[1] + 1)), (version, spec)
    assert cs.vllm_extra_spec(history.requires["trl"]["1.0.0"]) == "<=0.17.1,>=0.10.2"
    assert cs.vllm_extra_spec(history.requires["trl"]["1.16.0"]) == "<=0.31.0,>=0.22.0"


def test_committed_facts_stay_within_budget() -> None:
    total = sum(p.stat().st_size for p in (REPO_ROOT / "tests" / "facts").iterdir())
    assert total < 6 * 1024 * 1024, total


def test_diff_reads_releases_of_the_history_too(capsys) -> None:
    assert refresh.main(["--diff", "trl", "1.15.0", "1.16.0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("trl 1.15.0 -> 1.16.0 (release history)")
    assert '  + vllm<=0.31.0,>=0.22.0; extra == "vllm"' in out
    assert '  - vllm<=0.31.0,>=0.21.0; extra == "vllm"' in out
    assert refresh.main(["--diff", "trl", "1.15.0", "9.9.9"]) == 2
