"""Which install-planner goal each TRL extra serves: shared by the diagnostic (its next steps) and the planner."""

from __future__ import annotations

EXTRA_GOALS = {
    "vllm": "vllm-server",
    "peft": "peft",
    "deepspeed": "deepspeed",
    "quantization": "qlora",
    "liger": "liger",
    "kernels": "hub-kernels",
}
