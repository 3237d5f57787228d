"""Rules: a ready/limited/unavailable verdict per backend, judged from the gathered facts only."""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from common import recorded
from common.output import shell_word
from common.read import find_executable
from common.trl_extras import EXTRA_GOALS

from diagnostic.base import BACKEND_IDS, DIST_TO_ID, first_line, fmt_mib, read_text, version_tuple
from diagnostic.packages import DistRecord


def _quoted(word: str) -> str:
    """One shell word, scrubbed then quoted; a leading ``~/`` stays unquoted so the shell expands it."""
    return shell_word(word)


class Context:
    """Facts the rules read, with small helpers."""

    def __init__(self, report: Dict[str, Any], chosen: Dict[str, DistRecord]) -> None:
        self.report = report
        self.packages: Dict[str, Dict[str, Any]] = report["packages"]
        self.rows: List[Dict[str, Any]] = report["compatibility"]
        self.build: Dict[str, Any] = report["torch_build"]
        self.accel: Dict[str, Any] = report["accelerators"]
        self.chosen = chosen
        self.probes = report.get("probes") or {}
        imports = self.probes.get("imports") or []
        self.import_results = {r["package"]: r for r in imports}
        python = report["python"]
        hint = report.get("interpreter") or {}
        # Name the interpreter in every install command: the one the interpreter hint suggests (it has torch),
        # else this one; a bare "pip" may belong to another environment.
        self.python_cmd = hint.get("suggested_python") or python.get("executable") or "python3"
        self.installer = f"{_quoted(self.python_cmd)} -m pip install"
        if python["kind"] == "uv" and not python["pip"]:
            self.installer = f"uv pip install --python {_quoted(self.python_cmd)}"
        config = report["launch"]["accelerate_config"]
        self.distributed_type = config["settings"].get("distributed_type") if config["status"] == "found" else None

    def pkg(self, pid: str) -> Dict[str, Any]:
        return self.packages[pid]

    def installed(self, pid: str) -> bool:
        return bool(self.packages[pid]["installed"])

    def label(self, pid: str) -> str:
        entry = self.packages[pid]
        return f"{pid} {entry['version']}" if entry["version"] else f"{pid} (no metadata)"

    def rows_for(self, subject: str, **match: Any) -> List[Dict[str, Any]]:
        return [r for r in self.rows if r["subject"] == subject and all(r.get(k) == v for k, v in match.items())]

    def gate(self, subject: str, owner: str) -> Optional[Dict[str, Any]]:
        for row in self.rows:
            if row["subject"] == subject and row["kind"] == "gate" and row["required_by"].startswith(owner + " "):
                return row
        return None

    def visible_gpus(self) -> List[Dict[str, Any]]:
        return [g for g in self.accel["gpus"] if g.get("visible")]

    def gpu_runtime(self) -> Tuple[Optional[str], List[Dict[str, Any]], str]:
        """(``cuda``/``rocm``/None, usable GPUs, explanation) for the installed torch build and visible GPUs."""
        kind = self.build["kind"]
        visible = self.visible_gpus()
        torch_probe = self.probes.get("torch") or {}
        if torch_probe.get("status") == "ok" and "cuda_available" in torch_probe:
            count = torch_probe.get("device_count") or 0
            if torch_probe.get("cuda_available") and count:
                runtime = "rocm" if torch_probe.get("hip_build") else "cuda"
                devices = torch_probe.get("devices") or []
                gpus = visible or [
                    {"index": d["index"], "name": d["name"], "compute_capability": d["compute_capability"]}
                    for d in devices
                ]
                return runtime, gpus, f"torch sees {count} GPU(s) (probed)"
            return None, [], "torch sees no GPU (probed: torch.cuda.is_available() is False)"
        if not self.installed("torch"):
            return None, [], "torch is not installed"
        vendor_gpus = {
            "cuda": [g for g in visible if g["vendor"] == "nvidia"],
            "rocm": [g for g in visible if g["vendor"] == "amd"],
        }
        if kind in ("cuda", "rocm"):
            gpus = vendor_gpus[kind]
            if gpus:
                build = f"CUDA {self.build['cuda']}" if kind == "cuda" else f"ROCm {self.build['hip']}"
                return kind, gpus, f"torch {self.build['version']} ({build})"
            listed = [g for g in self.accel["gpus"] if g["vendor"] == ("nvidia" if kind == "cuda" else "amd")]
            if listed:
                return None, [], f"{len(listed)} GPU(s) present but none visible ({self._visible_raw()})"
            smi = self.accel["nvidia_smi" if kind == "cuda" else "rocm_smi"]
            if smi["status"] == "not_found":
                return None, [], f"no GPU found ({'nvidia-smi' if kind == 'cuda' else 'rocm-smi'} not on PATH)"
            return None, [], f"no GPU found ({smi['status']}: {smi['detail']})"
        if kind == "cpu":
            if visible:
                return None, [], f"torch is a CPU-only build although {len(visible)} GPU(s) are visible"
            if sys.platform == "darwin":
                return None, [], "macOS: no CUDA or ROCm GPU (MPS only); these backends need CUDA or ROCm"
            return None, [], "no GPU found; torch is a CPU-only build"
        if kind == "xpu":
            return None, [], f"torch is an XPU build ({self.build['xpu']}); these verdicts assume CUDA or ROCm GPUs"
        return None, [], f"torch build unknown ({self.build['source']})"

    def _visible_raw(self) -> str:
        info = self.accel["visible_devices"]
        return f"{info['variable'].split(',')[0]}={info['raw']!r}" if info.get("raw") is not None else "visible devices"

    def import_state(self, pid: str) -> Tuple[Optional[bool], str]:
        """(True/False/None, text): the probe result, or None when not probed."""
        result = self.import_results.get(pid)
        if result is None:
            return None, "import not probed"
        if result.get("status") == "ok":
            return True, f"import {pid} ok ({result.get('seconds', result.get('wall_seconds'))} s)"
        reason = result.get("error") or result.get("status")
        if result.get("error_type"):
            reason = f"{result['error_type']}: {reason}"
        return False, f"import {result.get('module', pid)} failed: {reason}"

    def planned_install(self, extra: str) -> Optional[str]:
        """For a TRL extra, the install planner's command (scripts/plan_install.py): it prints the pip line pinned
        so that it resolves with what is installed, or names the constraint to drop. The default run does not
        resolve the stack itself (that would cost more than the whole metadata scan); None without TRL."""
        goal = EXTRA_GOALS.get(extra)
        if goal is None or not self.installed("trl"):
            return None
        script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plan_install.py")
        return f"{_quoted(self.python_cmd)} {_quoted(script)} --want {goal}"

    def install(self, *specs: str) -> str:
        return self.installer + " " + " ".join(f'"{s}"' if any(c in s for c in "[]<>=!,") else s for s in specs)

    def trl_extra_install(self, extra: str, fallback: str) -> str:
        planned = self.planned_install(extra)
        if planned:
            return planned
        record = self.chosen.get("trl")
        if record is not None and extra in record.provides_extras():
            return self.install(f"trl[{extra}]")
        return self.install(fallback)


