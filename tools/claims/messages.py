"""Quoted messages matched against upstream message templates."""

from __future__ import annotations

import difflib
import re
from typing import Dict, List, Optional, Tuple

from .common import EXCEPTION_PREFIX_RE
from .upstream import Context

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
