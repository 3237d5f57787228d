#!/usr/bin/env python3
"""Ground truth for the planner's LoRA/QLoRA counts: build each fixture model on the meta device and wrap it with PEFT.

Run by hand, never by the test-suite, in a separate virtual environment with CPU torch (no GPU, no download):

    python3 -m venv ~/peft-parity
    ~/peft-parity/bin/pip install torch==2.13.0 transformers==5.24.0 peft==0.21.2
    ~/peft-parity/bin/pip install --no-deps bitsandbytes==0.50.2
    ~/peft-parity/bin/python tools/peft_parity.py --write tests/fixtures/peft_parity.json

For every ``tests/fixtures/model_configs/*/config.json`` it records the total parameter count and the largest
module (DeepSpeed's ZeRO-3 ``largest_layer_params``: one module's own parameters), and for LoRA and
QLoRA (bitsandbytes 4-bit ``Linear4bit`` swapped in on the meta device, the layers ``from_pretrained`` would
quantize) with ``all-linear`` and the common seven-name list: the trainable count, the target modules and
parameters PEFT resolved (after its transformers-v5 MoE conversion), the rank pattern, and the error PEFT raises
with TRL's default ``lora_dropout=0.05``. ``tests/test_peft_parity.py`` checks the planner against the file
without torch.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = ROOT / "tests" / "fixtures" / "model_configs"
RANK = 16
TARGETS = {
    "all-linear": "all-linear",
    "names7": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}
NO_MATCH = ["not_a_layer"]


def _model(config: Dict[str, Any]):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    # A vision-language model is built whole, as TRL builds it (its config's architectures[0], trl/trainer/utils.py
    # create_model_from_path @1.16.0): AutoModelForImageTextToText gives that class for gemma3 and qwen2_5_vl.
    auto = AutoModelForImageTextToText if "vision_config" in config else AutoModelForCausalLM
    cfg = dict(config)
    model_type = cfg.pop("model_type")
    for key in (
        "architectures",
        "_name_or_path",
        "transformers_version",
        "torch_dtype",
        "dtype",
        "quantization_config",
    ):
        cfg.pop(key, None)
    hf_config = AutoConfig.for_model(model_type, **cfg)
    with torch.device("meta"):
        return auto.from_config(hf_config)


def _quantize(model) -> int:
    """Swap nn.Linear for bitsandbytes Linear4bit the way a 4-bit from_pretrained does; return the weights swapped."""
    import torch
    from transformers import BitsAndBytesConfig
    from transformers.integrations.bitsandbytes import replace_with_bnb_linear
    from transformers.quantizers.base import get_keys_to_not_convert

    before = {n: m.in_features * m.out_features for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    skip = get_keys_to_not_convert(model)
    with torch.device("meta"):
        replace_with_bnb_linear(model, modules_to_not_convert=skip, quantization_config=quant)
    import bitsandbytes as bnb

    swapped = {n for n, m in model.named_modules() if isinstance(m, bnb.nn.Linear4bit)}
    return sum(v for n, v in before.items() if n in swapped)


def _wrap(model, targets: Any, dropout: float):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=RANK, lora_alpha=2 * RANK, lora_dropout=dropout, target_modules=copy.copy(targets), task_type="CAUSAL_LM"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_peft_model(model, config)


def _case(config: Dict[str, Any], method: str, targets: Any) -> Dict[str, Any]:
    model = _model(config)
    quantized = _quantize(model) if method == "qlora" else None
    try:
        peft_model = _wrap(model, targets, 0.0)
    except Exception as exc:  # PEFT's own refusal is part of the ground truth
        return {"error": f"{type(exc).__name__}: {exc}"}
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    lora_config = peft_model.peft_config["default"]
    result: Dict[str, Any] = {
        "trainable": trainable,
        "target_modules": sorted(lora_config.target_modules or []),
        "target_parameters": sorted(lora_config.target_parameters or []),
        "rank_pattern": dict(sorted((lora_config.rank_pattern or {}).items())),
    }
    if quantized is not None:
        result["quantized_linear_params"] = quantized
    try:
        _wrap(_model(config), targets, 0.05)
        result["trl_default_dropout_error"] = None
    except Exception as exc:
        result["trl_default_dropout_error"] = f"{type(exc).__name__}: {exc}"
    return result


def measure(names: Optional[List[str]] = None) -> Dict[str, Any]:
    import bitsandbytes
    import peft
    import torch
    import transformers

    out: Dict[str, Any] = {
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "peft": peft.__version__,
            "bitsandbytes": bitsandbytes.__version__,
        },
        "command": "python tools/peft_parity.py --write tests/fixtures/peft_parity.json (see the tool's docstring)",
        "rank": RANK,
        "targets": TARGETS,
        "models": {},
    }
    for path in sorted(MODEL_DIR.glob("*/config.json")):
        name = path.parent.name
        if names and name not in names:
            continue
        config = json.loads(path.read_text(encoding="utf-8"))
        model = _model(config)
        entry: Dict[str, Any] = {
            "model_type": config["model_type"],
            "total_params": sum(p.numel() for p in model.parameters()),
            # DeepSpeed's largest_layer_params (estimate_zero3_model_states_mem_needs_all_live): the most parameters
            # one module holds itself, its children not counted.
            "largest_module_params": max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules()),
            "cases": {},
        }
        for method in ("lora", "qlora"):
            for label, targets in TARGETS.items():
                entry["cases"][f"{method}/{label}"] = _case(config, method, targets)
        entry["no_match_error"] = _case(config, "lora", NO_MATCH).get("error")
        out["models"][name] = entry
        print(f"{name}: {entry['total_params']:,} params", file=sys.stderr)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="PATH", help="write the JSON here (default: print it)")
    parser.add_argument("--model", action="append", help="only this fixture directory (repeatable)")
    args = parser.parse_args(argv)
    data = measure(args.model)
    text = json.dumps(data, indent=1, sort_keys=False) + "\n"
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