def _verdict(backend: str, status: str, evidence: List[str], next_step: Optional[str]) -> Dict[str, Any]:
    return {"id": backend, "status": status, "evidence": [e for e in evidence if e], "next_step": next_step}


def _package_state(
    ctx: Context, pid: str, extra: Optional[str], gates: Sequence[Tuple[str, str]] = ()
) -> Dict[str, Any]:
    """Whether a package is missing, broken, too old/new for TRL or a gate, or fine (plus evidence)."""
    entry = ctx.pkg(pid)
    state: Dict[str, Any] = {"ok": False, "blocking": None, "soft": [], "evidence": [], "next": None}
    leftover = [p for p in entry["problems"] if p["code"] == "namespace_leftover"]
    if leftover:
        state["blocking"] = leftover[0]["message"]
        install = ctx.trl_extra_install(extra, pid) if extra else ctx.install(pid)
        state["next"] = f"remove the folder {entry['location']}, then {install}"
        return state
    if not entry["installed"]:
        state["blocking"] = f"{pid} not installed"
        state["next"] = ctx.trl_extra_install(extra, pid) if extra else ctx.install(pid)
        return state
    hard_codes = {"metadata_without_module", "namespace_leftover", "find_spec_error"}
    for problem in entry["problems"]:
        if problem["code"] in hard_codes:
            state["blocking"] = problem["message"]
            state["next"] = (
                ctx.install("--force-reinstall", f"{entry['dist'] or pid}=={entry['version']}")
                if entry["version"]
                else ctx.install("--force-reinstall", pid)
            )
            return state
        state["soft"].append(problem["message"])
    state["evidence"].append(ctx.label(pid) if entry["version"] else f"{pid} importable without metadata")
    subject = entry["dist"] or DIST_TO_ID.get(pid, pid)
    if extra:
        for row in ctx.rows_for(subject, kind="extra", extra=extra):  # trl's own line, or a nested extra's
            if row["status"] == "outside":
                owner = "trl" if row["required_by"].startswith("trl ") else row["required_by"]
                state["soft"].append(
                    f"{pid} {row['installed']} is outside {owner}'s supported range {row['requirement']} "
                    f"({row['required_by']})"
                )
                state["next"] = ctx.trl_extra_install(extra, f"{subject}{row['requirement']}")
    extra_outside = bool(state["next"])
    for owner, severity in gates:
        row = ctx.gate(subject, owner)
        if row and row["status"] == "outside":
            owner_label = row["required_by"].replace(" (code)", "")
            text = f"{pid} {row['installed']} is outside {owner_label}'s gate {row['requirement']} ({row['note']})"
            if severity == "hard":
                state["blocking"] = text
                # trl[extra] fixes it only when the extra's own range is violated too; else name the gate's range.
                if extra and extra_outside:
                    state["next"] = ctx.trl_extra_install(extra, f"{subject}{row['requirement']}")
                elif " or " not in row["requirement"]:
                    state["next"] = ctx.install(f"{subject}{row['requirement']}")
                return state
            state["soft"].append(text)
    imported, text = ctx.import_state(pid)
    if imported is False:
        state["blocking"] = text
        spec = f"{entry['dist'] or pid}=={entry['version']}" if entry["version"] else (entry["dist"] or pid)
        state["next"] = f"read the import error; a reinstall often fixes it: {ctx.install('--force-reinstall', spec)}"
        return state
    state["evidence"].append(text)
    state["ok"] = True
    return state


