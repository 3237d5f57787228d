"""Ranking the troubleshooting entries and release-history rows against a question.

Two passes, in this order: each line of the text through the shared matcher (``common/troubleshooting.py``, the
triage's own), so a pasted message finds the entry that quotes it; then the words, each weighted by its rarity
across entries and rows (inverse document frequency) and by where the entry holds it (heading, symptom, other
text), with a bonus for a backticked config key, flag or variable named exactly."""

from __future__ import annotations

import math
import re
from typing import Any, Dict, FrozenSet, List, NamedTuple, Sequence, Set, Tuple

from common.troubleshooting import Index, scope_holds

MAX_RESULTS = 3
EXACT = 1000.0  # an exact message match outranks any word score
FIELD_WEIGHTS = (("heading", 3.0), ("symptom", 2.0), ("text", 1.0))
TERM_BONUS = 4.0
KEEP_RATIO = 0.35  # a word match below this share of the best one is not shown
MIN_WORDS = 2  # a word match needs this many words in common, or one exact term
MIN_COVERAGE = 0.25  # ... and this share of the question's weight
_TERM = re.compile(r"--?[a-z][\w-]*|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+")


class Doc(NamedTuple):
    kind: str  # "entry" | "row"
    ref: int
    weights: Dict[str, float]  # word -> its field weight (the best field that holds it)
    terms: FrozenSet[str]  # backticked terms, lower case, without a value
    scope: Tuple[Tuple[Any, ...], ...]
    readme: bool  # an entry of troubleshooting/README.md (repeats a topic file's entry)
    quotes: FrozenSet[str]


class Hit(NamedTuple):
    kind: str  # "entry" | "row"
    ref: int
    score: float
    how: str  # "message" (the shared matcher) | "words"
    matched: Tuple[str, ...]  # words (or terms) in common, rarest first
    quote: int = -1  # the quote the message matched


class Ranked(NamedTuple):
    hits: List[Hit]  # best first, at most MAX_RESULTS
    found: bool  # False: nothing passed the bar; ``hits`` are then the nearest suggestions
    upstream: List[Dict[str, Any]]  # upstream packages whose own message the text holds


def _term_key(term: str) -> str:
    return term.split("=")[0].split(" ")[0].strip().lower()


def _doc(kind: str, ref: int, item: Dict[str, Any]) -> Doc:
    search = item.get("search") or {}
    weights: Dict[str, float] = {}
    for field, weight in FIELD_WEIGHTS:
        for word in search.get(field, ()):
            weights[word] = max(weights.get(word, 0.0), weight)
    terms = frozenset(_term_key(t) for t in search.get("terms", ()))
    scope = tuple(tuple(r) for r in item.get("scope") or ())
    quotes = frozenset(q["text"] for q in item.get("quotes", ()))
    return Doc(kind, ref, weights, terms, scope, item.get("file", "").endswith("/README.md"), quotes)


