"""Workspaces on one database (issue 37): each session sees and writes only its workspace's rows,
a database from before workspaces migrates with its rows, and claims are fair across workspaces.
Every test runs on SQLite and PostgreSQL unless it names one."""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Engine, func, text, update
from sqlmodel import col, select

from bot.cli import main
from bot.jobs.worker import DebateWorker
from bot.settings import Settings
from bot.store import channels, operations, outbox, overview, queue, reviews, turns, workspaces
from bot.store.channel_tables import ChannelSettings
from bot.store.db import alembic_config, make_engine, session_scope
from bot.store.debate_tables import Debate, DebateSource, DebateState, Turn
from bot.store.errors import BudgetExceededError, InFlightLimitError, WorkspaceScopeError
from bot.store.export import verify_export
from bot.store.outbox import Draft
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.tenancy import (
    EVERY_WORKSPACE,
    PENDING_TEAM,
    Workspace,
    adopt_pending,
    tenant_tables,
)
from engine.models import DebateSpec, ModelSettings, Role, TurnRecord, Usage, utcnow
from tests.helpers import DebateScript, reply_for, shipped_prompts
from tests.integration.test_durability import wait_for
from tests.migrated import upgrade
from tests.worker_fleet import WorkerFleet

SPEC = DebateSpec(
    question="Adopt the new queue?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
)
ACME = Workspace(team_id="TACME")
GLOBEX = Workspace(team_id="TGLOBEX", enterprise_id="EGRID")


def turn(attempt: int) -> TurnRecord:
    return TurnRecord(
        round=1,
        role=Role.PROPOSER,
        attempt=attempt,
        provider="fake",
        model="fake-model",
        prompt_sha256="a" * 64,
        request_sha256="b" * 64,
        usage=Usage(input_tokens=10, output_tokens=5),
        cost_usd=0.0,
        latency_s=0.1,
        raw_text="{}",
        parsed={},
    )


def add(engine: Engine, workspace: Workspace, key: str, channel: str = "C1") -> int:
    with session_scope(engine, workspace=workspace) as session:
        debate, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(
                trigger_key=key,
                spec=SPEC,
                source=DebateSource.COMMAND,
                channel_id=channel,
                requested_by="U1",
            ),
        )
        assert debate.id is not None
        return debate.id


def test_a_workspace_reads_and_changes_only_its_own_rows(store: Engine) -> None:
    acme = add(store, ACME, "acme:1")
    globex = add(store, GLOBEX, "globex:1")
    with session_scope(store, workspace=ACME) as session:
        assert queue.count_debates(session) == 1
        assert queue.debate_ids(session) == [acme]
        with pytest.raises(Exception, match="no debate"):
            queue.get_debate(session, debate_id=globex)
        # An ORM update of every debate reaches only this workspace's.
        moved = session.execute(update(Debate).values(question="changed"))
        assert moved.rowcount == 1  # type: ignore[attr-defined]
        session.commit()
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        questions = dict(session.exec(select(Debate.team_id, Debate.question)).all())
        stamped = session.exec(select(Debate.enterprise_id).where(Debate.id == globex)).one()
    assert questions == {"TACME": "changed", "TGLOBEX": SPEC.question}
    assert stamped == "EGRID"


def test_a_channel_has_settings_in_each_workspace(store: Engine) -> None:
    """A Slack Connect channel has one id in two workspaces: each has its own settings."""
    with session_scope(store, workspace=ACME) as session:
        channels.save_channel_settings(
            session, channel_id="CSHARED", updated_by="U1", values={"rounds": 3}
        )
    with session_scope(store, workspace=GLOBEX) as session:
        assert channels.channel_settings(session, channel_id="CSHARED").rounds is None
        channels.save_channel_settings(
            session, channel_id="CSHARED", updated_by="U2", values={"rounds": 2}
        )
    with session_scope(store, workspace=ACME) as session:
        assert channels.channel_settings(session, channel_id="CSHARED").rounds == 3
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        rows = session.exec(select(ChannelSettings.team_id, ChannelSettings.rounds)).all()
    assert sorted(rows) == [("TACME", 3), ("TGLOBEX", 2)]


