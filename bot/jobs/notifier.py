"""Follows a debate's run and owes its messages: each finished round, the parent's live status
as turns start, its Slack agent session's `processing` (with the "who is speaking" line in the
assistant pane), and the plan streamed into the thread as turns start, are written and end.
Replayed events owe nothing new, since every draft has a key (a replayed turn only rebuilds the
plan, which the next live event owes whole); the delivery loop (`bot.jobs.delivery`) sends
what is owed."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Engine

from bot.messages import owed, transcript
from bot.messages.plan import Plan
from bot.messages.sessions import SessionStatus, session
from bot.store import outbox
from bot.store.db import in_session
from bot.store.debate_tables import Debate, DebateSource
from bot.store.outbox import Draft
from bot.store.tenancy import EVERY_WORKSPACE
from engine.events import (
    DebateEvent,
    EventSink,
    RoundFinished,
    TurnFinished,
    TurnStarted,
    TurnStreaming,
)
from engine.models import DebateSpec
from engine.protocols.definition import TurnKey


@dataclass
class _Run:
    """One worker's run of one debate, as the notifier follows it."""

    debate: Debate
    spec: DebateSpec
    plan: Plan
    progress: tuple[str, str] | None = None
    session_owed: bool = False
    """Whether the run owed its session's `processing` (once: a debate outside the assistant
    pane shows no "who is speaking" line, so its status never changes while it runs)."""
    written_at: dict[TurnKey, float] = field(default_factory=dict)
    """When the plan was last owed for each turn's text being written (`time.monotonic`); a
    re-ask forgets it, so the new reply's first text is owed at once."""


WRITING_OWED_EVERY_S = 0.5
"""A turn's text being written is owed at most this often: a model streams tens of tokens a
second and the stream row holds only the newest plan anyway (appended at most once a second,
`DeliveryConfig.stream_interval_s`), so more writes would be store work nobody sees. The first
text of a turn, a re-ask and the turn's end are owed at once."""


class DebateNotifier:
    """Writes what a debate owes to its outbox and wakes the delivery loop."""

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

    async def owe(self, debate: Debate, drafts: Sequence[Draft]) -> None:
        """Write `drafts` to the debate's outbox and wake the delivery loop."""
        assert debate.id is not None
        debate_id = debate.id
        await in_session(
            self.engine,
            lambda s: outbox.owe(s, debate_id=debate_id, drafts=drafts, deadline_s=self.deadline_s),
            workspace=EVERY_WORKSPACE,
        )
        self.wake()

    def owes_messages(self, debate: Debate) -> bool:
        return owed.owes_messages(debate)

    def sink_for(self, debate: Debate, spec: DebateSpec) -> EventSink:
        """The event sink a worker runs this debate with: rounds and live status as owed rows."""
        assert debate.id is not None
        debate_id = debate.id
        run = _Run(debate=debate, spec=spec, plan=Plan(debate_id=debate.id, spec=spec))

        async def sink(event: DebateEvent) -> None:
            if not owed.has_thread(run.debate):
                return  # an agent's debate owes its review request only, at its ending
            if isinstance(event, TurnStarted):
                drafts = []
                progress = transcript.progress(event, run.spec)
                if progress != run.progress:
                    run.progress = progress
                    drafts.append(owed.status(run.debate, run.spec, *progress))
                    assistant = run.debate.source == DebateSource.ASSISTANT
                    if assistant or not run.session_owed:
                        run.session_owed = True
                        line = progress[1] if assistant else ""
                        drafts.append(session(debate_id, run.spec, SessionStatus.PROCESSING, line))
                if run.plan.started(event):
                    drafts.append(owed.stream(run.plan.live()))
                if drafts:
                    await self.owe(run.debate, drafts)
            elif isinstance(event, TurnStreaming):
                now = time.monotonic()
                if event.reasked:
                    run.written_at.pop(event.key, None)
                last = run.written_at.get(event.key)
                due = last is None or now - last >= WRITING_OWED_EVERY_S
                if run.plan.streaming(event) and due:
                    if not event.reasked:
                        run.written_at[event.key] = now
                    await self.owe(run.debate, [owed.stream(run.plan.live())])
            elif isinstance(event, TurnFinished):
                # A replayed turn only rebuilds the plan; the next live event owes it whole.
                if run.plan.finished(event.turn) and not event.replayed:
                    await self.owe(run.debate, [owed.stream(run.plan.live())])
            elif isinstance(event, RoundFinished):
                await self.owe(run.debate, owed.round_finished(event, run.spec))

        return sink
