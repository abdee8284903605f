"""Turns a debate's life into the Slack messages it owes, as outbox rows.

Nothing here calls Slack. A new debate owes its parent (and, for a long question, the full text);
each round owes one threaded message; each turn refreshes the parent's live status; the ending
owes the verdict, the parent's summary and, when the verdict escalates, the review request. The
rows are written with the state that creates them (`enqueue_debate`, `finish_debates`,
`record_review`) or, for rounds and status, as the engine reports them; replayed events owe
nothing new, since every message has a key. `bot.jobs.delivery` sends them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from typing import TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from bot.messages import kit, posts, transcript
from bot.store import outbox
from bot.store.db import in_session
from bot.store.outbox import PARENT, PARENT_UPDATE, REVIEW, Draft
from bot.store.tables import (
    Debate,
    Escalation,
    OutboxAction,
    OutboxFallback,
    OutboxTarget,
    Review,
)
from engine.events import DebateEvent, EventSink, RoundFinished, TurnStarted
from engine.models import DebateResult, DebateSpec

log = logging.getLogger(__name__)
R = TypeVar("R")

THREADED_SOURCES = (
    "adr",
    "upload",
    "link",
    "reaction",
    "shortcut",
    "another_round",
    "debate_anyway",
    "assistant",
)
ANSWER = "answer"
ASSISTANT_STATUS = "status:assistant"
"""The assistant thread's status line, sent with `assistant.threads.setStatus`."""


@dataclass
class _Run:
    """One worker's run of one debate, as the notifier follows it."""

    debate: Debate
    spec: DebateSpec
    progress: tuple[str, str] | None = None