def test_a_row_of_another_workspace_is_refused(store: Engine) -> None:
    globex = add(store, GLOBEX, "globex:1")
    with session_scope(store, workspace=ACME) as session:
        session.add(ChannelSettings(team_id="TGLOBEX", channel_id="C9"))
        with pytest.raises(WorkspaceScopeError, match="TGLOBEX"):
            session.flush()
    # A Core statement on a workspace's table could not be filtered: refused.
    with (
        session_scope(store, workspace=ACME) as session,
        pytest.raises(WorkspaceScopeError, match="Core statement"),
    ):
        session.execute(Debate.__table__.select())  # type: ignore[attr-defined]
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        # Work for every workspace: a row with a debate takes its debate's workspace …
        outbox_row = Outbox(
            debate_id=globex,
            key="k",
            channel_id="C1",
            text="t",
            deadline_at=utcnow(),
        )
        session.add(outbox_row)
        session.commit()
        assert (outbox_row.team_id, outbox_row.enterprise_id) == ("TGLOBEX", "EGRID")
        # … and one without must name its own.
        session.add(ChannelSettings(channel_id="C9"))
        with pytest.raises(WorkspaceScopeError, match="must name its workspace"):
            session.flush()


def test_app_home_stats_and_spend_count_one_workspace(store: Engine) -> None:
    for index in range(3):
        add(store, ACME, f"acme:{index}")
    add(store, GLOBEX, "globex:0")
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        for debate in session.exec(select(Debate)).all():
            session.add(
                Turn(
                    debate_id=debate.id or 0,
                    seq=0,
                    round=1,
                    role="proposer",
                    attempt=1,
                    provider="fake",
                    model="fake-model",
                    prompt_sha256="a" * 64,
                    request_sha256="b" * 64,
                    input_tokens=1,
                    output_tokens=1,
                    cached_input_tokens=0,
                    cost_usd=1.0,
                    latency_s=0.1,
                    reasks=0,
                    raw_text="{}",
                    parsed_json="{}",
                    created_at=debate.created_at,
                    prev_hash="0" * 64,
                    hash="1" * 64,
                )
            )
        session.commit()
    since = datetime(2000, 1, 1, tzinfo=UTC)
    for workspace, debates in ((ACME, 3), (GLOBEX, 1)):
        with session_scope(store, workspace=workspace) as session:
            assert operations.spend_since(session, since=since) == debates
            [row] = overview.protocol_stats(session)
            assert row.debates == debates
            assert len(overview.recent_debates(session, channel_ids=["C1"])) == debates
            assert reviews.open_escalations(session) == []
            assert operations.dashboard(session).queue["waiting"] == debates


def test_the_monthly_cap_counts_each_workspace_apart(store: Engine) -> None:
    """DEBATEBOT_WORKSPACE_MONTHLY_BUDGET_USD is each workspace's: one that spent its cap is
    refused, another with the same cap is not."""
    spent = add(store, ACME, "acme:spent")
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        [_claimed] = queue.claim_debates(session, worker_id="w1", lease_s=600, debate_id=spent)
        write = turns.TurnWrite(spent, "w1", turn(1), turns.ChainHead())
        turns.append_turns(session, writes=[write])
        session.execute(update(Turn).values(cost_usd=1.0))
        session.commit()
    caps = queue.SpendCaps(workspace_usd=1.5)
    costly = SPEC.model_copy(update={"budget_usd": 0.75})
    new = queue.NewDebate(trigger_key="next", spec=costly, source=DebateSource.COMMAND)
    with session_scope(store, workspace=ACME) as session, pytest.raises(BudgetExceededError):
        queue.enqueue_debate(session, new=new, caps=caps)
    with session_scope(store, workspace=GLOBEX) as session:
        _, created = queue.enqueue_debate(session, new=new, caps=caps)
    assert created


