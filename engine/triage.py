"""Triage before a debate: one cheap call answers the question directly and estimates the task
type, its confidence and the downside of being wrong; `engine.gating.should_debate` then decides
whether a debate is warranted at all.

The call goes through the turn ledger like every other turn, so it is metered, stored in the
audit chain and replayed on resume. When no debate is warranted, `answered` turns the estimate
into the common `DebateResult` (a verdict that is not escalated, its reason in the report), so
the store, the audit seal and the export treat it like any other outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from engine.events import EventSink, discard_events
from engine.gating import GateDecision, GatingPolicy, should_debate
from engine.ledger import HaltCheck, LLMResolver, TurnLedger
from engine.models import (
    ConfidenceAdjustment,
    DebateResult,
    DebateSpec,
    DebateStatus,
    Decision,
    LongText,
    Role,
    ShortText,
    TurnRecord,
    Verdict,
    utcnow,
)
from engine.prompts import PromptLibrary
from engine.protocols.base import Asker, level_for

TRIAGE_ROUND = 0


class TriageEstimate(BaseModel):
    task_type: Literal[
        "architecture", "security", "compliance", "contract", "operations", "product", "other"
    ]
    answer: LongText
    decision: Decision
    confidence: float = Field(ge=0.0, le=1.0)
    downside: float = Field(ge=0.0, le=1.0)
    rationale: ShortText


class Triage(BaseModel):
    """The estimate, the gate's decision with its reason, and the turn it took."""

    estimate: TriageEstimate
    gate: GateDecision
    turn: TurnRecord


async def triage(
    spec: DebateSpec,
    *,
    resolve_llm: LLMResolver,
    prompts: PromptLibrary,
    sink: EventSink = discard_events,
    recorded: Sequence[TurnRecord] = (),
    halt: HaltCheck | None = None,
    policy: GatingPolicy | None = None,
) -> Triage:
    """Ask the triage model once (or replay its stored turn) and decide whether to debate.
    Model failures raise the engine's LLMError: the caller debates then, as if warranted."""
    ledger = TurnLedger(spec=spec, resolve_llm=resolve_llm, sink=sink, recorded=recorded, halt=halt)
    estimate = await Asker(spec=spec, ledger=ledger, prompts=prompts).ask(
        "triage/estimate.md",
        round=TRIAGE_ROUND,
        role=Role.TRIAGE,
        step="deciding whether this needs a debate",
        output_type=TriageEstimate,
    )
    gate = should_debate(estimate.task_type, estimate.confidence, estimate.downside, policy)
    return Triage(estimate=estimate, gate=gate, turn=ledger.transcript[-1])


def answered(spec: DebateSpec, outcome: Triage) -> DebateResult:
    """The single answer as the debate's result: not escalated (the gate found the stakes low
    or the answer sure), with the estimate and the gate's reason in the report."""
    estimate = outcome.estimate
    verdict = Verdict(
        status=DebateStatus.COMPLETE,
        decision=estimate.decision,
        synthesis=estimate.answer,
        confidence=estimate.confidence,
        level=level_for(estimate.confidence),
        confidence_method=[
            ConfidenceAdjustment(
                reason="single answer: the triage model's own confidence",
                delta=estimate.confidence,
            )
        ],
        escalate=False,
    )
    return DebateResult(
        spec=spec,
        transcript=[outcome.turn],
        verdict=verdict,
        report={
            "triage": {
                "debated": False,
                "reason": outcome.gate.reason,
                **estimate.model_dump(mode="json"),
            }
        },
        started_at=outcome.turn.created_at,
        finished_at=utcnow(),
    )


def debated(result: DebateResult, outcome: Triage) -> DebateResult:
    """A debate's result with the triage that let it happen: its turn first in the transcript
    (so the cost counts it) and the gate's reason in the report."""
    report = dict(result.report or {})
    report["triage"] = {
        "debated": True,
        "reason": outcome.gate.reason,
        **outcome.estimate.model_dump(mode="json"),
    }
    return result.model_copy(
        update={"transcript": [outcome.turn, *result.transcript], "report": report}
    )
