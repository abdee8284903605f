"""Workspace isolation as a property (issue 37; seeded, bounded): three workspaces on one
deployment send random commands, App Home visits, settings changes and feedback clicks, while two
`debatebot worker` processes (the fake model, OAuth installs: each delivers with each workspace's
token) run the debates and are SIGKILLed at random moments, each while it holds a debate, and
started again. On SQLite and on PostgreSQL. Afterwards:

- no Slack call about a workspace's channel or person was made with another workspace's token;
- every row belongs to the workspace of its debate, and each workspace's store answers (its
  debates, stats, App Home's lists) hold its own debates only, every one of them;
- each App Home was published with its viewer's workspace's token and shows that workspace's
  debates only;
- every accepted debate finished exactly once: one verdict, each turn stored once in an intact
  chain, every owed message delivered and none given up; in Slack, one parent per debate at the
  top of its channel, one verdict in its thread and no message twice, also when a worker was
  SIGKILLed before it could record a post Slack took (the next sender finds it by its metadata,
  bot.jobs.resend_check); and the kills did interrupt debates (some were claimed again).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

from bot.store import overview, turns, verify
from bot.store.db import session_scope
from bot.store.debate_tables import Debate, DebateState, Turn, VerdictRecord
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.tenancy import EVERY_WORKSPACE, Workspace
from tests.e2e.conftest import BOT_TOKEN, CHANNEL, Bot, BotFactory
from tests.e2e.test_oauth_installs import command, install, open_home, start_many, tenancy
from tests.integration.conftest import fresh_database_url
from tests.worker_fleet import WorkerFleet

RUNS = [("sqlite", 1), ("sqlite", 2), ("postgres", 3)]
"""(database, seed) of each run."""
ACTIONS = 12
KILLS = 3
SLOTS = ("w1", "w2")
TEAMS = {"T1": CHANNEL, "T2": "C2DEBATE", "T3": "C3DEBATE"}
PEOPLE = {team: [f"U{team}A", f"U{team}B"] for team in TEAMS}


@pytest.fixture(params=RUNS, ids=[f"{backend}-{seed}" for backend, seed in RUNS])
def run(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A database of its own and the run's seed (asked for before `start_bot`, so the bot
    stops before its database is dropped)."""
    backend, seed = request.param
    databases = fresh_database_url(backend, tmp_path)
    yield next(databases), seed
    next(databases, None)


def debates(bot: Bot) -> list[Debate]:
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        return list(session.exec(select(Debate).order_by(col(Debate.id))))


def settled(bot: Bot, count: int) -> bool:
    rows = debates(bot)
    if len(rows) < count or any(d.state != DebateState.FINISHED for d in rows):
        return False
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        open_states = (OutboxState.PENDING, OutboxState.SENDING)
        return not session.exec(select(Outbox).where(col(Outbox.state).in_(open_states))).all()


def holding(bot: Bot, worker: str) -> bool:
    """Whether `worker` holds a running debate."""
    return any(d.state == DebateState.RUNNING and d.lease_owner == worker for d in debates(bot))


async def kill_at_random(
    bot: Bot, fleet: WorkerFleet, rng: random.Random, acted: asyncio.Event
) -> None:
    """SIGKILL a random worker, soon after it took a debate, and start another in its place;
    `KILLS` times, or fewer if every debate ended first."""
    for _ in range(KILLS):
        slot = rng.choice(SLOTS)
        name = fleet.name_of(slot)

        def ready(name: str = name) -> bool:
            idle = acted.is_set() and all(d.state == DebateState.FINISHED for d in debates(bot))
            return holding(bot, name) or idle

        await bot.wait_for(ready, f"{name} running a debate", limit_s=120)
        if not holding(bot, name):
            return
        await asyncio.sleep(rng.uniform(0.0, 0.2))
        fleet.kill(slot)
        await asyncio.sleep(rng.uniform(0.0, 0.5))
        fleet.start(slot)


