"""Checks of inline code and blockquoted messages."""

from __future__ import annotations

import re

from .common import (
    ASSIGN_RE,
    CALL_RE,
    CLASS_RE,
    DOTTED_RE,
    ENV_RE,
    FLAG_RE,
    IMPORT_PACKAGES,
    KEY_VALUE_RE,
    LOCAL_URL_RE,
    PLACEHOLDER_RE,
    ROUTE_RE,
    SNAKE_RE,
    YAML_PAIR_RE,
)
from .failures import Failure
from .helpers import _split_words, _vllm_label
from .markdown import InlineSpan
from .messages import _shorten, match_message, nearest_messages
from .upstream import Context


class InlineChecks:
    """Quotes and inline code spans (part of ``Checker``)."""

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
