"""Checks that keep degenerate model output from passing for a verdict, in every protocol.

A small or confused model can fill every field of the schema and still say nothing: a turn
that repeats itself ("the decision is a decision that is not a decision…"), a synthesis that is
a bare number (`1.0`), a judge that copies the prompt's description of a field instead of
answering it, or a structured judgment whose decision contradicts the side totals computed in
code. Each check that fires lowers the confidence by a stated amount (listed in
`verdict.confidence_method`), flags the result `degenerate_output`, and asks for a human review.
The runner applies them to every protocol's result, so no protocol can skip them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from engine.models import (
    ConfidenceAdjustment,
    DebateFlag,
    DebateResult,
    Decision,
    Role,
    TurnRecord,
)
from engine.prompts import PromptLibrary
from engine.protocols.base import THRESHOLD_REASON, level_for, threshold_reason

DECIDING_ROLES = frozenset({Role.MODERATOR, Role.JUDGE, Role.SYNTHESIZER})
VERDICT_FIELDS = frozenset({"synthesis", "recommendation", "reasoning", "verdict", "summary"})
REPETITION_PENALTY = 0.15
REPETITION_CAP = 0.30
BARE_PENALTY = 0.30
ECHO_PENALTY = 0.20
CONTRADICTION_PENALTY = 0.25
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


def output_checks(result: DebateResult, prompts: PromptLibrary) -> list[ConfidenceAdjustment]:
    """The penalties the result's model output earns (none for sound output)."""
    steps: list[ConfidenceAdjustment] = []
    repetitive = sorted(
        {
            _who(turn)
            for turn in result.transcript
            if any(repeats_itself(text) for _, text in _strings(turn.parsed))
        }
    )
    if repetitive:
        steps.append(
            ConfidenceAdjustment(
                reason=f"output repeats itself ({', '.join(repetitive)})",
                delta=-min(REPETITION_CAP, REPETITION_PENALTY * len(repetitive)),
            )
        )
    deciding = [t for t in result.transcript if t.role in DECIDING_ROLES]
    bare = [
        f"{_who(t)} {field}: {text.strip()[:20]!r}"
        for t in deciding
        for field, text in _strings(t.parsed)
        if field in VERDICT_FIELDS and bare_value(text)
    ]
    if bare or (result.verdict.synthesis and bare_value(result.verdict.synthesis)):
        shown = ", ".join(bare) or f"synthesis {result.verdict.synthesis.strip()[:20]!r}"
        steps.append(
            ConfidenceAdjustment(
                reason=f"a verdict field is a bare value, not an argument ({shown})",
                delta=-BARE_PENALTY,
            )
        )
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
        steps.append(
            ConfidenceAdjustment(
                reason=(
                    f"output copies the prompt's field descriptions ({', '.join(sorted(echoed))})"
                ),
                delta=-ECHO_PENALTY,
            )
        )
    contradiction = _contradiction(result)
    if contradiction:
        steps.append(ConfidenceAdjustment(reason=contradiction, delta=-CONTRADICTION_PENALTY))
    return steps


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


def checked(result: DebateResult, prompts: PromptLibrary) -> DebateResult:
    """`result` with the penalties applied: confidence, level, method, a flag, escalation."""
    steps = output_checks(result, prompts)
    if not steps:
        return result
    verdict = result.verdict
    confidence = min(1.0, max(0.0, verdict.confidence + sum(s.delta for s in steps)))
    # The threshold reason states the confidence the verdict ends with, after these penalties,
    # not the one before them (the CLI printed 0.00 beside "0.39 is below the threshold").
    reasons = [r for r in verdict.escalation_reasons if THRESHOLD_REASON not in r]
    threshold = result.spec.escalation_threshold
    if confidence < threshold:
        reasons.append(threshold_reason(confidence, threshold))
    reasons.append("the model's output looks degenerate: " + "; ".join(s.reason for s in steps))
    checked_verdict = verdict.model_copy(
        update={
            "confidence": confidence,
            "level": level_for(confidence),
            "confidence_method": [*verdict.confidence_method, *steps],
            "escalate": True,
            "escalation_reasons": reasons,
        }
    )
    flags = [*result.flags, DebateFlag.DEGENERATE_OUTPUT]
    return result.model_copy(update={"verdict": checked_verdict, "flags": flags})
