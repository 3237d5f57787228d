#!/usr/bin/env python3
"""Ground truth for the planner's vLLM KV capacity: vLLM's own grouping and block arithmetic on CPU.

Run by hand, never by the test-suite, in a separate virtual environment (no GPU, no download):

    python3 -m venv ~/vllm-kv
    ~/vllm-kv/bin/pip install torch==2.13.0   # the CPU wheel
    ~/vllm-kv/bin/pip install --no-deps vllm==0.31.0
    # then pip install each module the import of vllm.v1.core.kv_cache_utils names as missing (cbor2, pyzmq, ...)
    ~/vllm-kv/bin/python tools/vllm_kv_parity.py --write tests/fixtures/vllm_kv_parity.json

For each case (a fixture config.json, TP size, max_model_len, bytes left for the KV cache, max_num_batched_tokens)
it builds one KV cache spec per decoder layer with vLLM's spec classes (full attention, sliding window, MLA) and
asks vLLM's ``get_kv_cache_groups``, ``get_kv_cache_config_from_groups`` and
``get_max_concurrency_for_kv_cache_config`` for the groups, the block count and the concurrency.
``tests/test_planner_kv_cache.py`` checks ``scripts/planner/kv_cache.py`` against the file without vLLM.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
SKILL_DIR = ROOT / "skills" / "scaling-and-backends"
sys.path.insert(0, str(SKILL_DIR / "scripts"))
MODEL_DIR = ROOT / "tests" / "fixtures" / "model_configs"
GIB = 1024**3

CASES = [
    # (fixture, tp, max_model_len, KV bytes, max_num_batched_tokens)
    ("llama-3.1-8b", 1, 8192, 20 * GIB, 16384),
    ("llama-3.1-8b", 2, 131072, 30 * GIB, 16384),
    ("phi-3-medium-4k", 2, 4096, 11 * GIB, 8192),
    ("qwen2.5-7b", 4, 32768, 9 * GIB, 4096),
    ("deepseek-v2-lite", 1, 16384, 25 * GIB, 16384),
    ("deepseek-v3", 8, 65536, 30 * GIB, 16384),
    ("gemma-3-1b", 1, 4096, 10 * GIB, 4096),
    ("gemma-3-1b", 1, 16384, 10 * GIB, 8192),
    ("gemma-3-1b", 1, 32768, 60 * GIB, 16384),
    ("gpt-oss-20b", 1, 32768, 50 * GIB, 16384),
    ("gpt-oss-20b", 1, 131072, 50 * GIB, 16384),
    ("gpt-oss-20b", 2, 131072, 60 * GIB, 4096),
    ("gemma-2-9b", 2, 8192, 20 * GIB, 8192),
]


def _specs(facts, tp: int) -> Dict[str, Any]:
    import torch
    from planner import kv_cache
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec

    block = kv_cache.MLA_BLOCK_SIZE if facts.mla_kv_dim else kv_cache.DEFAULT_BLOCK_SIZE
    specs: Dict[str, Any] = {}
    for i, window in enumerate(facts.layer_windows or [None] * facts.layers):
        name = f"model.layers.{i}.self_attn.attn"
        if facts.mla_kv_dim:
            specs[name] = MLAAttentionSpec(
                block_size=block, num_kv_heads=1, head_size=facts.mla_kv_dim, dtype=torch.bfloat16
            )
        elif window is None:
            specs[name] = FullAttentionSpec(
                block_size=block,
                num_kv_heads=kv_cache.kv_heads_per_rank(facts, tp),
                head_size=facts.head_dim,
                dtype=torch.bfloat16,
            )
        else:
            specs[name] = SlidingWindowSpec(
                block_size=block,
                num_kv_heads=kv_cache.kv_heads_per_rank(facts, tp),
                head_size=facts.head_dim,
                dtype=torch.bfloat16,
                sliding_window=window,
            )
    return specs


def _config(max_model_len: int, batched: int):
    from vllm.v1.kv_cache_layout import KVCacheLayout

    layout = next(iter(KVCacheLayout))
    for candidate in KVCacheLayout:
        if not getattr(candidate, "is_block_outermost", False):
            layout = candidate
            break
    cache = SimpleNamespace(
        get_resolved_kv_cache_layout=lambda: layout,
        num_gpu_blocks_override=None,
        prefix_cache_retention_interval=None,
        enable_prefix_caching=True,
    )
    return SimpleNamespace(
        scheduler_config=SimpleNamespace(
            disable_hybrid_kv_cache_manager=False, max_num_batched_tokens=batched, async_scheduling=True
        ),
        attention_config=SimpleNamespace(hisparse_config=None),
        cache_config=cache,
        model_config=SimpleNamespace(max_model_len=max_model_len, hf_config=SimpleNamespace()),
        parallel_config=SimpleNamespace(decode_context_parallel_size=1, pipeline_parallel_size=1),
        speculative_config=None,
        max_in_flight_tokens=2 * batched,  # async scheduling on (the default): two batches in flight
        max_concurrent_batches=2,
    )


def measure(only: Optional[List[str]] = None) -> Dict[str, Any]:
    import torch
    import vllm
    from planner import model as pm
    from vllm.v1.core import kv_cache_utils as kcu

    out: Dict[str, Any] = {
        "versions": {"vllm": vllm.__version__, "torch": torch.__version__},
        "command": "python tools/vllm_kv_parity.py --write tests/fixtures/vllm_kv_parity.json (see its docstring)",
        "async_scheduling": True,
        "cases": [],
    }
    for name, tp, max_len, available, batched in CASES:
        if only and name not in only:
            continue
        path = MODEL_DIR / name / "config.json"
        facts = pm.facts_from_config(json.loads(path.read_text(encoding="utf-8")), str(path))
        config = _config(max_len, batched)
        groups = kcu.get_kv_cache_groups(config, _specs(facts, tp))
        kv_config = kcu.get_kv_cache_config_from_groups(config, groups, available)
        concurrency = kcu.get_max_concurrency_for_kv_cache_config(config, kv_config)
        out["cases"].append(
            {
                "model": name,
                "tensor_parallel_size": tp,
                "max_model_len": max_len,
                "available_kv_bytes": available,
                "max_num_batched_tokens": batched,
                "groups": len(groups),
                "layers_per_group": [len(g.layer_names) for g in groups],
                "num_blocks": kv_config.num_blocks,
                "max_concurrency": concurrency,
            }
        )
        print(f"{name} tp{tp} {max_len}: {len(groups)} groups, {concurrency:.3f}x", file=sys.stderr)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="PATH", help="write the JSON here (default: print it)")
    parser.add_argument("--model", action="append", help="only this fixture directory (repeatable)")
    args = parser.parse_args(argv)
    text = json.dumps(measure(args.model), indent=1) + "\n"
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
