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
from typing import Any, Dict, List, NamedTuple, Optional  # noqa: E402

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from common import recorded  # noqa: E402
from common.output import HelpFormatter, dumps_strict, emit, escape_controls, one_line, scrub  # noqa: E402
from common.versions import specifier_contains  # noqa: E402
from planner.assemble import build_plan, path_goals  # noqa: E402
from planner.hardware import resolve_hardware  # noqa: E402
from planner.inputs import (  # noqa: E402
    TRAINERS,
    VLLM_RELEASE_TEXT,
    Flags,
    PlanInputError,
    PlanRequest,
    load_request,
    trl_releases,
)
from planner.memory import DTYPE_BYTES, MEMORY_MODEL  # noqa: E402
from planner.model import (  # noqa: E402
    PEFT_MOE_CONVERSION,
    ModelFacts,
    facts_from_config,
    facts_from_params,
    family_names,
    parse_param_count,
    wrap_words,
)
from planner.render import error_dict, fit_plan_text, render_text, result_dict, verdict_block  # noqa: E402
from planner.rules import lint  # noqa: E402
from planner.templates import Commands, build_commands  # noqa: E402
from planner.verdict import EXIT_CODES_HELP, judge  # noqa: E402
from stack.floors import path_floors  # noqa: E402

TRL_RELEASES = trl_releases()


def family_help() -> str:
    """The --help paragraph on model inputs, its family list generated from planner/model.py's tables."""
    names = family_names()
    head = "inputs: the model is --params or --model-config, a local config.json whose model_type is one of:"
    tail = (
        "The vision-language ones are counted with their vision tower and projector; other multimodal wrappers are "
        "refused, with the way out (their text_config as a config.json of its own, or --params). "
        "With --params alone, activations and the KV cache use the nearest published reference shape (named in the "
        "output). Hardware is --gpus/--gpu-memory-gib or --hardware-json (the output of check_optional_backends.py "
        "--json; its visible GPUs); --gpus is per node. Batch, accumulation, sequence, generation and beta come from "
        "--lint-trl-config when it sets them; a flag overrides the file, and the output says which won."
    )
    families = [name + "," for name in names[:-1]] + [names[-1] + "."]  # a name and its mark stay on one line
    return "\n".join(wrap_words(head.split() + families + tail.split(), 98))


FAMILY_HELP = family_help()

