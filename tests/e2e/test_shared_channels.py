"""A channel shared by two workspaces of one Enterprise Grid org (issue 37), each with its own
install: the channel has one id in both and a message in it one ts, so a reaction on that
message makes the same trigger key in each. Each workspace's reaction starts that workspace's
own debate, delivered with that workspace's token; Slack sending a reaction again, or another
person of the same workspace reacting, starts nothing more."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from sqlmodel import col, select

from bot.store import dedupe
from bot.store.db import session_scope
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.tenancy import EVERY_WORKSPACE, Workspace
from tests.e2e.conftest import Bot, BotFactory
from tests.e2e.test_oauth_installs import install, outer, post_event, start_many, tenancy
from tests.e2e.test_workspaces import debates, settled

SHARED = "CSHARED"
ORG = "E1"


def reaction(team: str, user: str, ts: str, event_id: str) -> dict[str, Any]:
    """`user` of `team` adds the review reaction to message `ts` of the shared channel. Slack
    sends an event that several installs can see once, its `authorizations` naming one
    install: here `team`'s."""
    event = {
        "type": "reaction_added",
        "user": user,
        "reaction": "scales",
        "item": {"type": "message", "channel": SHARED, "ts": ts},
        "item_user": "UALICE",
        "event_ts": f"{time.time():.6f}",
    }
    authorization = {
        "enterprise_id": ORG,
        "team_id": team,
        "user_id": f"UB{team}",
        "is_bot": True,
        "is_enterprise_install": False,
    }
    return outer(
        team,
        event,
        event_id=event_id,
        enterprise_id=ORG,
        context_team_id=team,
        authorizations=[authorization],
    )


async def resend(bot: Bot, body: dict[str, Any]) -> int:
    """Slack sending an event again (its first delivery went unanswered)."""
    headers = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    reply = await bot.driver.send(json.dumps(body), "application/json", headers=headers)
    return reply.status


def handled(bot: Bot, team: str, event_id: str) -> bool:
    with session_scope(bot.engine, workspace=Workspace(team_id=team)) as session:
        return dedupe.was_processed(session, key=dedupe.event_key(event_id))


async def test_a_shared_message_reacted_to_in_two_workspaces_is_debated_in_each(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.slack.acknowledgement")
    bot = await start_many(start_bot)
    for team in ("T5", "T6"):
        tenancy(bot).teams[team].channels.add(SHARED)
        await install(bot, team)
    [t5] = tenancy(bot).tokens_of("T5", ORG)
    [t6] = tenancy(bot).tokens_of("T6", ORG)
    token_of = {"T5": t5, "T6": t6}
    root = bot.emulator.seed_message(SHARED, "Proposal: move the shared build cache to S3.")

    assert await post_event(bot, reaction("T5", "UEVE", root, "EvShared5")) == 200
    assert await post_event(bot, reaction("T6", "UDAN", root, "EvShared6")) == 200

    first, second = await settled(bot, 2)
    assert {first.team_id, second.team_id} == {"T5", "T6"}
    assert first.trigger_key == second.trigger_key == f"thread:{SHARED}:{root}"
    assert first.thread_ts == second.thread_ts == root

    # Each debate's messages went out with its own workspace's token, into the one thread.
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        sent = session.exec(select(Outbox).where(col(Outbox.state) == OutboxState.SENT)).all()
    team_of = {
        ts: str(row.team_id) for row in sent for channel, ts in row.deliveries if channel == SHARED
    }
    assert set(team_of.values()) == {"T5", "T6"}
    writes = [
        call
        for call in bot.emulator.calls
        if call.method in ("chat.postMessage", "chat.update") and call.params["channel"] == SHARED
    ]
    for call in writes:
        assert call.answer is not None
        ts = call.answer["ts"] if call.method == "chat.postMessage" else call.params["ts"]
        assert call.token == token_of[team_of[ts]], (call.method, call.params.get("text"))
    assert {call.token for call in writes} == {t5, t6}
    verdicts = [m for m in bot.emulator.posted(SHARED) if m["text"].startswith("Verdict")]
    assert len(verdicts) == 2
    assert all(m["thread_ts"] == root for m in verdicts)

    # Slack sends T5's reaction again, and another person of T5 reacts: T5 has its debate.
    assert await resend(bot, reaction("T5", "UEVE", root, "EvShared5")) == 200
    assert await post_event(bot, reaction("T5", "UFAY", root, "EvShared5b")) == 200
    await bot.wait_for(
        lambda: "event EvShared5 delivered again; ignored" in caplog.text, "the resend dropped"
    )
    await bot.wait_for(lambda: handled(bot, "T5", "EvShared5b"), "the second reaction handled")
    assert not handled(bot, "T6", "EvShared5b")
    assert [d.id for d in debates(bot)] == [first.id, second.id]
    assert len([m for m in bot.emulator.posted(SHARED) if m["text"].startswith("Verdict")]) == 2
