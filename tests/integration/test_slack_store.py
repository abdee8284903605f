"""The Slack surface's store functions on SQLite and PostgreSQL: the outbox (one claimer per
message, order, coalesced updates, expiring claims, size splits, halts), the ending written with
its escalation and review request in one transaction, one review per escalation, event ids seen
once, forked debates with a valid chain, reminders owed once."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy import Engine, event, update
from sqlmodel import Session, col, select

from bot.jobs.notifier import DebateNotifier
from bot.jobs.reminders import remind_reviewers
from bot.jobs.worker import DebateWorker
from bot.store import (
    channels,
    dedupe,
    endings,
    outbox,
    outbox_claims,
    outbox_deliveries,
    post_doubt,
    queue,
    reviews,
    turns,
    verify,
)
from bot.store.channel_tables import ChannelSettings
from bot.store.db import session_scope
from bot.store.debate_tables import DebateSource
from bot.store.errors import InFlightLimitError
from bot.store.outbox import Draft
from bot.store.outbox_tables import Outbox, OutboxAction, OutboxTarget
from bot.store.review_tables import Escalation, EscalationState
from bot.store.tenancy import PENDING_WORKSPACE
from engine.models import DebateSpec, ModelSettings, utcnow
from tests.helpers import DebateScript, reply_for, shipped_prompts

SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
)


def queued(engine: Engine, key: str = "k", drafts: list[Draft] | None = None) -> int:
    """A queued debate and, in the same unit of work, the messages it owes (as the intake
    stages them)."""
    with Session(engine) as session:
        debate, created = queue.add_debate(
            session,
            new=queue.NewDebate(
                trigger_key=key,
                spec=SPEC,
                source=DebateSource.COMMAND,
                channel_id="C1",
                reviewers_channel_id="C1",
                requested_by="UALICE",
            ),
        )
        if created and drafts:
            outbox.stage(session, debate=debate, drafts=drafts)
        session.commit()
        assert debate.id is not None
        return debate.id


def notifying_worker(engine: Engine, script: DebateScript | None = None) -> DebateWorker:
    """A worker on `script` (the canned debate by default) that tells Slack through the outbox."""
    return DebateWorker(
        engine=engine,
        resolve_llm=lambda _m: (script or DebateScript()).llm(),
        prompts=shipped_prompts(),
        reporter=DebateNotifier(engine=engine),
    )


def post(key: str, target: str = "thread") -> Draft:
    return Draft(key=key, text=key, blocks=[], target=OutboxTarget(target))


def claim(session: Session, debate_id: int, owner: str) -> tuple[Outbox, int]:
    """Claim the debate's head post, which the test expects due: the row and its id."""
    claimed = outbox_claims.claim_head(session, debate_id=debate_id, owner=owner, claim_s=30)
    assert claimed is not None
    row, _ = claimed
    assert row.id is not None
    return row, row.id


def test_a_queued_debate_is_written_with_the_messages_it_owes(store: Engine) -> None:
    debate_id = queued(store, drafts=[post("parent", "channel"), post("material:0")])
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        again, created = queue.enqueue_debate(
            session,
            new=queue.NewDebate(
                trigger_key="k", spec=SPEC, source=DebateSource.COMMAND, channel_id="C1"
            ),
        )
        assert (again.id, created) == (debate_id, False)
        rows = outbox.rows_of(session, debate_id=debate_id)
    assert [(r.key, r.seq, r.state, r.channel_id) for r in rows] == [
        ("parent", 1, "pending", "C1"),
        ("material:0", 2, "pending", "C1"),
    ]


async def test_concurrent_claims_of_one_message_let_one_sender_win(store: Engine) -> None:
    debate_id = queued(store, drafts=[post("parent", "channel")])

    def claim(owner: str) -> bool:
        with session_scope(store, workspace=PENDING_WORKSPACE) as session:
            return (
                outbox_claims.claim_head(session, debate_id=debate_id, owner=owner, claim_s=30)
                is not None
            )

    winners = await asyncio.gather(*(asyncio.to_thread(claim, f"p{i}") for i in range(8)))

    assert sum(winners) == 1


