"""scripts/planner/split.py: the vLLM server/trainer GPU split, TP choices and the GRPO batch geometry."""

from __future__ import annotations

from planner.hardware import Hardware
from planner.model import facts_from_params
from planner.split import batch_geometry, plan_split, tp_choices


def _hw(gpus: int, nodes: int = 1) -> Hardware:
    return Hardware(gpus, nodes, 80.0, [], [], "test")


def test_one_node_server_and_trainer_use_disjoint_gpus() -> None:
    split = plan_split(_hw(8), 2)
    assert split.server_mask == "0,1" and split.trainer_masks == ["2,3,4,5,6,7"] and split.trainer_world == 6


def test_several_nodes_give_node_0_to_the_server_when_that_leaves_more() -> None:
    split = plan_split(_hw(8, 3), 4)
    assert split.layout.startswith("node 0 runs") and split.trainer_world == 16 and split.idle == 4
    uniform = plan_split(_hw(8, 2), 1)
    assert uniform.trainer_world == 14 and uniform.idle == 1  # 2 x 7 beats one node of 8


def test_tp_choices_divide_the_attention_heads() -> None:
    facts = facts_from_params(8_000_000_000)
    assert tp_choices(facts, 8) == [t for t in (1, 2, 4, 8) if facts.heads % t == 0]
    assert tp_choices(facts, 3) == [1, 2]


def test_generation_batch_must_split_into_prompt_groups() -> None:
    good = batch_geometry(4, 2, 2, None, 8)
    assert good.generation_batch == 16 and good.divisible and good.suggestion is None
    bad = batch_geometry(3, 1, 1, None, 8)
    assert not bad.divisible and (3 * bad.suggestion) % 8 == 0