def _pin_text(pid: str, row: Dict[str, Any]) -> str:
    if row["status"] == "missing":
        return f"{pid} requires {row['subject']}{row['requirement']}, which is not installed"
    return f"{pid} requires {row['subject']}{row['requirement']}, installed {row['installed']}"


def _pin_problems(ctx: Context, pid: str) -> List[Dict[str, Any]]:
    """Outside/missing rows for the base pins that an installed package declares on other stack packages."""
    label = f"{pid} {ctx.pkg(pid)['version']}"
    return [
        r
        for r in ctx.rows
        if r["kind"] == "dependency" and r["required_by"] == label and r["status"] in ("outside", "missing")
    ]


def _summarize_gpus(gpus: List[Dict[str, Any]]) -> str:
    if not gpus:
        return "no GPU"
    names: Dict[str, int] = {}
    for gpu in gpus:
        names[gpu.get("name") or "GPU"] = names.get(gpu.get("name") or "GPU", 0) + 1
    parts = [f"{count}x {name}" for name, count in names.items()]
    caps = sorted({g.get("compute_capability") for g in gpus if g.get("compute_capability")}, key=version_tuple)
    return ", ".join(parts) + (f" (cc {'/'.join(caps)})" if caps else "")


def judge_backends(ctx: Context) -> List[Dict[str, Any]]:
    """One verdict per backend id, in BACKEND_IDS order."""
    rules: Dict[str, Callable[[Context], Dict[str, Any]]] = {
        "ddp": rule_ddp,
        "fsdp2": rule_fsdp2,
        "deepspeed": rule_deepspeed,
        "peft": rule_peft,
        "qlora": rule_qlora,
        "liger": rule_liger,
        "hub-kernels": rule_hub_kernels,
        "flash-attn": rule_flash_attn,
        "unsloth": rule_unsloth,
        "vllm-colocate": rule_vllm_colocate,
        "vllm-server": rule_vllm_server,
        "async-grpo-lora": rule_async_grpo_lora,
    }
    verdicts = []
    for backend in BACKEND_IDS:
        try:
            verdicts.append(rules[backend](ctx))
        except Exception as error:
            verdicts.append(
                _verdict(backend, "limited", [f"rule failed: {type(error).__name__}: {first_line(str(error))}"], None)
            )
    return verdicts


def _blocked(ctx: Context, backend: str, evidence: List[str], next_step: Optional[str]) -> Dict[str, Any]:
    """An 'unavailable' verdict for a GPU-only backend; a missing GPU is named too, and joins the next step."""
    runtime, _, why = ctx.gpu_runtime()
    if runtime is None:
        evidence = [*evidence, why]
        next_step = f"{next_step}; then run where a CUDA or ROCm GPU is visible" if next_step else _torch_gpu_step(ctx)
    return _verdict(backend, "unavailable", evidence, next_step)


def _torch_first(ctx: Context, backend: str) -> Optional[Dict[str, Any]]:
    if not ctx.installed("torch"):
        return _verdict(backend, "unavailable", ["torch is not installed"], ctx.install("torch"))
    return None