def test_posts_go_in_order_and_a_later_one_waits_behind_a_retry(store: Engine) -> None:
    debate_id = queued(store, drafts=[post("parent", "channel"), post("round:1")])
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        row, row_id = claim(session, debate_id, "a")
        assert row.key == "parent"
        assert outbox_claims.claim_head(session, debate_id=debate_id, owner="b", claim_s=30) is None
        outbox_deliveries.mark_retry(
            session, row_id=row_id, owner="a", error="http_500", delay_s=60
        )
        # The parent waits out its backoff; round 1 may not overtake it.
        assert outbox_claims.claim_head(session, debate_id=debate_id, owner="b", claim_s=30) is None
        assert outbox_claims.pull_in_retries(session) == 1
        row, row_id = claim(session, debate_id, "b")
        assert (row.key, row.attempts) == ("parent", 1)
        assert (
            outbox_deliveries.mark_sent(
                session, row_id=row_id, owner="a", version=1, deliveries=[], delivered_to="x"
            )
            is None
        ), "only the claimer may record the delivery"
        outbox_deliveries.mark_sent(
            session,
            row_id=row_id,
            owner="b",
            version=row.version,
            deliveries=[["C1", "100.1"]],
            delivered_to="channel",
        )
        # A top-level parent starts the debate's thread.
        assert queue.get_debate(session, debate_id=debate_id).thread_ts == "100.1"
        row, _ = claim(session, debate_id, "b")
        assert row.key == "round:1"


def test_an_expired_claim_is_taken_over_and_a_deadline_gives_up(store: Engine) -> None:
    debate_id = queued(store, drafts=[post("parent", "channel")])
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        row, row_id = claim(session, debate_id, "dead")
        assert (
            outbox_claims.claim_head(session, debate_id=debate_id, owner="next", claim_s=30) is None
        )
        session.execute(
            update(Outbox).where(col(Outbox.id) == row_id).values(claimed_until=utcnow())
        )
        session.commit()
        row, row_id = claim(session, debate_id, "next")
        assert row.claimed_by == "next"
        session.execute(update(Outbox).where(col(Outbox.id) == row_id).values(deadline_at=utcnow()))
        session.commit()
        given_up = outbox_deliveries.mark_retry(
            session, row_id=row_id, owner="next", error="timeout", delay_s=1
        )
        assert given_up is not None
        assert given_up.state == "failed"


def test_status_updates_are_coalesced_and_a_newer_one_is_sent_after_an_older(
    store: Engine,
) -> None:
    debate_id = queued(store, drafts=[post("parent", "channel")])
    status = Draft(
        key="update:parent",
        text="round 1",
        blocks=[],
        action=OutboxAction.UPDATE,
        target_key="parent",
    )
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        outbox.owe(session, debate_id=debate_id, drafts=[status])
        [(row, target)] = outbox_claims.claim_updates(
            session, debate_id=debate_id, owner="a", claim_s=30
        )
        assert row.id is not None
        assert target is not None
        assert (row.text, target.key) == ("round 1", "parent")
        # While "round 1" is being sent, "round 2" replaces it.
        newer = Draft(
            key="update:parent",
            text="round 2",
            blocks=[],
            action=OutboxAction.UPDATE,
            target_key="parent",
        )
        outbox.owe(session, debate_id=debate_id, drafts=[newer])
        outbox_deliveries.mark_sent(
            session, row_id=row.id, owner="a", version=1, deliveries=[], delivered_to="updated"
        )
        [(row, _)] = outbox_claims.claim_updates(
            session, debate_id=debate_id, owner="a", claim_s=30
        )
        assert (row.text, row.version) == ("round 2", 2)
        rows = [r for r in outbox.rows_of(session, debate_id=debate_id) if r.action == "update"]
        assert len(rows) == 1


def test_a_refused_size_is_replaced_by_its_parts_in_place(store: Engine) -> None:
    debate_id = queued(store, drafts=[post("parent", "channel"), post("verdict"), post("review")])
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        _, first_id = claim(session, debate_id, "a")
        outbox_deliveries.mark_sent(
            session,
            row_id=first_id,
            owner="a",
            version=1,
            deliveries=[["C1", "1.1"]],
            delivered_to="channel",
        )
        _, verdict_id = claim(session, debate_id, "a")
        parts = [Draft(key="", text=f"part {n}", blocks=[]) for n in (1, 2)]
        outbox_deliveries.split(
            session, row_id=verdict_id, owner="a", error="msg_blocks_too_long", parts=parts
        )
        keys = []
        while claimed := outbox_claims.claim_head(
            session, debate_id=debate_id, owner="a", claim_s=30
        ):
            row, _ = claimed
            assert row.id is not None
            keys.append(row.key)
            outbox_deliveries.mark_sent(
                session,
                row_id=row.id,
                owner="a",
                version=1,
                deliveries=[["C1", f"2.{len(keys)}"]],
                delivered_to="thread",
            )
        assert keys == ["verdict~1", "verdict~2", "review"]