async def act_at_random(bot: Bot, rng: random.Random) -> dict[str, list[str]]:
    """The workspaces' people at work; the questions each workspace asked."""
    asked: dict[str, list[str]] = {team: [] for team in TEAMS}
    for step in range(ACTIONS):
        team = rng.choice(list(TEAMS))
        user = rng.choice(PEOPLE[team])
        roll = rng.random()
        if roll < 0.5:
            question = f"Should we adopt ADR-{step} of {team}?"
            asked[team].append(question)
            assert await command(bot, team, TEAMS[team], question, user) == 200
        elif roll < 0.65:
            assert await open_home(bot, team, user) == 200
        elif roll < 0.8:
            rounds = rng.randint(1, 2)
            text = f"config set rounds {rounds}"
            assert await command(bot, team, TEAMS[team], text, "UADMIN") == 200
        else:
            await feedback(bot, rng, team, user)
        await asyncio.sleep(rng.uniform(0.0, 0.3))
    return asked


async def test_no_workspace_sees_or_acts_for_another(
    run: tuple[str, int], start_bot: BotFactory, tmp_path: Path
) -> None:
    url, seed = run
    rng = random.Random(seed)
    bot = await start_many(
        start_bot,
        database_url=url,
        worker_concurrency=0,  # the debates are the worker processes'
        worker_lease_s=2.0,
        worker_heartbeat_s=0.5,
        worker_poll_s=0.1,
        fake_delay_s=0.1,
        max_debates_per_user=ACTIONS,
        max_debates_per_channel=ACTIONS,
    )
    tenancy(bot).add("T3", channels={"C3DEBATE"})
    for team in TEAMS:
        await install(bot, team)
    tokens = {team: set(tenancy(bot).tokens_of(team)) for team in TEAMS}
    assert tokens["T1"] == {BOT_TOKEN}

    with WorkerFleet(
        bot.settings,
        tmp_path / "workers",
        concurrency=2,
        env_for=lambda name: {"DEBATEBOT_SLACK_API_URL": bot.emulator.api_url_for(name)},
    ) as fleet:
        for slot in SLOTS:
            fleet.start(slot)
        acted = asyncio.Event()
        killing = asyncio.create_task(kill_at_random(bot, fleet, random.Random(seed), acted))
        asked = await act_at_random(bot, rng)
        acted.set()
        await killing
        total = sum(len(questions) for questions in asked.values())
        await bot.wait_for(lambda: settled(bot, total), f"{total} debates settled", limit_s=180)
        await asyncio.to_thread(fleet.stop)
    for team in TEAMS:
        assert await open_home(bot, team, PEOPLE[team][0]) == 200
    await bot.wait_for(
        lambda: (
            {c.params.get("user_id") for c in bot.emulator.calls_of("views.publish")}
            >= {PEOPLE[team][0] for team in TEAMS}
        ),
        "every App Home",
    )

    # No call about a workspace's channel or person carried another workspace's token.
    owner_of_channel = {channel: team for team, channel in TEAMS.items()}
    owner_of_person = {person: team for team, people in PEOPLE.items() for person in people}
    for call in bot.emulator.calls:
        about = owner_of_channel.get(str(call.params.get("channel"))) or owner_of_person.get(
            str(call.params.get("user_id") or call.params.get("user"))
        )
        if about is not None and call.token.startswith("xoxb"):
            assert call.token in tokens[about], (call.method, call.params, about)

    # Every row is its debate's workspace's; each workspace's answers hold its own, all of them.
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        for table in (Turn, VerdictRecord, Outbox):
            rows: list[Any] = list(
                session.exec(
                    select(table.team_id, Debate.team_id).join(
                        Debate, col(Debate.id) == table.debate_id
                    )
                )
            )
            assert rows
            assert all(mine == theirs for mine, theirs in rows), table.__name__
    for team, questions in asked.items():
        with session_scope(bot.engine, workspace=Workspace(team_id=team)) as session:
            mine = list(session.exec(select(Debate)))
            stats = overview.protocol_stats(session)
            recent = overview.recent_debates(session, channel_ids=list(TEAMS.values()), limit=50)
        assert sorted(d.question for d in mine) == sorted(questions)
        assert sum(s.debates for s in stats) == len(questions)
        assert {d.team_id for d in recent} <= {team}

    # Each App Home: its viewer's workspace's token, its workspace's debates only.
    for call in bot.emulator.calls_of("views.publish"):
        team = owner_of_person[call.params["user_id"]]
        assert call.token in tokens[team]
        view = str(call.params["view"])
        for other in TEAMS:
            if other != team:
                assert f"of {other}?" not in view

    finished = debates(bot)
    assert len(finished) == total
    assert_each_finished_once(bot, finished)
    assert_each_delivered_once(bot, finished)
    assert fleet.killed
    assert any(d.claims > 1 for d in finished), "a kill interrupted a debate"


