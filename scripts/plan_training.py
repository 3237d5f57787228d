#!/usr/bin/env python3
"""Offline planner for TRL training: per-GPU memory, the GPU split for vLLM generation, and config lint.

Read-only: no download, no torch import, reads only the files it is given. The commands it prints are templates
that need the user's approval to run.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # the planner's sibling modules must not leave __pycache__ in scripts/

import argparse  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional, Tuple  # noqa: E402

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from common.output import WIDTH, HelpFormatter, dumps_strict, emit, escape_controls, fit_width, one_line  # noqa: E402
from planner import rules as plan_rules  # noqa: E402
from planner.assemble import build_plan  # noqa: E402
from planner.hardware import resolve_hardware  # noqa: E402
from planner.inputs import (  # noqa: E402
    check_accelerate_config,
    check_args,
    check_model_config,
    check_params_text,
    check_trl_config,
    shell_safe,
)
from planner.memory import DTYPE_BYTES, MEMORY_MODEL, TRAINERS  # noqa: E402
from planner.model import facts_from_config, facts_from_params, parse_param_count  # noqa: E402
from planner.render import plan_dict, render_text  # noqa: E402
from planner.rules import PlanInputError  # noqa: E402

SCHEMA_VERSION = 1

EPILOG = (
    MEMORY_MODEL
    + """
inputs: the model is --params or --model-config (a local config.json of a Llama, Mistral, Mixtral, Qwen2/2.5/3,
  Qwen2-MoE/Qwen3-MoE, DeepSeek-V2/V3 (MLA + MoE), gpt-oss, Gemma/Gemma2/Gemma3-text or Phi/Phi-3 decoder;
  multimodal wrappers such as model_type gemma3 are refused: their vision tower is not counted). With --params
  alone, activations and the KV cache use the nearest published reference shape (named in the output). Hardware
  is --gpus/--gpu-memory-gib or --hardware-json (the output of check_optional_backends.py --json; its visible
  GPUs); --gpus is per node. Batch, accumulation, sequence, generation and beta come from --lint-trl-config
  when it sets them; a flag overrides the file, and the output says which won.
lint: --lint-accelerate-config and/or --lint-trl-config (TRL CLI YAML, or JSON of config values); every finding
  names the setting to change and its upstream source. Without --params/--model-config only the lint runs.
exit codes: 0 report produced; 1 --require-fit found no fitting candidate for the requested method (or the vLLM
  side does not fit), or --require-lint-clean found a lint error; 2 usage error or unusable input (unknown
  architecture, malformed YAML/JSON, impossible hardware).
