#!/usr/bin/env python3
"""Measure training memory with TRL on random weights: SFT, LoRA, DPO and GRPO steps, peak memory per step.

Run by hand in a separate virtual environment with torch, transformers, peft, trl and datasets (no download: the
model is built from a config.json with random weights, the tokenizer and the data are made up here):

    python tools/measure_memory.py --config tests/fixtures/model_configs/llama-3.1-8b/config.json \\
        --lengths 512,2048 --batches 1,4 --write tests/fixtures/memory/llama-3.1-8b-h100.json

On a GPU each record holds ``torch.cuda.max_memory_allocated`` and ``max_memory_reserved`` after every optimizer
step (the peaks are reset before each), with the GPU name and the torch, transformers, PEFT and TRL releases.
Without a GPU (``--tiny``, or no CUDA device) the same code path runs on a tiny config on the CPU and the memory
fields are null; ``check_record`` validates either kind. GRPO generates with ``model.generate`` (no vLLM).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

SCHEMA = 1
TRAINERS = ("sft", "lora", "dpo", "grpo")
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


# ==============================================================================================================
# The record (pure Python: the test checks it without torch)
# ==============================================================================================================


def check_record(record: Dict[str, Any]) -> List[str]:
    """Problems with a record's shape, or an empty list."""
    problems: List[str] = []
    if record.get("schema") != SCHEMA:
        problems.append(f"schema must be {SCHEMA}")
    versions = record.get("versions")
    if not isinstance(versions, dict) or not all(isinstance(versions.get(k), str) for k in ("torch", "trl")):
        problems.append("versions must name torch and trl releases")
    device = record.get("device")
    if device not in ("cuda", "cpu"):
        problems.append("device must be cuda or cpu")
    if device == "cuda" and not isinstance(record.get("gpu"), str):
        problems.append("a cuda record names its GPU")
    runs = record.get("runs")
    if not isinstance(runs, list) or not runs:
        return [*problems, "runs must be a non-empty list"]
    for i, run in enumerate(runs):
        where = f"runs[{i}]"
        if run.get("trainer") not in TRAINERS:
            problems.append(f"{where}: trainer must be one of {', '.join(TRAINERS)}")
        for key in ("seq_len", "micro_batch"):
            if not isinstance(run.get(key), int) or run[key] < 1:
                problems.append(f"{where}: {key} must be a positive integer")
        steps = run.get("steps")
        if run.get("error") is None and (not isinstance(steps, list) or not steps):
            problems.append(f"{where}: a run without an error has steps")
        for step in steps or []:
            for key in ("max_memory_allocated", "max_memory_reserved"):
                value = step.get(key)
                if device == "cuda" and not (isinstance(value, int) and value > 0):
                    problems.append(f"{where}: {key} must be a positive byte count on cuda")
                if device == "cpu" and value is not None:
                    problems.append(f"{where}: {key} is null on cpu")
    return problems


# ==============================================================================================================
# Measuring (torch, transformers, peft, trl, datasets imported here only)
# ==============================================================================================================


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    vocab.update({f"w{i}": i + 3 for i in range(TOKENIZER_WORDS)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def _words(n: int, seed: int) -> str:
    return " ".join(f"w{(seed * 7919 + i * 104729) % TOKENIZER_WORDS}" for i in range(n))


def _model(config: Dict[str, Any], dtype):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = {k: v for k, v in config.items() if k not in ("architectures", "_name_or_path", "quantization_config")}
    model_type = cfg.pop("model_type")
    for key in ("torch_dtype", "dtype", "transformers_version"):
        cfg.pop(key, None)
    return AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **cfg), dtype=dtype)


def _callback(cuda: bool):
    import torch
    from transformers import TrainerCallback

    class PeakPerStep(TrainerCallback):
        def __init__(self) -> None:
            self.steps: List[Dict[str, Any]] = []

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


