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
