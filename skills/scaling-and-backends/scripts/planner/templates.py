"""Command templates for a plan: the accelerate/trl/vllm lines a user approves before running.

A sibling module of ``plan_training.py`` (not a command); standard library only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the siblings must not leave __pycache__ in scripts/

from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, NamedTuple  # noqa: E402

_HERE = Path(__file__).resolve().parent.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from planner.assemble import Plan  # noqa: E402
from planner.inputs import PlanRequest  # noqa: E402
from planner.memory import STRATEGIES  # noqa: E402
from planner.split import ASYNC_MAX_STALENESS  # noqa: E402

VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # trl/experimental/async_grpo/async_grpo_trainer.py

PRESET_CHANGES = {
    "zero2-offload": ("zero2", {"deepspeed_config.offload_optimizer_device": "cpu"}),
    "zero3-offload-opt": ("zero3", {"deepspeed_config.offload_optimizer_device": "cpu"}),
    "zero3-offload-all": (
        "zero3",
        {"deepspeed_config.offload_optimizer_device": "cpu", "deepspeed_config.offload_param_device": "cpu"},
    ),
    "fsdp2-offload": ("fsdp2", {"fsdp_config.fsdp_offload_params": True}),
}


# ==============================================================================================================
# Command templates
# ==============================================================================================================


def _round_lora_rank(rank: int) -> int:
    return next((r for r in VLLM_LORA_RANKS if r >= rank), VLLM_LORA_RANKS[-1])


class Commands(NamedTuple):
    """The launch templates (role, command, note) and the config fields for a Python script."""

    commands: List[Dict[str, str]]
    config_fields: Dict[str, Any]


def build_commands(request: PlanRequest, plan: Plan) -> Commands:
    """Launch templates for the recommended candidate. They are shown, never run."""
    pick = plan.recommended or plan.alternative_pick
    if pick is None:
        return Commands([], {})
    model = request.model_id or "<model>"
    setup = pick.setup or plan.setup  # a smallest change may have a smaller micro-batch or another dtype
    trainer = setup.trainer
    world = plan.split.trainer_world
    preset, changes = (STRATEGIES[pick.strategy][2], {}) if pick.strategy in STRATEGIES else (None, {})
    if pick.strategy in PRESET_CHANGES:
        preset, changes = PRESET_CHANGES[pick.strategy]
    if setup.cp_size > 1:  # accelerate ParallelismConfig (accelerate/parallelism_config.py @1.15.0)
        changes = {**changes, "parallelism_config.parallelism_config_cp_size": setup.cp_size}
    if setup.sp_size > 1:
        changes = {
            **changes,
            "parallelism_config.parallelism_config_sp_size": setup.sp_size,
            "parallelism_config.parallelism_config_sp_backend": "deepspeed",
        }
    fp16 = setup.mixed_precision == "fp16"
    if fp16:  # every TRL preset says mixed_precision: bf16 (trl/accelerate_configs/*.yaml @1.16.0)
        changes = {**changes, "mixed_precision": "fp16"}
    if world == 1 and pick.strategy == "ddp":
        preset = "single_gpu"
    commands: List[Dict[str, str]] = []
    fields: Dict[str, Any] = {}
    nodes_training = len(plan.split.trainer_masks)
    v = plan.vllm
    if plan.vllm_mode == "server" and v is not None:
        env = f"CUDA_VISIBLE_DEVICES={plan.split.server_mask} VLLM_SERVER_DEV_MODE=1"
        extra = ""
        if trainer == "async-grpo" and pick.method != "full" and not (plan.lora and plan.lora.merged_sync_reason):
            env += " VLLM_ALLOW_RUNTIME_LORA_UPDATING=1"
            extra = (
                f" --enable-lora --max-lora-rank {_round_lora_rank(request.lora_rank)} --max-loras "
                f"{ASYNC_MAX_STALENESS + 2}"
            )
        dtype = f" --dtype {setup.model_dtype}" if trainer == "async-grpo" else ""
        if fp16 and not dtype:  # vLLM refuses bfloat16 weights below compute capability 8.0
            dtype = " --dtype float16"
        commands.append(
            {
                "role": "vLLM server (node 0)",
                "command": (
                    f"{env} vllm serve {model} --tensor-parallel-size {v.tp} --data-parallel-size 1 "
                    f"--gpu-memory-utilization {v.util:g} --max-model-len {v.max_model_len}{dtype}{extra} "
                    '--enable-scale-out --weight-transfer-config \'{"backend": "nccl"}\' '
                    "--logprobs-mode processed_logprobs --max-logprobs -1"
                ),
                "note": "mirrors what the deprecated trl vllm-serve execs (trl/scripts/vllm_serve.py@1.16.0 "
                "build_command); --enable-scale-out needs vLLM >= 0.30",
            }
        )
    cfg = "<accelerate_config.yaml>"
    preset_note = f"start from TRL preset {preset} (trl/accelerate_configs/{preset}.yaml)" if preset else ""
    if changes:
        preset_note += "; change " + ", ".join(f"{k}: {str(v_).lower()}" for k, v_ in changes.items())
    preset_note += f"; num_processes {world} (the preset says 8)"
    if pick.method == "qlora" and pick.strategy.startswith("fsdp2"):
        preset_note += "; keep fsdp_cpu_ram_efficient_loading: true"
    multi = nodes_training > 1
    # The first training node hosts accelerate's rendezvous; when node 0 runs only the vLLM server, that is node 1.
    first_node = 1 if plan.split.layout.startswith("node 0 runs") else 0
    for node, mask in enumerate(plan.split.trainer_masks):
        machine = ""
        if multi:
            machine = (
                f" --num_machines {nodes_training} --machine_rank {node} --main_process_ip <node{first_node}-ip> "
                "--main_process_port 29500"
            )
        role = "trainer" + (f" (node {node + first_node})" if multi else "")
        commands.append(
            {
                "role": role,
                "command": (
                    f"CUDA_VISIBLE_DEVICES={mask} accelerate launch --config_file {cfg} --num_processes {world}"
                    f"{machine} train.py"
                ),
                "note": preset_note.strip("; "),
            }
        )
    if trainer in ("sft", "dpo", "grpo", "rloo") and not multi:
        parts = [f"CUDA_VISIBLE_DEVICES={plan.split.trainer_masks[0]} trl {trainer}"]
        parts.append(f"--accelerate_config {preset if not changes and preset else cfg}")
        parts.append(f"--num_processes {world}")
        parts.append(f"--model_name_or_path {model} --dataset_name <dataset>")
        if trainer in ("grpo", "rloo"):
            parts.append("--reward_funcs <reward>")
        parts.append(f"--dtype {setup.model_dtype}")
        if fp16:  # TRL turns bf16 on when fp16 is unset (trl/trainer/base_config.py @1.16.0)
            parts.append("--bf16 false --fp16 true")
        parts.append(f"--per_device_train_batch_size {setup.micro_batch}")
        if plan.geometry is not None:
            parts.append(f"--num_generations {plan.geometry.num_generations}")
            if plan.geometry.steps_per_generation != setup.grad_accum:
                parts.append(f"--steps_per_generation {plan.geometry.steps_per_generation}")
        if setup.grad_accum != 1:
            parts.append(f"--gradient_accumulation_steps {setup.grad_accum}")
        if plan.vllm_mode in ("server", "colocate"):
            parts.append(f"--use_vllm --vllm_mode {plan.vllm_mode}")
            if plan.vllm_mode == "colocate" and v is not None:
                parts.append(f"--vllm_gpu_memory_utilization {v.util:g} --vllm_tensor_parallel_size {v.tp}")
                parts.append(f"--vllm_max_model_length {v.max_model_len}")
        if pick.method != "full":
            targets = request.lora_targets if request.lora_targets != "all-linear" else "all-linear"
            parts.append(f"--use_peft --lora_r {request.lora_rank} --lora_target_modules {targets}")
            if plan.lora and plan.lora.parameters:
                parts.append("--lora_dropout 0")
        if pick.method == "qlora":
            parts.append("--load_in_4bit")
            if request.bnb_double_quant:
                parts.append("--use_bnb_nested_quant")
            if pick.strategy.startswith("fsdp2") or pick.strategy.startswith("zero3"):
                parts.append(f"--bnb_4bit_quant_storage {setup.quant_storage}")
        if not setup.grad_ckpt:
            parts.append("--gradient_checkpointing false")
        parts.append("--output_dir <output_dir>")
        commands.append(
            {
                "role": "trainer via the TRL CLI (alternative)",
                "command": " ".join(parts),
                "note": "trl <command> resolves --accelerate_config NAME to the packaged preset and passes "
                "--num_processes to accelerate launch (trl/cli/accelerate_config.py@1.16.0)",
            }
        )
    # Config fields for a Python script (train.py)
    fields["per_device_train_batch_size"] = setup.micro_batch
    if setup.grad_accum != 1:
        fields["gradient_accumulation_steps"] = setup.grad_accum
    fields["gradient_checkpointing"] = setup.grad_ckpt
    fields["bf16"] = not fp16
    if fp16:
        fields["fp16"] = True
    if setup.model_dtype != "float32" or pick.method == "qlora":
        fields["model_init_kwargs"] = {"dtype": setup.model_dtype}
    if plan.geometry is not None:
        fields["num_generations"] = plan.geometry.num_generations
        if plan.geometry.steps_per_generation != setup.grad_accum:
            fields["steps_per_generation"] = plan.geometry.steps_per_generation
    if trainer in ("grpo", "rloo") and plan.vllm_mode != "none" and v is not None:
        fields["use_vllm"] = True
        fields["vllm_mode"] = plan.vllm_mode
        if plan.vllm_mode == "colocate":
            fields["vllm_gpu_memory_utilization"] = v.util
            fields["vllm_tensor_parallel_size"] = v.tp
            fields["vllm_max_model_length"] = v.max_model_len
        elif nodes_training > 1 or plan.split.layout.startswith("node 0 runs"):
            fields["vllm_server_base_url"] = "http://<node0-ip>:8000"
    if trainer == "async-grpo" and v is not None:
        fields["vllm_server_base_url"] = "http://<server-host>:8000"
        fields["dtype"] = setup.model_dtype
        fields["max_completion_length"] = f"<= {v.max_model_len} - prompt length"
    if pick.method != "full":
        dropout = ", lora_dropout=0.0" if plan.lora and plan.lora.parameters else ""
        fields["peft_config"] = f"LoraConfig(r={request.lora_rank}, target_modules={request.lora_targets!r}{dropout})"
    if pick.method == "qlora":
        storage = setup.quant_storage if pick.strategy.startswith(("fsdp2", "zero3")) else None
        fields["quantization_config"] = (
            "BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_compute_dtype=torch."
            + ("float16" if fp16 else "bfloat16")
            + (", bnb_4bit_use_double_quant=True" if request.bnb_double_quant else "")
            + (f", bnb_4bit_quant_storage=torch.{storage}" if storage else "")
            + ")"
        )
    return Commands(commands, fields)