def test_a_halt_is_recorded_once_with_its_notice(store: Engine) -> None:
    debate_id = queued(store)
    dm = Draft(
        key="dm:halted", text="stopped", blocks=[], target=OutboxTarget.DM, recipients=("UALICE",)
    )
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        assert outbox_deliveries.halt(
            session, debate_id=debate_id, reason="not_in_channel", notices=[dm]
        )
        assert not outbox_deliveries.halt(
            session, debate_id=debate_id, reason="again", notices=[dm]
        )
        assert queue.get_debate(session, debate_id=debate_id).halt_reason == "not_in_channel"
        [row] = outbox.rows_of(session, debate_id=debate_id)
        assert (row.key, row.target, row.recipients) == ("dm:halted", "dm", ["UALICE"])


async def test_an_escalating_ending_is_stored_with_its_escalation_and_review_request(
    store: Engine,
) -> None:
    debate_id = queued(store)
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id="C1", updated_by="UADMIN", values={"reviewers": ["UREV"]}
        )
    worker = notifying_worker(store)
    assert await worker.run_once()
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        verdict = endings.verdict_for(session, debate_id=debate_id)
        escalation = reviews.escalation_for(session, debate_id=debate_id)
        rows = {r.key: r for r in outbox.rows_of(session, debate_id=debate_id)}
    assert verdict is not None
    assert escalation is not None
    assert verdict.escalate
    assert escalation.reviewers == ["UREV"]
    assert escalation.created_at >= verdict.created_at - timedelta(seconds=1)
    review = rows["review"]
    assert (review.fallback, review.recipients) == ("reviewers", ["UREV"])
    assert str(escalation.id) in str(review.blocks)
    assert {"round:1", "verdict", "update:parent", "review"} <= set(rows)


async def test_a_confident_ending_owes_no_review_request(store: Engine) -> None:
    debate_id = queued(store)
    sure = reply_for("moderator", confidence_level="HIGH", unresolved_points=[], decision="accept")
    worker = notifying_worker(store, DebateScript(moderator=[sure]))
    assert await worker.run_once()
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        assert reviews.escalation_for(session, debate_id=debate_id) is None
        assert outbox.row_for(session, debate_id=debate_id, key="review") is None
        assert outbox.row_for(session, debate_id=debate_id, key="verdict") is not None


async def test_a_debate_without_a_thread_ends_escalated_with_no_outbox_work(store: Engine) -> None:
    with Session(store) as session:
        debate, _ = queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key="cli", spec=SPEC, source=DebateSource.CLI)
        )
    assert debate.id is not None
    statements: list[str] = []
    event.listen(
        store, "before_cursor_execute", lambda *args: statements.append(args[2].split("\n")[0])
    )
    worker = notifying_worker(store)
    assert await worker.run_once()
    assert not any("outbox" in statement for statement in statements), statements
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        verdict = endings.verdict_for(session, debate_id=debate.id)
        assert verdict is not None
        assert verdict.escalate
        assert reviews.escalation_for(session, debate_id=debate.id) is not None
        assert outbox.rows_of(session, debate_id=debate.id) == []


def test_one_review_per_escalation_and_event_ids_seen_once(store: Engine) -> None:
    debate_id = queued(store)
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        escalation = Escalation(debate_id=debate_id, reasons=["low"], reviewers=["U1"])
        session.add(escalation)
        session.commit()
        session.refresh(escalation)
        assert escalation.id is not None
        _, made = reviews.record_review(
            session,
            escalation_id=escalation.id,
            reviewer="U1",
            decision=EscalationState.APPROVED,
            note="ok",
        )
        again, made_again = reviews.record_review(
            session,
            escalation_id=escalation.id,
            reviewer="U2",
            decision=EscalationState.REJECTED,
            note="no",
        )
        assert (made, made_again) == (True, False)
        assert (again.reviewer, again.decision) == ("U1", "approved")
        reviewed = reviews.get_escalation(session, escalation_id=escalation.id)
        assert reviewed is not None
        assert reviewed.state == "approved"
        assert dedupe.mark_processed(session, key="event:Ev1")
        assert not dedupe.mark_processed(session, key="event:Ev1")


def test_a_second_click_within_the_window_opens_nothing(store: Engine) -> None:
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        assert dedupe.open_window(session, key="note-form:1:U1", window_s=10)
        assert not dedupe.open_window(session, key="note-form:1:U1", window_s=10)
        assert dedupe.open_window(session, key="note-form:1:U2", window_s=10)
        assert dedupe.open_window(session, key="note-form:1:U1", window_s=0)