class Ranker:
    """The documents (entries, rows) with their word weights and the rarity of each word."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.docs = [_doc("entry", i, e) for i, e in enumerate(index.entries)]
        self.docs += [_doc("row", i, r) for i, r in enumerate(index.rows)]
        frequency: Dict[str, int] = {}
        for doc in self.docs:
            for word in doc.weights:
                frequency[word] = frequency.get(word, 0) + 1
        total = len(self.docs)
        self.idf = {word: math.log(1.0 + total / count) for word, count in frequency.items()}
        self.average = sum(len(d.weights) for d in self.docs) / max(total, 1)
        self.entry_docs = {d.ref: d for d in self.docs if d.kind == "entry"}

    def rank(self, text: str, words: Sequence[str], releases: Dict[str, str]) -> Ranked:
        exact, upstream = self._messages(text)
        scored = self._words(text, words, releases)
        hits: List[Hit] = list(exact)
        taken = {("entry", h.ref) for h in exact}
        best = max((h.score for h in scored), default=0.0)
        found = bool(exact) or bool(scored and self._passes(scored[0], words))
        for hit in scored:
            if (hit.kind, hit.ref) in taken:
                continue
            if found and hits and hit.score < KEEP_RATIO * best:
                break
            hits.append(hit)
            taken.add((hit.kind, hit.ref))
        return Ranked(self._unrepeated(hits)[:MAX_RESULTS], found, upstream)

    def _messages(self, text: str) -> Tuple[List[Hit], List[Dict[str, Any]]]:
        """Entries whose quoted message a line of the text holds (the triage's matcher), best first."""
        lines = [line for line in text.splitlines() if line.strip()]
        joined = " ".join(text.split())
        best: Dict[int, Hit] = {}
        upstream: List[Dict[str, Any]] = []
        for line in [*lines, joined] if len(lines) > 1 else [joined]:
            for match in self.index.matches(line):
                message = match.message
                if message.kind == "upstream":
                    info = self.index.upstream[message.ref]
                    item = {"package": info["package"], "releases": info["releases"]}
                    if item not in upstream:
                        upstream.append(item)
                    continue
                score = EXACT + match.score + match.values
                if message.ref not in best or best[message.ref].score < score:
                    best[message.ref] = Hit("entry", message.ref, score, "message", (), message.quote)
        hits = sorted(best.values(), key=lambda h: (-h.score, self.entry_docs[h.ref].readme, h.ref))
        return hits, upstream[:3]

    def _words(self, text: str, words: Sequence[str], releases: Dict[str, str]) -> List[Hit]:
        query: Set[str] = set(words)
        terms = {_term_key(t) for t in _TERM.findall(text)}
        mass = sum(self.idf.get(w, 0.0) for w in query) or 1.0
        hits: List[Hit] = []
        for doc in self.docs:
            common = [w for w in query if w in doc.weights]
            named = sorted(terms & doc.terms)
            if not common and not named:
                continue
            score = sum(self.idf[w] * doc.weights[w] for w in common) + TERM_BONUS * len(named)
            coverage = sum(self.idf[w] for w in common) / mass
            score *= (0.5 + coverage) / (max(len(doc.weights), 1) / self.average) ** 0.2
            score *= self._release_factor(doc, releases)
            matched = tuple(named) + tuple(sorted(common, key=lambda w: (-self.idf[w], w)))
            hits.append(Hit(doc.kind, doc.ref, round(score, 3), "words", matched))
        hits.sort(key=lambda h: (-h.score, h.kind != "entry", h.ref))
        return hits

    def _passes(self, hit: Hit, words: Sequence[str]) -> bool:
        """A word match good enough to call an answer: enough words in common, carrying enough of the weight."""
        doc = self._doc_of(hit)
        common = [w for w in set(words) if w in doc.weights]
        named = [m for m in hit.matched if m in doc.terms]
        mass = sum(self.idf.get(w, 0.0) for w in set(words)) or 1.0
        coverage = sum(self.idf[w] for w in common) / mass
        return bool(named) or (len(common) >= MIN_WORDS and coverage >= MIN_COVERAGE)

    def _doc_of(self, hit: Hit) -> Doc:
        return self.entry_docs[hit.ref] if hit.kind == "entry" else self.docs[len(self.entry_docs) + hit.ref]

    @staticmethod
    def _release_factor(doc: Doc, releases: Dict[str, str]) -> float:
        """A row or entry written for the user's releases counts more, one written for others less."""
        if not doc.scope or not releases:
            return 1.0
        held = scope_holds(doc.scope, releases)
        return 1.0 if held is None else (1.3 if held else 0.7)

    def _unrepeated(self, hits: List[Hit]) -> List[Hit]:
        """Without a README.md entry that repeats a quote of a topic file's entry also listed (the topic file's
        entry says more)."""
        topical: Set[str] = set()
        for hit in hits:
            doc = self._doc_of(hit)
            if doc.kind == "entry" and not doc.readme:
                topical |= doc.quotes
        return [h for h in hits if not (self._doc_of(h).readme and self._doc_of(h).quotes & topical)]
