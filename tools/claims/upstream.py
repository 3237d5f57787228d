"""The facts file as the checker reads it: releases, command lines, classes, routes and messages."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from facts.delta import apply_delta

from .common import CLASS_PRIORITY, DEFAULT_FACTS, IMPORT_PACKAGES

# Facts
# ====================================================================================================================


class Facts:
    """The committed facts file, with non-primary versions materialised on demand."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = data
        self._cache: Dict[Tuple[str, str], Dict[str, Any]] = {}

    @classmethod
    @lru_cache(maxsize=4)
    def load(cls, path: Path = DEFAULT_FACTS) -> Facts:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")))

    @property
    def packages(self) -> List[str]:
        return sorted(self.data["packages"])

    def primary(self, package: str) -> str:
        return self.data["packages"][package]["primary"]

    def versions(self, package: str) -> List[str]:
        return sorted(self.data["packages"][package]["versions"], key=_version_key)

    def version_facts(self, package: str, version: str) -> Dict[str, Any]:
        key = (package, version)
        if key not in self._cache:
            stored = self.data["packages"][package]["versions"][version]
            if "delta_from" in stored:
                base = self.version_facts(package, stored["delta_from"])
                facts = apply_delta({k: v for k, v in base.items() if k not in ("file", "sha256")}, stored["delta"])
                facts["file"], facts["sha256"] = stored["file"], stored["sha256"]
            else:
                facts = stored
            self._cache[key] = facts
        return self._cache[key]


def _version_key(version: str) -> Tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.+-]", version))


@dataclass
class CliSpec:
    """The options one command accepts, normalised the way its parser normalises them."""

    name: str
    source: str  # "vllm 0.31.0"
    flags: Dict[str, Dict[str, Any]]
    normalize: str = "exact"
    forwards_to: Optional[CliSpec] = None
    positional_ends_options: bool = False

    def _key(self, flag: str) -> str:
        if self.normalize == "underscore_dash" and flag.startswith("--"):
            return "--" + flag[2:].replace("_", "-")
        return flag

    @property
    def _index(self) -> Dict[str, str]:
        cache = self.__dict__.get("_index_cache")
        if cache is None:
            cache = {self._key(f): f for f in self.flags}
            self.__dict__["_index_cache"] = cache
        return cache

    def lookup(self, flag: str) -> Optional[Dict[str, Any]]:
        real = self._index.get(self._key(flag))
        if real is not None:
            return self.flags[real]
        if self.forwards_to is not None:
            return self.forwards_to.lookup(flag)
        return None

    def all_flags(self) -> List[str]:
        out = list(self.flags)
        if self.forwards_to is not None:
            out += self.forwards_to.all_flags()
        return out

    def label(self) -> str:
        text = f"{self.name}@{self.source}"
        if self.forwards_to is not None:
            text += f" (+ {self.forwards_to.label()})"
        return text


@dataclass
class ClassInfo:
    package: str
    qualified: str
    fields: Dict[str, Dict[str, Any]]
    init_params: Optional[Dict[str, Dict[str, Any]]]

    @property
    def keywords(self) -> Set[str]:
        names = {n for n, rec in self.fields.items() if rec.get("init") is not False}
        if self.init_params is not None:
            names |= set(self.init_params)
        return names


