"""A debate as the web door shows it, read from the store: its state, each stored turn, and
once decided the verdict with its confidence components, its cost and its review. Values only:
the API sends them as JSON, the page renders them (escaped) in its templates."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlmodel import Session, col, select

from bot.messages.posts import threshold_text
from bot.store import endings, queue, reviews
from bot.store.debate_tables import Debate, DebateState, Turn
from bot.store.results import StoredResult
from bot.store.review_tables import Escalation
from engine.models import DebateResult, RoundRecordBase
from engine.protocols import definition_for
from engine.views import Block, RoundView

LIST_LIMIT = 100
"""The most debates one listing shows, newest first."""


class TurnOut(BaseModel):
    """One stored turn: who spoke, when, on which model, and what they said (the fields of
    their structured answer, in order)."""

    seq: int
    round: int
    role: str
    speaker: str
    phase: str
    model: str
    cost_usd: float
    fields: list[tuple[str, str]]
    created_at: datetime


class ComponentOut(BaseModel):
    name: str
    value: float | None
    note: str
    logit: float | None


class VerdictOut(BaseModel):
    status: str
    decision: str
    confidence: float
    level: str
    synthesis: str
    confidence_line: str
    components: list[ComponentOut]
    weights_version: str | None
    threshold: float | None
    threshold_source: str | None
    threshold_line: str
    """Which escalation threshold the confidence was held against, as Slack's verdict says it
    ("threshold 0.69: the guaranteed threshold adopted with the weights"); empty for verdicts
    that did not record it."""
    unresolved_points: list[str]
    escalate: bool
    escalation_reasons: list[str]


class ReviewOut(BaseModel):
    """The review request of an escalated verdict, and its decision once made."""

    escalation_id: int
    state: str
    reviewer: str | None = None
    note: str | None = None


class DebateOut(BaseModel):
    id: int
    state: str
    source: str
    question: str
    protocol: str
    max_rounds: int
    created_at: datetime
    finished_at: datetime | None
    outcome: str | None
    decision: str | None
    cost_usd: float
    error: str | None
    turns: list[TurnOut]
    verdict: VerdictOut | None
    review: ReviewOut | None


class DebateLine(BaseModel):
    """One line of the list of past debates."""

    id: int
    state: str
    question: str
    protocol: str
    outcome: str | None
    decision: str | None
    cost_usd: float
    created_at: datetime


def answer_fields(parsed: Any) -> list[tuple[str, str]]:
    """A structured answer as (field, text) pairs a person reads: text fields as they are,
    lists one item a line, anything else as compact JSON."""
    if not isinstance(parsed, dict):
        return [("answer", parsed if isinstance(parsed, str) else json.dumps(parsed))]
    found: list[tuple[str, str]] = []
    for key, value in parsed.items():
        if value in (None, "", [], {}):
            continue
        if isinstance(value, str):
            text = value
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            text = "\n".join(f"- {item}" for item in value)
        else:
            text = json.dumps(value, ensure_ascii=False)
        found.append((key.replace("_", " "), text))
    return found


def turn_out(row: Turn) -> TurnOut:
    try:
        parsed = json.loads(row.parsed_json)
    except ValueError:
        parsed = row.raw_text
    return TurnOut(
        seq=row.seq,
        round=row.round,
        role=row.role,
        speaker=row.speaker,
        phase=row.phase,
        model=f"{row.provider}:{row.model}",
        cost_usd=row.cost_usd,
        fields=answer_fields(parsed),
        created_at=row.created_at,
    )


def turns_after(session: Session, *, debate_id: int, after: int = -1) -> list[TurnOut]:
    """The debate's turns stored after sequence number `after`, in order."""
    rows = session.exec(
        select(Turn)
        .where(Turn.debate_id == debate_id, col(Turn.seq) > after)
        .order_by(col(Turn.seq))
    )
    return [turn_out(row) for row in rows]