class DebateNotifier:
    """Renders the messages a debate owes and writes them to its outbox."""

    def __init__(
        self,
        *,
        engine: Engine,
        deadline_s: float = outbox.DEFAULT_DEADLINE_S,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.engine = engine
        self.deadline_s = deadline_s
        self.wake = wake

    async def _db(self, work: Callable[[Session], R]) -> R:
        return await in_session(self.engine, work)

    async def owe(self, debate: Debate, drafts: list[Draft]) -> None:
        """Write `drafts` to the debate's outbox and wake the delivery loop."""
        assert debate.id is not None
        debate_id = debate.id
        await self._db(
            lambda s: outbox.owe(s, debate_id=debate_id, drafts=drafts, deadline_s=self.deadline_s)
        )
        self.wake()

    # --- what each moment owes -------------------------------------------------------------

    def opening(self, debate: Debate) -> list[Draft]:
        """A new debate's parent (a top-level message that starts the thread, or a status
        message in the thread it was asked from) and, for a long question, its full text."""
        spec = DebateSpec.model_validate_json(debate.spec_json)
        parent = self._parent(debate, spec, "queued")
        threaded = debate.source in THREADED_SOURCES
        drafts = [
            _draft(PARENT, parent, target=OutboxTarget.THREAD if threaded else OutboxTarget.CHANNEL)
        ]
        full = spec.full_question
        if full != spec.question:
            for n, part in enumerate(posts.material_messages("The full question", full)):
                drafts.append(_draft(f"material:{n}", part))
        return drafts

    def status(self, debate: Debate, spec: DebateSpec, status: str, detail: str) -> Draft:
        """The parent's live status, as a coalesced update (only the newest one is sent)."""
        message = self._parent(debate, spec, status, detail)
        return _draft(PARENT_UPDATE, message, action=OutboxAction.UPDATE, target_key=PARENT)

    def round(self, event: RoundFinished, spec: DebateSpec) -> list[Draft]:
        """A round's (or phase's) message, keyed by its slot so a replay owes nothing new."""
        slot = event.record.slot
        return [
            _draft(f"round:{slot}" if n == 0 else f"round:{slot}:{n}", part)
            for n, part in enumerate(
                transcript.round_messages(event.record, max_rounds=spec.max_rounds)
            )
        ]

    def closing(
        self, debate: Debate, result: DebateResult, escalation: Escalation | None
    ) -> list[Draft]:
        """What the end of a debate owes: the verdict, the parent's summary, and the review
        request when the verdict escalates (by DM when the thread cannot be reached)."""
        assert debate.id is not None
        if not self.owes_messages(debate):
            return []
        if not ((result.report or {}).get("triage") or {}).get("debated", True):
            answer = posts.answer_message(result, debate_id=debate.id)
            summary = self._parent(debate, result.spec, "complete", result=result)
            return [
                _draft(ANSWER, answer),
                _draft(PARENT_UPDATE, summary, action=OutboxAction.UPDATE, target_key=PARENT),
            ]
        drafts = [
            _draft("verdict" if n == 0 else f"verdict:{n}", part)
            for n, part in enumerate(
                posts.verdict_messages(
                    result,
                    debate_id=debate.id,
                    seal=debate.chain_head,
                    outcome=transcript.outcome_sections(result),
                )
            )
        ]
        status = result.verdict.status.value
        summary = self._parent(debate, result.spec, status, result=result)
        drafts.append(_draft(PARENT_UPDATE, summary, action=OutboxAction.UPDATE, target_key=PARENT))
        if debate.source == "assistant":
            drafts.append(assistant_status(""))
        if escalation is not None:
            assert escalation.id is not None
            request = posts.escalation_message(
                escalation_id=escalation.id,
                debate_id=debate.id,
                reasons=escalation.reasons,
                reviewers=escalation.reviewers,
                confidence=result.verdict.confidence,
                another_round=result.spec.protocol == "adversarial",
                question=result.spec.full_question if debate.review_channel_id else None,
                synthesis=result.verdict.synthesis,
            )
            drafts.append(
                _draft(
                    REVIEW,
                    request,
                    fallback=OutboxFallback.REVIEWERS,
                    recipients=escalation.reviewers,
                    target=OutboxTarget.CHANNEL
                    if debate.review_channel_id
                    else OutboxTarget.THREAD,
                    channel=debate.review_channel_id,
                )
            )
        return drafts

    def answer_taken(self, debate: Debate, result: DebateResult, taken: str) -> Draft:
        """The single answer shown with who started the debate anyway, instead of the button."""
        assert debate.id is not None
        message = posts.answer_message(result, debate_id=debate.id, taken=taken)
        return _draft(f"update:{ANSWER}", message, action=OutboxAction.UPDATE, target_key=ANSWER)

    def decided(self, escalation: Escalation, review: Review, debate: Debate) -> list[Draft]:
        """The review request shown decided: who, what, when, the note; no buttons."""
        message = posts.escalation_decided_message(
            debate_id=debate.id or 0,
            reasons=escalation.reasons,
            decision=review.decision,
            reviewer=review.reviewer,
            note=review.note,
            decided_at=review.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )
        return [_draft(f"update:{REVIEW}", message, action=OutboxAction.UPDATE, target_key=REVIEW)]

    def reminder(self, escalation: Escalation, debate: Debate, periods: int, age_h: float) -> Draft:
        who = " ".join(kit.mention(p) for p in escalation.reviewers)
        text = (
            f":bell: Debate #{debate.id} has waited {age_h:.1f} h for a review."
            f" {who or 'A workspace admin'} can decide with the buttons on the review request."
        )
        return _draft(
            f"reminder:{periods}",
            posts.notice(text),
            fallback=OutboxFallback.REVIEWERS,
            recipients=escalation.reviewers,
        )

    def expired(
        self, escalation: Escalation, debate: Debate, owners: list[str], sla_h: float
    ) -> list[Draft]:
        """A review past its SLA: said in the thread (by DM to the reviewers when the thread is
        gone), and sent to the channel's owners."""
        reviewers = " ".join(kit.mention(p) for p in escalation.reviewers) or "No reviewer"
        text = (
            f":hourglass: The review of debate #{debate.id} expired: nobody decided it within"
            f" {sla_h:g} h. The verdict stands unreviewed; {reviewers} can still decide it with"
            " the buttons on the review request."
        )
        announce = posts.notice(text)
        drafts = [
            _draft(
                "expired",
                announce,
                fallback=OutboxFallback.REVIEWERS,
                recipients=escalation.reviewers,
            )
        ]
        if owners:
            link = f"<#{debate.channel_id}>" if debate.channel_id else "its channel"
            note = posts.notice(f"{text}\nYou get this as an owner of {link}'s debate settings.")
            drafts.append(_draft("expired:owners", note, target=OutboxTarget.DM, recipients=owners))
        return drafts

    def _parent(
        self,
        debate: Debate,
        spec: DebateSpec,
        status: str,
        detail: str = "",
        result: DebateResult | None = None,
    ) -> kit.Message:
        assert debate.id is not None
        return posts.parent_message(
            debate_id=debate.id,
            question=spec.full_question,
            requested_by=debate.requested_by,
            protocol=spec.protocol,
            max_rounds=spec.max_rounds,
            status=status,
            detail=detail,
            verdict=result.verdict if result else None,
            cost_usd=result.cost_usd if result else None,
        )

    # --- following a run -----------------------------------------------------------------------

    def owes_messages(self, debate: Debate) -> bool:
        """Only a debate with a channel has a thread to post to; the CLI's have none."""
        return debate.channel_id is not None

    def sink_for(self, debate: Debate, spec: DebateSpec) -> EventSink:
        """The event sink a worker runs this debate with: rounds and live status as owed rows."""
        run = _Run(debate=debate, spec=spec)

        async def sink(event: DebateEvent) -> None:
            if not self.owes_messages(run.debate):
                return
            if isinstance(event, TurnStarted):
                progress = transcript.progress(event, run.spec)
                if progress != run.progress:
                    run.progress = progress
                    drafts = [self.status(run.debate, run.spec, *progress)]
                    if run.debate.source == "assistant":
                        drafts.append(assistant_status(progress[1]))
                    await self.owe(run.debate, drafts)
            elif isinstance(event, RoundFinished):
                await self.owe(run.debate, self.round(event, run.spec))

        return sink


def assistant_status(text: str) -> Draft:
    """The assistant thread's status: who is speaking, or "" to clear it at the end."""
    return Draft(
        key=ASSISTANT_STATUS, text=text, blocks=[], action=OutboxAction.UPDATE, target_key=PARENT
    )


def _draft(
    key: str,
    message: kit.Message,
    *,
    target: OutboxTarget = OutboxTarget.THREAD,
    action: OutboxAction = OutboxAction.POST,
    target_key: str | None = None,
    fallback: OutboxFallback = OutboxFallback.NONE,
    recipients: list[str] | None = None,
    channel: str | None = None,
) -> Draft:
    return Draft(
        key=key,
        text=message.text,
        blocks=message.blocks,
        target=target,
        action=action,
        target_key=target_key,
        fallback=fallback,
        recipients=tuple(recipients or ()),
        channel=channel,
    )
