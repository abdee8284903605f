"""Who may decide a review is the server's choice, never the requester's.

The outside report: `/debate … --review-in <#C…>` sent the review to a channel where the
requester was a reviewer, and they approved their own debate, while the debate channel's own
reviewers were refused. Now the deciders are the reviewers of the channel chosen when the debate
was queued (the debate's channel; for the assistant pane, the deployment's review channel),
never the requester unless `DEBATEBOT_ALLOW_SELF_REVIEW` says so, wherever the request is
posted.
"""

from __future__ import annotations

import copy
from typing import Any

from sqlmodel import select

from bot.messages import action_ids, modals
from bot.store import channels
from bot.store.db import session_scope
from bot.store.review_tables import Review
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.test_assistant import ask, assistant_thread

REQUESTER = "UALICE"
REVIEW_CHANNEL = "CARCHREV"
NOTE = {"note": {"type": "plain_text_input", "value": "checked"}}


def configure(bot: Bot, channel: str, reviewers: list[str]) -> None:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id=channel, updated_by=ADMIN, values={"reviewers": reviewers}
        )


def reviews(bot: Bot) -> list[Review]:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        return list(session.exec(select(Review)))


async def review_request(bot: Bot, channel: str) -> dict[str, Any]:
    message = await bot.wait_for(
        lambda: next(
            (m for m in bot.emulator.posted(channel) if "Review needed" in m["text"]), None
        ),
        f"the review request in {channel}",
    )
    return copy.deepcopy(message)


async def refused(bot: Bot, request: dict[str, Any], user: str, channel: str) -> str:
    before = len(bot.emulator.ephemeral)
    await bot.driver.click(request, action_ids.ACTION_APPROVE, user=user, channel=channel)
    await bot.wait_for(lambda: len(bot.emulator.ephemeral) > before, "the refusal")
    refusal = bot.emulator.ephemeral[-1]
    assert refusal["user"] == user
    return str(refusal["text"])


async def approves(bot: Bot, request: dict[str, Any], user: str, channel: str) -> None:
    views = len(bot.emulator.views)
    await bot.driver.click(request, action_ids.ACTION_APPROVE, user=user, channel=channel)
    view = await bot.wait_for(lambda: len(bot.emulator.views) > views, "the note form")
    submitted = await bot.driver.submit(bot.emulator.views[-1], NOTE, user=user)
    assert submitted.status == 200
    assert view
    [review] = await bot.wait_for(lambda: reviews(bot), "the stored review")
    assert (review.reviewer, review.decision) == (user, "approved")


async def test_a_review_sent_to_a_channel_the_requester_reviews_is_decided_by_the_debates_channel(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    configure(bot, CHANNEL, [REVIEWER])
    configure(bot, REVIEW_CHANNEL, [REQUESTER])

    await bot.driver.command(
        f"Should we adopt ADR-042? --review-in <#{REVIEW_CHANNEL}|arch-reviews>", user=REQUESTER
    )
    await bot.finished()
    request = await review_request(bot, REVIEW_CHANNEL)
    assert f"<@{REVIEWER}>" in str(request["blocks"])

    said = await refused(bot, request, REQUESTER, REVIEW_CHANNEL)
    assert "You asked for debate #1, so someone else must decide its review" in said
    assert reviews(bot) == []
    # A reviewer of the review channel who is not one of the debate channel's is refused too:
    # where the request is posted does not choose who decides.
    configure(bot, REVIEW_CHANNEL, [REQUESTER, "UCAROL"])
    assert "Only the reviewers of debate #1's channel" in await refused(
        bot, request, "UCAROL", REVIEW_CHANNEL
    )

    await approves(bot, request, REVIEWER, REVIEW_CHANNEL)


async def test_a_requester_who_is_the_channels_only_reviewer_leaves_the_decision_to_admins(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    configure(bot, CHANNEL, [REQUESTER])

    await bot.driver.command("Should we adopt ADR-042?", user=REQUESTER)
    await bot.finished()
    request = await review_request(bot, CHANNEL)

    assert "someone else must decide" in await refused(bot, request, REQUESTER, CHANNEL)
    assert "Only the reviewers" in await refused(bot, request, "UCAROL", CHANNEL)
    await approves(bot, request, ADMIN, CHANNEL)


async def test_the_note_form_of_a_requester_is_refused_too(start_bot: BotFactory) -> None:
    """A forged note submission (the form needs no click) is checked the same way."""
    bot = await start_bot()
    configure(bot, CHANNEL, [REQUESTER, REVIEWER])
    await bot.driver.command("Should we adopt ADR-042?", user=REQUESTER)
    await bot.finished()
    await review_request(bot, CHANNEL)

    view = modals.review_note_modal(escalation_id=1, decision="approved")
    reply = await bot.driver.submit({**view, "id": "V1", "type": "modal"}, NOTE, user=REQUESTER)

    assert (reply.status, reply.body) == (200, "")
    [told] = await bot.wait_for(lambda: bot.emulator.dms(REQUESTER), "the refusal")
    assert "You asked for debate #1, so someone else must decide its review." in told["text"]
    assert reviews(bot) == []


async def test_a_workspace_may_allow_self_review_explicitly(start_bot: BotFactory) -> None:
    bot = await start_bot(allow_self_review=True)
    configure(bot, CHANNEL, [REQUESTER])

    await bot.driver.command("Should we adopt ADR-042?", user=REQUESTER)
    await bot.finished()
    request = await review_request(bot, CHANNEL)

    await approves(bot, request, REQUESTER, CHANNEL)


async def test_an_assistant_debate_is_decided_by_the_deployments_review_channel_not_by_review_in(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(review_channel="CREVIEWS")
    configure(bot, "CREVIEWS", [REVIEWER])
    configure(bot, REVIEW_CHANNEL, ["UCAROL"])

    await ask(
        bot,
        f"Should we adopt ADR-042? --review-in <#{REVIEW_CHANNEL}|arch-reviews>",
        assistant_thread(bot),
    )
    request = await review_request(bot, REVIEW_CHANNEL)

    assert "Only the reviewers" in await refused(bot, request, "UCAROL", REVIEW_CHANNEL)
    await approves(bot, request, REVIEWER, REVIEW_CHANNEL)