def _torch_gpu_step(ctx: Context) -> str:
    if ctx.build["kind"] == "cpu" and ctx.visible_gpus():
        return "install a CUDA (or ROCm) build of torch that matches your driver (see pytorch.org/get-started)"
    return "run on a machine with a CUDA or ROCm GPU (or check CUDA_VISIBLE_DEVICES)"


def rule_ddp(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "ddp")
    if early:
        return early
    runtime, gpus, why = ctx.gpu_runtime()
    evidence = [why if runtime else ctx.label("torch"), "" if runtime else why]
    torch_probe = ctx.probes.get("torch") or {}
    if torch_probe.get("status") == "ok":
        evidence.append("NCCL available" if torch_probe.get("nccl_available") else "NCCL not available (probed)")
    if not ctx.installed("accelerate"):
        return _verdict(
            "ddp",
            "limited",
            [*evidence, "accelerate not installed (TRL launches through it)"],
            ctx.install("accelerate"),
        )
    evidence.append(ctx.label("accelerate"))
    if runtime is None:
        return _verdict("ddp", "limited", [*evidence, "CPU only: gloo backend, no NCCL"], _torch_gpu_step(ctx))
    if torch_probe.get("status") == "ok" and not torch_probe.get("nccl_available") and runtime == "cuda":
        return _verdict("ddp", "limited", evidence, "torch reports no NCCL: reinstall a CUDA build of torch")
    if len(gpus) < 2:
        return _verdict(
            "ddp",
            "limited",
            [*evidence, f"{_summarize_gpus(gpus)}: one process per GPU gives a single rank here"],
            "use 2+ GPUs (or several nodes) for data parallelism",
        )
    return _verdict(
        "ddp", "ready", [*evidence, _summarize_gpus(gpus), "torch import not probed" if not torch_probe else ""], None
    )


FSDP2_CONSTANT = "FSDP2_PYTORCH_VERSION (accelerate/utils/constants.py)"


def _older_than_recorded(ctx: Context, pid: str) -> bool:
    """True when the installed ``pid`` is older than the newest release the recorded matrix lists: only then can a
    name the rule did not find be a feature of a later release (never advise an upgrade past the newest)."""
    version = ctx.pkg(pid)["version"]
    matrix = recorded.load()
    newest = matrix.newest.get(pid) if matrix else None
    return bool(version and newest and recorded.newer_than(newest, version))


def _fsdp2_floor_from_metadata(ctx: Context) -> Tuple[Optional[Dict[str, Any]], str]:
    """FSDP2's torch floor when accelerate's source no longer names it: accelerate 1.16.0 drops
    FSDP2_PYTORCH_VERSION ("2.6.0" up to 1.15.0, accelerate/utils/constants.py) and requires torch>=2.6.0 in its
    metadata instead. Returns (the base torch dependency row standing in for the gate, or None; the evidence)."""
    unread = f"could not read {FSDP2_CONSTANT} in {ctx.label('accelerate')}"
    for row in ctx.rows_for("torch", kind="dependency", extra=None):
        if row["required_by"] != ctx.label("accelerate"):
            continue
        floor = re.search(r">=\s*([0-9][0-9.]*)", row["requirement"] or "")
        if floor and version_tuple(floor.group(1)) >= (2, 6):
            return row, f"{unread}; its metadata requires torch {row['requirement']} (FSDP2's floor since 1.16.0)"
    return None, f"{unread}, nor a torch floor of 2.6 or higher in its metadata: FSDP2's torch floor is unverified"


def rule_fsdp2(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "fsdp2")
    if early:
        return early
    if not ctx.installed("accelerate"):
        return _verdict("fsdp2", "unavailable", ["accelerate not installed"], ctx.install("accelerate"))
    evidence = [ctx.label("accelerate")]
    gate = ctx.gate("torch", "accelerate")
    if gate is None:
        gate, note = _fsdp2_floor_from_metadata(ctx)
        if gate is None:
            older = _older_than_recorded(ctx, "accelerate")
            return _verdict(
                "fsdp2",
                "unavailable" if older else "limited",
                [*evidence, note],
                ctx.install("-U", "accelerate") if older else None,
            )
        evidence.append(note)
    if gate["status"] == "outside":
        return _verdict(
            "fsdp2",
            "unavailable",
            [*evidence, f"FSDP2 needs torch {gate['requirement']} ({gate['source'].split(' (')[0]})"],
            ctx.install(f"torch{gate['requirement']}"),
        )
    evidence.append(f"torch {gate['installed']} meets FSDP2's {gate['requirement']}")
    runtime, gpus, why = ctx.gpu_runtime()
    evidence.append(why)
    if runtime is None:
        return _verdict("fsdp2", "unavailable", evidence, _torch_gpu_step(ctx))
    if ctx.distributed_type == "DEEPSPEED":
        evidence.append("accelerate default config selects DEEPSPEED; pass an FSDP config to accelerate launch")
    if len(gpus) < 2:
        return _verdict(
            "fsdp2", "limited", [*evidence, "1 GPU: nothing to shard across (CPU offload only)"], "use 2+ GPUs"
        )
    return _verdict("fsdp2", "ready", [*evidence, _summarize_gpus(gpus)], None)


