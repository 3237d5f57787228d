"""The checker: contexts per check marker, failure reporting and the walk over one document.

The checks for each kind of claim live in the ``check_*`` modules, as mixins of ``Checker``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import claim_scopes

from .allowlist import Allowlist
from .check_config import ConfigChecks
from .check_inline import InlineChecks
from .check_python import PythonChecks
from .check_ranges import RangeChecks
from .check_shell import ShellChecks
from .common import DEFAULT_FACTS, HISTORY_NAME, PYTHON_LANGS, SHELL_LANGS, SKILL_DIR, VERSIONS_HEADING, YAML_LANGS
from .failures import Failure, nearest
from .helpers import _relative
from .markdown import MarkdownDoc, parse_markdown
from .messages import quote_matches_template
from .upstream import CliSpec, Context, Facts


@lru_cache(maxsize=4)
def load_history(path: Path) -> Optional[claim_scopes.History]:
    """The release history beside the facts file; None when there is none (scopes are then not checked)."""
    if not Path(path).is_file():
        return None
    return claim_scopes.History.load(path)


def _quote_matcher(quote: str, template: str) -> bool:
    return quote_matches_template(quote, template)


class Checker(InlineChecks, ShellChecks, PythonChecks, ConfigChecks, RangeChecks):
    def __init__(
        self,
        facts: Facts,
        root: Path = SKILL_DIR,
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
        text = path.read_text(encoding="utf-8")
        doc = parse_markdown(rel, text)
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
        self.check_scopes(rel, text, self.claims[first_claim:])
        self.check_ranges(rel, text)

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