class Context:
    """Everything a claim is checked against, for one choice of package versions."""

    def __init__(self, facts: Facts, selection: Dict[str, List[str]], label: str) -> None:
        self.facts = facts
        self.selection = selection
        self.label = label
        self.clis: Dict[str, CliSpec] = {}
        self.env: Dict[str, List[str]] = {}
        self.routes: Dict[str, Dict[str, Any]] = {}
        self.classes: Dict[str, List[ClassInfo]] = {}
        self.identifiers: Set[str] = set()
        self.values: Set[str] = set()
        self.modules: Dict[str, Set[str]] = {}
        self.modules_cover: Dict[str, Set[str]] = {}  # packages whose module list covers only these prefixes
        self.package_names: Dict[str, Set[str]] = {}  # what ``from <package>... import NAME`` may name
        self.messages: List[Tuple[str, str]] = []
        self.accelerate_config: Dict[str, Any] = {}
        self.deepspeed_keys: Dict[str, Set[str]] = {"any_level": set(), "zero_optimization": set()}
        self.trl_yaml_keys: Set[str] = set()
        self.presets: Set[str] = set()
        self._build()

    # ---- construction --------------------------------------------------------------------------------------------

    def _build(self) -> None:
        raw_classes: Dict[str, Dict[str, Dict[str, Any]]] = {}
        for package, versions in self.selection.items():
            for version in versions:
                facts = self.facts.version_facts(package, version)
                source = f"{package} {version}"
                self._add_package(package, source, facts)
                raw_classes.setdefault(package, {}).update(facts.get("classes", {}))
        self._build_classes(raw_classes)
        self._link_clis()
        self.identifiers |= self.values | self.presets
        for spec in self.clis.values():
            for flag in spec.flags:
                if flag.startswith("--"):
                    self.identifiers.add(flag[2:].replace("-", "_"))
        self.all_fields: Set[str] = set()
        for infos in self.classes.values():
            for info in infos:
                self.all_fields |= set(info.fields) | set(info.init_params or {})
        self.identifiers |= self.all_fields
        self._message_index: Dict[str, List[int]] = {}
        for i, (template, _) in enumerate(self.messages):
            for word in set(_words(template)):
                self._message_index.setdefault(word, []).append(i)

    def _add_package(self, package: str, source: str, facts: Dict[str, Any]) -> None:
        for name, spec in facts.get("clis", {}).items():
            if "flags" not in spec:
                continue
            existing = self.clis.get(name)
            flags = spec["flags"]
            flags = {f: {} for f in flags} if isinstance(flags, list) else dict(flags)
            if existing is not None:  # union of several versions (Versions section)
                flags = {**existing.flags, **flags}
                source = f"{existing.source}, {source.split(' ', 1)[1]}"
            cli = CliSpec(name, source, flags, spec.get("normalize", "exact"))
            cli.__dict__["forwards_name"] = spec.get("forwards_unknown_to")
            cli.__dict__["launcher_flags"] = set(spec.get("launcher_flags", []))
            self.clis[name] = cli
        for name in facts.get("env_vars", {}):
            self.env.setdefault(name, []).append(source)
        for path, route in facts.get("routes", {}).items():
            self.routes.setdefault(path, route)
        self.identifiers |= set(facts.get("identifiers", []))
        self.identifiers |= set(facts.get("exports", []))
        names = self.package_names.setdefault(package, set())
        names |= set(facts.get("identifiers", [])) | set(facts.get("exports", []))
        names |= {q.rsplit(".", 1)[-1] for q in facts.get("classes", {})}
        for record in facts.get("classes", {}).values():
            names |= set(record.get("fields", {}))
        self.values |= set(facts.get("values", []))
        mods = set(facts.get("modules", []))
        self.modules.setdefault(package, set()).update(mods)
        names |= {m.rsplit(".", 1)[-1] for m in mods}
        if "modules_cover" in facts:
            self.modules_cover.setdefault(package, set()).update(facts["modules_cover"])
        for module in mods:
            self.identifiers.add(module.rsplit(".", 1)[-1])
        for template in facts.get("messages", []):
            self.messages.append((template, source))
        if "config_file" in facts:
            self.accelerate_config = facts["config_file"]
            self.identifiers |= set(facts["config_file"].get("launch_dests", []))
            for keys in facts["config_file"].get("top_level", {}).values():
                self.identifiers |= set(keys)
            for keys in facts["config_file"].get("nested_written_by_questionnaire", {}).values():
                self.identifiers |= set(keys)
        if "deepspeed_config_keys" in facts:
            for key, values in facts["deepspeed_config_keys"].items():
                self.deepspeed_keys.setdefault(key, set()).update(values)
            self.identifiers |= set(facts["deepspeed_config_keys"].get("any_level", []))
        for name, preset in facts.get("accelerate_presets", {}).items():
            self.presets.add(name)
            if isinstance(preset, dict):
                self.identifiers |= set(preset)

    def _build_classes(self, raw: Dict[str, Dict[str, Dict[str, Any]]]) -> None:
        def find(qualified: str) -> Tuple[Optional[str], Optional[str], Optional[Dict[str, Any]]]:
            package_import = qualified.split(".", 1)[0]
            package = IMPORT_PACKAGES.get(package_import, package_import)
            classes = raw.get(package, {})
            if qualified in classes:
                return package, qualified, classes[qualified]
            simple = qualified.rsplit(".", 1)[-1]
            for key in sorted(classes):
                if key.rsplit(".", 1)[-1] == simple:
                    return package, key, classes[key]
            return None, None, None

        @cache
        def resolved(qualified: str) -> Tuple[Dict[str, Dict[str, Any]], Optional[Dict[str, Dict[str, Any]]]]:
            _, _key, record = find(qualified)
            if record is None:
                return {}, None
            fields: Dict[str, Dict[str, Any]] = {}
            params: Optional[Dict[str, Dict[str, Any]]] = None
            for base in reversed(record.get("bases", [])):
                base_fields, base_params = resolved(base)
                fields.update(base_fields)
                if base_params is not None:
                    params = {**(params or {}), **base_params}
            fields.update(record.get("fields", {}))
            if record.get("init_params") is not None:
                params = {**(params or {}), **record["init_params"]}
            return fields, params

        for package, classes in raw.items():
            for qualified in sorted(classes):
                fields, params = resolved(qualified)
                info = ClassInfo(package, qualified, fields, params)
                self.classes.setdefault(qualified.rsplit(".", 1)[-1], []).append(info)
                self.identifiers.add(qualified.rsplit(".", 1)[-1])
        for infos in self.classes.values():
            infos.sort(key=lambda i: CLASS_PRIORITY.index(i.package) if i.package in CLASS_PRIORITY else 99)

    def _link_clis(self) -> None:
        for spec in self.clis.values():
            target = spec.__dict__.get("forwards_name")
            if target and target in self.clis:
                spec.forwards_to = self.clis[target]
        for name in (
            "accelerate launch",
            "hf jobs run",
            "hf jobs uv run",
            "hf jobs scheduled run",
            "hf jobs scheduled uv run",
        ):
            if name in self.clis:
                self.clis[name].positional_ends_options = True
        for name, spec in self.clis.items():
            if name.startswith("trl ") and spec.__dict__.get("forwards_name") == "accelerate launch":
                self.trl_yaml_keys |= {f[2:] for f in spec.flags if f.startswith("--")}
        if "accelerate launch" in self.clis:
            self.trl_yaml_keys |= set(self.accelerate_config.get("launch_dests", []))
        self.trl_yaml_keys |= {"env", "accelerate_config"}

    # ---- queries -------------------------------------------------------------------------------------------------

    def route_match(self, path: str) -> bool:
        path = path.rstrip("/") or "/"
        if path in self.routes:
            return True
        pattern_parts = path.split("/")
        for route in self.routes:
            parts = route.split("/")
            if len(parts) != len(pattern_parts):
                continue
            if all(a == b or _is_path_param(a) or _is_path_param(b) for a, b in zip(parts, pattern_parts)):
                return True
        return False

    def class_infos(self, name: str, package: Optional[str] = None) -> List[ClassInfo]:
        infos = self.classes.get(name, [])
        if package is not None:
            preferred = [i for i in infos if i.package == package]
            return preferred or infos
        return infos

    def module_exists(self, dotted: str) -> Optional[bool]:
        """True/False for a tracked package's module path; None when the first segment is not tracked."""
        head = dotted.split(".", 1)[0]
        package = IMPORT_PACKAGES.get(head)
        if package is None or package not in self.modules:
            return None
        if dotted.startswith("transformers.models."):
            return True
        if dotted in self.modules[package]:
            return True
        cover = self.modules_cover.get(package)
        if cover is not None and not any(dotted == c or dotted.startswith(c + ".") for c in cover):
            return None
        return False

    def message_candidates(self, quote: str, limit: int = 80) -> List[Tuple[str, str]]:
        """Templates sharing the most (rarity-weighted) words with ``quote``, best first."""
        scores: Dict[int, float] = {}
        total = max(len(self.messages), 1)
        for word in set(_words(quote)):
            postings = self._message_index.get(word, [])
            if not postings:
                continue
            weight = 1.0 + (total / len(postings)) ** 0.5
            for i in postings:
                scores[i] = scores.get(i, 0.0) + weight
        ranked = sorted(scores, key=lambda i: (-scores[i], i))[:limit]
        return [self.messages[i] for i in ranked]


def _is_path_param(segment: str) -> bool:
    return (segment.startswith("{") and segment.endswith("}")) or (segment.startswith("<") and segment.endswith(">"))


_WORD_RE = re.compile(r"[A-Za-z][A-Za-z_]{3,}")


def _words(text: str) -> List[str]:
    return [w.lower() for w in _WORD_RE.findall(text.replace("{}", " "))]
