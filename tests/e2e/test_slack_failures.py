"""What people see when Slack fails: a deleted or unupdatable parent, a 5xx outage, calls that
hang, a channel the bot is not in (before and during a debate), Slack's size limits, and text
that tries to mention or link. In every case the review request reaches a person, and nothing
owed is lost once the fault clears."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pydantic import SecretStr
from sqlmodel import select

from bot.messages import action_ids, owed
from bot.settings import Settings
from bot.store import channels, endings, outbox, reviews
from bot.store.db import session_scope
from bot.store.outbox_tables import Outbox
from bot.store.review_tables import Escalation
from bot.wiring import build_delivery, slack_client, slack_session
from engine.models import DebateResult
from tests.e2e.conftest import ADMIN, BOT_TOKEN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import MAX_BLOCK_TEXT, Fault, block_chars
from tests.helpers import DebateScript, reply_for

THREAD_TEXTS = [
    "Round 1 of 1",
    "Verdict: revise (0.05)",
    "[file debate-1-receipt.json]",
    "Review needed for debate #1",
]


def with_reviewer(bot: Bot) -> None:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id=CHANNEL, updated_by=ADMIN, values={"reviewers": [REVIEWER]}
        )


def escalation_of(bot: Bot, debate_id: int) -> Escalation | None:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        return reviews.escalation_for(session, debate_id=debate_id)


def review_row(bot: Bot, debate_id: int) -> Outbox:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        row = outbox.row_for(session, debate_id=debate_id, key="review")
    assert row is not None
    return row


def texts(messages: list[dict[str, Any]]) -> list[str]:
    """Each message's text; a shared file (the debate's receipt) as its name."""
    return [f"[file {m['files'][0]['name']}]" if m.get("files") else m["text"] for m in messages]


async def test_a_5xx_outage_mid_debate_loses_nothing_and_keeps_the_thread_in_order(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    with_reviewer(bot)
    bot.llm.delay_s = 0.2
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    outage = Fault(status=500, error="internal_error")
    bot.emulator.fail_for("chat.postMessage", outage, seconds=4)
    bot.emulator.fail_for("chat.update", outage, seconds=4)

    [debate] = await bot.finished(limit_s=90)

    failed = [c for c in bot.emulator.calls if c.status == 500]
    assert failed, "the outage was felt"
    assert debate.thread_ts is not None
    thread = bot.emulator.in_thread(CHANNEL, debate.thread_ts)
    assert texts(thread) == THREAD_TEXTS
    assert f"<@{REVIEWER}>" in str(thread[-1]["blocks"])
    parent = bot.emulator.posted(CHANNEL)[0]
    assert "Done" in str(parent["blocks"])
    assert debate.id is not None
    escalation = escalation_of(bot, debate.id)
    assert escalation is not None
    assert escalation.message_ts == thread[-1]["ts"]


async def test_a_call_that_hangs_past_the_timeout_is_retried_with_its_reason_logged(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_bot()
    # The parent goes out; the round hangs past the 2 s client timeout, twice.
    hang = Fault(status=500, hang_s=3.0)
    bot.emulator.fail("chat.postMessage", None, hang, hang)
    caplog.set_level(logging.WARNING, logger="bot")

    await bot.driver.command("Should we adopt ADR-042?")

    [debate] = await bot.finished(limit_s=90)
    assert debate.thread_ts is not None
    assert texts(bot.emulator.in_thread(CHANNEL, debate.thread_ts)) == THREAD_TEXTS
    reasons = [r.getMessage() for r in caplog.records if "round:1 not delivered" in r.getMessage()]
    assert len(reasons) == 2
    assert all("timeout: Slack did not answer chat_postMessage" in r for r in reasons)


async def test_a_failing_parent_update_never_holds_back_the_review_request(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    with_reviewer(bot)
    # Every status update fails (a network blip that outlasts the debate) ...
    bot.emulator.fail_for("chat.update", Fault(status=503, html=True), seconds=6)

    await bot.driver.command("Should we adopt ADR-042?")

    # ... yet the review request arrives while the updates are still failing.
    request = await bot.wait_for(
        lambda: next(
            (m for m in bot.emulator.posted(CHANNEL) if "Review needed" in m["text"]), None
        ),
        "the review request",
        limit_s=5,
    )
    assert f"<@{REVIEWER}>" in str(request["blocks"])
    assert not any(c.status == 200 for c in bot.emulator.calls_of("chat.update", ok_only=False))
    await bot.finished(limit_s=60)
    assert "Done" in str(bot.emulator.posted(CHANNEL)[0]["blocks"])


async def test_a_deleted_parent_is_posted_again_and_the_debate_goes_on_there(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    with_reviewer(bot)
    bot.llm.delay_s = 0.3
    await bot.driver.command("Should we adopt ADR-042?")
    parent = await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    old_ts = parent[0]["ts"]
    bot.emulator.delete_message(CHANNEL, old_ts)

    [debate] = await bot.finished(limit_s=60)

    [new_parent] = [m for m in bot.emulator.posted(CHANNEL) if "thread_ts" not in m]
    assert new_parent["ts"] != old_ts
    assert debate.thread_ts == new_parent["ts"]
    assert "original message of this debate was deleted" in str(new_parent["blocks"])
    assert f"p{old_ts.replace('.', '')}" in str(new_parent["blocks"]), "it links the old thread"
    thread = texts(bot.emulator.in_thread(CHANNEL, new_parent["ts"]))
    assert thread == THREAD_TEXTS
    assert "Done" in str(new_parent["blocks"])
    assert debate.id is not None
    assert escalation_of(bot, debate.id) is not None


async def test_debate_in_a_channel_without_the_bot_is_refused_before_anything_is_paid(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    bot.emulator.outside.add(CHANNEL)

    reply = await bot.driver.command("Should we adopt ADR-042?")
    form = await bot.driver.command("")

    assert reply.status == 200
    await bot.wait_for(lambda: len(bot.emulator.responses) == 2, "both answers")
    for answer in bot.emulator.responses:
        assert answer["response_type"] == "ephemeral"
        assert "/invite @debatebot" in answer["text"]
        assert "not_in_channel" in answer["text"]
    assert form.status == 200
    assert bot.emulator.views == []
    assert bot.debates() == []
    assert bot.llm.calls == []
    assert bot.emulator.posted(CHANNEL) == []


async def test_the_form_and_the_shortcut_check_the_channel_too(start_bot: BotFactory) -> None:
    bot = await start_bot()
    await bot.driver.command("")
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "the form")
    bot.emulator.outside.add(CHANNEL)

    submitted = await bot.driver.submit(
        view,
        {
            "question": {"type": "plain_text_input", "value": "Adopt ADR-042?"},
            "protocol": {
                "type": "static_select",
                "selected_option": {"value": "adversarial"},
            },
            "rounds": {"type": "plain_text_input", "value": "1"},
        },
        user="UALICE",
    )
    shortcut = await bot.driver.interaction(
        {
            "type": "message_action",
            "callback_id": action_ids.SHORTCUT_DEBATE_THREAD,
            "team": {"id": "T1"},
            "user": {"id": "UALICE"},
            "channel": {"id": CHANNEL},
            "message": {"ts": "1700000000.000001", "text": "hi"},
            "trigger_id": "trigger.x",
            "response_url": f"{bot.emulator.url}/response/shortcut",
        }
    )

    # The form closes at once; the check's answer comes after it, by DM where the bot cannot
    # post even an ephemeral message.
    assert (submitted.status, submitted.body) == (200, "")
    [told] = await bot.wait_for(lambda: bot.emulator.dms("UALICE"), "the form's answer")
    assert "/invite @debatebot" in told["text"]
    assert shortcut.status == 200
    answer = await bot.wait_for(lambda: bot.emulator.responses, "the shortcut's answer")
    assert "/invite @debatebot" in answer[-1]["text"]
    assert bot.debates() == []


async def test_a_thread_lost_mid_debate_stops_it_and_the_review_request_goes_by_dm(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(DebateScript())
    with_reviewer(bot)
    bot.llm.delay_s = 0.3
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    bot.emulator.outside.add(CHANNEL)  # someone removes the bot from the channel

    [debate] = await bot.finished(limit_s=60)

    assert debate.outcome == "FAILED"
    assert "not_in_channel" in (debate.error or "")
    assert len(bot.llm.calls) < 5, "it stopped at the next turn instead of spending on"
    assert debate.id is not None
    escalation = escalation_of(bot, debate.id)
    assert escalation is not None
    [request] = bot.emulator.dms(REVIEWER)
    assert "Review needed" in request["text"]
    assert "cannot post there" in str(request["blocks"])
    assert [a["action_id"] for a in request["blocks"][-1]["elements"]][:2] == [
        action_ids.ACTION_APPROVE,
        action_ids.ACTION_REJECT,
    ]
    assert debate.id is not None
    assert review_row(bot, debate.id).delivered_to == f"dm to reviewers: {REVIEWER}"
    [told] = bot.emulator.dms("UALICE")
    assert "/invite @debatebot" in told["text"]


async def test_with_no_reviewers_the_requester_gets_the_review_request_by_dm(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    bot.llm.delay_s = 0.3
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    bot.emulator.archived.add(CHANNEL)

    [debate] = await bot.finished(limit_s=60)

    dms = texts(bot.emulator.dms("UALICE"))
    assert any("Review needed" in t for t in dms)
    assert any("is_archived" in t for t in dms)
    assert debate.id is not None
    assert review_row(bot, debate.id).delivered_to == "dm to requester: UALICE"


async def test_a_long_question_is_posted_whole_within_slacks_limits_even_when_refused(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    words = " ".join(f"w{n}" for n in range(9000))  # about 50,000 characters
    question = f"Should we adopt this? {words}"
    # Slack refuses anything over 8,000 characters of block text for a while: the parts are
    # re-split smaller and go through.
    bot.emulator.fail_for(
        "chat.postMessage", Fault(error="msg_blocks_too_long", max_chars=8000), seconds=600
    )

    await bot.driver.command(question)

    [debate] = await bot.finished(limit_s=90)
    assert debate.thread_ts is not None
    thread = bot.emulator.in_thread(CHANNEL, debate.thread_ts)
    parts = [m for m in thread if m["text"].startswith("The full question")]
    assert len(parts) >= 7
    for message in bot.emulator.posted(CHANNEL):
        assert block_chars(message["blocks"]) <= min(8000, MAX_BLOCK_TEXT)
        assert len(message["text"]) <= 40_000
        for block in message["blocks"]:
            assert len((block.get("text") or {}).get("text", "")) <= 3000
    shown = " ".join(
        b["text"]["text"] for m in parts for b in m["blocks"] if b["type"] == "section"
    )
    assert " ".join(shown.split()) == question
    assert "Verdict: revise (0.05)" in texts(thread)


async def test_what_people_type_round_trips_and_nothing_the_bot_sends_can_mention(
    start_bot: BotFactory,
) -> None:
    typed = "R&amp;D &lt;legacy&gt; <!here> <@U1> <https://x|y>"
    meant = "R&D <legacy> <!here> <@U1> <https://x|y>"
    hostile = "Ping <!channel> and <#C999|general>, see <https://evil|https://good> <@U1>"
    script = DebateScript(moderator=[reply_for("moderator", synthesis=hostile)])
    bot = await start_bot(script)
    with_reviewer(bot)

    await bot.driver.command(f"{typed} --rounds abc")
    await bot.driver.command(typed)

    [debate] = await bot.finished()
    assert debate.question == meant
    sent = [c.params for c in bot.emulator.calls if c.method.startswith("chat.")]
    sent += bot.emulator.responses
    for params in sent:
        flat = f"{params.get('text', '')} {params.get('blocks', '')}"
        for raw in ("<!here>", "<!channel>", "<@U1>", "<https://", "<#C999"):
            assert raw not in flat, (raw, params)
    parent = bot.emulator.posted(CHANNEL)[0]
    assert "R&amp;D &lt;legacy&gt; &lt;!here&gt; &lt;@U1&gt;" in parent["text"]
    assert debate.thread_ts is not None
    assert "&lt;!channel&gt;" in str(bot.emulator.in_thread(CHANNEL, debate.thread_ts))


async def test_a_double_click_opens_one_note_form_and_a_refused_note_is_told_by_dm(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    with_reviewer(bot)
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished()
    request = next(m for m in bot.emulator.posted(CHANNEL) if "Review needed" in m["text"])

    await bot.driver.click(request, action_ids.ACTION_APPROVE, user=REVIEWER)
    await bot.driver.click(request, action_ids.ACTION_APPROVE, user=REVIEWER)
    await bot.wait_for(lambda: bot.emulator.views, "the note form")

    assert len(bot.emulator.calls_of("views.open")) == 1
    refused = await bot.driver.submit(
        bot.emulator.views[0], {"note": {"type": "plain_text_input", "value": "x"}}, user="UMAL"
    )
    assert (refused.status, refused.body) == (200, "")
    [told] = await bot.wait_for(lambda: bot.emulator.dms("UMAL"), "the refusal")
    assert "Only the reviewers" in told["text"]
    assert "Nothing was changed" in told["text"]


async def test_another_round_is_offered_only_where_it_can_run(start_bot: BotFactory) -> None:
    bot = await start_bot()
    with_reviewer(bot)
    await bot.driver.command("Should we adopt ADR-042?")
    [debate] = await bot.finished()
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        escalation = session.exec(select(Escalation)).one()
        assert debate.id is not None
        record = endings.verdict_for(session, debate_id=debate.id)
    assert record is not None
    result = DebateResult.model_validate_json(record.result_json)
    adversarial = owed.closing(debate, result, escalation)[-1]
    stances = result.model_copy(
        update={"spec": result.spec.model_copy(update={"protocol": "stances"})}
    )
    other = owed.closing(debate, stances, escalation)[-1]

    def buttons(draft: outbox.Draft) -> list[str]:
        return [e["action_id"] for e in draft.blocks[-1]["elements"]]

    assert action_ids.ACTION_ANOTHER_ROUND in buttons(adversarial)
    assert buttons(other) == [action_ids.ACTION_APPROVE, action_ids.ACTION_REJECT]


async def test_a_new_process_delivers_what_a_stopped_one_still_owed(start_bot: BotFactory) -> None:
    bot = await start_bot()
    with_reviewer(bot)
    # Slack is down for the whole life of the first process.
    bot.emulator.fail_for("*", Fault(status=503, error="service_unavailable"), seconds=600)
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.wait_for(
        lambda: bot.debates() and bot.debates()[0].state == "finished", "the finished debate"
    )
    await bot.runtime.stop()
    assert bot.emulator.posted(CHANNEL) == []
    assert {row.key for row in bot.owed()} >= {"parent", "round:1", "verdict", "review"}

    bot.emulator.heal()
    settings = Settings(
        slack_bot_token=SecretStr(BOT_TOKEN), slack_api_url=bot.emulator.api_url, post_interval_s=0
    )
    http = slack_session(settings)
    successor = build_delivery(
        settings, bot.engine, slack_client(settings, session=http), owner="successor"
    )
    stop = asyncio.Event()
    delivering = asyncio.create_task(successor.run_forever(stop))

    [debate] = await bot.finished()
    stop.set()
    await delivering
    await http.close()
    [parent] = [m for m in bot.emulator.posted(CHANNEL) if "thread_ts" not in m]
    assert texts(bot.emulator.in_thread(CHANNEL, parent["ts"])) == THREAD_TEXTS
    assert "Done" in str(parent["blocks"])
    assert debate.id is not None
    escalation = escalation_of(bot, debate.id)
    assert escalation is not None
    assert escalation.message_ts is not None


async def test_the_dm_chain_reaches_the_admins_when_the_requester_cannot_be_reached(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    bot.llm.delay_s = 0.3
    # conversations.open is down: DMs go to the user id itself; the requester's DM refuses.
    bot.emulator.fail_for("conversations.open", Fault(status=500), seconds=600)
    bot.emulator.outside.add("DUALICE")
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    bot.emulator.archived.add(CHANNEL)

    [debate] = await bot.finished(limit_s=60)

    [request] = bot.emulator.dms(ADMIN)
    assert "Review needed" in request["text"]
    assert debate.id is not None
    assert review_row(bot, debate.id).delivered_to == f"dm to workspace admins: {ADMIN}"
    assert bot.emulator.dms("UALICE") == []
    assert bot.emulator.calls_of("users.list")


async def test_a_parent_is_posted_again_without_a_link_when_slack_gives_none(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    bot.llm.delay_s = 0.3
    bot.emulator.fail_for("chat.getPermalink", Fault(status=200, error="internal_error"), 600)
    await bot.driver.command("Should we adopt ADR-042?")
    parent = await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    bot.emulator.delete_message(CHANNEL, parent[0]["ts"])

    await bot.finished(limit_s=60)

    [new_parent] = [m for m in bot.emulator.posted(CHANNEL) if "thread_ts" not in m]
    assert "stays in its thread" in str(new_parent["blocks"])
    assert "https://" not in str(new_parent["blocks"])


async def test_when_slack_cannot_say_whether_the_bot_is_in_the_channel_the_debate_goes_ahead(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    # conversations.info fails, then hangs past the check's short wait: neither blocks anyone.
    bot.emulator.fail("conversations.info", Fault(status=500), Fault(status=500, hang_s=3))

    await bot.driver.command("Should we adopt ADR-042?")
    await bot.driver.command("")
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "the form")

    assert view["callback_id"] == action_ids.VIEW_DEBATE
    [debate] = await bot.finished()
    assert debate.thread_ts is not None
    assert texts(bot.emulator.in_thread(CHANNEL, debate.thread_ts)) == THREAD_TEXTS


async def test_a_form_is_answered_in_time_while_conversations_info_hangs(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    await bot.driver.command("")
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "the form")
    bot.emulator.fail("conversations.info", Fault(status=500, hang_s=5))

    submitted = await bot.driver.submit(
        view,
        {
            "question": {"type": "plain_text_input", "value": "Adopt ADR-042?"},
            "protocol": {"type": "static_select", "selected_option": {"value": "adversarial"}},
            "rounds": {"type": "plain_text_input", "value": "1"},
        },
        user="UALICE",
    )

    # The check gave up after its short wait (2 s), inside Slack's 3 s, and the form closed.
    assert submitted.status == 200
    assert submitted.body == ""
    [debate] = await bot.finished()
    assert debate.source == "modal"


async def test_review_dms_are_retried_through_a_slack_outage(start_bot: BotFactory) -> None:
    bot = await start_bot()
    with_reviewer(bot)
    bot.llm.delay_s = 0.3
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    bot.emulator.outside.add(CHANNEL)
    await bot.wait_for(lambda: bot.emulator.dms("UALICE"), "the requester told by DM")
    # From here every DM fails for a while: the review request waits, it is not lost.
    bot.emulator.fail_for("chat.postMessage", Fault(status=500), seconds=3)

    [debate] = await bot.finished(limit_s=60)

    [request] = bot.emulator.dms(REVIEWER)
    assert "Review needed" in request["text"]
    assert debate.id is not None
    row = review_row(bot, debate.id)
    assert (row.state, row.delivered_to) == ("sent", f"dm to reviewers: {REVIEWER}")
    assert row.attempts >= 1


async def test_admins_are_asked_again_when_users_list_does_not_answer(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    bot.llm.delay_s = 0.3
    bot.emulator.outside.add("DUALICE")  # the requester cannot be sent a DM
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    bot.emulator.archived.add(CHANNEL)
    bot.emulator.fail("users.list", Fault(status=503), Fault(status=503))

    [debate] = await bot.finished(limit_s=60)

    assert len(bot.emulator.calls_of("users.list", ok_only=False)) >= 3
    [request] = bot.emulator.dms(ADMIN)
    assert "Review needed" in request["text"]
    assert debate.id is not None
    assert review_row(bot, debate.id).delivered_to == f"dm to workspace admins: {ADMIN}"


async def test_a_parent_that_cannot_be_posted_again_yet_is_retried(start_bot: BotFactory) -> None:
    bot = await start_bot()
    bot.llm.delay_s = 0.3
    await bot.driver.command("Should we adopt ADR-042?")
    parent = await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    # The round meets the deleted thread; the parent's re-post then meets a 500, once.
    bot.emulator.fail("chat.postMessage", None, Fault(status=500))
    bot.emulator.delete_message(CHANNEL, parent[0]["ts"])

    [debate] = await bot.finished(limit_s=60)

    [new_parent] = [m for m in bot.emulator.posted(CHANNEL) if "thread_ts" not in m]
    assert texts(bot.emulator.in_thread(CHANNEL, new_parent["ts"]))[:2] == THREAD_TEXTS[:2]
    assert debate.thread_ts == new_parent["ts"]
