"""`/debate cancel <id>` (issue 44): the requester, the channel's reviewers and workspace admins
may stop a debate, queued or mid-call; anyone else is refused privately; a finished debate's
refusal says it has finished. Over HTTP (on SQLite and PostgreSQL) and over Socket Mode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import col, select

from bot.store import channels
from bot.store.db import session_scope
from bot.store.debate_tables import CancelSource, Debate, DebateState
from bot.store.outbox_tables import Outbox, OutboxAction
from engine.models import DebateStatus
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import Fault
from tests.e2e.test_socket_mode import command, socket_bot, until
from tests.integration.conftest import BACKENDS, fresh_database_url

REQUESTER = "UALICE"
STRANGER = "UBOB"


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from fresh_database_url(request.param, tmp_path)


def debates(bot: Bot) -> list[Debate]:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        return list(session.exec(select(Debate).order_by(col(Debate.id))))


async def told(bot: Bot, user: str, text: str) -> str:
    """What the bot then told `user` alone."""
    before = len(bot.emulator.ephemeral)
    reply = await bot.driver.command(text, user=user)
    assert reply.status == 200
    await bot.wait_for(lambda: len(bot.emulator.ephemeral) > before, f"the answer to {text}")
    answer = bot.emulator.ephemeral[-1]
    assert answer["user"] == user
    return str(answer["text"])


async def test_the_requester_stops_a_running_debate_and_others_are_refused(
    start_bot: BotFactory, database_url: str
) -> None:
    bot = await start_bot(database_url=database_url)
    bot.llm.delay_s = 60  # every call outlasts the test unless the cancel abandons it
    await bot.driver.command("Should we adopt ADR-042 for pricing?", user=REQUESTER)
    [debate] = await bot.wait_for(
        lambda: [d for d in debates(bot) if d.state == DebateState.RUNNING] or None,
        "the running debate",
    )

    refusal = await told(bot, STRANGER, f"cancel {debate.id}")
    assert f"Only the person who asked for debate #{debate.id}" in refusal
    assert "Nothing was changed" in refusal
    assert debates(bot)[0].cancel_requested_at is None

    unknown = await told(bot, REQUESTER, "cancel 999999")
    assert "there is no debate #999999" in unknown

    stopping = await told(bot, REQUESTER, f"cancel #{debate.id}")
    assert f"Debate #{debate.id} is stopping" in stopping
    [ended] = await bot.finished()
    assert ended.outcome == DebateStatus.CANCELLED
    assert (ended.cancelled_by, ended.cancelled_from) == (REQUESTER, CancelSource.COMMAND)

    finished = await told(bot, REQUESTER, f"cancel {debate.id}")
    assert f"debate {debate.id} has already finished (cancelled)" in finished


async def test_the_channels_reviewers_and_admins_may_stop_a_debate(
    start_bot: BotFactory, database_url: str
) -> None:
    bot = await start_bot(database_url=database_url)
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id=CHANNEL, updated_by=ADMIN, values={"reviewers": [REVIEWER]}
        )
    bot.llm.delay_s = 60
    await bot.driver.command("Should we adopt ADR-042 for pricing?", user=REQUESTER)
    await bot.driver.command("Should we move sessions to Redis?", user=REQUESTER)
    running, queued = await bot.wait_for(
        lambda: (rows := debates(bot)) and len(rows) == 2 and rows[0].state == "running" and rows,
        "one running debate and one queued",
    )
    assert queued.state == DebateState.QUEUED

    assert "is stopping" in await told(bot, REVIEWER, f"cancel {running.id}")
    assert "is stopping" in await told(bot, ADMIN, f"cancel {queued.id}")
    again = await told(bot, REQUESTER, f"cancel {queued.id}")
    assert f"Debate #{queued.id} is already being stopped (stopped by <@{ADMIN}>" in again

    ended = await bot.finished(2)
    assert [d.outcome for d in ended] == [DebateStatus.CANCELLED] * 2
    assert [d.cancelled_by for d in ended] == [REVIEWER, ADMIN]


async def test_cancel_over_socket_mode(tmp_path: Path) -> None:
    async with socket_bot(tmp_path, fake_delay_s=60) as bot:
        emulator = bot.emulator
        await emulator.push("slash_commands", command("Should we adopt ADR-042?", 1))
        [debate] = await until(
            lambda: [d for d in bot.debates() if d.state == DebateState.RUNNING],
            "the running debate",
        )
        stranger = {**command(f"cancel {debate.id}", 2), "user_id": STRANGER}
        await emulator.push("slash_commands", stranger)
        await until(lambda: emulator.ephemeral, "the refusal")
        assert emulator.ephemeral[-1]["user"] == STRANGER
        assert "Only the person who asked" in emulator.ephemeral[-1]["text"]

        await emulator.push("slash_commands", command(f"cancel {debate.id}", 3))
        await until(lambda: len(emulator.ephemeral) == 2, "the answer")
        assert emulator.ephemeral[-1]["user"] == REQUESTER
        assert "is stopping" in emulator.ephemeral[-1]["text"]
        [ended] = await until(
            lambda: [d for d in bot.debates() if d.state == DebateState.FINISHED],
            "the cancelled debate",
        )
        assert ended.outcome == DebateStatus.CANCELLED
        assert ended.cancelled_from == CancelSource.COMMAND


async def test_a_cancel_while_posts_are_owed_posts_each_once_and_then_only_the_ending(
    start_bot: BotFactory, database_url: str
) -> None:
    """The cancel lands while Slack refuses the thread's posts for a while (503), so rounds are
    still owed: once Slack takes posts again, each owed post goes out once, none is lost, and
    the only messages the stop added are the cancel's verdict and the plan's end."""
    bot = await start_bot(database_url=database_url)
    bot.llm.delay_s = 1.0  # the debate outlasts the cancel's way to its worker
    replies = Fault(
        status=503, error="service_unavailable", when=lambda call: "thread_ts" in call.params
    )
    bot.emulator.fail_for("chat.postMessage", replies, seconds=600)
    # Two rounds: the first is owed while the second runs (a round is owed at its moderation,
    # and the last round's judge is asked beside it, so a one-round debate ends as it is owed).
    await bot.driver.command("Should we adopt ADR-042 for pricing? --rounds 2", user=REQUESTER)
    await bot.wait_for(
        lambda: [r for r in bot.owed() if r.key.startswith("round:")], "a round owed, unposted"
    )
    [debate] = debates(bot)
    assert "is stopping" in await told(bot, REQUESTER, f"cancel {debate.id}")
    await bot.wait_for(
        lambda: debates(bot)[0].state == DebateState.FINISHED, "the debate ended while owing"
    )
    owed_then = {r.key: r.state for r in posts_of(bot)}
    assert any(k.startswith("round:") and s != "sent" for k, s in owed_then.items())

    bot.emulator.heal()
    [ended] = await bot.finished()
    assert ended.outcome == DebateStatus.CANCELLED
    rows = posts_of(bot)
    assert {r.key for r in rows} == set(owed_then), "nothing more was owed after the ending"
    # The ending's verdict and its receipt file (the cancel's statement joined: `receipt:1`).
    assert {r.key for r in rows} - {"parent"} <= {
        k for k in owed_then if k.startswith(("round:", "verdict", "receipt:"))
    }
    assert "receipt:1" in owed_then
    messages = [r for r in rows if not r.key.startswith("receipt:")]
    assert all(r.state == "sent" for r in rows)
    assert all(len(r.deliveries) == 1 for r in messages), "each posted once"
    assert ended.thread_ts is not None
    replies_posted = [
        m for m in bot.emulator.in_thread(CHANNEL, ended.thread_ts) if m["ts"] != ended.thread_ts
    ]
    delivered = sorted(ts for r in messages for _, ts in r.deliveries if r.key != "parent")
    posted = [m for m in replies_posted if "chunks" not in m and "files" not in m]
    assert sorted(m["ts"] for m in posted) == delivered
    assert posted[-1]["text"].startswith("Verdict"), "the ending comes last"
    [(_, receipt)] = bot.emulator.shared_files(CHANNEL, ended.thread_ts)
    [cancel] = json.loads(receipt)["decisions"]
    assert (cancel["statement"]["kind"], cancel["statement"]["by"]) == ("cancel", REQUESTER)
    [plan] = bot.emulator.streams(CHANNEL)
    assert f"was stopped by <@{REQUESTER}> with /debate cancel" in str(plan["blocks"])


def posts_of(bot: Bot) -> list[Outbox]:
    """The debate's owed posts (not its updates or its plan)."""
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        return list(session.exec(select(Outbox).where(Outbox.action == OutboxAction.POST)))
