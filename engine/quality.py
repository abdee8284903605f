"""Checks that keep degenerate model output from passing for a verdict, in every protocol.

A small or confused model can fill every field of the schema and still say nothing: a turn
that repeats itself ("the decision is a decision that is not a decision…"), a synthesis that is
a bare number (`1.0`), a judge that copies the prompt's description of a field instead of
answering it, or a structured judgment whose decision contradicts the side totals computed in
code. Each check that fires is a finding: the findings are the confidence's `output_checks`
component (`engine.scoring`), flag the result `degenerate_output`, and ask for a human review.
The runner applies them to every protocol's result, so no protocol can skip them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from engine.models import DebateResult, Decision, Role, TurnRecord
from engine.prompts import PromptLibrary

DECIDING_ROLES = frozenset({Role.MODERATOR, Role.JUDGE, Role.SYNTHESIZER})
VERDICT_FIELDS = frozenset({"synthesis", "recommendation", "reasoning", "verdict", "summary"})
TIE = 0.005
CLEAR_MARGIN = 0.5
BARE_WORDS = frozenset({"true", "false", "null", "none", "n/a", "na", "undefined", "tbd"})


def _strings(value: Any, field: str = "") -> Iterator[tuple[str, str]]:
    """Every (field, text) in a parsed output, however nested."""
    if isinstance(value, str):
        yield field, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, str(key))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, field)


_WORD = re.compile(r"[a-z0-9']+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def repeats_itself(text: str, *, min_words: int = 12, share: float = 0.4) -> bool:
    """Whether at least `share` of the text's word triples are repeats of earlier ones."""
    words = _words(text)
    if len(words) < min_words:
        return False
    triples = [tuple(words[i : i + 3]) for i in range(len(words) - 2)]
    return (len(triples) - len(set(triples))) / len(triples) >= share


def bare_value(text: str) -> bool:
    """A number, a literal or punctuation where words were asked for."""
    stripped = text.strip().strip("\"'`.").lower()
    return not re.search(r"[a-z]{2,}", stripped) or stripped in BARE_WORDS


def normalized(text: str) -> str:
    """`text` as lower-case words joined by single spaces, for phrase comparison."""
    return " ".join(_words(text))


def echoes(text: str, prompt_words: str, *, min_words: int = 5) -> bool:
    """Whether `text`, a phrase of some length, is copied from the prompt it answers
    (`prompt_words`: the prompt `normalized` once)."""
    words = _words(text)
    return len(words) >= min_words and " ".join(words) in prompt_words


@lru_cache(maxsize=64)
def _normalized_template(text: str) -> str:
    """A template's text `normalized`, once per template rather than once per debate."""
    return normalized(text)


def _who(turn: TurnRecord) -> str:
    return f"{turn.role.value} {turn.speaker}".strip()


def output_checks(result: DebateResult, prompts: PromptLibrary) -> list[str]:
    """The findings the result's model output earns, each saying what and where (none for
    sound output)."""
    findings: list[str] = []
    repetitive = sorted(
        {
            _who(turn)
            for turn in result.transcript
            if any(repeats_itself(text) for _, text in _strings(turn.parsed))
        }
    )
    if repetitive:
        findings.append(f"output repeats itself ({', '.join(repetitive)})")
    deciding = [t for t in result.transcript if t.role in DECIDING_ROLES]
    bare = [
        f"{_who(t)} {field}: {text.strip()[:20]!r}"
        for t in deciding
        for field, text in _strings(t.parsed)
        if field in VERDICT_FIELDS and bare_value(text)
    ]
    if bare or (result.verdict.synthesis and bare_value(result.verdict.synthesis)):
        shown = ", ".join(bare) or f"synthesis {result.verdict.synthesis.strip()[:20]!r}"
        findings.append(f"a verdict field is a bare value, not an argument ({shown})")
    echoed: set[str] = set()
    for turn in deciding:
        template = prompts.by_sha(turn.prompt_sha256)
        if template is None:
            continue
        prompt_words = _normalized_template(template.text)
        echoed.update(
            f"{_who(turn)} {field}"
            for field, text in _strings(turn.parsed)
            if echoes(text, prompt_words)
        )
    if echoed:
        findings.append(
            f"output copies the prompt's field descriptions ({', '.join(sorted(echoed))})"
        )
    contradiction = _contradiction(result)
    if contradiction:
        findings.append(contradiction)
    return findings


def _contradiction(result: DebateResult) -> str | None:
    """A decision the side totals computed in code do not support (structured judgments)."""
    totals = (result.report or {}).get("side_totals")
    if not isinstance(totals, dict) or not {"PRO", "CON"} <= set(totals):
        return None
    pro, con = float(totals["PRO"]), float(totals["CON"])
    decision = result.verdict.decision
    tied = abs(pro - con) <= TIE
    decisive = decision in (Decision.ACCEPT, Decision.REJECT)
    if (
        (tied and decisive)
        or (decision is Decision.REJECT and pro - con >= CLEAR_MARGIN)
        or (decision is Decision.ACCEPT and con - pro >= CLEAR_MARGIN)
    ):
        return (
            f"the decision `{decision.value}` contradicts the weighted side totals"
            f" (PRO {pro:.2f}, CON {con:.2f})"
        )
    return None