The commands in the output are templates: never run them without the user's approval.
"""
)


# ==============================================================================================================
# CLI
# ==============================================================================================================


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def _headroom(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value < 0.9:
        raise argparse.ArgumentTypeError(f"must be in [0, 0.9), got {value}")
    return value


def _compute_capability(text: str) -> str:
    if not re.fullmatch(r"\d+\.\d+", text):
        raise argparse.ArgumentTypeError(f"expected MAJOR.MINOR such as 8.0, got {text!r}")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plan_training.py",
        description=(
            "Offline planner for TRL training: per-GPU memory for DDP, ZeRO-2/3, FSDP2 (with and without offload) "
            "under full fine-tuning, LoRA and QLoRA; the vLLM GPU split and launch templates for GRPO, RLOO and "
            "AsyncGRPO; and a lint of Accelerate/TRL configs. Reads only the files given; no download, no torch."
        ),
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    model = parser.add_argument_group("model")
    source = model.add_mutually_exclusive_group()
    source.add_argument("--params", help="parameter count: 7B, 0.5B, 7e9, 500M")
    source.add_argument("--model-config", metavar="PATH", help="a local config.json (no download)")
    model.add_argument("--model-id", help="model name or path to put into the command templates")
    model.add_argument(
        "--model-dtype",
        choices=sorted(DTYPE_BYTES),
        help="dtype the trainer loads the model in (TRL --dtype / model_init_kwargs dtype); default "
        "float32 as TRL does, except bfloat16 for QLoRA (TRL uses it as bnb_4bit_compute_dtype)",
    )
    method = parser.add_argument_group("method")
    method.add_argument("--method", choices=("full", "lora", "qlora"), default="full")
    method.add_argument("--lora-rank", type=_positive_int, default=16, help="LoRA r (TRL's lora_r default: 16)")
    method.add_argument(
        "--lora-targets",
        default="all-linear",
        help="all-linear, or a comma list of Linear names (q_proj,v_proj,...); PEFT ignores names that match nothing. "
        "On fused-MoE models (mixtral, qwen3_moe, deepseek_v2/v3) PEFT also trains the experts and the router",
    )
    method.add_argument(
        "--optimizer",
        choices=("adamw", "adamw-8bit"),
        default="adamw",
        help="adamw: m and v in the parameter dtype; adamw-8bit: bitsandbytes 8-bit states",
    )
    method.add_argument(
        "--bnb-double-quant",
        action="store_true",
        help="QLoRA nested quantization (TRL use_bnb_nested_quant; default off)",
    )
    method.add_argument(
        "--bnb-quant-storage",
        choices=("bfloat16", "float16", "float32", "uint8"),
        default=None,
        help="bnb_4bit_quant_storage assumed for FSDP QLoRA (TRL leaves it unset = uint8, which "
        "FSDP cannot shard); default bfloat16, float32 under fp16 mixed precision (PEFT's FSDP guide)",
    )
    train = parser.add_argument_group("trainer and batch")
    train.add_argument(
        "--trainer",
        choices=TRAINERS,
        default=None,
        help="the TRL trainer (default: inferred from --lint-trl-config when it has trainer-specific fields, else sft)",
    )
    train.add_argument(
        "--seq-len",
        type=_positive_int,
        help="tokens per sequence (prompt + completion for GRPO/RLOO); default: the TRL config's max_length "
        "(SFT/DPO) or vllm_max_model_length (GRPO/RLOO), else 2048",
    )
    train.add_argument(
        "--micro-batch",
        type=_positive_int,
        help="per_device_train_batch_size (default: the TRL config's, else TRL's default 8)",
    )
    train.add_argument(
        "--grad-accum", type=_positive_int, help="gradient_accumulation_steps (default: the TRL config's, else 1)"
    )
    ckpt = train.add_mutually_exclusive_group()
    ckpt.add_argument(
        "--gradient-checkpointing",
        dest="gradient_checkpointing",
        action="store_true",
        default=None,
        help="on (default: the TRL config's gradient_checkpointing, else on as in TRL)",
    )
    ckpt.add_argument("--no-gradient-checkpointing", dest="gradient_checkpointing", action="store_false")
    train.add_argument(
        "--num-generations", type=_positive_int, help="GRPO/RLOO num_generations (default: the TRL config's, else 8)"
    )
    train.add_argument(
        "--steps-per-generation",
        type=_positive_int,
        help="GRPO/RLOO steps_per_generation (default: gradient_accumulation_steps)",
    )
    train.add_argument(
        "--full-logits",
        action="store_true",
        help="count full-vocabulary logits (a training loop without TRL's chunked LM head, e.g. a plain "
        "transformers loss; the 2024 published runs the planner is calibrated against)",
    )
    train.add_argument(
        "--beta",
        type=float,
        help="KL coefficient for GRPO/RLOO: non-zero loads a reference model (GRPO default 0.0, RLOO 0.05)",
    )
    hw = parser.add_argument_group("hardware")
    hw.add_argument("--gpus", type=int, help="GPUs per node")
    hw.add_argument("--gpu-memory-gib", type=float, help="memory per GPU in GiB (80 for an A100 80GB)")
    hw.add_argument("--compute-capability", type=_compute_capability, help="e.g. 8.0; enables the bf16 check")
    hw.add_argument("--hardware-json", metavar="PATH", help="output of check_optional_backends.py --json")
    hw.add_argument("--nodes", type=int, default=1, help="number of nodes (default 1)")
    hw.add_argument("--host-memory-gib", type=float, help="host RAM per node; offload candidates must fit in it")
    hw.add_argument("--headroom", type=_headroom, default=0.10, help="fraction of GPU memory kept free (0.10)")
    gen = parser.add_argument_group("vLLM generation (GRPO, RLOO, AsyncGRPO)")
    gen.add_argument(
        "--vllm-mode",
        choices=("none", "colocate", "server"),
        help="default: server with 2+ GPUs, else colocate; AsyncGRPO: server",
    )
    gen.add_argument(
        "--vllm-gpu-memory-utilization",
        type=_fraction,
        help="server: --gpu-memory-utilization (default 0.9); colocate: vllm_gpu_memory_utilization "
        "(default: the smallest that fits)",
    )
    gen.add_argument("--vllm-tp", type=_positive_int, help="vLLM tensor-parallel size (default: smallest that fits)")
    gen.add_argument("--max-model-len", type=_positive_int, help="vLLM max_model_len (default: --seq-len)")
    gen.add_argument(
        "--vllm-concurrency",
        type=_positive_int,
        help="sequences generated at once (default: the generation batch; colocate: max_num_seqs)",
    )
    lint = parser.add_argument_group("config lint")
    lint.add_argument("--lint-accelerate-config", metavar="PATH", help="an Accelerate config YAML")
    lint.add_argument("--lint-trl-config", metavar="PATH", help="a TRL CLI YAML, or JSON of config values")
    lint.add_argument(
        "--num-processes",
        type=_positive_int,
        help="the --num_processes the user passes on the command line (wins over the files)",
    )
    lint.add_argument(
        "--vllm-server-gpus",
        type=int,
        help="GPUs per machine reserved for a vLLM server (default: the plan's server GPUs)",
    )
    lint.add_argument(
        "--yaml-parser",
        choices=("auto", "pyyaml", "builtin"),
        default="auto",
        help="auto: PyYAML when installed, else the built-in parser",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="JSON instead of text")
    out.add_argument(
        "--require-fit",
        action="store_true",
        help="exit 1 when no candidate of the requested method fits (or the vLLM side does not)",
    )
    out.add_argument("--require-lint-clean", action="store_true", help="exit 1 when the lint reports an error")
    return parser


# Fields that only one trainer family's config has (TRL 1.16.0): AsyncGRPOConfig
# (trl/experimental/async_grpo/async_grpo_config.py) and GRPOConfig/RLOOConfig (trl/trainer/grpo_config.py,
# rloo_config.py; reward_funcs is their scripts' argument). The lint rules for GRPO and RLOO are the same.
_ASYNC_GRPO_FIELDS = ("max_staleness", "weight_sync_steps", "max_inflight_tasks")
_GRPO_FIELDS = (
    "num_generations",
    "use_vllm",
    "vllm_mode",
    "generation_batch_size",
    "steps_per_generation",
    "reward_funcs",
)


def infer_trainer(trl_config: Optional[Dict[str, Any]]) -> Tuple[Optional[str], List[str]]:
    """The trainer a TRL config belongs to, judged by the trainer-specific fields it sets, and those fields."""
    if not isinstance(trl_config, dict):
        return None, []
    async_keys = [key for key in _ASYNC_GRPO_FIELDS if key in trl_config]
    if async_keys:
        return "async-grpo", async_keys
    grpo_keys = [key for key in _GRPO_FIELDS if key in trl_config]
    if grpo_keys:
        return "grpo", grpo_keys
    return None, []


def resolve_trainer(args: argparse.Namespace, trl_config: Optional[Dict[str, Any]]) -> Optional[plan_rules.Finding]:
    """Set ``args.trainer`` when it was not given; return an info finding saying how it was chosen."""
    if args.trainer is not None:
        return None
    inferred, keys = infer_trainer(trl_config)
    args.trainer = inferred or "sft"
    if trl_config is None:
        return None
    if inferred is None:
        message = f"no trainer-specific fields in {args.lint_trl_config}: linted as an SFT config"
    else:
        message = f"trainer inferred as {inferred} from {', '.join(keys)} in {args.lint_trl_config}"
        if inferred == "grpo":
            message += " (RLOO has the same lint rules)"
    return plan_rules.Finding(
        id="trainer-inferred",
        severity="info",
        message=message,
        fix="pass --trainer to choose it explicitly",
        source="trl/trainer/grpo_config.py@1.16.0, trl/experimental/async_grpo/async_grpo_config.py@1.16.0",
    )


# Plan inputs a TRL config can set (TRL 1.16.0 field names): (argparse dest, config field, default, trainers).
# sft_config.py / dpo_config.py max_length; grpo_config.py / rloo_config.py vllm_max_model_length (prompt +
# completion); base_config.py gradient_checkpointing (default True); TrainingArguments per_device_train_batch_size
# and gradient_accumulation_steps.
TRL_CONFIG_INPUTS: Tuple[Tuple[str, str, str, str, Any, Tuple[str, ...]], ...] = (
    # (argparse dest, flag, config field, kind, default, trainers whose config has the field)
    ("micro_batch", "--micro-batch", "per_device_train_batch_size", "int", 8, TRAINERS),
    ("grad_accum", "--grad-accum", "gradient_accumulation_steps", "int", 1, TRAINERS),
    ("seq_len", "--seq-len", "max_length", "int", 2048, ("sft", "dpo")),
    ("seq_len", "--seq-len", "vllm_max_model_length", "int", 2048, ("grpo", "rloo")),
    ("num_generations", "--num-generations", "num_generations", "int", 8, ("grpo", "rloo", "async-grpo")),
    ("steps_per_generation", "--steps-per-generation", "steps_per_generation", "int", None, ("grpo", "rloo")),
    ("gradient_checkpointing", "--gradient-checkpointing", "gradient_checkpointing", "bool", True, TRAINERS),
    ("beta", "--beta", "beta", "float", None, ("grpo", "rloo")),
)


def _config_value(value: Any, kind: str) -> Any:
    """A TRL config value converted like the flag it stands for; None when it is unusable."""
    if kind == "bool":
        return plan_rules._as_bool(value)
    if isinstance(value, bool):
        return None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    if kind == "float":
        return number if number == number and abs(number) != float("inf") else None
    return int(number) if number.is_integer() and number >= 1 else None


def apply_trl_config(args: argparse.Namespace, trl_config: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Fill the batch, sequence and generation inputs: a flag wins over the TRL config, which wins over the
    default. Returns one record per input the config or a flag set, saying which won."""
    sources: List[Dict[str, Any]] = []
    done = set()
    for dest, flag, key, kind, _default, trainers in TRL_CONFIG_INPUTS:
        if dest in done:
            continue
        flag_value = getattr(args, dest, None)
        in_config = (
            trl_config is not None and args.trainer in trainers and key in trl_config and trl_config[key] is not None
        )
        config_value = _config_value(trl_config[key], kind) if in_config else None
        if in_config and config_value is None:
            raise PlanInputError(f"{args.lint_trl_config}: {key} {trl_config[key]!r} is not a usable value")
        if flag_value is not None:
            if in_config:
                done.add(dest)
                sources.append(
                    {"input": flag, "value": flag_value, "source": "flag", "overrides": f"{key}: {config_value}"}
                )
            continue
        if in_config:
            done.add(dest)
            setattr(args, dest, config_value)
            sources.append({"input": flag, "value": config_value, "source": f"{key} in {args.lint_trl_config}"})
    for dest, _flag, _key, _kind, default, _trainers in TRL_CONFIG_INPUTS:
        if getattr(args, dest, None) is None and default is not None:
            setattr(args, dest, default)
    return sources


