"""diagnostic/rules.py: the one-line verdict over the judged backends (the per-backend rules are exercised through
real runs in tests/test_check_optional_backends.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from diagnostic.rules import verdict_line

from diagnostic_helpers import add_dist, add_fixture_dist, add_stack, backend, fake_nvidia_smi, run_script

BACKENDS = [
    {"id": "ddp", "status": "ready"},
    {"id": "fsdp2", "status": "ready"},
    {"id": "deepspeed", "status": "limited"},
    {"id": "vllm-server", "status": "unavailable"},
]


def test_the_verdict_line_groups_backends_by_status() -> None:
    assert verdict_line(BACKENDS, (), probed=True) == (
        "verdict: ready: ddp, fsdp2; limited: deepspeed; unavailable: vllm-server"
    )
    assert verdict_line([], (), probed=True) == "verdict: ready: none; limited: none; unavailable: none"
    assert verdict_line(BACKENDS[:1], (), probed=False).endswith(
        "(static checks; imports not probed: add --probe-imports)"
    )


def test_the_verdict_line_says_whether_require_is_met() -> None:
    assert verdict_line(BACKENDS, ("ddp", "fsdp2"), probed=True).endswith("; --require ddp,fsdp2: met")
    assert verdict_line(BACKENDS, ("ddp", "vllm-server", "deepspeed"), probed=True).endswith(
        "; --require ddp,vllm-server,deepspeed: FAILED (deepspeed, vllm-server not ready)"
    )


# --- a name the rule looks for in installed source, absent from the newest wheels (real runs) -------------------------

ACCELERATE_116_CONSTANTS = (
    "# Shape of accelerate-1.16.0 accelerate/utils/constants.py: FSDP2_PYTORCH_VERSION is gone.\n"
)
TRL_ASYNC_GRPO_WITHOUT_SYNC = "# async_grpo_trainer.py of a TRL whose adapter-sync function has another name.\n"


def _fsdp2_site(tmp_path: Path, accelerate: str, requires_torch: str) -> Path:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    shutil.rmtree(site / "accelerate-1.15.0.dist-info")
    files = {"accelerate/utils/constants.py": ACCELERATE_116_CONSTANTS}
    if accelerate == "1.16.0":  # the real 1.16.0 header: Requires-Dist torch>=2.6.0
        add_fixture_dist(site, "accelerate-1.16.0", files=files)
    else:
        add_dist(site, "accelerate", accelerate, requires=[f"torch{requires_torch}"], files=files)
    fake_nvidia_smi(tmp_path / "bin")
    return site


def test_the_newest_accelerate_and_trl_shapes_say_could_not_read_never_missing(tmp_path: Path) -> None:
    """accelerate 1.16.0 drops FSDP2_PYTORCH_VERSION and states torch>=2.6.0 in its metadata; a TRL whose
    async_grpo_trainer.py has no select_adapter_sync (as the newest TRL could ship) is unverified, not missing."""
    site = _fsdp2_site(tmp_path, "1.16.0", ">=2.6.0")
    trl_source = site / "trl" / "experimental" / "async_grpo" / "async_grpo_trainer.py"
    trl_source.write_text(TRL_ASYNC_GRPO_WITHOUT_SYNC, encoding="utf-8")
    add_fixture_dist(site, "vllm-0.31.0")
    for name, version in (("requests", "2.32.5"), ("aiohttp", "3.13.3")):
        add_dist(site, name, version)
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    fsdp2 = backend(report, "fsdp2")
    assert fsdp2["status"] == "ready", fsdp2
    assert (
        "could not read FSDP2_PYTORCH_VERSION (accelerate/utils/constants.py) in accelerate 1.16.0; its metadata "
        "requires torch >=2.6.0 (FSDP2's floor since 1.16.0)" in fsdp2["evidence"]
    )
    assert not any("missing" in line for line in fsdp2["evidence"])
    lora = backend(report, "async-grpo-lora")
    assert lora["status"] == "limited" and lora["next_step"] is None, lora
    assert (
        "could not read select_adapter_sync (trl/experimental/async_grpo/async_grpo_trainer.py) in trl 1.16.0: "
        "adapter-only LoRA sync is unverified" in lora["evidence"]
    )


def test_fsdp2_never_advises_an_upgrade_past_the_newest_accelerate(tmp_path: Path) -> None:
    site = _fsdp2_site(tmp_path, "9.0.0", ">=2.0.0")  # newer than any recorded release, no torch floor to read
    fsdp2 = backend(run_script(["--json"], [site], tmp=tmp_path).json(), "fsdp2")
    assert fsdp2["status"] == "limited" and fsdp2["next_step"] is None
    assert fsdp2["evidence"][-1].startswith("could not read FSDP2_PYTORCH_VERSION (accelerate/utils/constants.py) in")
    assert "FSDP2's torch floor is unverified" in fsdp2["evidence"][-1]
