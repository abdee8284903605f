"""The endings of a worker's debates, recorded in batches with the messages they owe.

Each batch is one transaction: the store records the verdicts, seals and escalations
(`bot.store.endings.record_endings`, not committed), the messages each ending owes are rendered
from the rows as stored (`bot.messages.owed.closing`: the seal, the escalation's id) and staged
in the same transaction, then it commits. So an escalating verdict never exists without its
review request, and the store never renders a message.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine
from sqlmodel import Session

from bot.messages import owed
from bot.store import endings, outbox
from bot.store.endings import Closed, Finish, Sealed
from bot.store.writer import GroupWriter


def record_batch(session: Session, batch: Sequence[Finish]) -> list[Sealed | Exception]:
    """Record `batch` and stage the messages each recorded ending owes; one commit."""
    recorded = endings.record_endings(session, finishes=batch)
    outcomes: list[Sealed | Exception] = []
    for finish, outcome in zip(batch, recorded, strict=True):
        if not isinstance(outcome, Closed):
            outcomes.append(outcome)
            continue
        if outcome.debate is not None:
            drafts = owed.closing(
                outcome.debate, finish.result, outcome.escalation, receipt=outcome.receipt
            )
            outbox.stage(session, debate=outcome.debate, drafts=drafts, owed=outcome.outbox)
        outcomes.append(outcome.sealed)
    session.commit()
    return outcomes


class FinishWriter(GroupWriter[Finish, Sealed]):
    """Records endings (verdict, seal, escalation, owed messages) of any number of debates."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine, record_batch)

    async def finish(self, finish: Finish) -> Sealed:
        """Record the ending; returns its seal. Raises LeaseLostError when the run no longer
        holds the debate."""
        return await self.submit(finish)