def test_in_flight_limits_count_each_workspace_apart(store: Engine) -> None:
    limits = queue.InFlightLimits(per_user=1, per_channel=5)
    new = queue.NewDebate(
        trigger_key="x", spec=SPEC, source=DebateSource.COMMAND, channel_id="C1", requested_by="U1"
    )
    with session_scope(store, workspace=ACME) as session:
        queue.enqueue_debate(session, new=new, limits=limits)
    with session_scope(store, workspace=GLOBEX) as session:
        # The same person and channel ids in another workspace are other people and channels.
        queue.enqueue_debate(session, new=replace(new, trigger_key="y"), limits=limits)
    with session_scope(store, workspace=ACME) as session, pytest.raises(InFlightLimitError):
        queue.enqueue_debate(session, new=replace(new, trigger_key="w"), limits=limits)


def test_claims_are_fair_across_workspaces(store: Engine) -> None:
    """One workspace floods the queue; another's one debate is taken by the next claim."""
    flood = [add(store, ACME, f"flood:{index}") for index in range(40)]
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        first = queue.claim_debates(session, worker_id="w1", lease_s=600, limit=3)
    assert [d.id for d in first] == flood[:3]
    late = add(store, GLOBEX, "late:1")
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        [taken] = queue.claim_debates(session, worker_id="w2", lease_s=600, limit=1)
        assert taken.id == late
        # Then the flood goes on, oldest first.
        assert [d.id for d in queue.claim_debates(session, worker_id="w3", lease_s=600)] == [
            flood[3]
        ]


FLOOD = 500
WORKERS = 3
CONCURRENCY = 4
POLL_S = 0.2
CLAIM_LOG = (
    "CREATE TABLE claim_log (seq bigserial PRIMARY KEY, debate_id integer, team_id text,"
    " worker text, tx bigint, began timestamptz)",
    "CREATE FUNCTION log_claim() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " INSERT INTO claim_log (debate_id, team_id, worker, tx, began) VALUES (NEW.id,"
    " NEW.team_id, NEW.lease_owner, txid_current(), transaction_timestamp()); RETURN NEW; END $$",
    "CREATE TRIGGER claimed AFTER UPDATE OF claims ON debate FOR EACH ROW"
    " WHEN (NEW.claims > OLD.claims) EXECUTE FUNCTION log_claim()",
)
"""Every claim of a debate, in the order claims were written, with its claim's transaction and
when that began (PostgreSQL's clock)."""


@dataclass(frozen=True)
class Claim:
    """One claim: one worker's transaction leasing one or more debates."""

    worker: str
    began: datetime
    debates: frozenset[int]


def claims_in_order(engine: Engine) -> list[Claim]:
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT worker, min(began), array_agg(debate_id) FROM claim_log"
                " GROUP BY tx, worker ORDER BY min(seq)"
            )
        ).all()
    return [Claim(worker, began, frozenset(ids)) for worker, began, ids in rows]


def flood(engine: Engine, count: int) -> None:
    """ACME queues `count` debates at once."""
    with session_scope(engine, workspace=ACME) as session:
        for index in range(count):
            queue.add_debate(
                session,
                new=queue.NewDebate(
                    trigger_key=f"flood:{index}", spec=SPEC, source=DebateSource.COMMAND
                ),
            )
        session.commit()


def test_fair_claims_take_each_debate_once_under_concurrent_workers(postgres_url: str) -> None:
    """On PostgreSQL: 500 queued by one workspace and one by another, claimed by many workers at
    once; no debate is taken twice, and the lone workspace's debate is in the first round of
    claims."""
    from concurrent.futures import ThreadPoolExecutor

    upgrade(postgres_url)
    engine = make_engine(postgres_url)
    try:
        flood(engine, FLOOD)
        lone = add(engine, GLOBEX, "lone:1")

        def claim(worker: int) -> list[int]:
            with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
                taken = queue.claim_debates(session, worker_id=f"w{worker}", lease_s=600, limit=4)
                return [d.id or 0 for d in taken]

        with ThreadPoolExecutor(6) as pool:
            first_round = [id_ for ids in pool.map(claim, range(6)) for id_ in ids]
            later = [id_ for ids in pool.map(claim, range(6, 40)) for id_ in ids]
        assert lone in first_round
        claimed = first_round + later
        assert len(claimed) == len(set(claimed))
        with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
            running = session.exec(
                select(func.count()).where(col(Debate.state) == DebateState.RUNNING)
            ).one()
        assert running == len(claimed)
    finally:
        engine.dispose()


