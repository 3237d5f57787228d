"""The install planner's search and judgement, in process, on the recorded matrix: the issue's cases."""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import pytest
from stack import judge
from stack.goals import GOAL_IDS
from stack.inputs import Keep, PlanRequest, parse_keeps
from stack.matrix import load

from stack_helpers import TRL_10, TRL_18, TRL_116

MATRIX = load()


def _plan(
    wants: Sequence[str],
    installed: Dict[str, str],
    python: str,
    keeps: Sequence[str] = (),
    cuda: Optional[str] = None,
    python_given: bool = False,
) -> dict:
    parsed: Tuple[Keep, ...] = parse_keeps(list(keeps), MATRIX.names())
    request = PlanRequest(
        tuple(wants), parsed, python, python_given, cuda, dict(installed), "./.venv/bin/python", "test", True, 3
    )
    return judge.plan(request, MATRIX)


def test_transformers_524_kept_with_vllm_is_impossible_once_open_ranges_are_capped() -> None:
    # vLLM 0.31-0.33 exclude transformers 5.24; older vLLM releases declare no upper bound, and vLLM's next bounding
    # release (0.31.0: <5.18.0) caps them, so no vLLM is shown to work with 5.24.0 (pip would take 0.30.0)
    result = _plan(["vllm-server"], {**TRL_116, "vllm": "0.33.0"}, "3.12.3", ["transformers==5.24.0"])
    assert result["status"] == "impossible" and result["drop"] == ["--keep transformers==5.24.0"]
    cap = MATRIX.open_cap("vllm", "0.30.0", next(r for r in _reqs("vllm", "0.30.0") if r.key == "transformers"))
    assert cap is not None and cap.spec == "<5.18.0" and "vllm 0.31.0 declares" in cap.text
    # the answer says so: the newest vLLM that only the cap rules out, and what pip alone would do
    capped = [line for line in result["conflicts"] if "ruled out only by a cap" in line]
    assert capped == [
        "vllm 0.30.0 is ruled out only by a cap on a range it left open (vllm 0.30.0 requires transformers>=5.10.4 "
        "(no upper bound; capped <5.18.0), not 5.24.0): pip would accept it, but no later vllm release accepts that "
        "combination"
    ]


def test_a_conflict_of_declared_pins_names_no_cap() -> None:
    # every vLLM pins torch exactly: torch 2.4.0 conflicts with each by a declared pin, none by a cap
    result = _plan(["vllm-server"], {**TRL_116, "vllm": "0.33.0"}, "3.12.3", ["torch==2.4.0"])
    assert result["status"] == "impossible"
    assert [line for line in result["conflicts"] if line.startswith("no vllm release fits")]
    assert not [line for line in result["conflicts"] if "ruled out only by a cap" in line]


def _reqs(name: str, version: str) -> list:
    from stack.matrix import parse_lines

    release = MATRIX.release(name, version)
    assert release is not None
    return parse_lines(release.requires)


def test_keep_trl_0191_gets_a_capped_vllm_and_says_so() -> None:
    result = _plan(["vllm-server"], {}, "3.12", ["trl==0.19.1"], python_given=True)
    first = result["options"][0]
    req = next(r for r in _reqs("trl", "0.19.1") if r.key == "vllm")
    assert req.specifier == ">=0.8.3"  # declared without an upper bound
    cap = MATRIX.open_cap("trl", "0.19.1", req)
    assert cap is not None
    from common import versions

    assert versions.specifier_contains(cap.spec, first["set"]["vllm"])
    # the cap is the bound of the next TRL release that bounds vllm, far below the newest vLLM
    assert first["set"]["vllm"] != MATRIX.newest("vllm")
    assert any(
        c.startswith("trl 0.19.1 declares vllm>=0.8.3 without an upper bound; capped at") for c in first["capped"]
    )


def test_a_bounded_requirement_is_never_capped() -> None:
    req = next(r for r in _reqs("trl", "1.16.0") if r.key == "vllm")
    assert MATRIX.open_cap("trl", "1.16.0", req) is None
    # TRL never bounds transformers: its open range stays open (TRL 1.16 runs on the newest transformers)
    req = next(r for r in _reqs("trl", "1.16.0") if r.key == "transformers" and not r.marker)
    assert MATRIX.open_cap("trl", "1.16.0", req) is None


def _newest_trl_for(goal: str, python: str) -> str:
    """The newest recorded TRL that has a plan for ``goal`` when it is kept (computed, not hard-coded)."""
    for release in reversed(MATRIX.releases["trl"]):
        if _plan([goal], {}, python, [f"trl=={release.version}"], python_given=True)["options"]:
            return release.version
    raise AssertionError(f"no TRL release supports {goal}")


@pytest.mark.parametrize("goal", GOAL_IDS)
def test_a_fresh_environment_gets_the_newest_trl_that_supports_the_goal(goal: str) -> None:
    from common import versions

    python = "3.12"
    first = _plan([goal], {}, python, python_given=True)["options"][0]
    trl = first["set"]["trl"]
    assert trl == _newest_trl_for(goal, python)
    if "vllm" not in first["set"]:
        return
    vllm = first["set"]["vllm"]
    declared = next(r for r in _reqs("trl", trl) if r.key == "vllm" and "vllm" in r.marker)
    assert versions.specifier_contains(declared.specifier, vllm)  # TRL's declared range accepts it
    later = [r for r in MATRIX.releases["trl"] if (versions.compare_versions(r.version, trl) or 0) > 0]
    raised = [
        r.date
        for r in later
        if any(q.key == "vllm" and q.specifier != declared.specifier for q in _reqs("trl", r.version))
    ]
    released = MATRIX.release("vllm", vllm)
    assert released is not None and (not raised or released.date <= min(raised))
    # and it is the newest vLLM inside that range that fits the rest of the plan's set
    newer = [r.version for r in MATRIX.releases["vllm"] if (versions.compare_versions(r.version, vllm) or 0) > 0]
    assert not [v for v in newer if versions.specifier_contains(declared.specifier, v) and v in _fits(goal, trl)]