def rule_deepspeed(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "deepspeed")
    if early:
        return early
    state = _package_state(ctx, "deepspeed", "deepspeed")
    if state["blocking"]:
        return _blocked(ctx, "deepspeed", [state["blocking"]], state["next"])
    evidence = list(state["evidence"])
    soft = list(state["soft"])
    for row in ctx.rows_for("transformers", kind="extra", extra="deepspeed"):
        if row["status"] == "outside":
            soft.append(f"transformers {row['installed']} is excluded by {row['required_by']} ({row['requirement']})")
    if not ctx.installed("accelerate"):
        return _verdict("deepspeed", "unavailable", [*evidence, "accelerate not installed"], ctx.install("accelerate"))
    build = ctx.report.get("deepspeed_build") or {}
    ops = build.get("installed_ops")
    if ops is not None:
        if ops:
            evidence.append(f"prebuilt ops: {', '.join(ops)}")
        else:
            tools = []
            toolkit = ctx.report["torch_build"].get("cuda_toolkit") or {}
            tools.append("nvcc found" if toolkit.get("nvcc") else "no nvcc")
            import importlib.util

            has_ninja = bool(find_executable("ninja") or importlib.util.find_spec("ninja"))
            tools.append("ninja found" if has_ninja else "no ninja")
            evidence.append(f"no prebuilt ops: fused/CPU-offload optimizers compile on first use ({', '.join(tools)})")
            if not has_ninja:
                soft.append("ninja missing: DeepSpeed cannot JIT-compile ops (ZeRO-Offload's CPU Adam)")
    runtime, gpus, why = ctx.gpu_runtime()
    evidence.append(why)
    if runtime is None:
        return _verdict("deepspeed", "unavailable", evidence + soft, _torch_gpu_step(ctx))
    if soft:
        return _verdict("deepspeed", "limited", evidence + soft, state["next"] or ctx.install("ninja"))
    return _verdict("deepspeed", "ready", [*evidence, _summarize_gpus(gpus)], None)


def rule_peft(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "peft")
    if early:
        return early
    state = _package_state(ctx, "peft", "peft")
    if state["blocking"]:
        return _verdict("peft", "unavailable", [state["blocking"]], state["next"])
    evidence = list(state["evidence"])
    pins = _pin_problems(ctx, "peft")
    soft = state["soft"] + [_pin_text("peft", r) for r in pins]
    runtime, gpus, why = ctx.gpu_runtime()
    if soft:
        return _verdict("peft", "limited", evidence + soft, state["next"])
    if runtime is None:
        return _verdict("peft", "limited", [*evidence, why, "CPU-only training is slow"], _torch_gpu_step(ctx))
    return _verdict("peft", "ready", [*evidence, _summarize_gpus(gpus)], None)


def rule_qlora(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "qlora")
    if early:
        return early
    peft_state = _package_state(ctx, "peft", "peft")
    if peft_state["blocking"]:
        return _blocked(ctx, "qlora", [peft_state["blocking"]], peft_state["next"])
    bnb = _package_state(ctx, "bitsandbytes", "quantization", gates=(("transformers", "hard"),))
    if bnb["blocking"]:
        return _blocked(ctx, "qlora", [*peft_state["evidence"][:1], bnb["blocking"]], bnb["next"])
    evidence = peft_state["evidence"][:1] + bnb["evidence"]
    soft = peft_state["soft"] + bnb["soft"]
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict(
            "qlora", "unavailable", [*evidence, why, "4-bit training needs a CUDA or ROCm GPU"], _torch_gpu_step(ctx)
        )
    libraries = ctx.report.get("bitsandbytes_libraries") or []
    if libraries and runtime == "cuda" and ctx.build.get("cuda"):
        major = str(version_tuple(ctx.build["cuda"])[0]) if version_tuple(ctx.build["cuda"]) else ""
        if not any(name.startswith(f"libbitsandbytes_cuda{major}") for name in libraries):
            soft.append(f"bitsandbytes ships no library for CUDA {ctx.build['cuda']}")
    caps = [version_tuple(g.get("compute_capability")) for g in gpus if g.get("compute_capability")]
    if caps and min(caps) < (7, 5):
        soft.append("a GPU below compute capability 7.5: bitsandbytes int8 matmul is unavailable there")
    evidence.append(_summarize_gpus(gpus))
    if soft:
        return _verdict("qlora", "limited", evidence + soft, bnb["next"] or peft_state["next"])
    return _verdict("qlora", "ready", evidence, None)


