"""Turns a debate's engine events into Slack messages, exactly once each.

Every message a debate owns (its parent or status message, each round, the verdict, the review
request, long material) is reserved in the `slack_post` ledger before it is posted and completed
with its ts after. A debate resumed by another worker, or replayed events, find the ts and update
or skip instead of posting again.

Slack failures never stop a debate: they are logged, and when the thread is still reachable, a
short notice there tells people what did not arrive and how to get the full record.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from bot.slack import blocks
from bot.slack.errors import PostError
from bot.slack.poster import SlackPoster
from bot.store import slack as store
from bot.store.db import in_session
from bot.store.tables import Debate
from engine.events import (
    DebateEvent,
    DebateFailed,
    DebateTruncated,
    EventSink,
    RoundFinished,
    TurnStarted,
    VerdictReached,
)
from engine.models import DebateResult, DebateSpec, Role

log = logging.getLogger(__name__)


@dataclass
class _Run:
    """One worker's run of one debate, as the notifier follows it."""

    debate: Debate
    spec: DebateSpec
    token: str
    started: bool = False
    progress: tuple[str, str] | None = None


R = TypeVar("R")

THREADED_SOURCES = ("adr", "reaction", "shortcut", "another_round")
# Messages the listener may be posting concurrently with a worker, so never taken over early.
LISTENER_KEYS = ("parent", "material")
UNREACHABLE = ("channel_not_found", "not_in_channel", "is_archived", "thread_not_found")