def _fits(goal: str, trl: str) -> list:
    """vLLM releases that have a plan with ``trl`` kept."""
    found = []
    for release in MATRIX.releases["vllm"]:
        if _plan([goal], {}, "3.12", [f"trl=={trl}", f"vllm=={release.version}"], python_given=True)["options"]:
            found.append(release.version)
    return found


def test_trainer_and_server_images_each_get_their_own_torch() -> None:
    trainer = _plan(["vllm-server"], TRL_116, "3.12.3", ["vllm==0.27.1"])["options"][0]
    server = _plan(["vllm-server"], TRL_116, "3.12.3", ["vllm==0.31.0"])["options"][0]
    assert trainer["set"]["torch"] == "2.13.0" and trainer["set"]["vllm"] == "0.27.1"
    assert server["set"]["vllm"] == "0.31.0"
    assert server["set"]["transformers"] != "5.24.0"  # 0.31.0 caps transformers below 5.18
    assert any("transformers 5.24.0 cannot stay" in line for line in server["why_not_nearer"])


def test_async_grpo_on_trl_18_with_vllm_0191_moves_vllm_to_the_weight_transfer_floor() -> None:
    result = _plan(["async-grpo"], TRL_18, "3.11.9", ["trl==1.8.0"])
    first = result["options"][0]
    assert first["set"]["vllm"] == "0.22.0" and first["set"]["trl"] == "1.8.0"
    assert any(f["feature"] == "async-grpo" and f["spec"] == ">=0.22.0" for f in first["floors"])
    assert any("weight_transfer" in line for line in result["as_installed"])


def test_hub_kernels_with_kept_releases_outside_each_others_range_is_impossible_and_names_the_keeps() -> None:
    result = _plan(["hub-kernels"], TRL_116, "3.12.3", ["transformers==5.24.0", "kernels==0.17.2"])
    assert result["status"] == "impossible" and judge.exit_code(result) == 1
    assert result["drop"] == ["--keep transformers==5.24.0", "--keep kernels==0.17.2"]


def test_hub_kernels_adds_the_kernels_release_the_installed_transformers_accepts() -> None:
    """transformers 5.24.0 takes kernels >=0.18.2,<0.19: PyPI has 0.18.3 since 2026-11-12 (none before)."""
    first = _plan(["hub-kernels"], TRL_116, "3.12.3")["options"][0]
    assert first["set"]["transformers"] == "5.24.0"
    kernels = next(c for c in first["changes"] if c["package"] == "kernels")
    assert kernels["to"] == "0.18.3"


def test_qlora_fsdp_on_an_older_stack_adds_peft_and_bitsandbytes_above_the_floors() -> None:
    result = _plan(["qlora", "fsdp2"], TRL_10, "3.10.12")
    first = result["options"][0]
    assert first["set"]["trl"] == "1.0.0"  # moving TRL ranks after adding libraries
    assert {"peft", "bitsandbytes"} <= set(first["set"])
    features = {f["feature"] for f in first["floors"]}
    assert {"fsdp2", "fsdp-qlora"} <= features  # the FSDP+QLoRA floors come with the pair of goals


def test_qlora_alone_does_not_carry_the_fsdp_qlora_floors() -> None:
    first = _plan(["qlora"], TRL_10, "3.10.12")["options"][0]
    assert "fsdp-qlora" not in {f["feature"] for f in first["floors"]}


def test_python_constraint_rules_out_releases_and_names_the_flag() -> None:
    result = _plan(["vllm-server"], {}, "3.9", ["trl==1.16.0"], python_given=True)
    assert result["status"] == "impossible"
    assert any("needs Python" in p["reason"] for p in result["problems"])
    assert any(d.startswith("--python 3.9") for d in result["drop"])


def test_cuda_12_keeps_vllm_and_torch_on_cuda_12_wheels() -> None:
    result = _plan(
        ["vllm-server"],
        {
            "trl": "1.14.0",
            "transformers": "5.5.3",
            "torch": "2.10.0",
            "accelerate": "1.12.0",
            "datasets": "4.7.0",
            "huggingface-hub": "1.3.0",
        },
        "3.11.9",
        cuda="12",
    )
    for option in result["options"]:
        assert all(v.startswith("12") for v in option["cuda"].values() if v), option


def test_satisfied_goal_prints_no_pip_line() -> None:
    result = _plan(["ddp"], TRL_116, "3.12.3")
    assert result["status"] == "satisfied" and result["options"][0]["pip"] is None


def test_fast_specifier_path_agrees_with_the_shared_helper_on_every_recorded_pair() -> None:
    from common import versions
    from stack import resolve
    from stack.matrix import parse_lines

    checked = 0
    for releases in MATRIX.releases.values():
        for release in releases:
            for req in parse_lines(release.requires):
                for candidate in MATRIX.releases.get(req.key, [])[::3]:
                    fast = resolve._contains(req.specifier, candidate.version, {})
                    assert fast == (versions.specifier_contains(req.specifier, candidate.version) is not False)
                    checked += 1
    assert checked > 1000
