"""Checks that every piece of evidence an agent cites is actually in the debate's material.

Agents are told to cite verbatim quotes from the documents. A quote is verified when, after
normalising case, punctuation and white space, it appears in a context document; a debate with
no documents has only its question to quote, so there the question is the material. Where there
are documents, a quote found only in the question is a claim someone made, not evidence, and is
flagged like any other quote the documents do not hold. Quotes of four
words or more are also accepted when at least `FUZZY_THRESHOLD` of their word pairs appear in one
document and every number in them appears there too: that tolerates a typo or a dropped word, but
not an invented sentence or an altered figure. A quote may elide with "..." or "…": every
fragment must then be found. Anything else is flagged fabricated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.models import CitationCheck, ContextDocument, Role

FUZZY_THRESHOLD = 0.8
_ELLIPSIS = re.compile(r"\.\.\.+|…")
_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalize(text: str) -> str:
    return _NON_WORD.sub(" ", text.lower()).strip()


def _bigrams(words: Sequence[str]) -> set[tuple[str, str]]:
    return {(words[i], words[i + 1]) for i in range(len(words) - 1)}


def _numbers(words: Sequence[str]) -> set[str]:
    return {word for word in words if any(char.isdigit() for char in word)}


@dataclass(frozen=True)
class _Source:
    title: str
    text: str
    bigrams: frozenset[tuple[str, str]]
    words: frozenset[str]


class CitationChecker:
    """Verifies quotes against a fixed set of documents (normalised once, checked many times)."""

    def __init__(self, documents: Sequence[ContextDocument], question: str) -> None:
        material = list(documents) or [ContextDocument(title="question", text=question)]
        self._sources = []
        for doc in material:
            words = normalize(doc.text).split()
            self._sources.append(
                _Source(
                    doc.title,
                    f" {' '.join(words)} ",
                    frozenset(_bigrams(words)),
                    frozenset(words),
                )
            )

    def _fragment_score(self, fragment: str) -> tuple[float, str | None]:
        words = fragment.split()
        best: tuple[float, str | None] = (0.0, None)
        for source in self._sources:
            if f" {fragment} " in source.text:
                return 1.0, source.title
            if len(words) >= 4 and _numbers(words) <= source.words:
                grams = _bigrams(words)
                share = len(grams & source.bigrams) / len(grams)
                if share > best[0]:
                    best = (share, source.title)
        return best

    def check(self, quote: str, *, round: int, role: Role) -> CitationCheck:
        """Verify one quote; the score is the weakest fragment's match share."""
        fragments = [normalize(part) for part in _ELLIPSIS.split(quote.strip(" \"'“”‘’"))]
        fragments = [fragment for fragment in fragments if fragment]
        if not fragments:
            return CitationCheck(round=round, role=role, quote=quote, verified=False, score=0.0)
        scored = [self._fragment_score(fragment) for fragment in fragments]
        score = min(share for share, _ in scored)
        source = scored[0][1]
        return CitationCheck(
            round=round,
            role=role,
            quote=quote,
            verified=score >= FUZZY_THRESHOLD,
            score=_three_places(score),
            source=source if score >= FUZZY_THRESHOLD else None,
        )

    def check_all(self, quotes: Sequence[str], *, round: int, role: Role) -> list[CitationCheck]:
        return [self.check(quote, round=round, role=role) for quote in quotes]


def _three_places(score: float) -> float:
    # `round` is shadowed by the keyword argument that matches the models' field name.
    return float(f"{score:.3f}")
