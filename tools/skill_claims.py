#!/usr/bin/env python3
"""Check every upstream name in the skill text against ``tests/facts/upstream_facts.json``.

    python3 tools/skill_claims.py                 # all skill files; prints one line per failure, exit 1 if any
    python3 tools/skill_claims.py FILE.md ...     # only these files
    python3 tools/skill_claims.py --claims FILE   # list the claims found (debugging the extractor)

The conventions it enforces are in README.md, "Writing skill text: the conventions the tests check". In short:
inline code shaped like a flag, an env var, a route, a ``snake_case`` name, a ``*Config``/``*Trainer`` class or
``name=value`` is a claim; so are command lines in shell blocks, ``*Config(...)`` keywords in Python blocks, keys in
YAML blocks and blockquoted messages. Each claim must name something the pinned releases really have.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib.util
import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

TOOLS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parent
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import claim_scopes  # noqa: E402
from facts.delta import apply_delta  # noqa: E402

DEFAULT_FACTS = REPO_ROOT / "tests" / "facts" / "upstream_facts.json"
HISTORY_NAME = "release_history.json"  # beside the facts file
DEFAULT_ALLOWLIST = REPO_ROOT / "tests" / "claims_allowlist.txt"
SKILL_DIRS = ("backend-selection", "vllm-reference", "troubleshooting")
VERSIONS_HEADING = "Versions (time-sensitive)"
SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh"}
PYTHON_LANGS = {"python", "py", "python3", "pycon"}
YAML_LANGS = {"yaml", "yml"}
# Import-name -> distribution name in the facts file.
IMPORT_PACKAGES = {
    "trl": "trl",
    "vllm": "vllm",
    "accelerate": "accelerate",
    "peft": "peft",
    "transformers": "transformers",
    "deepspeed": "deepspeed",
    "bitsandbytes": "bitsandbytes",
    "liger_kernel": "liger-kernel",
    "kernels": "kernels",
    "huggingface_hub": "huggingface_hub",
}
# ``from transformers import X`` also reaches every model class (registered lazily from ``transformers/models``),
# and the facts hold only part of DeepSpeed's names: for these package roots the imported name is not judged.
UNJUDGED_ROOT_IMPORTS = ("transformers", "deepspeed")
# Which package wins when a class name exists in several (``ModelConfig`` is TRL's unless vllm is imported).
CLASS_PRIORITY = ("trl", "peft", "transformers", "accelerate", "vllm", "deepspeed")
NEAREST_COUNT = 3

FLAG_RE = re.compile(r"^--?[A-Za-z0-9][\w.-]*$")
ENV_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
SNAKE_RE = re.compile(r"^_*[a-z][a-z0-9]*(?:_+[a-z0-9]+)+$")
CLASS_RE = re.compile(r"^[A-Z][A-Za-z0-9]*(?:Config|Trainer|Arguments)$")
ROUTE_RE = re.compile(r"^(?:(GET|POST|PUT|DELETE|PATCH)\s+)?(/[A-Za-z0-9_{}<>.:-]*(?:/[A-Za-z0-9_{}<>.:-]*)*)$")
DOTTED_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")
CALL_RE = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$", re.S)
ASSIGN_RE = re.compile(r"^(--?[A-Za-z][\w.-]*|[A-Za-z_][\w.]*)=(.*)$", re.S)
LOCAL_URL_RE = re.compile(
    r"\bhttp://(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\d+\.\d+\.\d+\.\d+|<[^<>/\s]+>|\$\{?\w+\}?)(?::[\w<>${}]+)?"
    r"(/[^\s\"'?#]*)"
)
KEY_VALUE_RE = re.compile(r"(?:^|[\s,(])([A-Za-z_][\w.]*)=")
YAML_PAIR_RE = re.compile(r"^([a-z][a-z0-9]*(?:_[a-z0-9]+)+):\s+\S")
CITATION_RE = re.compile(r"[\w.-]+/[\w.-]+#\d+|https?://\S+")
BUNDLE_SCRIPT_RE = re.compile(r"(?:^|/)scripts/([\w-]+\.py)$")
TRL_SCRIPT_RE = re.compile(r"(?:^|/)trl/scripts/(\w+)\.py$")
MARKER_RE = re.compile(r"^\s*<!--\s*check:\s*(.*?)\s*-->\s*$")
PLACEHOLDER_RE = re.compile(r"<[^<>\n]{1,60}>")
FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXCEPTION_PREFIX_RE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit): ")


# ====================================================================================================================
# Failures
# ====================================================================================================================


@dataclass(frozen=True)
class Failure:
    path: str
    line: int
    kind: str
    identifier: str
    where: str
    nearest: Tuple[str, ...] = ()
    note: str = ""

    def format(self) -> str:
        if self.kind.startswith("scope"):
            return f"{self.path}:{self.line}: [{self.kind}] {self.identifier!r} {self.where}; {self.note}"
        text = f"{self.path}:{self.line}: [{self.kind}] {self.identifier!r} not found in {self.where}"
        if self.nearest:
            text += "; nearest: " + ", ".join(self.nearest)
        elif not self.note:
            text += "; nearest: (none)"
        if self.note:
            text += f"; {self.note}"
        return text


def nearest(name: str, candidates: Iterable[str], count: int = NEAREST_COUNT) -> Tuple[str, ...]:
    pool = sorted(set(candidates))
    found = difflib.get_close_matches(name, pool, n=count, cutoff=0.6)
    if not found:
        found = difflib.get_close_matches(name, pool, n=count, cutoff=0.4)
    return tuple(found)


# ====================================================================================================================
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


# ====================================================================================================================
# Message matching
# ====================================================================================================================


MIN_LITERAL_CHARS = 12
MAX_FIELD_SPACES = 3


def _tokens(text: str, wildcard: str) -> List[Optional[str]]:
    """Characters of ``text`` with whitespace collapsed; ``wildcard`` becomes ``None``."""
    collapsed = re.sub(r"\s+", " ", text).strip()
    out: List[Optional[str]] = []
    i = 0
    while i < len(collapsed):
        if collapsed.startswith(wildcard, i):
            if not out or out[-1] is not None:
                out.append(None)
            i += len(wildcard)
        else:
            out.append(collapsed[i])
            i += 1
    return out


MIN_LITERAL_CHARS = 12
MAX_FIELD_SPACES = 3


def quote_matches_template(quote: str, template: str) -> bool:
    """Is ``quote`` (``…`` = any text) a substring of some instance of ``template`` (``{}`` = a formatted field)?

    A dynamic programme over states (template position, inside a field?, spaces the field absorbed) that keeps the
    most quote characters matched against literal template text. Rules that stop a made-up sentence from hiding in
    a field: the quote may start or end inside a field only where that field opens or closes the template (or where
    the quote itself starts or ends with ``…``); a field that the quote passes through stands for a value, so it
    absorbs at most ``MAX_FIELD_SPACES`` spaces (write ``…`` for longer variable text); and at least
    ``MIN_LITERAL_CHARS`` characters must match literal template text. Whitespace is collapsed on both sides.
    """
    q = _tokens(quote, "…")
    t = _tokens(template, "{}")
    concrete = sum(1 for c in q if c is not None and c != " ")
    if not concrete:
        return False
    n = len(t)
    cap = MAX_FIELD_SPACES + 1
    State = Tuple[int, bool, int]

    def closure(states: Dict[State, int]) -> Dict[State, int]:
        out = dict(states)
        pending = list(states.items())
        while pending:
            (j, inside, spaces), score = pending.pop()
            moves: List[State] = []
            if inside:
                if spaces <= MAX_FIELD_SPACES:
                    moves.append((j + 1, False, 0))  # leave the field: it held a value
            elif j < n and t[j] is None:
                moves += [(j, True, 0), (j + 1, False, 0)]  # enter the field, or treat it as empty
            for move in moves:
                if out.get(move, -1) < score:
                    out[move] = score
                    pending.append((move, score))
        return out

    if q[0] is None:
        best: Dict[State, int] = {(j, False, 0): 0 for j in range(n + 1)}
    else:
        best = {(j, False, 0): 0 for j in range(n) if t[j] is not None}
        best[(0, False, 0)] = 0
    best = closure(best)
    for qi in q:
        nxt: Dict[State, int] = {}

        def push(state: State, score: int, nxt: Dict[State, int] = nxt) -> None:
            if nxt.get(state, -1) < score:
                nxt[state] = score

        for (j, inside, spaces), score in best.items():
            if qi is None:  # a quote wildcard absorbs any run of template items
                for k in range(j, n + 1):
                    push((k, False, 0), score)
                continue
            if inside:
                push((j, True, min(cap, spaces + (qi == " "))), score)
            elif j < n and t[j] is not None and t[j] == qi:
                push((j + 1, False, 0), score + (qi != " "))
        best = closure(nxt)
        if not best:
            return False
    if q[-1] is None:
        finals = list(best.values())
    else:
        # The quote ends on literal text, or inside the template's last field (any length there).
        finals = [
            score
            for (j, inside, _), score in best.items()
            if (inside and j == n - 1) or (not inside and (j == 0 or t[j - 1] is not None or j == n))
        ]
    return bool(finals) and max(finals) >= min(MIN_LITERAL_CHARS, concrete)


def match_message(ctx: Context, quote: str) -> bool:
    candidates = ctx.message_candidates(quote)
    variants = [quote]
    stripped = EXCEPTION_PREFIX_RE.sub("", quote, count=1)
    if stripped != quote:
        variants.append(stripped)
    for variant in variants:
        for template, _ in candidates:
            if quote_matches_template(variant, template):
                return True
    return False


def nearest_messages(ctx: Context, quote: str) -> Tuple[str, ...]:
    candidates = [t for t, _ in ctx.message_candidates(EXCEPTION_PREFIX_RE.sub("", quote, count=1))]
    scored = sorted(
        ((difflib.SequenceMatcher(None, quote, t).ratio(), t) for t in candidates[:400]), key=lambda x: (-x[0], x[1])
    )
    return tuple(_shorten(t) for score, t in scored[:2] if score > 0.5)


def _shorten(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ====================================================================================================================
# Markdown walk
# ====================================================================================================================


@dataclass
class CodeBlock:
    lang: str
    info: str
    start_line: int  # line number of the first content line
    lines: List[str]
    marker: Optional[str]
    section: str
    marker_line: int = 0


@dataclass
class InlineSpan:
    text: str
    line: int
    section: str
    blockquote_role: str = ""  # "" | "message" | "cited" | "uncited"
    marker: Optional[str] = None
    marker_line: int = 0


@dataclass
class MarkdownDoc:
    path: str
    blocks: List[CodeBlock] = field(default_factory=list)
    spans: List[InlineSpan] = field(default_factory=list)


def iter_code_spans(text: str) -> Iterator[Tuple[int, str]]:
    """(offset, content) of CommonMark inline code spans in ``text`` (backslash-escaped backticks are literal)."""
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            i += 2
            continue
        if ch != "`":
            i += 1
            continue
        j = i
        while j < n and text[j] == "`":
            j += 1
        run = j - i
        k = j
        close = -1
        while k < n:
            if text[k] == "`":
                m = k
                while m < n and text[m] == "`":
                    m += 1
                if m - k == run:
                    close = k
                    break
                k = m
            else:
                k += 1
        if close < 0:
            i = j
            continue
        content = text[j:close].replace("\n", " ")
        if len(content) >= 2 and content[0] == " " and content[-1] == " " and content.strip():
            content = content[1:-1]
        yield i, content
        i = close + run


def parse_markdown(path: str, text: str) -> MarkdownDoc:
    doc = MarkdownDoc(path)
    lines = text.splitlines()
    section = ""
    i = 0
    pending_marker: Optional[str] = None
    marker_line = 0
    paragraph: List[Tuple[int, str]] = []
    in_comment = False

    def flush() -> None:
        if paragraph:
            _paragraph_spans(doc, paragraph, section)
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        if in_comment:
            if "-->" in line:
                in_comment = False
            i += 1
            continue
        marker = MARKER_RE.match(line)
        if marker:
            flush()
            pending_marker = marker.group(1)
            marker_line = i + 1
            i += 1
            continue
        if line.lstrip().startswith("<!--"):
            flush()
            if "-->" not in line:
                in_comment = True
            i += 1
            continue
        fence = FENCE_RE.match(line)
        if fence and not line.lstrip().startswith(">"):
            flush()
            indent, ticks, info = fence.group(1), fence.group(2), fence.group(3).strip()
            if ticks[0] == "`" and "`" in info:
                paragraph.append((i + 1, line))
                i += 1
                continue
            body: List[str] = []
            j = i + 1
            while j < len(lines):
                close = FENCE_RE.match(lines[j])
                if (
                    close
                    and close.group(2)[0] == ticks[0]
                    and len(close.group(2)) >= len(ticks)
                    and not close.group(3).strip()
                ):
                    break
                body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
                j += 1
            lang = info.split()[0].lower() if info else ""
            doc.blocks.append(CodeBlock(lang, info, i + 2, body, pending_marker, section, marker_line))
            pending_marker = None
            i = j + 1
            continue
        heading = HEADING_RE.match(line)
        if heading:
            flush()
            if len(heading.group(1)) <= 2:
                section = heading.group(2).strip()
            for _offset, content in iter_code_spans(heading.group(2)):
                doc.spans.append(InlineSpan(content, i + 1, section))
            pending_marker = None
            i += 1
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        quote = re.match(r"^\s{0,3}>\s?(.*)$", line)
        if quote:
            flush()
            _blockquote_line(doc, quote.group(1), i + 1, section, pending_marker, marker_line)
            pending_marker = None
            i += 1
            continue
        if pending_marker is not None and not paragraph:
            pending_marker = None
        paragraph.append((i + 1, line))
        i += 1
    flush()
    return doc


def _paragraph_spans(doc: MarkdownDoc, paragraph: List[Tuple[int, str]], section: str) -> None:
    is_table = all(text.lstrip().startswith("|") for _, text in paragraph)
    joined = ""
    starts: List[Tuple[int, int]] = []
    for number, text in paragraph:
        starts.append((len(joined), number))
        joined += text + "\n"
    for offset, content in iter_code_spans(joined):
        if is_table:
            content = content.replace("\\|", "|")
        number = max(n for start, n in starts if start <= offset)
        doc.spans.append(InlineSpan(content, number, section))


def _blockquote_line(
    doc: MarkdownDoc, content: str, number: int, section: str, marker: Optional[str], marker_line: int
) -> None:
    spans = list(iter_code_spans(content))
    stripped = content.strip()
    if len(spans) == 1 and stripped.startswith("`"):
        _offset, text = spans[0]
        run = len(stripped) - len(stripped.lstrip("`"))
        end = content.find("`" * run, content.find("`" * run) + run + len(text)) + run
        rest = content[end:].strip() if end > run else ""
        if not rest:
            doc.spans.append(InlineSpan(text, number, section, "message", marker, marker_line))
            return
        if claim_scopes.is_scope_only(rest):  # ``> `message` (TRL ≥ 1.14)``: a scoped upstream message
            doc.spans.append(InlineSpan(text, number, section, "message", marker, marker_line))
            return
        if rest.startswith("(") and rest.endswith(")"):
            role = "cited" if CITATION_RE.search(rest) else "uncited"
            doc.spans.append(InlineSpan(text, number, section, role, marker, marker_line))
            return
    for _, text in spans:
        doc.spans.append(InlineSpan(text, number, section))


def skill_files(root: Path) -> List[Path]:
    """Root ``SKILL.md`` plus every Markdown file inside the sub-skill folders."""
    files = [root / "SKILL.md"] if (root / "SKILL.md").is_file() else []
    for name in SKILL_DIRS:
        folder = root / name
        if folder.is_dir():
            files.extend(sorted(folder.rglob("*.md")))
    return files


# ====================================================================================================================
# Allow-list
# ====================================================================================================================


@dataclass
class Allowlist:
    entries: Dict[str, str]
    problems: List[str]
    used: Set[str] = field(default_factory=set)

    @classmethod
    def load(cls, path: Optional[Path]) -> Allowlist:
        entries: Dict[str, str] = {}
        problems: List[str] = []
        if path is None or not path.is_file():
            return cls(entries, problems)
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, reason = line.partition(" # ")
            name, reason = name.strip(), reason.strip()
            if not sep or not reason:
                problems.append(f"{path.name}:{number}: entry {name!r} needs a reason: '<identifier> # <reason>'")
                continue
            entries[name] = reason
        return cls(entries, problems)

    def allows(self, identifier: str) -> bool:
        if identifier in self.entries:
            self.used.add(identifier)
            return True
        return False

    def unused(self) -> List[str]:
        return sorted(set(self.entries) - self.used)


# ====================================================================================================================
# Checker
# ====================================================================================================================


@lru_cache(maxsize=4)
def load_history(path: Path) -> Optional[claim_scopes.History]:
    """The release history beside the facts file; None when there is none (scopes are then not checked)."""
    if not Path(path).is_file():
        return None
    return claim_scopes.History.load(path)


def _quote_matcher(quote: str, template: str) -> bool:
    return quote_matches_template(quote, template)


class Checker:
    def __init__(
        self,
        facts: Facts,
        root: Path = REPO_ROOT,
        allowlist: Optional[Allowlist] = None,
        facts_path: Path = DEFAULT_FACTS,
    ) -> None:
        self.facts = facts
        self.facts_path = Path(facts_path)
        self.root = root
        self.allowlist = allowlist or Allowlist({}, [])
        self._contexts: Dict[str, Context] = {}
        self._script_specs: Dict[str, Optional[CliSpec]] = {}
        self.failures: List[Failure] = []
        self.claims: List[Tuple[str, int, str, str]] = []
        self.resolved: List[Tuple[str, claim_scopes.Resolved]] = []  # scope-checked claims, per file

    # ---- contexts ------------------------------------------------------------------------------------------------

    def context(self, marker: Optional[str] = None, union: bool = False) -> Context:
        key = "union" if union else (marker or "")
        if key in self._contexts:
            return self._contexts[key]
        selection = {p: [self.facts.primary(p)] for p in self.facts.packages}
        label = "primary pins"
        if union:
            selection = {p: self.facts.versions(p) for p in self.facts.packages}
            label = "any pinned version"
        elif marker:
            pins = self.parse_marker(marker)
            for package, version in pins:
                selection[package] = [version]
            label = ", ".join(f"{p}=={v}" for p, v in pins)
        cache = self.facts.__dict__.setdefault("_contexts", {})
        cache_key = (key, tuple(sorted((p, tuple(v)) for p, v in selection.items())))
        if cache_key not in cache:  # contexts are read-only once built: share them between checkers
            cache[cache_key] = Context(self.facts, selection, label)
        self._contexts[key] = cache[cache_key]
        return self._contexts[key]

    def parse_marker(self, marker: str) -> List[Tuple[str, str]]:
        pins = []
        for part in marker.split(","):
            package, sep, version = part.strip().partition("==")
            if not sep or package not in self.facts.packages or version not in self.facts.versions(package):
                raise ValueError(part.strip())
            pins.append((package, version))
        return pins

    # ---- reporting -----------------------------------------------------------------------------------------------

    def fail(
        self,
        path: str,
        line: int,
        kind: str,
        identifier: str,
        where: str,
        candidates: Iterable[str] = (),
        note: str = "",
    ) -> None:
        if self.allowlist.allows(identifier):
            return
        self.failures.append(Failure(path, line, kind, identifier, where, nearest(identifier, candidates), note))

    def record(self, path: str, line: int, kind: str, identifier: str) -> None:
        self.claims.append((path, line, kind, identifier))

    # ---- documents -----------------------------------------------------------------------------------------------

    def check_file(self, path: Path) -> None:
        rel = _relative(path, self.root)
        doc = parse_markdown(rel, path.read_text(encoding="utf-8"))
        for block in doc.blocks:
            ctx = self._block_context(rel, block.marker_line, block.marker)
            if ctx is None:
                continue
            if block.lang in SHELL_LANGS:
                self.check_shell_block(rel, block, ctx)
            elif block.lang in PYTHON_LANGS:
                self.check_python_block(rel, block, ctx)
            elif block.lang in YAML_LANGS:
                self.check_yaml_block(rel, block, ctx)
            elif block.lang == "json":
                self.check_json_block(rel, block, ctx)
        first_claim = len(self.claims)
        self._check_spans(rel, doc)
        self.check_scopes(rel, path.read_text(encoding="utf-8"), self.claims[first_claim:])

    def check_scopes(self, rel: str, text: str, claims: Sequence[Tuple[str, int, str, str]]) -> None:
        """Release scopes: each claim against every release of its inline scope or the file's window."""
        history = self.history
        if history is None:
            return
        baseline = {p: self.facts.primary(p) for p in ("trl", "vllm") if p in self.facts.packages}
        foreign = self._foreign_names()
        resolved: List[claim_scopes.Resolved] = []
        found = claim_scopes.check_scopes(
            history,
            text,
            [(line, kind, ident) for _, line, kind, ident in claims],
            _quote_matcher,
            baseline,
            lambda kind, ident: kind != "message" and ident.rsplit(".", 1)[-1] in foreign.get(kind, ()),
            resolved,
        )
        self.resolved.extend((rel, item) for item in resolved)
        for failure in found:
            if self.allowlist.allows(failure.identifier):
                continue
            self.failures.append(
                Failure(rel, failure.line, failure.kind, failure.identifier, failure.where, (), failure.note)
            )

    def _foreign_names(self) -> Dict[str, Set[str]]:
        """Names the pinned packages outside the release history also define (``gradient_accumulation_steps`` is a
        transformers field, ``--mixed_precision`` an ``accelerate launch`` flag): their scope is not TRL's or vLLM's,
        so they are not scope-checked."""
        cached = self.__dict__.get("_foreign")
        if cached is not None:
            return cached
        ctx = self.context()
        history = self.history
        tracked = set(history.releases) if history is not None else set()
        names: Set[str] = set()
        for package, package_names in ctx.package_names.items():
            if package not in tracked:
                names |= package_names
        for infos in ctx.classes.values():
            for info in infos:
                if info.package not in tracked:
                    names.add(info.qualified.rsplit(".", 1)[-1])
                    names |= set(info.fields) | set(info.init_params or {})
        flags: Set[str] = set()
        for name, spec in ctx.clis.items():
            if name.split(" ", 1)[0] not in tracked:
                flags |= set(spec.flags)
        for spec in self._all_script_specs():
            if spec is not None:
                flags |= set(spec.flags)
        flags |= {"--" + f[2:].replace("-", "_") for f in flags if f.startswith("--")}
        flags |= {"--" + f[2:].replace("_", "-") for f in flags if f.startswith("--")}
        env = {n for n, sources in ctx.env.items() if any(src.split(" ", 1)[0] not in tracked for src in sources)}
        foreign = {
            "identifier": names,
            "yaml-key": names,
            "class": names,
            "field": names,
            "kwarg": names,
            "flag": flags,
            "env": env,
        }
        self.__dict__["_foreign"] = foreign
        return foreign

    @property
    def history(self) -> Optional[claim_scopes.History]:
        if "_history" not in self.__dict__:
            self.__dict__["_history"] = load_history(self.facts_path.parent / HISTORY_NAME)
        return self.__dict__["_history"]

    def _check_spans(self, rel: str, doc: MarkdownDoc) -> None:
        for span in doc.spans:
            in_versions = span.section.startswith(VERSIONS_HEADING)
            ctx = self._block_context(rel, span.marker_line, span.marker)
            if ctx is None:
                continue
            if span.blockquote_role:
                self.check_quote(rel, span, ctx)
            else:
                self.check_inline(rel, span.line, span.text, self.context(union=True) if in_versions else ctx)

    def _block_context(self, rel: str, line: int, marker: Optional[str]) -> Optional[Context]:
        if not marker:
            return self.context()
        try:
            return self.context(marker)
        except ValueError as exc:
            known = [f"{p}=={v}" for p in self.facts.packages for v in self.facts.versions(p)]
            self.fail(
                rel,
                line,
                "marker",
                str(exc),
                "the facts file",
                known,
                note="a check marker must name a release the facts file holds",
            )
            return None

    # ---- quotes --------------------------------------------------------------------------------------------------

    def check_quote(self, rel: str, span: InlineSpan, ctx: Context) -> None:
        self.record(rel, span.line, "message", span.text)
        if span.blockquote_role == "cited":
            return
        if span.blockquote_role == "uncited":
            self.fail(
                rel,
                span.line,
                "quote-citation",
                span.text,
                "a citation",
                note="a quote from outside the pinned packages needs its source on the same line, "
                "e.g. (reported in huggingface/trl#3736)",
            )
            return
        if match_message(ctx, span.text):
            return
        if self.allowlist.allows(span.text):
            return
        self.failures.append(
            Failure(
                rel,
                span.line,
                "message",
                _shorten(span.text, 120),
                f"raised/logged messages@{ctx.label}",
                nearest_messages(ctx, span.text),
                note=""
                if nearest_messages(ctx, span.text)
                else "if users saw it from torch/NCCL or another package, cite the source: (reported in owner/repo#N)",
            )
        )

    # ---- inline code ---------------------------------------------------------------------------------------------

    def check_inline(self, rel: str, line: int, text: str, ctx: Context) -> None:
        text = text.strip()
        if not text:
            return
        for url_path in LOCAL_URL_RE.findall(text):
            if url_path.rstrip("/"):
                self.check_route(rel, line, url_path, ctx)
        if re.search(r"\s", text):
            tokens = _split_words(text)
            if tokens and self._command_for(tokens) is not None:
                self.check_command_tokens(rel, line, tokens, ctx)
                return
            route = ROUTE_RE.match(text)
            if route and route.group(1):
                self.check_route(rel, line, route.group(2), ctx)
                return
            if tokens and FLAG_RE.match(tokens[0].split("=", 1)[0]):
                self.check_token(rel, line, tokens[0], ctx)
                return
            pair = YAML_PAIR_RE.match(text)
            if pair:  # ``fsdp_version: 2``
                self.check_identifier(rel, line, pair.group(1), ctx)
                return
            for name in KEY_VALUE_RE.findall(text):  # ``bf16=False, fp16=True``
                self.check_assigned_name(rel, line, name, ctx)
            return
        self.check_token(rel, line, text, ctx)

    def check_token(self, rel: str, line: int, token: str, ctx: Context) -> None:
        """Classify one whitespace-free inline token by its shape and check it."""
        token = token.rstrip(",;:")
        if PLACEHOLDER_RE.fullmatch(token) or not token:
            return
        call = CALL_RE.match(token)
        if call:
            token = call.group(1)
        assign = ASSIGN_RE.match(token)
        if assign:
            token = assign.group(1)
            if not token.startswith("-"):
                self.check_assigned_name(rel, line, token, ctx)
                return
        if FLAG_RE.match(token) and token.startswith("--"):
            self.check_any_flag(rel, line, token, ctx)
        elif ROUTE_RE.match(token) and token.startswith("/") and len(token) > 1:
            self.check_route(rel, line, token, ctx)
        elif ENV_RE.match(token):
            self.check_env(rel, line, token, ctx, allow_values=True)
        elif CLASS_RE.match(token):
            self.check_class_name(rel, line, token, ctx)
        elif DOTTED_RE.match(token):
            self.check_dotted(rel, line, token, ctx)
        elif SNAKE_RE.match(token):
            self.check_identifier(rel, line, token, ctx)

    def check_assigned_name(self, rel: str, line: int, name: str, ctx: Context) -> None:
        """The ``name`` of ``name=value``: an env var, a dotted path, or a keyword/field (underscore or not)."""
        if ENV_RE.match(name):
            self.check_env(rel, line, name, ctx, allow_values=True)
        elif "." in name:
            self.check_dotted(rel, line, name, ctx)
        elif re.match(r"^_*[a-z][a-z0-9_]*$", name):
            self.check_identifier(rel, line, name, ctx)

    def check_any_flag(self, rel: str, line: int, flag: str, ctx: Context) -> None:
        self.record(rel, line, "flag", flag)
        base = flag.split("=", 1)[0].split(".", 1)[0]
        specs = list(ctx.clis.values()) + [s for s in self._all_script_specs() if s is not None]
        if any(spec.lookup(base) is not None for spec in specs):
            return
        candidates = [f for spec in specs for f in spec.flags]
        self.fail(rel, line, "flag", base, f"any covered CLI@{ctx.label}", candidates)

    def check_route(self, rel: str, line: int, path: str, ctx: Context) -> None:
        self.record(rel, line, "route", path)
        if ctx.route_match(path):
            return
        self.fail(rel, line, "route", path, f"vLLM HTTP routes@{_vllm_label(ctx)}", ctx.routes)

    def check_env(self, rel: str, line: int, name: str, ctx: Context, allow_values: bool = False) -> None:
        self.record(rel, line, "env", name)
        if name in ctx.env:
            return
        if allow_values and (name in ctx.values or name in ctx.identifiers):
            return
        self.fail(rel, line, "env", name, f"env vars read or set upstream@{ctx.label}", ctx.env)

    def check_class_name(self, rel: str, line: int, name: str, ctx: Context) -> None:
        self.record(rel, line, "class", name)
        if name in ctx.classes or name in ctx.identifiers:
            return
        candidates = [n for n in list(ctx.classes) + list(ctx.identifiers) if n[:1].isupper()]
        self.fail(rel, line, "class", name, f"upstream classes@{ctx.label}", candidates)

    def check_identifier(self, rel: str, line: int, name: str, ctx: Context) -> None:
        self.record(rel, line, "identifier", name)
        if name in ctx.identifiers:
            return
        pool = [n for n in ctx.identifiers if n.islower() and ("_" in n) == ("_" in name)]
        self.fail(rel, line, "identifier", name, f"config fields and upstream identifiers@{ctx.label}", pool)

    def check_dotted(self, rel: str, line: int, dotted: str, ctx: Context) -> None:
        parts = dotted.split(".")
        head = parts[0]
        if head in IMPORT_PACKAGES:
            self.record(rel, line, "module", dotted)
            for cut in range(len(parts), 0, -1):
                prefix = ".".join(parts[:cut])
                exists = ctx.module_exists(prefix)
                if exists is None:
                    return
                if exists:
                    for rest in parts[cut:]:
                        if rest not in ctx.identifiers:
                            self.fail(
                                rel,
                                line,
                                "module",
                                dotted,
                                f"{head} modules and names@{ctx.label}",
                                [f"{prefix}.{n}" for n in ctx.identifiers if n[:2] == rest[:2]][:2000],
                            )
                            return
                    return
            self.fail(
                rel,
                line,
                "module",
                dotted,
                f"{head} modules@{ctx.label}",
                ctx.modules.get(IMPORT_PACKAGES[head], set()),
            )
            return
        if CLASS_RE.match(head) or head in ctx.classes:
            self.check_class_name(rel, line, head, ctx)
            infos = ctx.class_infos(head)
            if infos and len(parts) == 2:
                attr = parts[1]
                self.record(rel, line, "field", f"{head}.{attr}")
                names = set().union(*(i.keywords | set(i.fields) for i in infos))
                if attr not in names and attr not in ctx.identifiers:
                    self.fail(rel, line, "field", f"{head}.{attr}", f"{head} fields@{ctx.label}", names)
            return
        last = parts[-1]
        if SNAKE_RE.match(last):
            self.check_identifier(rel, line, last, ctx)

    # ---- shell ---------------------------------------------------------------------------------------------------

    def check_shell_block(self, rel: str, block: CodeBlock, ctx: Context) -> None:
        for line_no, command in iter_shell_commands(block.lines, block.start_line, console=block.lang == "console"):
            self.check_command_tokens(rel, line_no, command, ctx)

    def _command_for(self, tokens: List[str]) -> Optional[Tuple[str, int]]:
        """(command kind, index of its first argument) when ``tokens`` start a covered command."""
        if not tokens:
            return None
        first = tokens[0].rsplit("/", 1)[-1]
        if first == "vllm" and len(tokens) > 1 and tokens[1] == "serve":
            return "vllm serve", 2
        if first == "trl" and len(tokens) > 1 and not tokens[1].startswith("-"):
            if PLACEHOLDER_RE.fullmatch(tokens[1]):
                return None
            return f"trl {tokens[1]}", 2
        if first == "accelerate" and len(tokens) > 1 and tokens[1] == "launch":
            return "accelerate launch", 2
        if first == "hf" and len(tokens) > 1 and tokens[1] in ("jobs", "buckets"):
            return "hf", 1
        if re.match(r"^python(\d(\.\d+)?)?$", first) and len(tokens) > 1:
            if tokens[1] == "-m" and len(tokens) > 2:
                module = tokens[2]
                if module == "trl" or module == "trl.cli.main":
                    return ("trl " + tokens[3], 4) if len(tokens) > 3 else None
                if module == "vllm.entrypoints.openai.api_server":
                    return "vllm serve", 3
                if module.startswith("trl.scripts."):
                    return "trl-script " + module.rsplit(".", 1)[-1], 3
                if module in ("accelerate.commands.launch",):
                    return "accelerate launch", 3
                return None
            return self._script_command(tokens[1], 2)
        return self._script_command(tokens[0], 1)

    def _script_command(self, path: str, index: int) -> Optional[Tuple[str, int]]:
        if BUNDLE_SCRIPT_RE.search(path) and not TRL_SCRIPT_RE.search(path):
            return "bundle " + BUNDLE_SCRIPT_RE.search(path).group(1), index  # type: ignore[union-attr]
        trl_script = TRL_SCRIPT_RE.search(path)
        if trl_script:
            return "trl-script " + trl_script.group(1), index
        return None

    def check_command_tokens(self, rel: str, line: int, tokens: List[str], ctx: Context) -> None:
        tokens = self._strip_env_prefix(rel, line, tokens, ctx)
        if tokens and tokens[0].rsplit("/", 1)[-1] in ("curl", "wget", "http", "xh"):
            for token in tokens[1:]:
                for url_path in LOCAL_URL_RE.findall(token):
                    if url_path.rstrip("/"):
                        self.check_route(rel, line, url_path, ctx)
            return
        found = self._command_for(tokens)
        if found is None:
            return
        kind, start = found
        args = tokens[start:]
        self.record(rel, line, "command", kind if kind != "hf" else " ".join(tokens[:3]))
        if kind == "hf":
            self._check_hf(rel, line, tokens, ctx)
            return
        if kind.startswith("bundle "):
            spec = self._script_spec(kind.split(" ", 1)[1])
            if spec is None:
                self.fail(
                    rel,
                    line,
                    "script",
                    f"scripts/{kind.split(' ', 1)[1]}",
                    "this bundle's scripts/",
                    [f"scripts/{p.name}" for p in sorted((self.root / "scripts").glob("*.py"))],
                    note="the command runs a script that does not exist",
                )
                return
            if spec.flags is None:  # exists but has no build_parser yet
                return
            self.check_flags(rel, line, args, spec)
            return
        if kind.startswith("trl-script "):
            name = kind.split(" ", 1)[1]
            spec = ctx.clis.get(f"trl {name}")
            if spec is not None:
                launcher = spec.__dict__.get("launcher_flags", set()) - {"--config"}
                flags = {k: v for k, v in spec.flags.items() if k not in launcher}
                self.check_flags(rel, line, args, CliSpec(f"trl/scripts/{name}.py", spec.source, flags, spec.normalize))
            return
        if kind.startswith("trl ") and "|" in kind:  # ``trl sft|dpo|grpo --flag``: every alternative
            for alternative in kind[4:].split("|"):
                self.check_command_tokens(rel, line, ["trl", alternative, *args], ctx)
            return
        spec = ctx.clis.get(kind)
        if spec is None:
            if kind.startswith("trl "):
                subcommands = [n for n in ctx.clis if n.startswith("trl ")]
                self.record(rel, line, "command", kind)
                self.fail(rel, line, "command", kind, f"trl subcommands@{ctx.label}", subcommands)
            return
        rest = self.check_flags(rel, line, args, spec)
        if kind == "accelerate launch" and rest:
            script = rest[0]
            trl_script = TRL_SCRIPT_RE.search(script)
            if trl_script and f"trl {trl_script.group(1)}" in ctx.clis:
                self.check_command_tokens(rel, line, ["python", script, *rest[1:]], ctx)

    def _strip_env_prefix(self, rel: str, line: int, tokens: List[str], ctx: Context) -> List[str]:
        out = list(tokens)
        while out:
            head = out[0]
            assignment = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=", head)
            if assignment:
                self.check_env(rel, line, assignment.group(1), ctx)
                out = out[1:]
            elif head in ("export", "unset") and len(out) > 1:
                for item in out[1:]:
                    name = item.split("=", 1)[0]
                    if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
                        self.check_env(rel, line, name, ctx)
                return []
            elif head in ("env", "sudo", "nohup", "time", "exec", "command"):
                out = out[1:]
            else:
                break
        return out

    def check_flags(self, rel: str, line: int, args: List[str], spec: CliSpec) -> List[str]:
        """Check every option in ``args``; return the arguments from the first positional on when the command stops
        parsing options there (``accelerate launch script.py --its-own-flags``), else ``[]``."""
        i = 0
        while i < len(args):
            token = args[i]
            if token == "--":
                return args[i + 1 :] if spec.positional_ends_options else []
            if _is_option(token):
                name, has_value, _ = token.partition("=")
                lookup_name = name
                if spec.name in ("vllm serve", "trl vllm-serve") or (
                    spec.forwards_to is not None and spec.forwards_to.name == "vllm serve"
                ):
                    lookup_name = _vllm_option(name)
                self.record(rel, line, "flag", name)
                record = {"takes_value": False} if name in ("-h", "--help") else spec.lookup(lookup_name)
                if record is None:
                    self.fail(rel, line, "flag", name, spec.label(), spec.all_flags())
                    record = {}
                takes_value = record.get("takes_value", True)
                if not has_value and takes_value and i + 1 < len(args) and not _is_option(args[i + 1]):
                    i += 1  # the option's value
                i += 1
                continue
            if spec.positional_ends_options:
                return args[i:]
            i += 1
        return []

    def _check_hf(self, rel: str, line: int, tokens: List[str], ctx: Context) -> None:
        words = ["hf"]
        i = 1
        names = [n for n in ctx.clis if n.startswith("hf ")]
        while i < len(tokens) and not tokens[i].startswith("-"):
            candidate = " ".join([*words, tokens[i]])
            if any(n == candidate or n.startswith(candidate + " ") for n in names):
                words.append(tokens[i])
                i += 1
            else:
                break
        command = " ".join(words)
        if command not in ctx.clis:
            self.record(rel, line, "command", command)
            if len(words) <= 2 and i < len(tokens) and not tokens[i].startswith("-"):
                command = " ".join([*words, tokens[i]])
            self.fail(rel, line, "command", command, f"hf commands@{ctx.label}", names)
            return
        spec = ctx.clis[command]
        options = tokens[i:]
        for flag, value in zip(options, options[1:]):  # ``-e NAME=value`` / ``--secrets NAME``: env var claims
            if flag in ("-e", "--env", "-s", "--secrets") and re.match(r"^[A-Z][A-Z0-9_]*(=|$)", value):
                self.check_env(rel, line, value.split("=", 1)[0], ctx)
        rest = self.check_flags(rel, line, options, spec)
        if command.endswith("jobs run") and len(rest) > 1:  # IMAGE then the container's command line
            inner = rest[1:]
            if len(inner) >= 3 and inner[0] in ("bash", "sh") and inner[1] == "-c":
                for sub in split_shell_commands(inner[2]):
                    self.check_command_tokens(rel, line, sub, ctx)
            else:
                self.check_command_tokens(rel, line, inner, ctx)
        elif command.endswith("uv run") and rest:
            trl_script = TRL_SCRIPT_RE.search(rest[0])
            if trl_script:
                self.check_command_tokens(rel, line, ["python", rest[0], *rest[1:]], ctx)

    # ---- bundle scripts ------------------------------------------------------------------------------------------

    def _all_script_specs(self) -> List[Optional[CliSpec]]:
        folder = self.root / "scripts"
        if folder.is_dir():
            for path in sorted(folder.glob("*.py")):
                self._script_spec(path.name)
        return [s for s in self._script_specs.values() if s is not None and s.flags is not None]

    def _script_spec(self, name: str) -> Optional[CliSpec]:
        """The options of ``scripts/<name>`` from its ``build_parser()``; None when the file does not exist;
        a spec with ``flags=None`` when it exists but exposes no parser."""
        if name in self._script_specs:
            return self._script_specs[name]
        path = self.root / "scripts" / name
        spec: Optional[CliSpec] = None
        if path.is_file():
            flags = _parser_flags(path)
            spec = CliSpec(f"scripts/{name}", "this bundle", flags if flags is not None else {}, "exact")
            if flags is None:
                spec.flags = None  # type: ignore[assignment]
        self._script_specs[name] = spec
        return spec

    # ---- python --------------------------------------------------------------------------------------------------

    def check_python_block(self, rel: str, block: CodeBlock, ctx: Context) -> None:
        source = "\n".join(block.lines)
        if block.lang == "pycon":
            source = "\n".join(text[4:] for text in block.lines if text.startswith((">>> ", "... ")))
        tree = _parse_python(source)
        if tree is None:
            self.failures.append(
                Failure(
                    rel,
                    block.start_line,
                    "python-syntax",
                    block.lang,
                    "a parsable Python block",
                    note="the block does not parse; use a `text` fence for pseudo-code",
                )
            )
            return
        imported: Dict[str, str] = {}
        local_classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for node in ast.walk(tree):
            line = block.start_line + getattr(node, "lineno", 1) - 1
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                package = IMPORT_PACKAGES.get(node.module.split(".", 1)[0])
                for alias in node.names:
                    if package:
                        imported[alias.asname or alias.name] = package
                self._check_import(rel, line, node, ctx)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if ctx.module_exists(alias.name) is False:
                        self.fail(
                            rel,
                            line,
                            "module",
                            alias.name,
                            f"upstream modules@{ctx.label}",
                            ctx.modules.get(IMPORT_PACKAGES[alias.name.split(".")[0]], set()),
                        )
            elif isinstance(node, ast.Call):
                self._check_call(rel, line, node, ctx, imported, local_classes)
            elif (
                isinstance(node, ast.Subscript)
                and ast.unparse(node.value).endswith("environ")
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                self.check_env(rel, line, node.slice.value, ctx)

    def _check_import(self, rel: str, line: int, node: ast.ImportFrom, ctx: Context) -> None:
        module = node.module or ""
        exists = ctx.module_exists(module)
        if exists is None:
            return
        self.record(rel, line, "module", module)
        if not exists:
            package = IMPORT_PACKAGES[module.split(".", 1)[0]]
            self.fail(rel, line, "module", module, f"{package} modules@{ctx.label}", ctx.modules.get(package, set()))
            return
        package = IMPORT_PACKAGES[module.split(".", 1)[0]]
        if module in UNJUDGED_ROOT_IMPORTS:
            return
        names = ctx.package_names.get(package, set())
        for alias in node.names:
            if alias.name == "*":
                continue
            self.record(rel, line, "import", f"{module}.{alias.name}")
            if alias.name not in names and ctx.module_exists(f"{module}.{alias.name}") is not True:
                self.fail(
                    rel,
                    line,
                    "import",
                    f"{module}.{alias.name}",
                    f"names in {package}@{_package_label(ctx, package)}",
                    [n for n in names if n[:1] == alias.name[:1]],
                )

    def _check_call(
        self, rel: str, line: int, node: ast.Call, ctx: Context, imported: Dict[str, str], local_classes: Set[str]
    ) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("getenv", "get", "setdefault", "pop") and node.args:
            owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
            if owner.endswith("environ") or ast.unparse(func) == "os.getenv":
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    self.check_env(rel, line, first.value, ctx)
            return
        if not name or name in local_classes:
            return
        is_claim_class = bool(CLASS_RE.match(name))
        infos = ctx.class_infos(name, imported.get(name))
        if not infos:
            if is_claim_class:
                self.record(rel, line, "class", name)
                self.fail(
                    rel,
                    line,
                    "class",
                    name,
                    f"upstream classes@{ctx.label}",
                    [n for n in ctx.classes if n[:1].isupper()],
                )
            return
        keywords: Set[str] = set()
        for info in infos if imported.get(name) is None else [i for i in infos if i.package == imported[name]] or infos:
            keywords |= info.keywords
        if not keywords and all(i.init_params is None for i in infos):
            return
        for kw in node.keywords:
            if kw.arg is None:
                continue
            self.record(rel, line, "kwarg", f"{name}.{kw.arg}")
            if kw.arg not in keywords:
                where = f"{name} fields@{infos[0].package} {ctx.selection.get(infos[0].package, ['?'])[0]}"
                self.fail(rel, line, "kwarg", f"{name}({kw.arg}=...)", where, keywords)

    # ---- yaml / json ---------------------------------------------------------------------------------------------

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


# ====================================================================================================================
# Helpers
# ====================================================================================================================


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _package_label(ctx: Context, package: str) -> str:
    versions = ctx.selection.get(package, [])
    return f"{package} {'/'.join(versions)}" if versions else package


def _vllm_label(ctx: Context) -> str:
    return _package_label(ctx, "vllm")


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not re.match(r"^-\d", token) and not token.startswith("-<")


def _vllm_option(name: str) -> str:
    """vLLM's FlexibleArgumentParser: ``--a.b`` sets a key of ``--a``; ``-O3`` means ``--optimization-level 3``."""
    if name.startswith("-O") and not name.startswith("--"):
        return "--optimization-level"
    return name.split(".", 1)[0]


def _json_key_line(lines: List[str], key: str) -> int:
    needle = json.dumps(key)
    for i, line in enumerate(lines):
        if needle + ":" in line.replace(" :", ":") or needle + " :" in line:
            return i
    return 0


def _parse_python(source: str) -> Optional[ast.Module]:
    for attempt in (source, PLACEHOLDER_RE.sub("...", source)):
        try:
            return ast.parse(attempt)
        except SyntaxError:
            continue
    return None


def _split_words(text: str) -> List[str]:
    try:
        return shlex.split(text, comments=False)
    except ValueError:
        return text.split()


def _parser_flags(path: Path) -> Optional[Dict[str, Dict[str, Any]]]:
    """Option strings of ``build_parser()`` in a bundle script (subparsers included); None when there is none."""
    module_name = f"_skill_claims_script_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    added = str(path.parent) not in sys.path
    if added:
        sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        build = getattr(module, "build_parser", None)
        if build is None:
            return None
        parser = build()
    except Exception:  # a half-written script must not crash the whole check
        return None
    finally:
        if added:
            sys.path.remove(str(path.parent))
    flags: Dict[str, Dict[str, Any]] = {}
    pending = [parser]
    while pending:
        current = pending.pop()
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending.extend(action.choices.values())
                continue
            for option in action.option_strings:
                flags[option] = {"takes_value": action.nargs != 0}
    return flags


# ---- shell splitting -----------------------------------------------------------------------------------------------

_OPERATORS = {"&&", "||", ";", "|", "&", "|&"}
_REDIRECT_RE = re.compile(r"^\d*(?:>>?|<|&>|>&)(?:&?\d+)?$")
_REDIRECT_ATTACHED_RE = re.compile(r"^\d*(?:>>?|&>)\S+$")
_HEREDOC_RE = re.compile(r"<<-?\s*['\"]?([A-Za-z_]\w*)['\"]?")


def split_shell_commands(text: str) -> List[List[str]]:
    """Simple commands of one logical shell line, without operators, redirections or substitutions."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        raw = list(lexer)
    except ValueError:
        raw = text.split("#", 1)[0].split()
    commands: List[List[str]] = [[]]
    skip_next = False
    for token in raw:
        if skip_next:
            skip_next = False
            continue
        if token in _OPERATORS:
            commands.append([])
            continue
        if token.endswith(";") and token != ";":
            commands[-1].append(token[:-1])
            commands.append([])
            continue
        if _REDIRECT_RE.match(token):
            skip_next = not re.search(r"&\d+$", token)
            continue
        if _REDIRECT_ATTACHED_RE.match(token):
            continue
        if token.startswith("$(") or token.startswith("`"):
            continue
        commands[-1].append(token)
    return [c for c in commands if c]


def iter_shell_commands(lines: List[str], start_line: int, console: bool = False) -> Iterator[Tuple[int, List[str]]]:
    """(line number, tokens) for every simple command in a shell block (continuations joined, heredocs skipped)."""
    i = 0
    while i < len(lines):
        line = lines[i]
        number = start_line + i
        if console:
            if not line.startswith("$ "):
                i += 1
                continue
            line = line[2:]
        logical = line
        while logical.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            logical = logical.rstrip()[:-1] + " " + lines[i]
        i += 1
        heredoc = _HEREDOC_RE.search(logical)
        if heredoc:
            terminator = heredoc.group(1)
            logical = logical[: heredoc.start()]
            while i < len(lines) and lines[i].strip() != terminator:
                i += 1
            i += 1
        for command in split_shell_commands(logical):
            yield number, command


# ====================================================================================================================
# Entry points
# ====================================================================================================================


def check_paths(
    paths: Sequence[Path],
    root: Path = REPO_ROOT,
    facts_path: Path = DEFAULT_FACTS,
    allowlist_path: Optional[Path] = DEFAULT_ALLOWLIST,
) -> Tuple[List[Failure], Checker]:
    allowlist = Allowlist.load(allowlist_path)
    checker = Checker(Facts.load(facts_path), root, allowlist, facts_path)
    for path in paths:
        checker.check_file(path)
    return sorted(set(checker.failures), key=lambda f: (f.path, f.line, f.kind, f.identifier)), checker


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Check the skill text's upstream names against the facts file.")
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: every skill file)")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="bundle root (default: this repository)")
    parser.add_argument("--facts", type=Path, default=DEFAULT_FACTS, help="facts file")
    parser.add_argument("--allowlist", type=Path, default=DEFAULT_ALLOWLIST, help="allow-list file")
    parser.add_argument("--claims", action="store_true", help="print every claim found instead of failures")
    parser.add_argument(
        "--scopes",
        action="store_true",
        help="print each scope-checked claim with the releases it is stated for and where it holds",
    )
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    files = args.files or skill_files(args.root)
    try:
        failures, checker = check_paths(files, args.root, args.facts, args.allowlist)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.claims:
        for path, line, kind, identifier in checker.claims:
            print(f"{path}:{line}: [{kind}] {identifier}")
        return 0
    if args.scopes and checker.history is not None:
        history = checker.history
        for path, item in checker.resolved:
            stated = history.label(item.package, item.scope)
            holds = history.label(item.package, history.mask_indices(item.package, item.mask))
            claim = _shorten(item.identifier, 80)
            print(f"{path}:{item.line}: [{item.kind}] {claim} stated for {stated}; holds in {holds}")
        return 0
    problems = list(checker.allowlist.problems)
    if not args.files:
        problems += [f"{args.allowlist.name}: unused entry {name!r}" for name in checker.allowlist.unused()]
    for failure in failures:
        print(failure.format())
    for problem in problems:
        print(problem)
    total = len(failures) + len(problems)
    print(f"{total} failure(s) in {len(files)} file(s), {len(checker.claims)} claims checked", file=sys.stderr)
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
