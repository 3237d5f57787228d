"""Rendering of a plan and its lint findings: text for people, a dict for ``--json``.

A sibling module of ``plan_training.py`` (not a command); standard library only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the siblings must not leave __pycache__ in scripts/

import json  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional  # noqa: E402

_HERE = Path(__file__).resolve().parent.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from common.output import WIDTH, fit_width  # noqa: E402

from planner.assemble import ESCALATION, Plan, chosen_change, path_goals  # noqa: E402
from planner.hardware import GIB  # noqa: E402
from planner.inputs import PlanRequest  # noqa: E402
from planner.memory import HOST_BAND, Estimate  # noqa: E402
from planner.rules import Finding  # noqa: E402
from planner.templates import Commands  # noqa: E402
from planner.verdict import FITS, Verdict  # noqa: E402

SCHEMA_VERSION = 1

# ==============================================================================================================
# Rendering
# ==============================================================================================================


def _gib(value: Optional[int]) -> str:
    return "-" if value is None else f"{value / GIB:.1f}"


def candidate_dict(c: Estimate) -> Dict[str, Any]:
    return {
        "method": c.method,
        "strategy": c.strategy,
        "label": c.label,
        "invasiveness_rank": c.rank,
        "world_size": c.world,
        "fits": c.fits,
        "verdict": c.reason,
        "per_gpu_gib": round(c.total_bytes / GIB, 2),
        "per_gpu_band_gib": {
            "low": round(c.lower_bytes / GIB, 2),
            "high": round(c.upper_bytes / GIB, 2),
            "approx_fraction": c.band,
            "verdict_uses": "point",
        },
        "per_gpu_text": c.total_text(),
        "model_states_gib_exact": round(c.states_bytes / GIB, 2),
        "approx_gib": round(c.approx_bytes / GIB, 2),
        "usable_gib": round(c.usable_bytes / GIB, 2),
        "headroom": c.headroom,
        "host_ram_per_node_gib": None if c.host_bytes is None else round(c.host_bytes / GIB, 1),
        "host_ram_band_gib": None
        if c.host_bytes is None
        else {"high": round((c.host_upper or 0) / GIB, 1), "fraction": HOST_BAND, "verdict_uses": "high"},
        "host_terms_gib": {k: round(v / GIB, 2) for k, v in c.host_terms.items()},
        "host_basis": c.host_basis,
        "deepspeed_host_estimate_gib": None if c.ds_host_estimate is None else round(c.ds_host_estimate / GIB, 1),
        "terms_gib": {
            "exact": {k: round(v / GIB, 3) for k, v in c.states.items()},
            "approx": {k: round(v / GIB, 3) for k, v in c.approx.items()},
        },
        "formula": c.formula,
        "source": c.source,
        "notes": c.notes,
    }


def plan_dict(plan: Plan, commands: Commands, verdict: Verdict) -> Dict[str, Any]:
    f = plan.facts
    return {
        "model": {
            "name": f.name,
            "source": f.source,
            "params_total": f.total,
            "params_active": f.active,
            "embedding_params": f.embedding,
            "lm_head_params": f.lm_head,
            "quantizable_linear_params": f.quantizable,
            "largest_module_params": f.largest_module,
            "layers": f.layers,
            "hidden": f.hidden,
            "attention_heads": f.heads,
            "kv_heads": f.kv_heads,
            "head_dim": f.head_dim,
            "vocab": f.vocab,
            "moe": f.is_moe,
        },
        "inputs_from": plan.input_sources,
        "setup": {**plan.setup.__dict__, "trainable_params": plan.trainable, "lora_modules": plan.lora_modules},
        "lora": None
        if plan.lora is None
        else {
            "trainable_params": plan.lora.trainable,
            "target_modules": plan.lora.modules,
            "target_parameters": plan.lora.parameters,
            "rank_pattern": plan.lora.rank_pattern,
            "unmatched_targets": plan.lora.unmatched,
            "async_grpo_merged_sync_reason": plan.lora.merged_sync_reason,
            "basis": "PEFT 0.21.2 with transformers 5.24.0 (exact; tests/fixtures/peft_parity.json)",
        },
        "hardware": {
            "gpus_per_node": plan.hardware.gpus_per_node,
            "nodes": plan.hardware.nodes,
            "gpu_memory_gib": plan.hardware.memory_gib,
            "compute_capabilities": plan.hardware.compute_capabilities,
            "source": plan.hardware.source,
        },
        "vllm_mode": plan.vllm_mode,
        "vllm": plan.vllm.as_dict() if plan.vllm else None,
        "split": {
            "layout": plan.split.layout,
            "server_gpus": plan.split.server_gpus,
            "server_cuda_visible_devices": plan.split.server_mask or None,
            "trainer_cuda_visible_devices": plan.split.trainer_masks,
            "num_processes": plan.split.trainer_world,
            "idle_gpus": plan.split.idle,
        },
        "trainer_usable_gib_per_gpu": round(plan.usable_bytes / GIB, 2),
        "candidates": [candidate_dict(c) for c in plan.candidates],
        "alternatives": [candidate_dict(c) for c in plan.alternatives],
        "recommendation": candidate_dict(plan.recommended) if plan.recommended else None,
        "alternative_if_method_may_change": candidate_dict(plan.alternative_pick) if plan.alternative_pick else None,
        "smallest_changes": [
            {
                "rank": i + 1,
                "step": change.step,
                "change": change.label,
                "fits": change.fits,
                "changes_what_is_trained": change.changes_training,
                "per_gpu_text": change.candidate.total_text(),
                "candidate": candidate_dict(change.candidate),
            }
            for i, change in enumerate(plan.changes)
        ],
        "escalation_order": [key for key, _, _ in ESCALATION],
        "fits": verdict.fit is not None and verdict.fit.state == FITS,
        "verdict": verdict.fit.as_dict() if verdict.fit is not None else {},
        "batch": plan.geometry.as_dict() if plan.geometry else None,
        "commands": commands.commands,
        "commands_are_templates": "run only with the user's explicit approval",
        "config_fields": commands.config_fields,
        "notes": plan.notes,
    }


FLOOR_KINDS = {
    "extra": "declared by TRL's extra",
    "requires": "read in source",
    "warns": "TRL warns outside it",
}


def install_check_command(plan: Plan) -> Optional[str]:
    """The install planner's command for the recommended path (None when nothing fits)."""
    goals = path_goals(plan)
    if not goals:
        return None
    # Absolute paths, so the line runs as printed from any folder; the interpreter is the one that ran the planner.
    script = shlex.quote(str(_HERE / "plan_install.py"))
    return f"{shlex.quote(sys.executable)} {script} --want {','.join(goals)} --keep trl=={plan.trl_version}"


