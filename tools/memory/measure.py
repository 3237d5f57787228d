"""The measured steps: a model built from config.json with random weights (no download), a made-up tokenizer and
data of exact lengths, a few optimizer steps of TRL's SFT, DPO or GRPO trainer (GRPO generates with
model.generate, no vLLM), peak memory per step. torch, transformers, peft, trl, datasets and, for QLoRA,
bitsandbytes are imported here only."""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from memory.record import SCHEMA
from memory.suite import LORA_RANK, TINY, RunSpec, planner_args

TINY_CONFIG: Dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
}
TOKENIZER_WORDS = 400  # the made-up tokenizer's vocabulary (below every real model's)
GIB = 2**30


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    vocab.update({f"w{i}": i + 3 for i in range(TOKENIZER_WORDS)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def _words(n: int, seed: int) -> str:
    """n tokens of the made-up tokenizer (one word each)."""
    return " ".join(f"w{(seed * 7919 + i * 104729) % TOKENIZER_WORDS}" for i in range(n))


def _config(spec: RunSpec, root: Path) -> Dict[str, Any]:
    if spec.config == TINY:
        return dict(TINY_CONFIG)
    return json.loads((root / spec.config).read_text(encoding="utf-8"))


def _model(config: Dict[str, Any], method: str, device: str):
    """Random weights in bf16 (float32 on the CPU), built on the device; QLoRA: every Linear but lm_head replaced by
    a bitsandbytes NF4 Linear4bit with double quantization (what BitsAndBytesConfig(load_in_4bit=True,
    bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True) loads), quantized on the device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = {k: v for k, v in config.items() if k not in ("architectures", "_name_or_path", "quantization_config")}
    model_type = cfg.pop("model_type")
    for key in ("torch_dtype", "dtype", "transformers_version"):
        cfg.pop(key, None)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **cfg), dtype=dtype)
    if method == "qlora":
        _quantize(model, dtype, device)
    return model


def _quantize(model, compute_dtype, device: str) -> None:
    import bitsandbytes as bnb
    import torch

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if not isinstance(child, torch.nn.Linear) or name == "lm_head":
                continue
            layer = bnb.nn.Linear4bit(
                child.in_features,
                child.out_features,
                bias=child.bias is not None,
                compute_dtype=compute_dtype,
                compress_statistics=True,
                quant_type="nf4",
                device="meta",
            )
            layer.weight = bnb.nn.Params4bit(
                child.weight.data, requires_grad=False, compress_statistics=True, quant_type="nf4"
            )
            if child.bias is not None:
                layer.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
            setattr(parent, name, layer.to(device))  # .to() quantizes
    model.is_loaded_in_4bit = True  # what TRL and PEFT read to treat the model as QLoRA


def _peak_callback(cuda: bool):
    import torch
    from transformers import TrainerCallback

    class PeakPerStep(TrainerCallback):
        def __init__(self) -> None:
            self.steps: List[Dict[str, Any]] = []
            self.allocated_at_start: Optional[int] = None

        def on_train_begin(self, args, state, control, **kwargs):
            if cuda:
                self.allocated_at_start = int(torch.cuda.memory_allocated())

        def on_step_begin(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.reset_peak_memory_stats()

        def on_step_end(self, args, state, control, **kwargs):
            self.steps.append(
                {
                    "step": state.global_step,
                    "max_memory_allocated": int(torch.cuda.max_memory_allocated()) if cuda else None,
                    "max_memory_reserved": int(torch.cuda.max_memory_reserved()) if cuda else None,
                }
            )

    return PeakPerStep()


def _trainer(spec: RunSpec, model, tokenizer, steps: int, out_dir: str, cuda: bool):
    from datasets import Dataset
    from peft import LoraConfig

    rows = spec.micro_batch * steps
    common = {
        "output_dir": out_dir,
        "per_device_train_batch_size": spec.micro_batch,
        "max_steps": steps,
        "gradient_checkpointing": True,
        "bf16": cuda,
        "report_to": [],
        "save_strategy": "no",
        "logging_steps": 1,
        "use_cpu": not cuda,
        "optim": "adamw_torch",
    }
    peft = LoraConfig(r=LORA_RANK, target_modules="all-linear") if spec.method != "full" else None
    # Each text is one word short of the length: the tokenizer's EOS makes it exactly seq_len tokens.
    if spec.trainer == "sft":
        from trl import SFTConfig, SFTTrainer

        data = Dataset.from_dict({"text": [_words(spec.seq_len - 1, i) for i in range(rows)]})
        args = SFTConfig(max_length=spec.seq_len, **common)
        return SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer, peft_config=peft)
    if spec.trainer == "dpo":
        from trl import DPOConfig, DPOTrainer

        half = spec.seq_len // 2
        data = Dataset.from_dict(
            {
                "prompt": [_words(half, i) for i in range(rows)],
                "chosen": [_words(spec.seq_len - half - 1, i + 1) for i in range(rows)],
                "rejected": [_words(spec.seq_len - half - 1, i + 2) for i in range(rows)],
            }
        )
        args = DPOConfig(max_length=spec.seq_len, **common)
        return DPOTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer, peft_config=peft)
    from trl import GRPOConfig, GRPOTrainer

    prompt = spec.seq_len - spec.completion_len
    prompts = rows // spec.num_generations + 1
    data = Dataset.from_dict({"prompt": [_words(prompt, i) for i in range(prompts * 2)]})
    args = GRPOConfig(
        max_completion_length=spec.completion_len,
        num_generations=spec.num_generations,
        # every completion runs to max_completion_length: the lengths the planner is given
        generation_kwargs={"min_new_tokens": spec.completion_len},
        **common,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **kw: [float(len(c)) for c in completions],
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=peft,
    )


def run_one(spec: RunSpec, root: Path, steps: int, cuda: bool) -> Dict[str, Any]:
    import torch

    device = "cuda" if cuda else "cpu"
    run: Dict[str, Any] = {**spec.as_dict(), "label": spec.label(), "error": None, "steps": []}
    started = time.monotonic()
    try:
        config = _config(spec, root)
        run["model_type"] = config["model_type"]
        model = _model(config, spec.method, device)
        if cuda:
            torch.cuda.empty_cache()  # construction's freed blocks must not count as the run's reserve
        with tempfile.TemporaryDirectory() as out_dir:
            job = _trainer(spec, model, _tokenizer(), steps, out_dir, cuda)
            callback = _peak_callback(cuda)
            job.add_callback(callback)
            job.train()
            run["steps"] = callback.steps
            run["allocated_at_start"] = callback.allocated_at_start
        del job, model
    except Exception as exc:  # an OOM is a result too
        run["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    run["seconds"] = round(time.monotonic() - started, 1)
    return run


def measure(
    specs: List[RunSpec],
    root: Path,
    steps: int,
    tiny: bool,
    budget_s: float,
    on_run: Callable[[Dict[str, Any]], None],
) -> Dict[str, Any]:
    """Measure each spec in turn; stop starting runs once budget_s has passed. on_run gets the record after each run
    (the command writes it then, so a run cut off by a time limit keeps what was measured)."""
    import torch
    import transformers
    import trl

    try:
        import peft

        peft_version = peft.__version__
    except ImportError:  # pragma: no cover - peft is needed for LoRA and DPO anyway
        peft_version = None
    cuda = torch.cuda.is_available() and not tiny
    record: Dict[str, Any] = {
        "schema": SCHEMA,
        "tool": "tools/measure_memory.py",
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
            "peft": peft_version,
            "bitsandbytes": _version("bitsandbytes"),
        },
        "device": "cuda" if cuda else "cpu",
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "runs": [],
    }
    if cuda:
        torch.zeros(1, device="cuda")
        free, total = torch.cuda.mem_get_info()
        record["gpu_total_bytes"] = int(total)
        record["cuda_context_bytes"] = int(total - free - torch.cuda.memory_reserved())
    started = time.monotonic()
    for spec in specs:
        if time.monotonic() - started > budget_s:
            print(f"budget of {budget_s:.0f} s spent: {spec.label()} and the rest not run", file=sys.stderr)
            break
        if not cuda:  # a real model's steps on the CPU measure nothing and take hours
            spec = RunSpec(**{**spec.as_dict(), "config": TINY, "seq_len": min(spec.seq_len, 32)})
            spec = _fit_tiny(spec)
        run = run_one(spec, root, steps, cuda)
        # the tiny stand-in has no config file for the planner to read
        run["planner_args"] = [] if spec.config == TINY else planner_args(spec, record["gpu_total_bytes"] / GIB)
        record["runs"].append(run)
        print(f"{run['label']}: {run['error'] or 'ok'} ({run['seconds']} s)", file=sys.stderr)
        on_run(record)
    return record


def _fit_tiny(spec: RunSpec) -> RunSpec:
    """The tiny stand-in keeps the trainer and method, with lengths a CPU runs in seconds."""
    if spec.trainer != "grpo":
        return RunSpec(**{**spec.as_dict(), "micro_batch": min(spec.micro_batch, 2)})
    return RunSpec(**{**spec.as_dict(), "seq_len": 16, "completion_len": 8, "micro_batch": 2, "num_generations": 2})


def _version(name: str) -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
