"""One model, one call: the single-agent review a debate is measured against, and the judge
that picks the best of several such reviews (best-of-n).

The reviewer gets the same preamble as every debate turn (rules, question, documents) and
answers with a decision, its reasons, the risks it finds and its confidence. The token benchmark
(`benchmarks/tokens.py`) divides a debate's tokens by this call's.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, Field

from engine.cache_plan import Planned
from engine.events import EventSink, discard_events
from engine.ledger import LLMResolver, TurnLedger
from engine.models import (
    ConfidenceLevel,
    DebateSpec,
    Decision,
    LongText,
    Role,
    ShortText,
    TurnRecord,
)
from engine.prompts import PromptLibrary
from engine.protocols.base import Asker

T = TypeVar("T", bound=BaseModel)


class PickedReview(BaseModel):
    best: int = Field(ge=1)
    reason: ShortText


class SingleReview(BaseModel):
    decision: Decision
    synthesis: LongText
    risks: list[ShortText] = Field(default_factory=list, max_length=8)
    evidence_cited: list[ShortText] = Field(default_factory=list, max_length=6)
    confidence_level: ConfidenceLevel


async def _one_turn(
    spec: DebateSpec,
    template: str,
    role: Role,
    step: str,
    output_type: type[T],
    values: dict[str, str],
    resolve_llm: LLMResolver,
    prompts: PromptLibrary,
    sink: EventSink,
    *,
    asked_again: bool = False,
) -> tuple[T, TurnRecord]:
    """A one-call run outside any debate: `role` answers `template` (round 1), and the turn it
    took. Unless the same prompt is `asked_again` (samples of one review), no later call reads
    it, so nothing of it is written to a vendor's cache that bills its writes."""
    ledger = TurnLedger(spec=spec, resolve_llm=resolve_llm, sink=sink)
    if not asked_again:
        ledger.planned([Planned(1, role)])
    answer = await Asker(spec=spec, ledger=ledger, prompts=prompts).ask(
        template, round=1, role=role, step=step, output_type=output_type, values=values
    )
    return answer, ledger.transcript[-1]


async def single_review(
    spec: DebateSpec,
    *,
    resolve_llm: LLMResolver,
    prompts: PromptLibrary,
    sink: EventSink = discard_events,
    asked_again: bool = False,
) -> tuple[SingleReview, TurnRecord]:
    """The reviewer's answer to `spec` (on the spec's default model) and the turn it took;
    `asked_again` when the same review is asked again after it (samples), so it is cached."""
    return await _one_turn(
        spec,
        "single/review.md",
        Role.REVIEWER,
        "reviewing alone",
        SingleReview,
        {},
        resolve_llm,
        prompts,
        sink,
        asked_again=asked_again,
    )


async def pick_best(
    spec: DebateSpec,
    reviews: list[SingleReview],
    *,
    resolve_llm: LLMResolver,
    prompts: PromptLibrary,
    sink: EventSink = discard_events,
) -> tuple[int, TurnRecord]:
    """The index of the review a judge (the spec's judge model) finds best, and its turn; the
    best-of-n arm of `debatebot eval`. A number out of range picks the first review."""
    candidates = "\n\n".join(
        f"Review {n}:\n{review.model_dump_json(indent=1)}" for n, review in enumerate(reviews, 1)
    )
    values = {"candidates": candidates}
    picked, turn = await _one_turn(
        spec,
        "single/pick.md",
        Role.JUDGE,
        "picking the best review",
        PickedReview,
        values,
        resolve_llm,
        prompts,
        sink,
    )
    index = picked.best - 1 if picked.best <= len(reviews) else 0
    return index, turn