def floors_dict(plan: Plan, floors: List[Dict[str, str]]) -> Dict[str, Any]:
    """--json: the recommended path's goal ids and the floors of the TRL release the plan is for."""
    return {
        "trl_version": plan.trl_version,
        "goals": path_goals(plan),
        "floors": [{**floor, "meaning": FLOOR_KINDS.get(floor.get("kind", ""), "")} for floor in floors],
        "check_command": install_check_command(plan),
    }


def floors_lines(plan: Plan, floors: List[Dict[str, str]]) -> List[str]:
    """Text: one line per floor of the recommended path, and the command that checks an environment against them."""
    command = install_check_command(plan)
    if command is None:
        return []
    out = [f"feature floors of this path (TRL {plan.trl_version}; {', '.join(path_goals(plan))}):"]
    if not floors:
        out.append("  none beyond TRL's own requirements")
    for floor in floors:
        meaning = FLOOR_KINDS.get(floor.get("kind", ""), "")
        out.append(f"  {floor['goal']}: {floor['subject']}{floor['spec']} ({meaning}; {floor['source']})")
    out.append(f"  check or fix an environment: {command}")
    return out


def _source_text(item: Dict[str, Any]) -> str:
    if item["source"] == "flag":
        return f"{item['input']} {item['value']} (the flag wins over {item['overrides']})"
    return f"{item['input']} {item['value']} from {item['source']}"