async def test_a_fork_carries_turns_on_a_valid_chain_and_shares_thread_messages(
    store: Engine,
) -> None:
    debate_id = queued(store, drafts=[post("parent", "channel")])
    worker = notifying_worker(store)
    assert await worker.run_once()
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        while claimed := outbox_claims.claim_head(
            session, debate_id=debate_id, owner="w", claim_s=30
        ):
            row, _ = claimed
            assert row.id is not None
            outbox_deliveries.mark_sent(
                session,
                row_id=row.id,
                owner="w",
                version=row.version,
                deliveries=[["C1", f"ts-{row.key}"]],
                delivered_to="thread",
            )
        more = SPEC.model_copy(update={"max_rounds": 2, "min_rounds": 2})
        new = queue.NewDebate(
            trigger_key="another_round:1",
            spec=more,
            source=DebateSource.ANOTHER_ROUND,
            channel_id="C1",
            parent_debate_id=debate_id,
        )
        fork, created = queue.fork_debate(session, new=new, original_id=debate_id)
        assert created
        assert not queue.fork_debate(session, new=new, original_id=debate_id)[1]
        assert fork.parent_debate_id == debate_id
        assert fork.id is not None
        # The original's six turns: the framing, one round, the independent judge.
        assert len(turns.turn_rows(session, debate_id=fork.id)) == 6
        assert verify.verify_chain(session, debate_id=fork.id).ok
        round_1 = outbox.row_for(session, debate_id=fork.id, key="round:1")
        parent = outbox.row_for(session, debate_id=fork.id, key="parent")
        assert round_1 is not None
        assert parent is not None
        assert round_1.ts == "ts-round:1"
        assert parent.ts == "ts-parent"
        assert outbox.row_for(session, debate_id=fork.id, key="verdict") is None


async def test_reminders_are_owed_once_per_period_however_many_replicas_fire(
    store: Engine,
) -> None:
    debate_id = queued(store)
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        session.add(ChannelSettings(channel_id="C1", reviewers=["U1"]))
        session.add(
            Escalation(
                debate_id=debate_id,
                reasons=["low"],
                reviewers=["U1"],
                created_at=utcnow() - timedelta(hours=2.5),
            )
        )
        session.commit()
    replicas = [DebateNotifier(engine=store) for _ in range(3)]

    due = await asyncio.gather(
        *(remind_reviewers(engine=store, notifier=r, period_s=3600) for r in replicas)
    )

    assert due == [1, 1, 1]
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        rows = session.exec(select(Outbox).where(Outbox.debate_id == debate_id)).all()
    assert [(r.key, r.fallback, r.recipients) for r in rows] == [
        ("reminder:2", "reviewers", ["U1"])
    ]


async def test_concurrent_requests_never_pass_the_in_flight_limits(store: Engine) -> None:
    limits = queue.InFlightLimits(per_user=3, per_channel=5)

    def request(n: int) -> str:
        with session_scope(store, workspace=PENDING_WORKSPACE) as session:
            try:
                queue.enqueue_debate(
                    session,
                    new=queue.NewDebate(
                        trigger_key=f"burst:{n}",
                        spec=SPEC,
                        source=DebateSource.COMMAND,
                        channel_id="C1",
                        requested_by=requester(n),
                    ),
                    limits=limits,
                )
            except InFlightLimitError as error:
                return error.scope
            return "queued"

    def requester(n: int) -> str:
        return "UGREEDY" if n < 8 else f"U{n}"

    outcomes = await asyncio.gather(*(asyncio.to_thread(request, n) for n in range(12)))

    assert outcomes[:8].count("queued") == 3
    assert set(outcomes[:8]) == {"queued", "user"}
    assert outcomes.count("queued") == 5, "the channel's limit holds too"
    first = outcomes.index("queued")
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        _, created = queue.enqueue_debate(
            session,
            new=queue.NewDebate(
                trigger_key=f"burst:{first}",
                spec=SPEC,
                source=DebateSource.COMMAND,
                channel_id="C1",
                requested_by=requester(first),
            ),
            limits=limits,
        )
    assert not created, "a retried request finds its debate instead of being refused"


def test_a_post_in_doubt_stays_marked_across_a_takeover_until_slack_says_it_was_not_taken(
    store: Engine,
) -> None:
    """The mark a post leaves before it goes to Slack outlives its sender's death (the next
    claimer sees it and looks first), only the claim holder may set it, and an answer that says
    Slack did not take the post clears it."""
    debate_id = queued(store, drafts=[post("parent", "channel")])
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        row, row_id = claim(session, debate_id, "dead")
        assert row.in_doubt_at is None
        assert post_doubt.sending(session, row_id=row_id, owner="dead", at=utcnow())
        session.execute(
            update(Outbox).where(col(Outbox.id) == row_id).values(claimed_until=utcnow())
        )
        session.commit()
        row, row_id = claim(session, debate_id, "next")
        assert row.in_doubt_at is not None, "the next sender knows to look first"
        assert not post_doubt.sending(session, row_id=row_id, owner="dead", at=utcnow())
        post_doubt.not_taken(session, row_id=row_id, owner="next")
        session.expire_all()
        again = session.get(Outbox, row_id)
        assert again is not None
        assert again.in_doubt_at is None