def run(args: argparse.Namespace) -> Tuple[Dict[str, Any], str, int]:
    check_args(args)
    check_params_text(args.params)
    args.model_id = shell_safe(args.model_id)
    planning = args.params is not None or args.model_config is not None
    linting = bool(args.lint_accelerate_config or args.lint_trl_config)
    if not planning and not linting:
        raise PlanInputError("nothing to do: give --params or --model-config, and/or a config to lint")
    yaml_parsers: List[str] = []
    trl_cfg = None
    if args.lint_trl_config:
        trl_cfg, used = plan_rules.load_config_file(args.lint_trl_config, args.yaml_parser)
        check_trl_config(trl_cfg, args.lint_trl_config)
        yaml_parsers.append(used)
    trainer_note = resolve_trainer(args, trl_cfg)
    input_sources = apply_trl_config(args, trl_cfg)
    facts = None
    if args.model_config:
        data, used = plan_rules.load_config_file(args.model_config, args.yaml_parser)
        check_model_config(data, args.model_config)
        facts = facts_from_config(data, args.model_config)
    elif args.params is not None:
        facts = facts_from_params(parse_param_count(args.params))
    hardware = resolve_hardware(args, need_memory=planning)
    plan = None
    if planning:
        if hardware is None:
            raise PlanInputError("hardware: give --gpus and --gpu-memory-gib, or --hardware-json")
        assert facts is not None
        plan = build_plan(args, facts, hardware)
    findings: List[plan_rules.Finding] = []
    if linting:
        acc, acc_label, used = plan_rules.resolve_accelerate(
            args.lint_accelerate_config, trl_cfg, args.lint_trl_config, args.yaml_parser
        )
        if used:
            yaml_parsers.append(used)
        if isinstance(acc, dict):
            check_accelerate_config(acc, acc_label or "the Accelerate config")
        server_gpus, reason = 0, ""
        if args.vllm_server_gpus is not None:
            if args.vllm_server_gpus < 0:
                raise PlanInputError("--vllm-server-gpus must not be negative")
            server_gpus, reason = args.vllm_server_gpus, "--vllm-server-gpus"
        elif plan is not None and plan.vllm_mode == "server" and plan.split.server_gpus:
            server_gpus, reason = len(plan.split.server_gpus), "the plan's server split"
        if args.vllm_server_gpus is None and plan is not None and plan.split.layout.startswith("node 0 runs"):
            server_gpus, reason = hardware.gpus_per_node, "the plan dedicates node 0 to the server"
        ctx = plan_rules.LintContext(
            trainer=args.trainer,
            accelerate=acc,
            accelerate_label=acc_label,
            trl=trl_cfg,
            trl_label=args.lint_trl_config,
            launch_num_processes=args.num_processes,
            gpus_per_node=hardware.gpus_per_node if hardware else None,
            nodes=hardware.nodes if hardware else args.nodes,
            server_gpus=server_gpus,
            server_gpus_reason=reason,
            compute_capabilities=hardware.compute_capabilities if hardware else [],
            vllm_mode_cli=args.vllm_mode,
        )
        findings = plan_rules.run_lint(ctx)
        if trainer_note:
            findings.insert(0, trainer_note)
    result: Dict[str, Any] = {"schema_version": SCHEMA_VERSION, "tool": "plan_training.py"}
    if plan is not None:
        plan.input_sources = input_sources
        result.update(plan_dict(plan))
    result["lint"] = {
        "ran": linting,
        "yaml_parser": sorted(set(yaml_parsers)) or None,
        "findings": [finding.as_dict() for finding in findings],
    }
    text = render_text(plan, findings, linting, yaml_parsers)
    code = 0
    if args.require_fit and plan is not None and not plan.fits:
        code = 1
    if args.require_lint_clean and any(finding.severity == "error" for finding in findings):
        code = 1
    result["exit_code"] = code
    return result, text, code


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse exits 0 for --help, 2 for usage errors (run_cli passes them on)
    try:
        result, text, code = run(args)
    except PlanInputError as exc:
        if args.json:
            error = {"schema_version": SCHEMA_VERSION, "tool": "plan_training.py", "error": str(exc), "exit_code": 2}
            emit(dumps_strict(error))
        sys.stderr.write(f"plan_training.py: error: {one_line(str(exc), 400)}\n")
        return 2
    if args.json:
        emit(dumps_strict(result))
    else:
        emit(fit_plan_text(escape_controls(text, keep_newlines=True).rstrip("\n")) + "\n" + verdict_block(result, args))
    return code