def _deprecation_of_liger(ctx: Context) -> Optional[str]:
    location = ctx.pkg("trl")["location"]
    if not location:
        return None
    text = read_text(os.path.join(location, "trainer", "base_config.py")) or ""
    if re.search(r"use_liger_kernel[\s\S]{0,600}?Deprecated", text):
        return (
            f"trl {ctx.pkg('trl')['version']} deprecates use_liger_kernel (trl/trainer/base_config.py); use Hub kernels"
        )
    return None


def rule_liger(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "liger")
    if early:
        return early
    state = _package_state(ctx, "liger-kernel", "liger", gates=(("trl", "hard"),))
    if state["blocking"]:
        return _blocked(ctx, "liger", [state["blocking"]], state["next"])
    evidence = list(state["evidence"])
    soft = list(state["soft"])
    if not ctx.installed("triton"):
        return _blocked(
            ctx, "liger", [*evidence, "triton not installed (Liger kernels are Triton)"], ctx.install("triton")
        )
    evidence.append(ctx.label("triton"))
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict(
            "liger", "unavailable", [*evidence, why, "Triton kernels need a CUDA or ROCm GPU"], _torch_gpu_step(ctx)
        )
    evidence.append(_summarize_gpus(gpus))
    deprecated = _deprecation_of_liger(ctx)
    if deprecated:
        return _verdict(
            "liger",
            "limited",
            evidence + soft + [deprecated],
            'model_init_kwargs={"use_kernels": True} (see hub-kernels)',
        )
    if soft:
        return _verdict("liger", "limited", evidence + soft, state["next"])
    return _verdict("liger", "ready", evidence, None)


def rule_hub_kernels(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "hub-kernels")
    if early:
        return early
    if not ctx.installed("transformers"):
        return _verdict("hub-kernels", "unavailable", ["transformers not installed"], ctx.install("transformers"))
    state = _package_state(ctx, "kernels", "kernels", gates=(("transformers", "hard"),))
    if state["blocking"]:
        return _blocked(ctx, "hub-kernels", [ctx.label("transformers"), state["blocking"]], state["next"])
    evidence = [ctx.label("transformers"), *state["evidence"]]
    soft = list(state["soft"])
    gate = ctx.gate("transformers", "trl")
    if gate and gate["status"] == "outside":
        return _verdict(
            "hub-kernels",
            "unavailable",
            [*evidence, f"transformers {gate['installed']}: {gate['note']} ({gate['required_by']})"],
            ctx.install("transformers>=5.4.0"),
        )
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict("hub-kernels", "unavailable", [*evidence, why], _torch_gpu_step(ctx))
    evidence.append(_summarize_gpus(gpus))
    env = ctx.report["launch"]["env"]
    if env.get("HF_HUB_OFFLINE") in ("1", "true", "True", "ON", "YES"):
        soft.append("HF_HUB_OFFLINE is set: kernels must already be in the local Hub cache")
    else:
        evidence.append("kernels are downloaded from the Hub on first use")
    if soft:
        return _verdict("hub-kernels", "limited", evidence + soft, state["next"])
    return _verdict("hub-kernels", "ready", evidence, None)


def rule_flash_attn(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "flash-attn")
    if early:
        return early
    fa2 = _package_state(ctx, "flash-attn", None, gates=(("transformers", "hard"),))
    fa3 = _package_state(ctx, "flash-attn-3", None)
    runtime, gpus, why = ctx.gpu_runtime()
    if not fa2["ok"] and not fa3["ok"]:
        evidence = [fa2["blocking"]]
        if ctx.installed("flash-attn-3"):
            evidence.append(fa3["blocking"])
        step = fa2["next"] if ctx.installed("flash-attn") else ctx.install("flash-attn", "--no-build-isolation")
        return _blocked(ctx, "flash-attn", evidence, step)
    evidence = (fa2["evidence"] if fa2["ok"] else []) + (fa3["evidence"] if fa3["ok"] else [])
    soft = fa2["soft"] + fa3["soft"]
    if runtime is None:
        return _verdict(
            "flash-attn", "unavailable", [*evidence, why, "flash-attn needs a CUDA (or ROCm) GPU"], _torch_gpu_step(ctx)
        )
    eligible = [g for g in gpus if g.get("flash_attn2_eligible")]
    evidence.append(_summarize_gpus(gpus))
    if not eligible:
        return _verdict(
            "flash-attn",
            "unavailable",
            [*evidence, "no visible GPU has compute capability >= 8.0"],
            'use attn_implementation="sdpa"',
        )
    if fa3["ok"] and not fa2["ok"]:
        hopper = [g for g in gpus if version_tuple(g.get("compute_capability")) >= (9, 0)]
        if not hopper:
            soft.append("only flash-attn-3 is installed, and it targets Hopper (cc 9.0)")
    if len(eligible) < len(gpus):
        soft.append(f"{len(gpus) - len(eligible)} visible GPU(s) below compute capability 8.0")
    if soft:
        return _verdict("flash-attn", "limited", evidence + soft, fa2["next"])
    return _verdict("flash-attn", "ready", evidence, None)


