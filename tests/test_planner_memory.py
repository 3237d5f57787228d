"""planner/memory.py: the DeepSpeed estimator formulas against DeepSpeed's published examples."""

from __future__ import annotations

import pytest
from planner import memory as pmem

GB = 2**30  # DeepSpeed's estimator prints bytes / 2**30 as "GB"


# ---------------------------------------------------------------------------------------------------------------
# DeepSpeed estimator formulas (deepspeed 0.19.8, docs/code-docs/source/memory.rst published examples)
# ---------------------------------------------------------------------------------------------------------------


def test_zero2_matches_deepspeed_published_example_3b_on_8_gpus():
    # estimate_zero2_model_states_mem_needs_all_cold(total_params=2851e6, num_gpus_per_node=8, num_nodes=1)
    cpu, gpu = pmem.ds_zero2_model_states(int(2851e6), 8, 1, cpu_offload=True)
    assert (round(cpu / GB, 2), round(gpu / GB, 2)) == (127.45, 5.31)
    cpu, gpu = pmem.ds_zero2_model_states(int(2851e6), 8, 1, cpu_offload=False)
    # 0.19.8 code: 2P + 18P/N. memory.rst still prints 15.93GB here, which is its older text formula
    # 4P + 16P/N; the planner follows the code of the pinned release.
    assert (round(cpu / GB, 2), round(gpu / GB, 2)) == (127.45, 11.28)
    assert round((4 * 2851e6 + 16 * 2851e6 / 8) / GB, 2) == 15.93


@pytest.mark.parametrize(
    ("offload", "offload_params", "zero_init", "cpu_gb", "gpu_gb"),
    [
        (True, True, True, 71.69, 0.12),
        (True, True, False, 127.45, 0.12),
        (True, False, True, 63.72, 0.78),
        (True, False, False, 127.45, 0.78),
        (False, False, True, 1.43, 6.09),
        (False, False, False, 127.45, 6.09),
    ],
)
def test_zero3_matches_deepspeed_published_example_3b_on_8_gpus(offload, offload_params, zero_init, cpu_gb, gpu_gb):
    # estimate_zero3_model_states_mem_needs_all_cold(total_params=2851e6, largest_layer_params=32e6, 8 GPUs)
    cpu, gpu, _ = pmem.ds_zero3_model_states(int(2851e6), int(32e6), 8, 1, offload, offload_params, zero_init)
    assert (round(cpu / GB, 2), round(gpu / GB, 2)) == (cpu_gb, gpu_gb)


def test_zero3_matches_deepspeed_t5_large_worked_example():
    # memory.rst: t5-large, 737.67M params, 32.90M largest layer, 4 GPUs -> 3291 / 125 / 477 MB
    total, largest = 737_668_096, 32_899_072
    _, case1, _ = pmem.ds_zero3_model_states(total, largest, 4, 1, cpu_offload=False, cpu_offload_params=False)
    _, case2, _ = pmem.ds_zero3_model_states(total, largest, 4, 1, cpu_offload=True, cpu_offload_params=True)
    _, case3, _ = pmem.ds_zero3_model_states(total, largest, 4, 1, cpu_offload=True, cpu_offload_params=False)
    assert (case1 >> 20, case2 >> 20, case3 >> 20) == (3291, 125, 477)


# ---------------------------------------------------------------------------------------------------------------
# The band: the verdict uses the upper edge
# ---------------------------------------------------------------------------------------------------------------


def _estimate(states_gib: float, approx_gib: float) -> pmem.Estimate:
    return pmem.Estimate("full", "ddp", 1, {"weights": int(states_gib * GB)}, {"activations": int(approx_gib * GB)},
                         None, "", "")  # fmt: skip


def test_total_is_printed_with_its_band():
    text = _estimate(17.3, 10.1).total_text()
    assert text == f"27.4 GiB (exact states 17.3 + approx 10.1, ±{pmem.APPROX_BAND * 100:.0f}%)"


def test_fit_verdict_uses_the_point_estimate_and_says_when_it_is_tight():
    # Under 90% of 30 GiB (27): 20 exact + 4 approx = 24 fits with its upper edge 25 inside too; 20 + 6 = 26 fits by
    # its point value although its upper edge 27.5 is above (said: tight); 20 + 8 = 28 does not fit.
    assert pmem.FIT_POSITION == 0.0
    roomy = _estimate(20, 4)
    pmem.judge(roomy, 30 * GB, 0.10, None)
    assert roomy.fits is True and "tight" not in roomy.reason
    tight = _estimate(20, 6)
    pmem.judge(tight, 30 * GB, 0.10, None)
    assert tight.fits is True and "tight" in tight.reason and tight.upper_bytes > 27 * GB
    over = _estimate(20, 8)
    pmem.judge(over, 30 * GB, 0.10, None)
    assert over.fits is False and "point estimate" in over.reason


def test_grpo_logits_cover_the_completion_tokens_only(capsys) -> None:
    """TRL 1.14 GRPO materialises the logits of the completion tokens (logits_to_keep), not prompt + completion;
    TRL 1.16 computes them in fused tiles."""
    import json

    import plan_training as pt

    argv = ["--params", "7B", "--trainer", "grpo", "--method", "lora", "--gpus", "2", "--gpu-memory-gib", "80"]
    argv += ["--micro-batch", "4", "--seq-len", "3072", "--max-completion-length", "1024", "--json"]
    pt.main([*argv, "--trl-version", "1.14.2"])
    old = json.loads(capsys.readouterr().out)["candidates"][0]["terms_gib"]["approx"]
    vocab = 32000  # the 7B reference shape (Mistral-7B)
    expected = 4 * 1024 * vocab * pmem.FULL_LOGITS_BYTES / 2**30
    assert old["logits of the scored tokens (materialised)"] == pytest.approx(expected, abs=0.001)
    pt.main([*argv, "--trl-version", "1.16.0"])
    new = json.loads(capsys.readouterr().out)["candidates"][0]["terms_gib"]["approx"]
    assert new["LM-head tile"] == pytest.approx(4096 * vocab * 8 / 2**30, abs=0.001)
    assert "logits of the scored tokens (materialised)" not in new