def fit_plan_text(text: str, width: int = WIDTH) -> str:
    """Wrap to ``width`` columns; a shell command keeps working when copied (continued with `` \\``), and a long
    comment line continues as a comment."""
    out: List[str] = []
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        indent = line[: len(line) - len(stripped)]
        if len(line) <= width:
            out.append(line)
        elif stripped.startswith("#"):
            out.extend(fit_width(line, width).replace("\n" + indent + "    ", "\n" + indent + "#   ").split("\n"))
        elif re.match(r"^[A-Z_]+=|^(vllm|accelerate|trl|python3?|torchrun|CUDA_VISIBLE_DEVICES) ", stripped):
            out.extend(_wrap_command(line, indent, width))
        else:
            out.extend(fit_width(line, width).split("\n"))
    return "\n".join(out)


def _wrap_command(line: str, indent: str, width: int) -> List[str]:
    """Break a command between words (never inside quotes), ending each continued line with a backslash."""
    words = re.findall(r"""(?:[^\s'"]+|'[^']*'|"[^"]*")+""", line.strip())
    lines: List[str] = []
    current = indent
    for word in words:
        candidate = word if current.strip() == "" else current + " " + word
        if current.strip() and len(candidate) + 2 > width:
            lines.append(current + " \\")
            current = indent + "    " + word
        else:
            current = candidate if current.strip() else indent + word
    lines.append(current)
    return lines


