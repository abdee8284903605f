"""The reviewer sees why: the review request and the verdict say, in one line, what the
confidence is made of (the independent judges, the citations, the objections left unanswered),
and a deployment with no judge says its confidence is unverified."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.helpers import DebateScript, reply_for

QUESTION = (
    "Should we adopt ADR-042? On a Redis outage it returns HTTP 503 instead of querying Postgres."
)
FOUND = "returns HTTP 503 instead of querying Postgres"
INVENTED = "RFC 9999 section 4 forbids cache-aside for prices"


async def review_request(bot: Bot) -> dict[str, Any]:
    await bot.driver.command(f"config set reviewers <@{REVIEWER}|rev>", user=ADMIN)
    await bot.wait_for(lambda: bot.emulator.responses, "the settings confirmation")
    await bot.driver.command(QUESTION)
    await bot.finished()
    return await bot.wait_for(  # type: ignore[no-any-return]
        lambda: next(
            (m for m in bot.emulator.posted(CHANNEL) if "Review needed" in m["text"]), None
        ),
        "the review request",
    )


async def test_the_review_request_and_the_verdict_say_what_the_confidence_is_made_of(
    start_bot: BotFactory,
) -> None:
    critic = reply_for("critic", evidence_cited=[FOUND, INVENTED])
    bot = await start_bot(DebateScript(critic=[critic]))

    request = await review_request(bot)

    # The canned judge (on the deciding model, the sides swapped) does not reach `revise`.
    line = (
        "judges agree 0 of 1 \u00b7 swapping the sides flipped a judge's decision"
        " \u00b7 1 of 2 citations not found \u00b7 0 of 1 objections unanswered"
        " \u00b7 moderator declared MODERATE"
    )
    header = request["blocks"][0]["text"]["text"]
    assert header.splitlines()[1] == line
    assert f"<@{REVIEWER}>" in header
    verdict = next(m for m in bot.emulator.posted(CHANNEL) if m["text"].startswith("Verdict"))
    shown = str(verdict["blocks"])
    assert line in shown
    assert "How the confidence was reached (weights default-1: each line adds to the logit" in shown
    assert "+0.00 agreement 0.00 (judges agree 0 of 1) \u00d7 +3.00" in shown
    assert "`position_bias`" in shown, "the flags say it too"


async def test_with_no_judge_the_review_request_says_the_confidence_is_unverified(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(DebateScript(), judges=0)

    request = await review_request(bot)

    header = request["blocks"][0]["text"]["text"]
    assert header.splitlines()[1].startswith(
        "confidence unverified: judges are set to 0: --judges or DEBATEBOT_JUDGES \u00b7 0 of 1"
        " objections unanswered"
    )
    why = str(request["blocks"][1])
    assert "the confidence is unverified" in why
    assert "not clear and grounded: nothing cited to check" in why
    assert not any(call.schema_name == "IndependentJudgment" for call in bot.llm.calls)