def test_a_lone_debate_starts_within_one_claim_cycle_of_worker_processes_under_a_flood(
    postgres_url: str, tmp_path: Path
) -> None:
    """On PostgreSQL, `WORKERS` `debatebot worker` processes (`CONCURRENCY` debates each, the
    fake model) work through `FLOOD` debates of one workspace; once each worker has claimed
    twice, another workspace queues one debate, and its first turn starts within one claim
    cycle.

    A claim cycle: every slot is busy with the flood, so a worker claims when one of its
    `CONCURRENCY` debates ends (idle, it would every `POLL_S`); in one cycle each worker makes
    one claim, of at most `CONCURRENCY` debates. So the lone debate is taken by the first claim
    any worker begins after it was queued, or by one beside that claim; no worker begins a
    second claim before it is taken. Measured in the store, not by wall-clock thresholds: a
    trigger logs each claim with its transaction and when that began, on PostgreSQL's clock,
    which the test reads once the lone debate is committed."""
    upgrade(postgres_url)
    engine = make_engine(postgres_url)
    with engine.begin() as connection:
        for statement in CLAIM_LOG:
            connection.execute(text(statement))
    flood(engine, FLOOD)
    settings = Settings(
        database_url=postgres_url,
        provider="fake",
        fake_delay_s=0.05,
        worker_poll_s=POLL_S,
        shutdown_grace_s=0.0,
    )
    try:
        with WorkerFleet(settings, tmp_path / "workers", concurrency=CONCURRENCY) as fleet:
            for index in range(WORKERS):
                fleet.start(f"w{index}")

            def busy() -> bool:
                counts = Counter(claim.worker for claim in claims_in_order(engine))
                return len(counts) == WORKERS and min(counts.values()) >= 2

            wait_for(busy, timeout_s=120)
            lone = add(engine, GLOBEX, "lone:1")
            with engine.connect() as connection:
                queued_at = connection.execute(text("SELECT clock_timestamp()")).scalar_one()

            def after() -> list[Claim]:
                return [claim for claim in claims_in_order(engine) if claim.began > queued_at]

            def first_turn() -> bool:
                with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
                    return bool(turns.turn_rows(session, debate_id=lone))

            # Or, if claims were unfair, until enough cycles passed to show it.
            wait_for(lambda: first_turn() or len(after()) > 3 * WORKERS, timeout_s=120)
            fleet.stop()

        claims = claims_in_order(engine)
        taken = next((claim for claim in claims if lone in claim.debates), None)
        assert taken is not None, f"still queued after {len(after())} claims begun after it"
        # The claims written before the lone debate's that began after it was queued.
        ahead = [claim for claim in claims[: claims.index(taken)] if claim.began > queued_at]
        per_worker = Counter(claim.worker for claim in ahead)
        assert all(count <= 1 for count in per_worker.values()), (per_worker, taken)
        assert sum(len(claim.debates) for claim in ahead) <= WORKERS * CONCURRENCY
        assert first_turn()
        with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
            row = queue.get_debate(session, debate_id=lone)
            waiting = queue.count_debates(session, state=DebateState.QUEUED)
        assert row.claims == 1
        assert waiting > FLOOD // 2, "the flood was still queued when the lone debate started"
    finally:
        engine.dispose()