def render_text(
    plan: Optional[Plan],
    commands: Commands,
    findings: List[Finding],
    lint_ran: bool,
    yaml_parsers: List[str],
    floors: Optional[List[Dict[str, str]]] = None,
) -> str:
    out: List[str] = []
    if plan is not None:
        f, s, hw = plan.facts, plan.setup, plan.hardware
        moe = f" ({f.active / 1e9:.2f}B active)" if f.is_moe else ""
        method = {"full": "full fine-tune", "lora": f"LoRA r={s.lora_rank}", "qlora": f"QLoRA r={s.lora_rank}"}
        out.append(
            f"model: {f.total / 1e9:.2f}B params{moe}, {f.source}; {method[s.method]}"
            + (f" ({plan.trainable / 1e6:.1f}M trainable: {','.join(plan.lora_modules)})" if s.method != "full" else "")
        )
        out.append(
            f"setup: {s.trainer}, seq {s.seq_len} x micro-batch {s.micro_batch}, gradient checkpointing "
            f"{'on' if s.grad_ckpt else 'off'}, {s.optimizer}, weights {s.model_dtype}, {s.mixed_precision} mixed "
            f"precision{', reference model' if s.ref_model and s.method == 'full' else ''}"
            + (f", context parallel {s.cp_size}" if s.cp_size > 1 else "")
            + (f", Ulysses sequence parallel {s.sp_size}" if s.sp_size > 1 else "")
            + f"; TRL {plan.trl_version} ({s.lm_head} LM head)"
        )
        if plan.input_sources:
            out.append("inputs: " + "; ".join(_source_text(item) for item in plan.input_sources))
        out.append(
            f"hardware: {hw.nodes} node(s) x {hw.gpus_per_node} GPU(s) x {hw.memory_gib:.1f} GiB ({hw.source}); "
            f"a candidate fits under {(1 - plan.headroom) * 100:.0f}% of {plan.usable_bytes / GIB:.1f} GiB"
        )
        v = plan.vllm
        if v is not None:
            if plan.vllm_mode == "server":
                out.append(
                    f"split: vLLM server on GPU {plan.split.server_mask} (node 0, TP {v.tp}); trainer on "
                    f"{plan.split.trainer_world} GPU(s), CUDA_VISIBLE_DEVICES={plan.split.trainer_masks[0]}"
                    f"{' per node' if len(plan.split.trainer_masks) > 1 else ''}, --num_processes "
                    f"{plan.split.trainer_world}; {plan.split.layout}"
                    + (f"; {plan.split.idle} GPU(s) idle" if plan.split.idle else "")
                )
            else:
                out.append(
                    f"split: colocate, vLLM TP {v.tp} inside each of the {plan.split.trainer_world} training processes"
                )
            out.append(
                f"vLLM {v.release_text} per GPU: weights {_gib(v.weights_per_gpu)} + overhead {_gib(v.overhead)} "
                f"(approx) of {v.util:g} x {hw.memory_gib:.0f} GiB [{v.util_source}] -> KV budget "
                f"{_gib(v.kv_budget)} GiB = {v.capacity} sequences of {v.max_model_len} tokens "
                f"({v.kv_per_seq / 2**20:.0f} MiB each); needs {v.concurrency} ({v.concurrency_source}): "
                f"{'fits' if v.fits else 'DOES NOT FIT'}"
            )
            out.extend(f"  ! {note}" for note in v.notes)
        out.append(
            f"candidates per GPU, least invasive first (world {plan.split.trainer_world}; exact model states + "
            "approx activations/overhead = total):"
        )
        for c in plan.candidates:
            out.append(_candidate_line(c))
        if plan.recommended:
            r = plan.recommended
            out.append(f"recommendation: {r.label} ({r.method}) - {r.total_text()} per GPU; {r.reason}")
        else:
            out.append(
                f"recommendation: nothing fits as asked ({s.method}, micro-batch {s.micro_batch}, without CPU offload)"
            )
            fitting = [change for change in plan.changes if change.fits]
            if fitting:
                out.append(
                    "smallest changes that fit, in the skill's order ("
                    + " < ".join(label for key, label, modelled in ESCALATION if modelled)
                    + "; offload last):"
                )
                for i, change in enumerate(fitting, 1):
                    c = change.candidate
                    ask = "; changes what is trained, ask the user" if change.changes_training else ""
                    out.append(f"  {i}. {change.label}: {c.method} {c.label}, {c.total_text()}{ask}")
            tried = [change for change in plan.changes if not change.fits]
            if tried:
                out.append(
                    "  also tried (does not fit): "
                    + "; ".join(f"{change.label} ({tried_reason(change.candidate)})" for change in tried)
                )
            chosen = chosen_change(plan.changes)
            if chosen is not None:
                c = chosen.candidate
                keeps = "" if chosen.changes_training else ", which keeps what is trained"
                out.append(f"  the templates below are for {chosen.label}{keeps}: {c.method} with {c.label}")
            else:
                out.append("  no single change or pair fits: more GPUs, a shorter max_length, or a smaller model")
        out.extend(floors_lines(plan, floors or []))
        if plan.geometry is not None:
            gm = plan.geometry
            line = (
                f"batch: per_device_train_batch_size {gm.per_device} x {gm.world} processes x steps_per_generation "
                f"{gm.steps_per_generation} = generation batch {gm.generation_batch}, num_generations "
                f"{gm.num_generations}: "
            )
            line += (
                "divisible"
                if gm.divisible
                else (f"NOT divisible; set steps_per_generation {gm.suggestion} (or change the per-device batch)")
            )
            out.append(line)
        if commands.commands:
            out.append("commands (TEMPLATES: show them; run only with the user's explicit approval):")
            for cmd in commands.commands:
                out.append(f"  # {cmd['role']}: {cmd['note']}")
                out.append(f"  {cmd['command']}")
            out.append("config fields: " + json.dumps(commands.config_fields))
        for note in plan.notes:
            out.append(f"note: {note}")
        out.append(
            "approximate: activations, FSDP gather, autocast cache, overheads; exact: model states per the cited "
            "formulas (run --help for the memory model)"
        )
    if lint_ran:
        parsers = f" (YAML parser: {', '.join(sorted(set(yaml_parsers)))})" if yaml_parsers else ""
        if not findings:
            out.append(f"lint: no findings{parsers}")
        else:
            out.append(f"lint: {len(findings)} finding(s){parsers}")
            for finding in findings:
                out.append(f"  [{finding.severity}] {finding.id}: {finding.message}")
                out.append(f"    fix: {finding.fix}")
                out.append(f"    source: {finding.source}")
    return "\n".join(out)


