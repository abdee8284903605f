"""The Slack surface's store functions on SQLite and PostgreSQL: the message ledger, one review
per escalation, event ids seen once, forked debates with a valid chain, reminders."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy import Engine, update
from sqlmodel import Session

from bot.jobs.reminders import remind_reviewers
from bot.jobs.worker import DebateWorker
from bot.slack.notifier import DebateNotifier
from bot.store import repository
from bot.store import slack as slack_store
from bot.store.db import session_scope
from bot.store.tables import Escalation
from engine.models import DebateSpec, ModelSettings, utcnow
from tests.helpers import DebateScript, shipped_prompts

SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
)


def queued(engine: Engine, key: str = "k") -> int:
    with Session(engine) as session:
        debate, _ = repository.enqueue_debate(
            session, trigger_key=key, spec=SPEC, source="command", channel_id="C1"
        )
        assert debate.id is not None
        return debate.id


async def test_concurrent_reservations_of_one_message_let_one_poster_win(store: Engine) -> None:
    debate_id = queued(store)

    def reserve(owner: str) -> bool:
        with session_scope(store) as session:
            _, mine = store_reserve(session, debate_id, owner)
            return mine

    winners = await asyncio.gather(*(asyncio.to_thread(reserve, f"p{i}") for i in range(8)))

    assert sum(winners) == 1


def store_reserve(session: Session, debate_id: int, owner: str, **kwargs: object):  # type: ignore[no-untyped-def]
    return slack_store.reserve_post(
        session, debate_id=debate_id, key="round:1", channel_id="C1", owner=owner, **kwargs
    )


def test_an_unfinished_reservation_is_taken_over_only_when_stale_or_by_the_lease_holder(
    store: Engine,
) -> None:
    debate_id = queued(store)
    with session_scope(store) as session:
        row, mine = store_reserve(session, debate_id, "dead-worker")
        assert mine
        assert not store_reserve(session, debate_id, "other")[1]
        assert store_reserve(session, debate_id, "lease-holder", take_over=True)[1]
        assert not store_reserve(session, debate_id, "late", stale_after_s=60)[1]
        assert store_reserve(session, debate_id, "late", stale_after_s=0)[1]
        slack_store.complete_post(session, post_id=row.id, ts="1.1")
        assert not store_reserve(session, debate_id, "anyone", take_over=True)[1]
        assert slack_store.post_for(session, debate_id=debate_id, key="round:1").ts == "1.1"


def test_one_review_per_escalation_and_event_ids_seen_once(store: Engine) -> None:
    debate_id = queued(store)
    with session_scope(store) as session:
        escalation, created = slack_store.open_escalation(
            session, debate_id=debate_id, reasons=["low"], reviewers=["U1"]
        )
        assert created
        _, again_created = slack_store.open_escalation(
            session, debate_id=debate_id, reasons=[], reviewers=[]
        )
        assert not again_created
        _, made = slack_store.record_review(
            session, escalation_id=escalation.id, reviewer="U1", decision="approved", note="ok"
        )
        again, made_again = slack_store.record_review(
            session, escalation_id=escalation.id, reviewer="U2", decision="rejected", note="no"
        )
        assert (made, made_again) == (True, False)
        assert (again.reviewer, again.decision) == ("U1", "approved")
        assert slack_store.get_escalation(session, escalation_id=escalation.id).state == "approved"
        assert slack_store.mark_processed(session, key="event:Ev1")
        assert not slack_store.mark_processed(session, key="event:Ev1")


async def test_a_fork_carries_turns_on_a_valid_chain_and_shares_thread_messages(
    store: Engine,
) -> None:
    debate_id = queued(store)
    worker = DebateWorker(
        engine=store, resolve_llm=lambda _m: DebateScript().llm(), prompts=shipped_prompts()
    )
    assert await worker.run_once()
    with session_scope(store) as session:
        for key in ("parent", "round:1", "verdict"):
            row, _ = slack_store.reserve_post(
                session, debate_id=debate_id, key=key, channel_id="C1", owner="w"
            )
            slack_store.complete_post(session, post_id=row.id, ts=f"ts-{key}")
        more = SPEC.model_copy(update={"max_rounds": 2, "min_rounds": 2})
        fork, created = slack_store.fork_debate(
            session, debate_id=debate_id, trigger_key="another_round:1", spec=more
        )
        assert created
        assert not slack_store.fork_debate(
            session, debate_id=debate_id, trigger_key="another_round:1", spec=more
        )[1]
        assert fork.parent_debate_id == debate_id
        assert len(repository.turn_rows(session, debate_id=fork.id)) == 5
        assert repository.verify_chain(session, debate_id=fork.id).ok
        assert slack_store.post_for(session, debate_id=fork.id, key="round:1").ts == "ts-round:1"
        assert slack_store.post_for(session, debate_id=fork.id, key="verdict") is None


class RecordingPoster:
    def __init__(self) -> None:
        self.posts: list[tuple[str, str]] = []

    async def post(self, *, channel: str, message: object, thread_ts: str | None = None) -> str:
        self.posts.append((channel, str(thread_ts)))
        return f"ts{len(self.posts)}"


async def test_reminders_post_once_per_period_however_many_replicas_fire(store: Engine) -> None:
    debate_id = queued(store)
    with session_scope(store) as session:
        slack_store.set_thread(session, debate_id=debate_id, thread_ts="100.1")
        escalation, _ = slack_store.open_escalation(
            session, debate_id=debate_id, reasons=["low"], reviewers=["U1"]
        )
        session.execute(
            update(Escalation)
            .where(Escalation.id == escalation.id)
            .values(created_at=utcnow() - timedelta(hours=2.5))
        )
        session.commit()
    poster = RecordingPoster()
    replicas = [
        DebateNotifier(engine=store, poster=poster, owner=f"replica{i}")  # type: ignore[arg-type]
        for i in range(3)
    ]

    due = await asyncio.gather(
        *(remind_reviewers(engine=store, notifier=r, period_s=3600) for r in replicas)
    )

    assert due == [1, 1, 1]
    assert poster.posts == [("C1", "100.1")]