def rule_unsloth(ctx: Context) -> Dict[str, Any]:
    early = _torch_first(ctx, "unsloth")
    if early:
        return early
    state = _package_state(ctx, "unsloth", None)
    if state["blocking"]:
        return _blocked(ctx, "unsloth", [state["blocking"]], state["next"])
    zoo = _package_state(ctx, "unsloth-zoo", None)
    if zoo["blocking"]:
        return _blocked(ctx, "unsloth", [*state["evidence"], zoo["blocking"]], zoo["next"])
    evidence = state["evidence"] + zoo["evidence"]
    soft = state["soft"] + zoo["soft"]
    for pid in ("unsloth", "unsloth-zoo"):
        soft.extend(_pin_text(pid, r) for r in _pin_problems(ctx, pid))
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict("unsloth", "unavailable", [*evidence, why, "Unsloth needs a GPU"], _torch_gpu_step(ctx))
    evidence.append(_summarize_gpus(gpus))
    if runtime != "cuda":
        soft.append("Unsloth is built for NVIDIA GPUs first; ROCm support depends on the Unsloth release")
    evidence.append("unsloth patches trl/transformers at import; import it before them")
    if soft:
        return _verdict("unsloth", "limited", evidence + soft, None)
    return _verdict("unsloth", "ready", evidence, None)


def _vllm_common(ctx: Context, backend: str) -> Tuple[Optional[Dict[str, Any]], List[str], List[str], Optional[str]]:
    """Shared vLLM checks (trl, vllm, trl's range, vllm's own pins): (early verdict, evidence, soft, step)."""
    if not ctx.installed("trl"):
        return _blocked(ctx, backend, ["trl not installed"], ctx.install("trl[vllm]")), [], [], None
    state = _package_state(ctx, "vllm", "vllm")
    if state["blocking"]:
        return _blocked(ctx, backend, [ctx.label("trl"), state["blocking"]], state["next"]), [], [], None
    evidence = [ctx.label("trl"), *state["evidence"]]
    soft = list(state["soft"])
    gate = ctx.gate("vllm", "trl")
    if gate and gate["status"] == "outside" and not any("outside trl's supported range" in s for s in soft):
        soft.append(f"vllm {gate['installed']} is outside trl's runtime range {gate['requirement']}")
    pins = _pin_problems(ctx, "vllm")
    others = [_pin_text("vllm", row) for row in pins if row["subject"] != "torch"]
    torch_pin = next((row for row in pins if row["subject"] == "torch"), None)
    if torch_pin is not None:  # vLLM's compiled ops are built against one exact torch
        reason = (
            f"vllm {ctx.pkg('vllm')['version']} is built for torch {torch_pin['requirement']}, installed "
            f"{torch_pin['installed'] or 'none'}"
        )
        step = state["next"] or ctx.install(f"torch{torch_pin['requirement']}")
        return _verdict(backend, "unavailable", [reason, *soft, *others], step), [], [], None
    for row in pins:
        state["next"] = state["next"] or ctx.install(f"{row['subject']}{row['requirement']}")
    return None, evidence, soft + others, state["next"]


def rule_vllm_colocate(ctx: Context) -> Dict[str, Any]:
    early, evidence, soft, step = _vllm_common(ctx, "vllm-colocate")
    if early:
        return early
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict(
            "vllm-colocate", "unavailable", [*evidence, why, "vLLM needs a CUDA or ROCm GPU"], _torch_gpu_step(ctx)
        )
    free = sum(g.get("memory_free_mib") or 0 for g in gpus)
    evidence.append(_summarize_gpus(gpus) + (f", {fmt_mib(free)} free" if free else ""))
    evidence.append("vLLM shares the training GPUs (vllm_gpu_memory_utilization, default 0.3)")
    if soft:
        return _verdict("vllm-colocate", "limited", evidence + soft, step)
    return _verdict("vllm-colocate", "ready", evidence, None)