def tried_reason(c: Estimate) -> str:
    """Why a change that was tried does not fit: its GPU figure, or the host RAM when that is what failed."""
    if c.verdict_bytes <= c.usable_bytes * (1 - c.headroom) and c.host_checked:
        return f"{c.verdict_bytes / GIB:.1f} GiB per GPU, but host RAM up to {(c.host_upper or 0) / GIB:,.0f} GiB"
    return f"{c.verdict_bytes / GIB:.1f} GiB"


def _candidate_line(c: Estimate) -> str:
    mark = "fits" if c.fits else "no  "
    host = f", host ~{c.host_bytes / GIB:.0f} GiB/node" if c.host_bytes is not None else ""
    if c.ds_host_estimate is not None and "offload" in c.strategy:
        host += f" (DeepSpeed's estimator says {c.ds_host_estimate / GIB:.0f})"
    return (
        f"  [{mark}] {c.method:5} {c.label:38} {_gib(c.states_bytes):>6} + {_gib(c.approx_bytes):>5} = "
        f"{_gib(c.total_bytes):>6} GiB ±{c.band * 100:.0f}% of approx, <= {_gib(c.upper_bytes)}  ({c.formula}{host})"
    )


def result_dict(
    request: PlanRequest,
    plan: Optional[Plan],
    commands: Commands,
    findings: List[Finding],
    verdict: Verdict,
    floors: Optional[List[Dict[str, str]]] = None,
) -> Dict[str, Any]:
    """The --json document (without its exit code); ``floors``: the recommended path's feature floors."""
    result: Dict[str, Any] = {"schema_version": SCHEMA_VERSION, "tool": "plan_training.py"}
    if plan is not None:
        result.update(plan_dict(plan, commands, verdict))
        result["feature_floors"] = floors_dict(plan, floors or [])
    result["lint"] = {
        "ran": request.linting,
        "yaml_parser": sorted(set(request.yaml_parsers)) or None,
        "findings": [finding.as_dict() for finding in findings],
    }
    return result


def error_dict(message: str) -> Dict[str, Any]:
    """The --json document of an input error (exit code 2)."""
    return {"schema_version": SCHEMA_VERSION, "tool": "plan_training.py", "error": message, "exit_code": 2}


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


def verdict_block(verdict: Verdict) -> str:
    """The last lines, always in this order: the plan's verdict, the lint's named errors, the --require results."""
    lines = verdict.lines()
    return fit_width("\n".join(lines)) + "\n" if lines else ""
