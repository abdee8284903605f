"""Runs a debate: picks the protocol, validates the spec, runs it, emits the closing event."""

from __future__ import annotations

from collections.abc import Sequence

from engine.confidence import DEFAULT_WEIGHTS, ConfidenceWeights
from engine.events import (
    DebateFailed,
    DebateTruncated,
    EventSink,
    VerdictReached,
    discard_events,
)
from engine.ledger import HaltCheck, LLMResolver, TurnLedger
from engine.models import DebateResult, DebateSpec, DebateStatus, TurnRecord, Verdict, utcnow
from engine.prompts import PromptLibrary
from engine.protocols import checked_protocol
from engine.protocols.base import Ending, no_verdict
from engine.scoring import scored


async def run_debate(
    spec: DebateSpec,
    *,
    resolve_llm: LLMResolver,
    prompts: PromptLibrary,
    sink: EventSink = discard_events,
    recorded: Sequence[TurnRecord] = (),
    halt: HaltCheck | None = None,
    weights: ConfidenceWeights = DEFAULT_WEIGHTS,
) -> DebateResult:
    """Run `spec` with its protocol and emit the closing event (verdict, truncated or failed).

    Raises SpecError before any model call when the spec does not suit the protocol. Model
    failures do not raise: they end the debate as FAILED with the partial transcript, and so
    does a `halt` check that answers with a reason before a model call. Whatever the protocol,
    the verdict's confidence is then measured and scored with `weights` (`engine.scoring`: the
    spec's independent judges, citations, what was left unanswered, degenerate output).
    """
    protocol = checked_protocol(spec)
    ledger = TurnLedger(spec=spec, resolve_llm=resolve_llm, sink=sink, recorded=recorded, halt=halt)
    try:
        ran = await protocol.run(spec, ledger=ledger, prompts=prompts)
        result = await scored(
            ran, protocol=protocol, ledger=ledger, prompts=prompts, weights=weights
        )
    finally:
        # Judges started beside the deciding call stop with the run (stopped, or its worker
        # shutting down) rather than go on asking models for a debate nobody is running.
        if ledger.judging is not None and not ledger.judging.done():
            ledger.judging.cancel()
    if result.status is DebateStatus.COMPLETE:
        await ledger.emit(VerdictReached(result=result))
    elif result.status is DebateStatus.TRUNCATED_BUDGET:
        await ledger.emit(DebateTruncated(reason=result.error or "budget", result=result))
    else:
        await ledger.emit(DebateFailed(error=result.error or "unknown failure", result=result))
    return result


def ended_unrun(spec: DebateSpec, reason: str, recorded: Sequence[TurnRecord] = ()) -> DebateResult:
    """The result of a debate ended FAILED without running (further): its spec cannot run, or
    its runs kept stopping. No verdict (so it escalates, as any failed debate does), `reason` as
    its error, and the turns it had stored, so what they cost is recorded."""
    ending = Ending(status=DebateStatus.FAILED, error=reason)
    return _ended(spec, reason, recorded, no_verdict(spec, ending))


def ended_cancelled(
    spec: DebateSpec, reason: str, recorded: Sequence[TurnRecord] = ()
) -> DebateResult:
    """The result of a debate a person stopped: CANCELLED with the turns stored so far (what
    they cost stays counted) and no verdict. Not escalated: the person who stopped it has
    already decided it needs no verdict."""
    ending = Ending(status=DebateStatus.CANCELLED, error=reason)
    verdict = no_verdict(spec, ending).model_copy(
        update={"escalate": False, "escalation_reasons": []}
    )
    return _ended(spec, reason, recorded, verdict)


def _ended(
    spec: DebateSpec, reason: str, recorded: Sequence[TurnRecord], verdict: Verdict
) -> DebateResult:
    now = utcnow()
    return DebateResult(
        spec=spec,
        transcript=list(recorded),
        verdict=verdict,
        error=reason,
        started_at=now,
        finished_at=now,
    )