def rule_vllm_server(ctx: Context) -> Dict[str, Any]:
    early, evidence, soft, step = _vllm_common(ctx, "vllm-server")
    if early:
        return early
    if not ctx.installed("requests"):
        return _blocked(
            ctx, "vllm-server", [*evidence, "requests not installed (VLLMClient uses it)"], ctx.install("trl[vllm]")
        )
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict(
            "vllm-server",
            "unavailable",
            [*evidence, why, "the NCCL weight sync needs a GPU on the trainer"],
            _torch_gpu_step(ctx),
        )
    evidence.append(_summarize_gpus(gpus))
    evidence.append("server itself not checked here: run scripts/check_vllm_server.py")
    if len(gpus) < 2:
        soft.append("1 GPU visible: the server needs GPUs of its own (another node, or use vllm-colocate)")
    if soft:
        return _verdict("vllm-server", "limited", evidence + soft, step)
    return _verdict("vllm-server", "ready", evidence, None)


def rule_async_grpo_lora(ctx: Context) -> Dict[str, Any]:
    early, evidence, soft, step = _vllm_common(ctx, "async-grpo-lora")
    if early:
        return early
    location = ctx.pkg("trl")["location"] or ""
    source = (
        read_text(os.path.join(location, "experimental", "async_grpo", "async_grpo_trainer.py")) if location else None
    )
    if not source or "select_adapter_sync" not in source:
        where = "select_adapter_sync (trl/experimental/async_grpo/async_grpo_trainer.py)"
        if source and _older_than_recorded(ctx, "trl"):
            return _verdict(
                "async-grpo-lora",
                "unavailable",
                [*evidence, f"{ctx.label('trl')} has no adapter-only LoRA sync (select_adapter_sync)"],
                ctx.install("-U", "trl"),
            )
        return _verdict(
            "async-grpo-lora",
            "limited",
            [*evidence, f"could not read {where} in {ctx.label('trl')}: adapter-only LoRA sync is unverified"],
            None,
        )
    evidence.append("adapter-only LoRA sync present (trl/experimental/async_grpo)")
    for pid, extra in (("peft", "peft"), ("kernels", "kernels"), ("aiohttp", "vllm"), ("requests", "vllm")):
        state = _package_state(ctx, pid, extra, gates=(("transformers", "hard"),) if pid == "kernels" else ())
        if state["blocking"]:
            why = {"kernels": " (tree attention loads the flash-attn3 Hub kernel)", "aiohttp": " (rollout worker)"}.get(
                pid, ""
            )
            return _blocked(ctx, "async-grpo-lora", [*evidence, state["blocking"] + why], state["next"])
        soft.extend(state["soft"])
    runtime, gpus, why = ctx.gpu_runtime()
    if runtime is None:
        return _verdict("async-grpo-lora", "unavailable", [*evidence, why], _torch_gpu_step(ctx))
    evidence.append(_summarize_gpus(gpus))
    if ctx.distributed_type == "DEEPSPEED":
        soft.append("accelerate default config selects DEEPSPEED; AsyncGRPO is FSDP2-only (async_grpo_trainer.py)")
    if len(gpus) < 2:
        soft.append("1 GPU visible: the vLLM server needs its own GPU (or another node)")
    evidence.append(
        "server side not checked: needs --enable-lora, VLLM_ALLOW_RUNTIME_LORA_UPDATING=1, DP=1 "
        "(scripts/check_vllm_server.py)"
    )
    if soft:
        return _verdict("async-grpo-lora", "limited", evidence + soft, step)
    return _verdict("async-grpo-lora", "ready", evidence, None)


def verdict_line(backends: List[Dict[str, Any]], required: Sequence[str], probed: bool) -> str:
    """The last line: what is ready, limited and unavailable, and the --require outcome."""
    groups: Dict[str, List[str]] = {"ready": [], "limited": [], "unavailable": []}
    for verdict in backends:
        groups.setdefault(verdict["status"], []).append(verdict["id"])
    parts = [f"{status}: {', '.join(ids) if ids else 'none'}" for status, ids in groups.items()]
    text = "verdict: " + "; ".join(parts)
    if not probed:
        text += " (static checks; imports not probed: add --probe-imports)"
    if required:
        failing = [b["id"] for b in backends if b["id"] in required and b["status"] != "ready"]
        text += f"; --require {','.join(required)}: " + (
            "FAILED (" + ", ".join(failing) + " not ready)" if failing else "met"
        )
    return text