EPILOG = (
    MEMORY_MODEL
    + "\n"
    + FAMILY_HELP
    + """
lint: --lint-accelerate-config and/or --lint-trl-config (TRL CLI YAML, or JSON of config values);
  every finding names the setting to change and its upstream source. Without --params/--model-config
  only the lint runs.
floors: the feature floors of the recommended path for --trl-version: the ranges TRL's extras
  declare and the floors read in source (AsyncGRPO's vLLM gate, FSDP2's torch, FSDP+QLoRA's
  bitsandbytes/accelerate), from scripts/stack/matrix.json, with the plan_install.py command that
  checks an environment against them.
verdict: one of "fits as asked" (the requested method without CPU offload, and the vLLM side), "fits
  only with a change" (the change named: a smaller micro-batch with more accumulation, bf16 weights,
  LoRA/QLoRA, CPU offload; the templates are for the first one that keeps what is trained, when one
  fits) or "does not fit". CPU offload is checked against --host-memory-gib; without it the verdict
  names the host RAM per node the change needs.
"""
    + EXIT_CODES_HELP
    + """The commands in the output are templates: never run them without the user's approval.
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
        f"On fused-MoE models ({', '.join(sorted(PEFT_MOE_CONVERSION))}) PEFT also trains the experts and the router",
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
        help="tokens per sequence (prompt + completion for GRPO/RLOO/AsyncGRPO); default: the TRL config's "
        "max_length (SFT/DPO) or vllm_max_model_length (GRPO/RLOO), else TRL's default for --trl-version: "
        "max_length (1024) for SFT/DPO, an assumed 512-token prompt + max_completion_length for the others",
    )
    train.add_argument(
        "--trl-version",
        default=TRL_RELEASES[-1],
        metavar="VERSION",
        help=f"the TRL release whose defaults and LM head the plan uses ({TRL_RELEASES[0]}-{TRL_RELEASES[-1]}, the "
        f"indexed releases; default {TRL_RELEASES[-1]})",
    )
    train.add_argument(
        "--max-completion-length",
        type=_positive_int,
        help="GRPO/RLOO/AsyncGRPO completion tokens, the ones logits are computed for (default: the TRL config's, "
        "else TRL's max_completion_length for --trl-version)",
    )
    train.add_argument(
        "--cp-size",
        type=_positive_int,
        default=1,
        help="context parallelism (accelerate parallelism_config_cp_size; FSDP2 only): each GPU holds seq_len/k "
        "tokens of every sequence; SFT/DPO only (GRPO/RLOO/AsyncGRPO refuse it)",
    )
    train.add_argument(
        "--sp-size",
        type=_positive_int,
        default=1,
        help="Ulysses sequence parallelism (accelerate parallelism_config_sp_size with sp_backend deepspeed; "
        "DeepSpeed only; attention heads must divide by it); SFT/DPO only",
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
    gen.add_argument(
        "--vllm-version",
        metavar="VERSION",
        help=f"the vLLM release that generates (default {VLLM_RELEASE_TEXT}, the release the KV and overhead "
        "rules were read from); older releases get their own rules: CUDA graphs in the KV budget from 0.20, the "
        "kept fused-MoE workspace from 0.11, the sort-based dummy sampler before 0.17 (read off one model's logs)",
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


# ==============================================================================================================
# Stages: inputs -> compute (model, hardware, memory, split, assemble) -> judge (rules) -> render
# ==============================================================================================================


def model_facts(request: PlanRequest) -> Optional[ModelFacts]:
    """The model's counts and shapes from its config.json, or the nearest reference shape for --params."""
    if request.model_config is not None and request.model_config_path is not None:
        return facts_from_config(request.model_config, request.model_config_path)
    if request.params is not None:
        return facts_from_params(parse_param_count(request.params))
    return None


def feature_floors(goals: List[str], trl_version: str) -> List[Dict[str, str]]:
    """The floors of the recommended path, from the install planner's recorded matrix (empty when it cannot be
    read): what TRL's extras declare, what source enforces, and where TRL warns."""
    return [floor._asdict() for floor in path_floors(goals, trl_version, with_extras=True)]


def vllm_outside_trl_extra(release: str, request: PlanRequest, floors: List[Dict[str, str]]) -> Optional[str]:
    """A note when the vLLM release the plan is sized for is outside the range the TRL release's vllm extra
    declares (the user's TRL would refuse or warn about it, and the plan's vLLM rules are for another release)."""
    spec = next((f["spec"] for f in floors if f.get("subject") == "vllm" and f.get("kind") == "extra"), None)
    if not spec or specifier_contains(spec, release) is not False:
        return None
    given = "--vllm-version" if request.vllm_release_source == "--vllm-version" else "the planner's default"
    return (
        f"vLLM {release} ({given}) is outside what TRL {request.trl_version}'s vllm extra declares (vllm{spec}); "
        "pass --vllm-version with the vLLM your image holds"
    )


def vllm_past_recorded(release: str, request: PlanRequest) -> Optional[str]:
    """A note when ``--vllm-version`` names a release newer than the recorded matrix lists: the plan's vLLM rules
    are those of the newest release they were read from, unverified for it."""
    if request.vllm_release_source != "--vllm-version":
        return None
    past = recorded.beyond("vllm", release)
    if not past:
        return None
    return f"{past}: the KV-cache and overhead rules used are the newest read, unverified for vLLM {release}"


class Report(NamedTuple):
    result: Dict[str, Any]  # the --json document
    text: str  # the plan and the lint, before wrapping
    verdict: str  # the last lines
    exit_code: int


def run(request: PlanRequest) -> Report:
    """Plan and lint what the request asks, judge it, and render the verdict."""
    facts = model_facts(request)
    hardware = resolve_hardware(request, need_memory=request.planning)
    plan = None
    if request.planning:
        if hardware is None:
            raise PlanInputError("hardware: give --gpus and --gpu-memory-gib, or --hardware-json")
        assert facts is not None
        plan = build_plan(request, facts, hardware)
    findings = lint(request, plan, hardware) if request.linting else []
    commands = build_commands(request, plan) if plan is not None else Commands([], {})
    floors = feature_floors(path_goals(plan), request.trl_version) if plan is not None else []
    if plan is not None and plan.vllm is not None:
        note = vllm_outside_trl_extra(plan.vllm.release_text, request, floors)
        if note:
            plan.notes.append(note)
        note = vllm_past_recorded(plan.vllm.release_text, request)
        if note:
            plan.notes.append(note)
    verdict = judge(request, plan, findings)
    result = result_dict(request, plan, commands, findings, verdict, floors)
    result["exit_code"] = verdict.exit_code
    text = render_text(plan, commands, findings, request.linting, list(request.yaml_parsers), floors)
    return Report(result, text, verdict_block(verdict), verdict.exit_code)


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)  # argparse exits 0 for --help, 2 for usage errors (run_cli passes them on)
    flags = Flags(**vars(args))
    try:
        request = load_request(flags)
        report = run(request)
    except PlanInputError as exc:
        if flags.json:
            emit(dumps_strict(error_dict(str(exc))))
        sys.stderr.write(f"plan_training.py: error: {one_line(escape_controls(str(exc)), 400)}\n")
        return 2
    if request.json:
        emit(dumps_strict(report.result))
    else:
        text = escape_controls(scrub(report.text), keep_newlines=True)  # scrubbed before a command is wrapped
        emit(fit_plan_text(text.rstrip("\n")) + "\n" + report.verdict)
    return report.exit_code


if __name__ == "__main__":
    from common.output import run_cli  # a closed pipe ends quietly; no traceback ever reaches the user

    sys.exit(run_cli(main, "plan_training.py"))