def verdict_out(result: DebateResult) -> VerdictOut:
    verdict = result.verdict
    components = verdict.components
    logits = {c.component: c.logit for c in verdict.contributions}
    return VerdictOut(
        status=verdict.status.value,
        decision=verdict.decision.value,
        confidence=verdict.confidence,
        level=verdict.level.value,
        synthesis=verdict.synthesis,
        confidence_line=components.line() if components is not None else "",
        components=[
            ComponentOut(
                name=name.value,
                value=value,
                note=components.notes.get(name, ""),
                logit=logits.get(name),
            )
            for name, value in components.values.items()
        ]
        if components is not None
        else [],
        weights_version=verdict.weights_version,
        threshold=verdict.threshold,
        threshold_source=verdict.threshold_source.value if verdict.threshold_source else None,
        threshold_line=threshold_text(verdict),
        unresolved_points=verdict.unresolved_points,
        escalate=verdict.escalate,
        escalation_reasons=verdict.escalation_reasons,
    )


def review_out(session: Session, escalation: Escalation | None) -> ReviewOut | None:
    if escalation is None or escalation.id is None:
        return None
    decided = reviews.review_of(session, escalation_id=escalation.id)
    return ReviewOut(
        escalation_id=escalation.id,
        state=escalation.state.value,
        reviewer=decided.reviewer if decided is not None else None,
        note=decided.note if decided is not None else None,
    )


def stored_result(session: Session, *, debate_id: int) -> StoredResult | None:
    record = endings.verdict_for(session, debate_id=debate_id)
    return StoredResult.read(record.result_json) if record is not None else None


def debate_out(session: Session, *, debate_id: int) -> DebateOut:
    """Everything the page and `GET /api/debates/{id}` show of one debate;
    DebateNotFoundError when there is none."""
    debate = queue.get_debate(session, debate_id=debate_id)
    turns = turns_after(session, debate_id=debate_id)
    result = stored_result(session, debate_id=debate_id)
    spec_rounds = json.loads(debate.spec_json).get("max_rounds", 0)
    return DebateOut(
        id=debate_id,
        state=debate.state.value,
        source=debate.source.value,
        question=debate.question,
        protocol=debate.protocol,
        max_rounds=int(spec_rounds or 0),
        created_at=debate.created_at,
        finished_at=debate.finished_at,
        outcome=debate.outcome.value if debate.outcome is not None else None,
        decision=debate.decision.value if debate.decision is not None else None,
        cost_usd=round(sum(t.cost_usd for t in turns), 6),
        error=debate.error,
        turns=turns,
        verdict=verdict_out(result) if result is not None else None,
        review=review_out(session, reviews.escalation_for(session, debate_id=debate_id)),
    )


def debate_lines(session: Session, *, limit: int = LIST_LIMIT) -> list[DebateLine]:
    """The newest debates, each with its outcome and cost."""
    rows = session.exec(select(Debate).order_by(col(Debate.id).desc()).limit(limit))
    return [
        DebateLine(
            id=row.id or 0,
            state=row.state.value,
            question=row.question,
            protocol=row.protocol,
            outcome=row.outcome.value if row.outcome is not None else None,
            decision=row.decision.value if row.decision is not None else None,
            cost_usd=row.cost_usd,
            created_at=row.created_at,
        )
        for row in rows
    ]


def is_finished(session: Session, *, debate_id: int) -> bool:
    return queue.get_debate(session, debate_id=debate_id).state == DebateState.FINISHED


def round_views(result: DebateResult) -> list[RoundView]:
    """The rounds as the protocol's own view reads them (the same neutral views Slack's
    thread renders), for the page once the debate is decided."""
    records: list[RoundRecordBase] = list(result.rounds)
    return [
        definition_for(record.kind).view.round(record, result.spec.max_rounds) for record in records
    ]


def outcome_view(result: DebateResult) -> list[Block]:
    """The protocol's own outcome (a tally, scores, the panel's aggregation), as views."""
    return list(definition_for(result.spec.protocol).view.outcome(result))