def test_a_database_from_before_workspaces_migrates_with_its_rows(
    database_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Migrated from 0019 with debates, settings and owed messages: every row gets the team
    `pending`, the single-workspace bot makes them its workspace's at start-up, and nothing
    else changes."""
    config = alembic_config(database_url)
    command.upgrade(config, "0019")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO debate (trigger_key, source, channel_id, question, protocol,"
                    " spec_json, state, claims, cost_usd, created_at, updated_at)"
                    " VALUES ('old:1', 'command', 'C1', 'Old question?', 'adversarial', :spec,"
                    " 'queued', 0, 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"spec": SPEC.model_dump_json()},
            )
            connection.execute(
                text(
                    "INSERT INTO channel_settings (channel_id, protocol, rounds, threshold,"
                    " reviewers, owners, adr_watch, trigger_reaction, triage, route, timezone,"
                    " pr_comment, updated_at) VALUES ('C1', 'adversarial', 2, 0.6, '[]', '[]',"
                    " false, 'scales', false, false, 'UTC', false, CURRENT_TIMESTAMP),"
                    " ('C2', 'adversarial', 1, 0.75, '[]', '[]', false, 'scales', false, false,"
                    " 'UTC', false, CURRENT_TIMESTAMP)"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO outbox (debate_id, key, seq, part, action, target, recipients,"
                    " fallback, channel_id, text, blocks, state, version, attempts,"
                    " next_attempt_at, deadline_at, deliveries, created_at) VALUES (1,"
                    " 'parent', 0, 0, 'post', 'thread', '[]', 'none', 'C1', 't', '[]',"
                    " 'pending', 1, 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, '[]',"
                    " CURRENT_TIMESTAMP)"
                )
            )
        with caplog.at_level(logging.WARNING, logger="alembic.runtime.migration"):
            command.upgrade(config, "head")
        [unset] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("0021:")]
        assert "rounds = 1 in 1 channel(s) and threshold = 0.6 in 1" in unset
        assert "`/debate config set rounds 1`, `set threshold 0.6`" in unset
        with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
            for table in tenant_tables():
                teams = session.connection().execute(
                    text(f"SELECT DISTINCT team_id FROM {table.name}")
                )
                assert {team for (team,) in teams} <= {PENDING_TEAM}
            moved = adopt_pending(session, workspace=Workspace(team_id="T1"))
        assert moved == 4
        with session_scope(engine, workspace=Workspace(team_id="T1")) as session:
            [debate] = session.exec(select(Debate)).all()
            assert (debate.trigger_key, debate.question) == ("old:1", "Old question?")
            # 0021: the columns' old defaults (1 round, 0.6) become unset, the deployment's.
            c1 = channels.channel_settings(session, channel_id="C1")
            c2 = channels.channel_settings(session, channel_id="C2")
            assert (c1.rounds, c1.threshold, c2.rounds, c2.threshold) == (2, None, None, 0.75)
            assert [row.key for row in session.exec(select(Outbox)).all()] == ["parent"]
        with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
            assert adopt_pending(session, workspace=Workspace(team_id="T1")) == 0
        # The way back holds while the database has one workspace.
        command.downgrade(config, "0019")
        with engine.connect() as connection:
            assert connection.execute(
                text("SELECT channel_id, rounds, threshold FROM channel_settings ORDER BY 1")
            ).all() == [("C1", 2, 0.6), ("C2", 1, 0.75)]
    finally:
        engine.dispose()


def test_adopting_keeps_the_workspaces_newer_channel_settings(store: Engine) -> None:
    """Settings saved while the bot read the pending rows as its own (start-up could not yet
    ask Slack for its workspace's id) are the workspace's row beside the pending one: adopting
    keeps the newer one instead of failing on the channel's key."""
    pending = Workspace(team_id=PENDING_TEAM)
    with session_scope(store, workspace=pending) as session:
        channels.save_channel_settings(
            session, channel_id="C1", updated_by="U1", values={"rounds": 2, "threshold": 0.7}
        )
        channels.save_channel_settings(
            session, channel_id="C2", updated_by="U1", values={"rounds": 4}
        )
    with session_scope(store, workspace=Workspace(team_id="T1")) as session:
        channels.save_channel_settings(
            session, channel_id="C1", updated_by="U2", values={"rounds": 3}
        )

    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        adopt_pending(session, workspace=Workspace(team_id="T1"))

    with session_scope(store, workspace=Workspace(team_id="T1")) as session:
        c1 = channels.channel_settings(session, channel_id="C1")
        c2 = channels.channel_settings(session, channel_id="C2")
    assert (c1.rounds, c1.threshold, c1.updated_by, c2.rounds) == (3, None, "U2", 4)
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert session.exec(select(func.count()).select_from(ChannelSettings)).one() == 2


def owe(engine: Engine, workspace: Workspace, debate_id: int, key: str) -> None:
    with session_scope(engine, workspace=workspace) as session:
        debate = queue.get_debate(session, debate_id=debate_id)
        outbox.stage(session, debate=debate, drafts=[Draft(key=key, text=f"{key} text", blocks=[])])
        session.commit()


def test_an_uninstalled_workspace_is_suspended_and_resumes(store: Engine) -> None:
    """Suspending a workspace stops its debates (no claim; a running one's next turn write
    says so) and drops what it is owed, as failed rows that say why; the other workspace is
    untouched; resuming makes its debates claimable again, their turns kept."""
    running = add(store, ACME, "acme:running")
    queued = add(store, ACME, "acme:queued")
    other = add(store, GLOBEX, "globex:1")
    owe(store, ACME, queued, "parent")
    owe(store, GLOBEX, other, "parent")
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        [_claimed] = queue.claim_debates(session, worker_id="w1", lease_s=600, debate_id=running)
    first = turns.TurnWrite(running, "w1", turn(1), turns.ChainHead())
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        [head] = turns.append_turns(session, writes=[first])
    assert isinstance(head, turns.ChainHead)
    assert head.halt_reason is None

    with session_scope(store, workspace=ACME) as session:
        stopped = workspaces.suspend(session, reason="the app was uninstalled (E-:TACME)")
        again = workspaces.suspend(session, reason="the app was uninstalled (E-:TACME)")
    assert (stopped.debates, stopped.dropped) == (2, 1)
    assert (again.debates, again.dropped) == (0, 0)

    second = turns.TurnWrite(running, "w1", turn(2), head)
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        [halted] = turns.append_turns(session, writes=[second])
        assert isinstance(halted, turns.ChainHead)
        assert halted.halt_reason == workspaces.SUSPENDED
        taken = queue.claim_debates(session, worker_id="w2", lease_s=600, limit=5)
        assert [d.id for d in taken] == [other]
        rows = {
            (row.team_id, row.state, row.last_error) for row in session.exec(select(Outbox)).all()
        }
    assert rows == {
        ("TACME", OutboxState.FAILED, "dropped: the app was uninstalled (E-:TACME)"),
        ("TGLOBEX", OutboxState.PENDING, None),
    }

    with session_scope(store, workspace=ACME) as session:
        assert workspaces.resume(session) == 2
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        queue.release_lease(session, debate_id=running, worker_id="w1")
        resumed = queue.claim_debates(session, worker_id="w3", lease_s=600, limit=5)
        assert sorted(d.id or 0 for d in resumed) == [running, queued]
        assert turns.chain_tail(session, debate_id=running)[0] == 2


async def test_an_admin_deletes_a_workspace_after_archiving_it(
    store: Engine,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`debatebot workspace delete` archives each debate (written, read back, verified), then
    deletes the workspace's records; the other workspace keeps everything."""
    acme = add(store, ACME, "acme:1")
    add(store, GLOBEX, "globex:1")
    with session_scope(store, workspace=ACME) as session:
        channels.save_channel_settings(
            session, channel_id="C1", updated_by="U1", values={"rounds": 2}
        )
    with session_scope(store, workspace=GLOBEX) as session:
        channels.save_channel_settings(
            session, channel_id="C1", updated_by="U2", values={"rounds": 3}
        )
    llm = DebateScript(moderator=[reply_for("moderator")]).llm()
    worker = DebateWorker(
        engine=store, resolve_llm=lambda _s: llm, prompts=shipped_prompts(), worker_id="w1"
    )
    assert await worker.run_once()
    assert await worker.run_once()
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    folder = tmp_path / "archive"

    assert main(["workspace", "delete", "TACME"]) == 2
    assert main(["workspace", "delete", "TACME", "--archive", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "1 debate(s) archived" in out

    archived = json.loads((folder / f"debate-{acme}.json").read_text(encoding="utf-8"))
    assert verify_export(archived, key=None).ok
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        for table in tenant_tables():
            teams = session.connection().execute(text(f"SELECT team_id FROM {table.name}"))
            assert "TACME" not in {team for (team,) in teams}, table.name
    with session_scope(store, workspace=GLOBEX) as session:
        assert queue.count_debates(session, state=DebateState.FINISHED) == 1
        assert channels.channel_settings(session, channel_id="C1").rounds == 3
