"""TRL's own defaults per trainer and release, for the planner: ``scripts/planner/trl_defaults.json``.

Read from the recorded release history (``tests/facts/release_history.json``: ``Class.field=<default>`` keys and
upstream names per indexed TRL release), never from a network. Run ``python3 -m tools.facts.planner_defaults`` from
the repository root after refreshing the history; ``tests/test_planner_inputs.py`` fails when the file is stale.

How the LM head computes logits, per trainer and release (``lm_head``):
    fused    ``add_fused_lm_head`` (TRL >= 1.15): log-probabilities in token x vocabulary tiles, every trainer here
    chunked  a chunked forward over the scored tokens without the full logits: SFT ``_patch_chunked_ce_lm_head``
             when ``loss_type`` resolves to ``chunked_nll`` (its default from 1.7 until 1.15, where ``nll`` is
             chunked); AsyncGRPO ``patch_chunked_lm_head`` (1.1 - 1.14)
    full     the logits of the scored tokens are materialised (GRPO/RLOO: completion tokens only, logits_to_keep)
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
HISTORY = REPO / "tests" / "facts" / "release_history.json"
OUTPUT = REPO / "skills" / "scaling-and-backends" / "scripts" / "planner" / "trl_defaults.json"

CONFIGS = {
    "sft": "SFTConfig",
    "dpo": "DPOConfig",
    "grpo": "GRPOConfig",
    "rloo": "RLOOConfig",
    "async-grpo": "AsyncGRPOConfig",
}
FIELDS = (
    "max_length",
    "max_prompt_length",
    "max_completion_length",
    "num_generations",
    "generation_batch_size",
    "gradient_checkpointing",
    "dtype",
    "beta",
    "loss_type",
)
SFT_NLL_UNTIL_17 = "The default `loss_type` will change from `'nll'` to `'chunked_nll'` in TRL 1.7."
_DEFAULT = re.compile(r"^(\w+)\.(\w+)=(.*)$")


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _present(facts: Dict[str, List[str]], wanted: str, index: int, prefix: bool = False) -> bool:
    return any(
        mask[index] == "1" and any(item == wanted or (prefix and item.startswith(wanted)) for item in items)
        for mask, items in facts.items()
    )


def build(history: Dict[str, Any]) -> Dict[str, Any]:
    trl = history["packages"]["trl"]
    releases = [release["version"] for release in trl["releases"]]
    defaults: Dict[str, Dict[str, Dict[str, Any]]] = {r: {t: {} for t in CONFIGS} for r in releases}
    by_class = {cls: trainer for trainer, cls in CONFIGS.items()}
    for mask, items in trl["facts"]["default"].items():
        for item in items:
            match = _DEFAULT.match(item)
            if not match or match.group(1) not in by_class or match.group(2) not in FIELDS:
                continue
            for index, bit in enumerate(mask):
                if bit == "1":
                    defaults[releases[index]][by_class[match.group(1)]][match.group(2)] = _value(match.group(3))
    names, messages = trl["facts"]["name"], trl["facts"]["message"]
    for index, release in enumerate(releases):
        fused = _present(names, "add_fused_lm_head", index)
        for trainer, values in defaults[release].items():
            if not values:
                continue
            head = "fused" if fused else "full"
            if not fused and trainer == "async-grpo" and _present(names, "patch_chunked_lm_head", index):
                head = "chunked"
            if not fused and trainer == "sft" and _present(names, "_patch_chunked_ce_lm_head", index):
                nll_default = values.get("loss_type") == "nll" or _present(messages, SFT_NLL_UNTIL_17, index, True)
                head = "full" if nll_default else "chunked"
            values["lm_head"] = head
    return {
        "source": "tests/facts/release_history.json via tools/facts/planner_defaults.py",
        "releases": releases,
        "defaults": {r: {t: v for t, v in trainers.items() if v} for r, trainers in defaults.items()},
    }


def render(data: Dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Write the table, or with ``--check`` exit 1 when the committed one is stale (no network either way)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv not in ([], ["--check"]):
        print("usage: python3 -m tools.facts.planner_defaults [--check]", file=sys.stderr)
        return 2
    text = render(build(json.loads(HISTORY.read_text(encoding="utf-8"))))
    if argv:
        if OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT.relative_to(REPO)}: stale; run python3 -m tools.facts.planner_defaults", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
