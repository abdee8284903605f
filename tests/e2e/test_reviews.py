"""Escalation in the thread, reviewer-only decisions, double clicks, another round, settings
permissions and App Home."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from sqlalchemy import delete
from sqlmodel import col, select

from bot.messages import action_ids
from bot.receipt_verifier import digest
from bot.store import channels, operations, outbox, receipts, reviews, turns, verify
from bot.store.channel_tables import ChannelSettings
from bot.store.db import session_scope
from bot.store.review_tables import Escalation, Review
from bot.store.tenancy import EVERY_WORKSPACE
from engine.errors import LLMError
from engine.providers.fake import FunctionLLM
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.helpers import DebateScript, calls_for, reply_for

NOTE = {"note": {"type": "plain_text_input", "value": "Fallback owner agreed offline."}}


async def configured(bot: Bot, setting: str, *, user: str = ADMIN) -> dict[str, Any]:
    """`/debate config set <setting>` and its answer, which comes through the response_url
    once the setting is saved (after the acknowledgement)."""
    answered = len(bot.emulator.responses)
    reply = await bot.driver.command(f"config set {setting}", user=user)
    assert (reply.status, reply.body) == (200, "")
    await bot.wait_for(lambda: len(bot.emulator.responses) > answered, f"config set {setting}")
    return bot.emulator.responses[answered]


async def escalated(bot: Bot) -> dict[str, Any]:
    """Configure a reviewer, run a low-confidence debate, return the review request message."""
    await configured(bot, f"reviewers <@{REVIEWER}|rev>")
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished()
    message = await bot.wait_for(
        lambda: next(
            (m for m in bot.emulator.posted(CHANNEL) if "Review needed" in m["text"]), None
        ),
        "the review request",
    )
    # As the reviewer's client saw it before any update (the emulator edits messages in place).
    return copy.deepcopy(message)


def reviews_of(bot: Bot) -> list[Review]:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        return list(session.exec(select(Review)))


async def test_low_confidence_is_escalated_and_only_a_reviewer_can_approve_once(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    request = await escalated(bot)

    [debate] = bot.debates()
    assert request["thread_ts"] == debate.thread_ts
    assert f"<@{REVIEWER}>" in request["blocks"][0]["text"]["text"]
    assert "below the escalation threshold 0.60" in str(request["blocks"])
    actions = next(b for b in request["blocks"] if b["type"] == "actions")
    assert [e["action_id"] for e in actions["elements"]] == [
        action_ids.ACTION_APPROVE,
        action_ids.ACTION_REJECT,
        action_ids.ACTION_ANOTHER_ROUND,
    ]

    # Someone else clicks: refused ephemerally, nothing changes, no modal opens.
    await bot.driver.click(request, action_ids.ACTION_APPROVE, user="UMALLORY")
    await bot.wait_for(lambda: bot.emulator.ephemeral, "the refusal")
    refusal = bot.emulator.ephemeral[-1]
    assert refusal["user"] == "UMALLORY"
    assert "Only the reviewers of debate #1's channel" in refusal["text"]
    assert reviews_of(bot) == []
    assert bot.emulator.views == []

    # The reviewer clicks Approve, which asks for a note, and submits it.
    await bot.driver.click(request, action_ids.ACTION_APPROVE, user=REVIEWER)
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "note modal")
    assert view["callback_id"] == action_ids.VIEW_REVIEW_NOTE
    submitted = await bot.driver.submit(view, NOTE, user=REVIEWER)
    assert submitted.status == 200
    await bot.wait_for(lambda: reviews_of(bot), "the stored review")
    [review] = reviews_of(bot)
    assert (review.reviewer, review.decision, review.note) == (
        REVIEWER,
        "approved",
        "Fallback owner agreed offline.",
    )
    assert review.created_at is not None
    # The decision joins the debate's signed receipt, with the digest of the request as posted.
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        receipt = receipts.receipt_of(session, debate_id=review.debate_id)
        shown = outbox.row_for(session, debate_id=review.debate_id, key="review")
    assert receipt is not None
    assert shown is not None
    assert shown.blocks == request["blocks"]
    [decision] = receipt["decisions"]
    assert decision["signature"] is not None
    statement = decision["statement"]
    assert (statement["by"], statement["decision"]) == (REVIEWER, "approved")
    assert statement["shown_sha256"] == digest({"text": shown.text, "blocks": shown.blocks})
    updated = await bot.wait_for(
        lambda: next(
            (
                m
                for m in bot.emulator.posted(CHANNEL)
                if m["ts"] == request["ts"] and m.get("edited")
            ),
            None,
        ),
        "the updated review request",
    )
    assert not any(b["type"] == "actions" for b in updated["blocks"])
    assert f"Approved by <@{REVIEWER}>" in str(updated["blocks"])

    # A second click and a retried submission change nothing.
    refusals = len(bot.emulator.ephemeral)
    await bot.driver.click(request, action_ids.ACTION_REJECT, user=REVIEWER)
    await bot.wait_for(lambda: len(bot.emulator.ephemeral) > refusals, "the second refusal")
    assert "already decided (approved)" in bot.emulator.ephemeral[-1]["text"]
    await bot.driver.submit(
        view, {"note": {"type": "plain_text_input", "value": "again"}}, user=REVIEWER
    )
    await bot.wait_for(lambda: len(bot.emulator.ephemeral) > refusals + 1, "the third refusal")
    assert len(reviews_of(bot)) == 1
    assert reviews_of(bot)[0].note == "Fallback owner agreed offline."
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        escalation = reviews.get_escalation(session, escalation_id=1)
        assert escalation is not None
        assert escalation.state == "approved"


async def test_a_member_of_the_reviewer_group_can_reject(start_bot: BotFactory) -> None:
    bot = await start_bot()
    bot.emulator.usergroups["SREVIEWERS"] = ["UCAROL"]
    await bot.driver.command("config set reviewers <!subteam^SREVIEWERS|@reviewers>", user=ADMIN)
    await bot.wait_for(lambda: bot.emulator.responses, "the settings confirmation")
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished()
    request = await bot.wait_for(
        lambda: next(
            (m for m in bot.emulator.posted(CHANNEL) if "Review needed" in m["text"]), None
        ),
        "the review request",
    )
    assert "<!subteam^SREVIEWERS>" in request["blocks"][0]["text"]["text"]

    await bot.driver.click(request, action_ids.ACTION_REJECT, user="UCAROL")
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "note modal")
    await bot.driver.submit(view, NOTE, user="UCAROL")

    await bot.wait_for(lambda: reviews_of(bot), "the stored review")
    assert reviews_of(bot)[0].decision == "rejected"


async def test_another_round_continues_the_debate_without_repeating_round_one(
    start_bot: BotFactory,
) -> None:
    script = DebateScript(
        moderator=[
            reply_for("moderator", synthesis="first look"),
            reply_for(
                "moderator",
                synthesis="second look",
                confidence_level="HIGH",
                unresolved_points=[],
                decision="accept",
            ),
        ]
    )
    bot = await start_bot(script)
    request = await escalated(bot)

    await bot.driver.click(request, action_ids.ACTION_ANOTHER_ROUND, user=REVIEWER)

    first, second = await bot.finished(count=2)
    assert second.parent_debate_id == first.id
    assert second.thread_ts == first.thread_ts
    assert second.outcome == "COMPLETE"
    assert second.decision == "accept"
    assert isinstance(bot.llm, FunctionLLM)
    assert len(calls_for(bot.llm, "framing")) == 1
    assert len(calls_for(bot.llm, "moderator")) == 2
    assert first.thread_ts is not None
    thread = [m["text"] for m in bot.emulator.in_thread(CHANNEL, first.thread_ts)]
    assert thread.count("Round 1 of 1") == 1
    assert "Round 2 of 2" in thread
    assert any("Round 2 requested" in t for t in thread)
    assert second.id is not None
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        assert verify.verify_chain(session, debate_id=second.id).ok
        # The first debate's six (its judge's too), round 2's four, and a judge of the whole.
        assert len(turns.turn_rows(session, debate_id=second.id)) == 11
    assert reviews_of(bot)[0].decision == "another_round"


async def test_channel_settings_need_an_owner_or_admin(start_bot: BotFactory) -> None:
    bot = await start_bot()

    await bot.driver.command("config set threshold 0.8", user="UALICE")
    await bot.wait_for(lambda: bot.emulator.responses, "the refusal")
    assert "Only workspace admins" in bot.emulator.responses[-1]["text"]

    await bot.driver.command("config set owners <@UALICE>", user=ADMIN)
    await bot.wait_for(lambda: len(bot.emulator.responses) == 2, "the confirmation")
    await bot.driver.command("config set threshold 80%", user="UALICE")
    await bot.wait_for(lambda: len(bot.emulator.responses) == 3, "the second confirmation")
    assert "Saved" in bot.emulator.responses[-1]["text"]
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        settings = channels.channel_settings(session, channel_id=CHANNEL)
    assert settings.threshold == 0.8
    assert settings.owners == ["UALICE"]
    assert settings.updated_by == "UALICE"


async def test_config_modal_saves_every_setting(start_bot: BotFactory) -> None:
    bot = await start_bot()

    await bot.driver.command("config", user=ADMIN)
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "modal")
    assert view["callback_id"] == action_ids.VIEW_CONFIG
    values: dict[str, dict[str, Any]] = {
        "protocol": {"type": "static_select", "selected_option": {"value": "adversarial"}},
        "rounds": {"type": "plain_text_input", "value": "2"},
        "threshold": {"type": "plain_text_input", "value": "0.7"},
        "reviewers": {"type": "plain_text_input", "value": "<@UREVIEW> <!subteam^SOPS>"},
        "owners": {"type": "plain_text_input", "value": ""},
        "budget": {"type": "plain_text_input", "value": "$2"},
        "adr": {
            "type": "checkboxes",
            "selected_options": [{"value": "on"}, {"value": "pr_comment"}],
        },
        "reaction": {"type": "plain_text_input", "value": ":mag:"},
        "monthly_budget": {"type": "plain_text_input", "value": "$50"},
        "review_sla": {"type": "plain_text_input", "value": "24h"},
        "digest": {"type": "plain_text_input", "value": "9:30"},
        "timezone": {"type": "plain_text_input", "value": "Europe/Berlin"},
        "adr_pattern": {"type": "plain_text_input", "value": r"RFC-\d+"},
    }
    bad = await bot.driver.submit(
        view,
        {
            **values,
            "threshold": {"type": "plain_text_input", "value": "high"},
            "timezone": {"type": "plain_text_input", "value": "Mars/Olympus"},
            "digest": {"type": "plain_text_input", "value": "25:00"},
        },
        user=ADMIN,
    )
    assert set(bad.json()["errors"]) == {"threshold", "timezone", "digest"}
    assert "IANA name" in bad.json()["errors"]["timezone"]
    assert (await bot.driver.submit(view, values, user=ADMIN)).status == 200

    def saved() -> ChannelSettings | None:
        with session_scope(bot.engine, workspace=WORKSPACE) as session:
            row = channels.channel_settings(session, channel_id=CHANNEL)
            return row if row.updated_by else None

    settings = await bot.wait_for(saved, "the saved settings")
    assert (settings.rounds, settings.threshold, settings.budget_usd) == (2, 0.7, 2.0)
    assert settings.reviewers == ["UREVIEW", "SOPS"]
    assert settings.adr_watch is True
    assert settings.trigger_reaction == "mag"
    assert (settings.monthly_budget_usd, settings.review_sla_h) == (50.0, 24.0)
    assert (settings.digest_time, settings.timezone) == ("09:30", "Europe/Berlin")
    assert (settings.adr_pattern, settings.pr_comment) == (r"RFC-\d+", True)

    # The form opens with what is saved, so saving it untouched changes nothing.
    await bot.driver.command("config", user=ADMIN)
    reopened = await bot.wait_for(
        lambda: len(bot.emulator.views) > 1 and bot.emulator.views[-1], "the second modal"
    )
    shown = {b.get("block_id"): b for b in reopened["blocks"]}
    assert shown["monthly_budget"]["element"]["initial_value"] == "50"
    assert shown["digest"]["element"]["initial_value"] == "09:30"
    assert shown["adr_pattern"]["element"]["initial_value"] == r"RFC-\d+"
    checked = [o["value"] for o in shown["adr"]["element"]["initial_options"]]
    assert checked == ["on", "pr_comment"]


async def test_app_home_shows_pending_reviews_recent_debates_and_spend(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    bot.emulator.user_channels[REVIEWER] = [CHANNEL]
    await escalated(bot)

    await bot.driver.event({"type": "app_home_opened", "user": REVIEWER, "tab": "home"})

    home = await bot.wait_for(lambda: bot.emulator.published, "the published home")
    [published] = home
    assert published["user_id"] == REVIEWER
    text = str(published["view"]["blocks"])
    assert "Reviews waiting for you" in text
    assert "*#1* in <#CDEBATE>" in text
    assert "Recent debates in your channels" in text
    assert "Whole workspace: *$" in text


async def test_a_failed_debate_is_escalated_with_its_reason(start_bot: BotFactory) -> None:
    failing = LLMError("the model server answered 500 three times")
    bot = await start_bot(DebateScript(critic=[failing]))

    await bot.driver.command("Should we adopt ADR-042?")

    [debate] = await bot.finished()
    assert debate.outcome == "FAILED"
    assert debate.thread_ts is not None
    thread = bot.emulator.in_thread(CHANNEL, debate.thread_ts)
    verdict = next(m for m in thread if m["text"].startswith("Verdict"))
    assert "Failed" in str(verdict["blocks"])
    request = await bot.wait_for(
        lambda: next((m for m in thread if "Review needed" in m["text"]), None), "review request"
    )
    assert "the debate failed" in str(request["blocks"])
    assert "answered 500 three times" in str(request["blocks"])
    parent = bot.emulator.posted(CHANNEL)[0]
    assert ":x: *Failed*" in str(parent["blocks"])


@pytest.mark.parametrize("gone", ["debate", "review request"])
async def test_a_decision_on_a_review_request_that_no_longer_exists_is_answered_plainly(
    start_bot: BotFactory, caplog: pytest.LogCaptureFixture, gone: str
) -> None:
    """Issue 41, item 6: the reviewer opened the note form, then the debate (or only its review
    request) was deleted; the note's submission tells them, by DM (the form has closed), and a
    click on the request's buttons, ephemerally; the log has one line, no traceback."""
    caplog.set_level(logging.WARNING)
    bot = await start_bot()
    request = await escalated(bot)
    [debate] = bot.debates()
    assert debate.id is not None
    await bot.driver.click(request, action_ids.ACTION_REJECT, user=REVIEWER)
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "note modal")
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        if gone == "debate":
            operations.remove_debate(session, debate_id=debate.id)
        else:
            session.execute(delete(Escalation).where(col(Escalation.debate_id) == debate.id))
        session.commit()

    submitted = await bot.driver.submit(view, NOTE, user=REVIEWER)
    assert submitted.status == 200
    [told] = await bot.wait_for(lambda: bot.emulator.dms(REVIEWER), "the reviewer told")
    assert "Review request 1 no longer exists" in told["text"]
    assert "your decision was not recorded and nothing was changed" in told["text"]
    assert "`/debate`" in told["text"]
    await bot.driver.click(request, action_ids.ACTION_APPROVE, user=REVIEWER)
    [clicked] = await bot.wait_for(lambda: bot.emulator.ephemeral, "the click answered")
    assert (clicked["user"], "no longer exists" in clicked["text"]) == (REVIEWER, True)
    assert reviews_of(bot) == []
    assert not [r for r in caplog.records if r.exc_info], "no traceback"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
