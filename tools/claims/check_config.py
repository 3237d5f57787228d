"""Checks of YAML and JSON blocks: Accelerate, TRL and DeepSpeed config keys."""

from __future__ import annotations

import json
from typing import Any, Dict, Set

from .failures import Failure
from .helpers import _json_key_line, _package_label
from .markdown import CodeBlock
from .upstream import Context


class ConfigChecks:
    """Keys in YAML and JSON blocks (part of ``Checker``)."""

    def check_yaml_block(self, rel: str, block: CodeBlock, ctx: Context) -> None:
        import yaml

        text = "\n".join(block.lines)
        try:
            documents = list(yaml.compose_all(text))
        except yaml.YAMLError as exc:
            self.failures.append(
                Failure(
                    rel,
                    block.start_line,
                    "yaml-syntax",
                    block.lang,
                    "a parsable YAML block",
                    note=str(exc).splitlines()[0],
                )
            )
            return
        for doc in documents:
            if not isinstance(doc, yaml.MappingNode):
                continue
            keys = {k.value: (k, v) for k, v in doc.value if isinstance(k, yaml.ScalarNode)}
            if "distributed_type" in keys or "compute_environment" in keys:
                self._check_accelerate_yaml(rel, block.start_line, keys, ctx)
            else:
                self._check_trl_yaml(rel, block.start_line, keys, ctx)

    def _check_accelerate_yaml(self, rel: str, start: int, keys: Dict[str, Any], ctx: Context) -> None:
        import yaml

        config = ctx.accelerate_config
        top = set().union(*[set(v) for v in config.get("top_level", {}).values()]) | set(
            config.get("legacy_top_level", [])
        )
        dests = set(config.get("launch_dests", []))
        written = config.get("nested_written_by_questionnaire", {})
        prefixes = config.get("nested_prefixes", {})
        where = f"accelerate config file keys@{_package_label(ctx, 'accelerate')}"
        for key, (knode, vnode) in keys.items():
            line = start + knode.start_mark.line
            self.record(rel, line, "yaml-key", key)
            if key not in top:
                self.fail(rel, line, "yaml-key", key, where, top)
                continue
            if isinstance(vnode, yaml.MappingNode) and key.endswith("_config"):
                prefix = prefixes.get(key, "")
                valid = set(written.get(key, []))
                for sub_k, _ in vnode.value:
                    sub = sub_k.value
                    sub_line = start + sub_k.start_mark.line
                    self.record(rel, sub_line, "yaml-key", f"{key}.{sub}")
                    copied = sub if (not prefix or sub.startswith(prefix)) else prefix + sub
                    if sub in valid or copied in dests:
                        continue
                    pool = valid | {d for d in dests if not prefix or d.startswith(prefix)}
                    self.fail(rel, sub_line, "yaml-key", f"{key}.{sub}", where, [f"{key}.{p}" for p in pool])

    def _check_trl_yaml(self, rel: str, start: int, keys: Dict[str, Any], ctx: Context) -> None:
        import yaml

        where = f"TRL CLI config keys (trainer configs, ModelConfig, script args)@{_package_label(ctx, 'trl')}"
        for key, (knode, vnode) in keys.items():
            line = start + knode.start_mark.line
            self.record(rel, line, "yaml-key", key)
            if key not in ctx.trl_yaml_keys:
                self.fail(rel, line, "yaml-key", key, where, ctx.trl_yaml_keys)
            if key == "env" and isinstance(vnode, yaml.MappingNode):
                for sub_k, _ in vnode.value:
                    self.check_env(rel, start + sub_k.start_mark.line, sub_k.value, ctx)

    def check_json_block(self, rel: str, block: CodeBlock, ctx: Context) -> None:
        try:
            data = json.loads("\n".join(block.lines))
        except ValueError:
            return
        if not isinstance(data, dict) or not {
            "zero_optimization",
            "train_micro_batch_size_per_gpu",
            "train_batch_size",
        } & set(data):
            return
        any_level = ctx.deepspeed_keys.get("any_level", set())
        zero = ctx.deepspeed_keys.get("zero_optimization", set()) | any_level
        where = f"DeepSpeed config keys@{_package_label(ctx, 'deepspeed')}"

        def walk(node: Any, path: str, allowed: Set[str]) -> None:
            if not isinstance(node, dict):
                return
            for key, value in node.items():
                line = block.start_line + _json_key_line(block.lines, key)
                self.record(rel, line, "deepspeed-key", f"{path}{key}")
                if key not in allowed:
                    self.fail(rel, line, "deepspeed-key", f"{path}{key}", where, allowed)
                walk(value, f"{path}{key}.", zero if key == "zero_optimization" else any_level)

        walk(data, "", any_level)