def verdict_block(result: Dict[str, Any], args: argparse.Namespace) -> str:
    """The last lines, always in this order: the plan's verdict, the lint's named errors, the --require results."""
    lines: List[str] = []
    if "fits" in result:
        recommendation = result.get("recommendation") or {}
        if result.get("fits") and isinstance(recommendation, dict):
            detail = f"{recommendation.get('label')} ({recommendation.get('method')})"
            if isinstance(recommendation.get("per_gpu_gib"), (int, float)):
                detail += f", {recommendation['per_gpu_gib']:.1f} GiB per GPU"
            lines.append(f"Verdict: fits: {detail}")
        else:
            lines.append("Verdict: does not fit (see the candidates and the smallest changes above)")
    lint = result.get("lint") or {}
    if lint.get("ran"):
        errors = [f["id"] for f in lint.get("findings") or [] if f.get("severity") == "error"]
        warnings = [f["id"] for f in lint.get("findings") or [] if f.get("severity") == "warning"]
        lines.append(f"Lint: errors: {', '.join(dict.fromkeys(errors)) or 'none'}")
        lines.append(f"  warnings: {', '.join(dict.fromkeys(warnings)) or 'none'}")
    if args.require_fit and "fits" in result:
        lines.append(f"Require fit: {'met' if result.get('fits') else 'FAILED (no candidate fits)'}")
    if args.require_lint_clean and lint.get("ran"):
        failed = any(f.get("severity") == "error" for f in lint.get("findings") or [])
        lines.append(f"Require lint clean: {'FAILED (lint errors above)' if failed else 'met'}")
    return fit_width("\n".join(lines)) + "\n" if lines else ""


if __name__ == "__main__":
    from common.output import run_cli  # a closed pipe ends quietly; no traceback ever reaches the user

    sys.exit(run_cli(main, "plan_training.py"))