def _run(trainer: str, config: Dict[str, Any], seq_len: int, batch: int, steps: int, out_dir: str, cuda: bool):
    import torch
    from datasets import Dataset
    from peft import LoraConfig

    dtype = torch.bfloat16 if cuda else torch.float32
    model = _model(config, dtype)
    if cuda:
        model = model.to("cuda")
    tokenizer = _tokenizer()
    rows = batch * steps
    common = {
        "output_dir": out_dir,
        "per_device_train_batch_size": batch,
        "max_steps": steps,
        "gradient_checkpointing": True,
        "bf16": cuda,
        "report_to": [],
        "save_strategy": "no",
        "logging_steps": 1,
        "use_cpu": not cuda,
    }
    callback = _callback(cuda)
    if trainer in ("sft", "lora"):
        from trl import SFTConfig, SFTTrainer

        data = Dataset.from_dict({"text": [_words(seq_len, i) for i in range(rows)]})
        peft = LoraConfig(r=16, target_modules="all-linear") if trainer == "lora" else None
        args = SFTConfig(max_length=seq_len, **common)
        job = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer, peft_config=peft)
    elif trainer == "dpo":
        from trl import DPOConfig, DPOTrainer

        half = max(1, seq_len // 2)
        data = Dataset.from_dict(
            {
                "prompt": [_words(half, i) for i in range(rows)],
                "chosen": [_words(half, i + 1) for i in range(rows)],
                "rejected": [_words(half, i + 2) for i in range(rows)],
            }
        )
        args = DPOConfig(max_length=seq_len, **common)
        peft = LoraConfig(r=16, target_modules="all-linear")  # no reference copy: the adapter-off model is it
        job = DPOTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer, peft_config=peft)
    else:
        from trl import GRPOConfig, GRPOTrainer

        half = max(1, seq_len // 2)
        data = Dataset.from_dict({"prompt": [_words(half, i) for i in range(rows * 2)]})
        args = GRPOConfig(max_completion_length=half, num_generations=2, **common)
        job = GRPOTrainer(
            model=model,
            reward_funcs=lambda completions, **kw: [float(len(c)) for c in completions],
            args=args,
            train_dataset=data,
            processing_class=tokenizer,
        )
    job.add_callback(callback)
    job.train()
    return callback.steps


def measure(
    config_path: Optional[str],
    lengths: List[int],
    batches: List[int],
    steps: int,
    tiny: bool,
    trainers: tuple = TRAINERS,
) -> Dict[str, Any]:
    import tempfile

    import torch
    import transformers
    import trl

    try:
        import peft

        peft_version = peft.__version__
    except ImportError:  # pragma: no cover - peft is needed for LoRA and DPO anyway
        peft_version = None
    cuda = torch.cuda.is_available() and not tiny
    # Without a GPU only the tiny config runs: a real model's steps on the CPU measure nothing and take hours.
    use_file = bool(config_path) and cuda
    config = json.loads(Path(config_path).read_text(encoding="utf-8")) if use_file else dict(TINY_CONFIG)
    record: Dict[str, Any] = {
        "schema": SCHEMA,
        "tool": "tools/measure_memory.py",
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
            "peft": peft_version,
        },
        "device": "cuda" if cuda else "cpu",
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "model": {"config": config_path if use_file else "tiny", "model_type": config["model_type"]},
        "runs": [],
    }
    for trainer in trainers:
        for seq_len in lengths:
            for batch in batches:
                run: Dict[str, Any] = {"trainer": trainer, "seq_len": seq_len, "micro_batch": batch, "error": None}
                with tempfile.TemporaryDirectory() as out_dir:
                    try:
                        run["steps"] = _run(trainer, config, seq_len, batch, steps, out_dir, cuda)
                    except Exception as exc:  # an OOM is a result too
                        run["steps"] = []
                        run["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                if cuda:
                    torch.cuda.empty_cache()
                record["runs"].append(run)
                print(f"{trainer} L={seq_len} B={batch}: {run['error'] or 'ok'}", file=sys.stderr)
    return record


def _ints(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="a config.json (default: the tiny config)")
    parser.add_argument("--lengths", default="64,128", help="sequence lengths, comma-separated")
    parser.add_argument("--batches", default="1,2", help="micro-batch sizes, comma-separated")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps per run")
    parser.add_argument("--tiny", action="store_true", help="the tiny config on the CPU (schema check)")
    parser.add_argument("--trainers", default=",".join(TRAINERS), help="which of sft,lora,dpo,grpo to run")
    parser.add_argument("--write", metavar="PATH", help="write the JSON here (default: print it)")
    args = parser.parse_args(argv)
    trainers = tuple(t for t in args.trainers.split(",") if t in TRAINERS) or TRAINERS
    record = measure(args.config, _ints(args.lengths), _ints(args.batches), args.steps, args.tiny, trainers)
    problems = check_record(record)
    text = json.dumps(record, indent=1) + "\n"
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    for problem in problems:
        print(f"record: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
