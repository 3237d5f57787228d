"""Feature floors of a path (stack.floors.path_floors), the helper the memory planner can state."""

from __future__ import annotations

from stack.floors import path_floors


def test_async_grpo_floor_follows_the_trl_release() -> None:
    old = {f.subject: f.spec for f in path_floors(["async-grpo"], "1.6.0")}
    new = {f.subject: f.spec for f in path_floors(["async-grpo"], "1.8.0")}
    assert old["vllm"] == ">=0.17.1" and new["vllm"] == ">=0.22.0"


def test_fsdp2_and_context_parallel_floors_name_their_source() -> None:
    floors = path_floors(["fsdp2", "context-parallel"])
    texts = [f.text() for f in floors]
    assert any(t.startswith("fsdp2: torch>=2.6.0") and "FSDP2_PYTORCH_VERSION" in t for t in texts)
    assert any(t.startswith("context-parallel: accelerate>=1.10.0") for t in texts)


def test_unknown_goals_are_skipped() -> None:
    assert path_floors(["warp-drive"]) == []


def test_fsdp_qlora_floors_come_with_the_pair_and_cite_the_wheels() -> None:
    pair = path_floors(["fsdp2", "qlora"], "1.0.0")
    alone = path_floors(["qlora"], "1.0.0")
    specs = {f.subject: f.spec for f in pair if f.goal == "fsdp2+qlora"}
    assert specs == {
        "bitsandbytes": ">=0.43.0",
        "transformers": ">=4.39.0",
        "accelerate": ">=1.7.0",
        "peft": ">=0.10.0",
    }
    assert all(f.goal != "fsdp2+qlora" for f in alone)
    sources = {f.subject: f.source for f in pair if f.goal == "fsdp2+qlora"}
    assert "bitsandbytes-0.43.0 bitsandbytes/nn/modules.py" in sources["bitsandbytes"]
    assert "accelerate-1.7.0 accelerate/utils/fsdp_utils.py" in sources["accelerate"]
    assert "peft-0.10.0 peft/utils/other.py" in sources["peft"]


def test_with_extras_adds_the_declared_ranges_and_the_warning_range() -> None:
    floors = path_floors(["vllm-server", "deepspeed"], "1.16.0", with_extras=True)
    by_kind = {(f.kind, f.goal, f.subject): f.spec for f in floors}
    assert by_kind[("extra", "vllm-server", "vllm")] == ">=0.22.0,<=0.31.0"
    assert ("warns", "vllm-server", "vllm") not in by_kind  # the same range as the extra's: said once
    assert by_kind[("extra", "deepspeed", "deepspeed")] == ">=0.18.6"
    assert all(f.kind == "requires" for f in path_floors(["vllm-server", "deepspeed"], "1.16.0"))


def test_the_extra_ranges_follow_the_trl_release() -> None:
    old = {f.subject: f.spec for f in path_floors(["vllm-server"], "1.8.0", with_extras=True) if f.kind == "extra"}
    assert old["vllm"] == ">=0.16.0,<=0.23.0"


def test_a_floor_two_goals_share_is_listed_once_under_the_first() -> None:
    floors = path_floors(["async-grpo", "async-grpo-lora"], "1.8.0", with_extras=True)
    vllm = [f for f in floors if f.subject == "vllm" and f.kind == "requires"]
    assert [f.goal for f in vllm] == ["async-grpo"]
    assert [f.goal for f in floors] == sorted((f.goal for f in floors), key=["async-grpo", "async-grpo-lora"].index)


def test_a_floor_another_package_s_releases_share_is_stated_with_their_span() -> None:
    """transformers 5.x all need bitsandbytes >= 0.46.1 (above TRL 1.16's extra): one floor, stated with the span;
    the kernels range differs per transformers release, so it is left to the compatibility tables."""
    floors = path_floors(["qlora", "hub-kernels"], "1.16.0")
    texts = [f.text() for f in floors]
    assert any(t.startswith("qlora: bitsandbytes>=0.46.1 (transformers 5.0.0-5.25.0: ") for t in texts)
    assert not any(f.subject == "kernels" for f in floors)