def assert_each_finished_once(bot: Bot, finished: list[Debate]) -> None:
    """Each debate finished with one verdict and each turn stored once in an intact chain, and
    every message owed was delivered (none open, none given up)."""
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        for debate in finished:
            assert debate.id is not None
            assert debate.state == DebateState.FINISHED, (debate.id, debate.error)
            verdicts = session.exec(
                select(VerdictRecord).where(VerdictRecord.debate_id == debate.id)
            ).all()
            assert len(verdicts) == 1
            rows = turns.turn_rows(session, debate_id=debate.id)
            assert len({(row.round, row.role, row.attempt) for row in rows}) == len(rows)
            assert verify.verify_chain(session, debate_id=debate.id).ok
        unsent = session.exec(
            select(Outbox.key, Outbox.state, Outbox.last_error).where(
                Outbox.state != OutboxState.SENT
            )
        ).all()
    assert not unsent


def assert_each_delivered_once(bot: Bot, finished: list[Debate]) -> None:
    """Slack holds every message the store recorded as delivered and no other of the bot's: one
    parent per debate at the top of its channel and, in its thread, one verdict and no message
    twice. A post Slack took from a worker SIGKILLed before it could record it is no exception:
    whoever sends it next finds it (docs/architecture.md, "Once")."""
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        owed = list(session.exec(select(Outbox)))
    recorded = {(channel, ts) for row in owed for channel, ts in row.deliveries}
    for channel in TEAMS.values():
        held = {m["ts"] for m in bot.emulator.messages.get(channel, [])}
        assert {ts for where, ts in recorded if where == channel} <= held, "nothing lost"
        # Chat posts only: a shared file (the receipt) is delivered at least once, and Slack's
        # answer to sharing it names no message to record (docs/architecture.md).
        delivered = [m for m in bot.emulator.posted(channel) if not m.get("upload")]
        repeats = [m["text"][:80] for m in delivered if (channel, m["ts"]) not in recorded]
        assert not repeats, f"posted but not recorded (a repeat) in {channel}: {repeats}"
        threads = [d.thread_ts or "" for d in finished if d.channel_id == channel]
        assert all(threads), "every debate's parent was posted"
        parents = [m["ts"] for m in delivered if "thread_ts" not in m]
        assert sorted(parents) == sorted(threads), f"one parent per debate in {channel}"
        for thread in threads:
            said = [m["text"] for m in delivered if m.get("thread_ts") == thread]
            assert len([t for t in said if t.startswith("Verdict")]) == 1, said
            assert len(said) == len(set(said)), said


async def feedback(bot: Bot, rng: random.Random, team: str, user: str) -> None:
    """A thumbs up or down on one of the workspace's delivered verdicts, if it has one."""
    channel = TEAMS[team]
    verdicts = [
        m
        for m in bot.emulator.posted(channel)
        if any(b["type"] == "context_actions" for b in m.get("blocks") or [])
    ]
    if not verdicts:
        return
    bot.driver.team = team
    try:
        reply = await bot.driver.feedback(
            rng.choice(verdicts), rng.random() < 0.5, user=user, channel=channel
        )
    finally:
        bot.driver.team = "T1"
    assert reply.status == 200