class DebateNotifier:
    """Posts a debate's parent, rounds, verdict and review request in its Slack thread."""

    def __init__(
        self, *, engine: Engine, poster: SlackPoster, owner: str, wait_for_peer_s: float = 15.0
    ) -> None:
        self.engine = engine
        self.poster = poster
        self.owner = owner
        self.wait_for_peer_s = wait_for_peer_s
        self._locks: defaultdict[tuple[int, str], asyncio.Lock] = defaultdict(asyncio.Lock)

    async def _db(self, work: Callable[[Session], R]) -> R:
        return await in_session(self.engine, work)

    async def post_once(
        self,
        debate: Debate,
        key: str,
        message: blocks.Message,
        *,
        thread_ts: str | None,
        run: str | None = None,
    ) -> str:
        """Post `message` as the debate's message `key` unless it was posted; returns its ts.

        `run` identifies a worker's run of the debate: it holds the lease, so a reservation left
        unfinished by anyone else (a worker that died mid-post) is taken over at once. The one
        case that can then post twice is a worker killed after Slack accepted its message but
        before the ts was stored: delivery is at least once, never silently lost.
        """
        assert debate.id is not None
        assert debate.channel_id is not None
        debate_id, channel = debate.id, debate.channel_id
        async with self._locks[(debate_id, key)]:
            row, mine = await self._db(
                lambda s: store.reserve_post(
                    s,
                    debate_id=debate_id,
                    key=key,
                    channel_id=channel,
                    owner=run or self.owner,
                    take_over=run is not None and not key.startswith(LISTENER_KEYS),
                )
            )
            assert row.id is not None
            post_id = row.id
            if not mine:
                return await self._wait_for_peer(debate_id, key, row.ts)
            try:
                ts = await self.poster.post(channel=channel, message=message, thread_ts=thread_ts)
            except PostError:
                await self._db(lambda s: store.release_post(s, post_id=post_id))
                raise
            await self._db(lambda s: store.complete_post(s, post_id=post_id, ts=ts))
            return ts

    async def _wait_for_peer(self, debate_id: int, key: str, ts: str | None) -> str:
        """Another process reserved this message; wait briefly for it to record the ts."""
        waited = 0.0
        while ts is None and waited < self.wait_for_peer_s:
            await asyncio.sleep(0.2)
            waited += 0.2
            row = await self._db(lambda s: store.post_for(s, debate_id=debate_id, key=key))
            ts = row.ts if row is not None else None
        if ts is None:
            raise PostError(
                f"message {key} of debate {debate_id} is being posted elsewhere", code="in_progress"
            )
        return ts

    def _parent(
        self,
        debate: Debate,
        spec: DebateSpec,
        status: str,
        detail: str = "",
        result: DebateResult | None = None,
    ) -> blocks.Message:
        assert debate.id is not None
        return blocks.parent_message(
            debate_id=debate.id,
            question=_full_question(spec),
            requested_by=debate.requested_by,
            protocol=spec.protocol,
            max_rounds=spec.max_rounds,
            status=status,
            detail=detail,
            verdict=result.verdict if result else None,
            cost_usd=result.cost_usd if result else None,
        )

    async def ensure_parent(self, debate: Debate) -> Debate:
        """Post the debate's parent (or in-thread status) message once; returns the debate with its
        thread. A `/debate` parent starts the thread; ADR, reaction and follow-up debates already
        have one and get a status message in it."""
        assert debate.id is not None
        debate_id = debate.id
        threaded = debate.source in THREADED_SOURCES
        spec = DebateSpec.model_validate_json(debate.spec_json)
        ts = await self.post_once(
            debate,
            "parent",
            self._parent(debate, spec, "queued"),
            thread_ts=debate.thread_ts if threaded else None,
        )
        if not threaded and debate.thread_ts != ts:
            debate = await self._db(
                lambda s: store.set_thread(s, debate_id=debate_id, thread_ts=ts)
            )
        full = _full_question(spec)
        if full != spec.question and debate.thread_ts is not None:
            for n, part in enumerate(blocks.material_messages("The full question", full)):
                await self.post_once(debate, f"material:{n}", part, thread_ts=debate.thread_ts)
        return debate

    async def _update_parent(self, debate: Debate, message: blocks.Message) -> None:
        assert debate.id is not None
        assert debate.channel_id is not None
        debate_id = debate.id
        row = await self._db(lambda s: store.post_for(s, debate_id=debate_id, key="parent"))
        if row is not None and row.ts is not None:
            await self.poster.update(channel=debate.channel_id, ts=row.ts, message=message)

    def sink_for(self, debate: Debate) -> EventSink:
        """The event sink a worker runs this debate with (one per run of the debate)."""
        run = _Run(
            debate=debate,
            spec=DebateSpec.model_validate_json(debate.spec_json),
            token=f"{self.owner}/run-{uuid.uuid4().hex[:12]}",
        )

        async def sink(event: DebateEvent) -> None:
            try:
                await self._handle(run, event)
            except PostError as error:
                await self._surface(run.debate, event, error)

        return sink

    async def _handle(self, run: _Run, event: DebateEvent) -> None:
        if not run.started:
            run.debate = await self.ensure_parent(run.debate)
            run.started = True
        debate, spec = run.debate, run.spec
        if isinstance(event, TurnStarted):
            progress = _progress(event, spec.max_rounds)
            if progress != run.progress:
                run.progress = progress
                await self._update_parent(debate, self._parent(debate, spec, *progress))
        elif isinstance(event, RoundFinished):
            number = event.record.round
            for n, part in enumerate(
                blocks.round_messages(event.record, max_rounds=spec.max_rounds)
            ):
                key = f"round:{number}" if n == 0 else f"round:{number}:{n}"
                await self.post_once(debate, key, part, thread_ts=debate.thread_ts, run=run.token)
        elif isinstance(event, VerdictReached | DebateTruncated | DebateFailed):
            await self.finish(debate, event.result, run=run.token)

    async def finish(self, debate: Debate, result: DebateResult, *, run: str | None = None) -> None:
        """Post the verdict, summarise it on the parent, and ask for review when needed."""
        assert debate.id is not None
        for n, part in enumerate(blocks.verdict_messages(result, debate_id=debate.id)):
            await self.post_once(
                debate,
                "verdict" if n == 0 else f"verdict:{n}",
                part,
                thread_ts=debate.thread_ts,
                run=run,
            )
        status = result.verdict.status.value
        await self._update_parent(debate, self._parent(debate, result.spec, status, result=result))
        if result.verdict.escalate:
            await self.escalate(debate, result, run=run)

    async def escalate(
        self, debate: Debate, result: DebateResult, *, run: str | None = None
    ) -> None:
        """Open the debate's escalation (once) and post the review request mentioning reviewers."""
        assert debate.id is not None
        assert debate.channel_id is not None
        debate_id, channel = debate.id, debate.channel_id
        settings = await self._db(lambda s: store.channel_settings(s, channel_id=channel))
        reasons = result.verdict.escalation_reasons or ["the verdict asks for a human decision"]
        escalation, _ = await self._db(
            lambda s: store.open_escalation(
                s, debate_id=debate_id, reasons=reasons, reviewers=list(settings.reviewers)
            )
        )
        assert escalation.id is not None
        escalation_id = escalation.id
        message = blocks.escalation_message(
            escalation_id=escalation_id,
            debate_id=debate_id,
            reasons=escalation.reasons,
            reviewers=escalation.reviewers,
            confidence=result.verdict.confidence,
        )
        ts = await self.post_once(
            debate, "escalation", message, thread_ts=debate.thread_ts, run=run
        )
        if escalation.message_ts != ts:
            await self._db(
                lambda s: store.set_escalation_message(s, escalation_id=escalation_id, ts=ts)
            )

    async def _surface(self, debate: Debate, event: DebateEvent, error: PostError) -> None:
        log.error("debate %s: Slack message for %s not delivered: %s", debate.id, event.kind, error)
        if error.code in UNREACHABLE or debate.thread_ts is None or debate.channel_id is None:
            return
        text = (
            f":warning: Part of debate #{debate.id} could not be posted here ({error.code})."
            f" The debate goes on and is recorded in full: `debatebot export {debate.id}`."
        )
        try:
            await self.poster.post(
                channel=debate.channel_id, message=blocks.notice(text), thread_ts=debate.thread_ts
            )
        except PostError as second:
            log.error("debate %s: could not tell the thread either: %s", debate.id, second)


def _full_question(spec: DebateSpec) -> str:
    """The question as the user wrote it: an overlong one travels as the first context document."""
    for doc in spec.context:
        if doc.title == LONG_QUESTION_TITLE:
            return doc.text
    return spec.question


LONG_QUESTION_TITLE = "The question as asked (full text)"


def _progress(event: TurnStarted, max_rounds: int) -> tuple[str, str]:
    if event.role is Role.FRAMING:
        return "running", "framing the question"
    if event.role is Role.MODERATOR:
        return "moderating", f"round {event.round} of {max_rounds}"
    return "running", f"round {event.round} of {max_rounds}"
