"""Workspace isolation as a property (issue 37; seeded, bounded): three workspaces on one
deployment send random commands, App Home visits, settings changes and feedback clicks while the
worker pool is killed at random moments and started again. Afterwards:

- no Slack call about a workspace's channel or person was made with another workspace's token;
- every row belongs to the workspace of its debate, and each workspace's store answers (its
  debates, stats, App Home's lists) hold its own debates only, every one of them;
- each App Home was published with its viewer's workspace's token and shows that workspace's
  debates only.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import pytest
from sqlmodel import col, select

from bot.store import overview
from bot.store.db import session_scope
from bot.store.tables import Debate, DebateState, Outbox, OutboxState, Turn, VerdictRecord
from bot.store.tenancy import EVERY_WORKSPACE, Workspace
from tests.e2e.conftest import BOT_TOKEN, CHANNEL, Bot, BotFactory
from tests.e2e.test_oauth_installs import command, install, open_home, start_many, tenancy
from tests.helpers import DebateScript, reply_for

SEEDS = (1, 2)
ACTIONS = 10
TEAMS = {"T1": CHANNEL, "T2": "C2DEBATE", "T3": "C3DEBATE"}
PEOPLE = {team: [f"U{team}A", f"U{team}B"] for team in TEAMS}


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


async def kill_workers(bot: Bot) -> None:
    """The worker pool dies mid-turn and another starts (its debates are claimed again)."""
    work = bot.runtime.work
    if work._pool is not None:
        work._pool.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work._pool
    work._pool = asyncio.create_task(work.worker.run_pool(work._stop, concurrency=2))
    work._tasks.append(work._pool)


@pytest.mark.parametrize("seed", SEEDS)
async def test_no_workspace_sees_or_acts_for_another(start_bot: BotFactory, seed: int) -> None:
    rng = random.Random(seed)
    script = DebateScript(moderator=[reply_for("moderator")] * 40)
    bot = await start_many(start_bot, script=script, worker_lease_s=2.0)
    bot.llm.delay_s = 0.03
    tenancy(bot).add("T3", channels={"C3DEBATE"})
    await install(bot, "T1")
    await install(bot, "T2")
    await install(bot, "T3")
    tokens = {team: set(tenancy(bot).tokens_of(team)) for team in TEAMS}
    assert tokens["T1"] == {BOT_TOKEN}

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
        if rng.random() < 0.3:
            await kill_workers(bot)
        await asyncio.sleep(rng.uniform(0.0, 0.3))

    total = sum(len(questions) for questions in asked.values())
    await bot.wait_for(lambda: settled(bot, total), f"{total} debates settled", limit_s=120)
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
