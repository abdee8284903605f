"""`/debate`: ack, parent message, one threaded message per round, verdict, bad input, modal."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bot.store import endings, turns, verify
from bot.store.db import session_scope
from engine.models import DebateSpec
from tests.e2e.conftest import CHANNEL, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.test_slack_failures import texts
from tests.helpers import DebateScript, reply_for


def confident(**changes: object) -> dict[str, Any]:
    """A moderator sure enough that nothing is escalated."""
    return reply_for(
        "moderator", confidence_level="HIGH", unresolved_points=[], decision="accept", **changes
    )


async def test_debate_command_runs_to_a_verdict_with_each_round_in_the_thread(
    start_bot: BotFactory,
) -> None:
    script = DebateScript(
        moderator=[
            confident(recommend_another_round=True, synthesis="round one view"),
            confident(recommend_another_round=False, synthesis="final view"),
        ]
    )
    bot = await start_bot(script)
    # Long enough per call that each status is delivered before the next replaces it (the
    # parent's status updates are coalesced: only the newest pending one is sent).
    bot.llm.delay_s = 0.3

    reply = await bot.driver.command("Should we adopt ADR-042 for pricing? --rounds 2")

    assert reply.status == 200
    assert reply.body == ""
    [debate] = await bot.finished()
    assert debate.error is None
    parent = bot.emulator.posted(CHANNEL)[0]
    assert "thread_ts" not in parent
    assert debate.thread_ts == parent["ts"]
    assert "Should we adopt ADR-042 for pricing?" in parent["blocks"][0]["text"]["text"]
    thread = bot.emulator.in_thread(CHANNEL, parent["ts"])
    # The canned judge's `accept_with_conditions` agrees with `accept`: -3.2 + 3.0 + 1.1 (nothing
    # cited) + 0.4 (HIGH) = 1.3, so 0.79.
    assert texts(thread) == [
        "Round 1 of 2",
        "Round 2 of 2",
        "Verdict: accept (0.79)",
        "[file debate-1-receipt.json]",
    ]
    verdict_text = str(thread[2]["blocks"])
    assert "final view" in verdict_text
    assert "cost $" in verdict_text
    # A copy of the audit seal lives outside the database, in the thread.
    assert debate.chain_head is not None
    assert f"audit seal `{debate.chain_head[:16]}`" in verdict_text
    # While it ran, the plan streamed in the thread showed each turn (the parent's live status
    # is the fallback where Slack does not stream: test_protocol_threads.py); the parent went
    # from queued to done and shows the verdict.
    [stream] = bot.emulator.streams(CHANNEL)
    tasks = [(t["title"], t["status"]) for t in bot.emulator.tasks(stream).values()]
    assert ("Round 1: critic challenges the proposal", "complete") in tasks
    assert ("Round 2: moderator weighs the arguments", "complete") in tasks
    updates = [
        c.params for c in bot.emulator.calls_of("chat.update") if c.params["ts"] == parent["ts"]
    ]
    statuses = [str(u["blocks"]) for u in updates]
    assert "Done" in statuses[-1]
    assert "final view" in statuses[-1]
    assert "confidence" in statuses[-1]
    assert debate.id is not None
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        # The framing, two rounds of four, the independent judge.
        assert len(turns.turn_rows(session, debate_id=debate.id)) == 10
        assert verify.verify_chain(session, debate_id=debate.id).ok
        verdict = endings.verdict_for(session, debate_id=debate.id)
        assert verdict is not None
        assert verdict.decision == "accept"


async def test_bad_flags_are_explained_ephemerally_and_nothing_is_queued(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()

    wrong_type = await bot.driver.command("Should we? --rounds two")
    unknown = await bot.driver.command("Should we? --model gpt")
    no_question = await bot.driver.command("--rounds 2")
    too_many = await bot.driver.command("Should we adopt it? --rounds 5")

    assert wrong_type.json()["response_type"] == "ephemeral"
    assert "--rounds takes a whole number" in wrong_type.json()["text"]
    assert "unknown option `--model`" in unknown.json()["text"]
    assert "there is no question" in no_question.json()["text"]
    # Valid syntax, but the protocol refuses five rounds: answered through the response_url.
    assert too_many.body == ""
    await bot.wait_for(lambda: bot.emulator.responses, "the response_url answer")
    [answer] = bot.emulator.responses
    assert answer["response_type"] == "ephemeral"
    assert "at most 3 rounds" in answer["text"]
    assert bot.debates() == []
    assert bot.emulator.posted(CHANNEL) == []


async def test_help_answers_ephemerally(start_bot: BotFactory) -> None:
    """The help names the channel's review reaction, read from the store, so it follows the
    acknowledgement through the response_url."""
    bot = await start_bot()

    reply = await bot.driver.command("help")

    assert (reply.status, reply.body) == (200, "")
    [answer] = await bot.wait_for(lambda: bot.emulator.responses, "the help")
    assert answer["response_type"] == "ephemeral"
    assert "--protocol" in answer["text"]
    assert "--budget" in answer["text"]
    assert bot.debates() == []


async def test_debate_without_text_opens_a_modal_whose_submission_starts_the_debate(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(DebateScript(moderator=[confident()]))

    assert (await bot.driver.command("")).body == ""
    await bot.wait_for(lambda: bot.emulator.views, "the modal")
    [view] = bot.emulator.views
    assert {b["block_id"] for b in view["blocks"]} >= {"question", "protocol", "rounds", "budget"}

    invalid = await bot.driver.submit(
        view,
        {
            "question": {"type": "plain_text_input", "value": "Adopt ADR-042?"},
            "protocol": {"type": "static_select", "selected_option": {"value": "adversarial"}},
            "rounds": {"type": "plain_text_input", "value": "many"},
            "budget": {"type": "plain_text_input", "value": ""},
        },
        user="UALICE",
    )
    assert invalid.json()["response_action"] == "errors"
    assert "rounds" in invalid.json()["errors"]
    assert bot.debates() == []

    valid = await bot.driver.submit(
        view,
        {
            "question": {"type": "plain_text_input", "value": "Adopt ADR-042?"},
            "protocol": {"type": "static_select", "selected_option": {"value": "adversarial"}},
            "rounds": {"type": "plain_text_input", "value": "1"},
            "budget": {"type": "plain_text_input", "value": "0.50"},
        },
        user="UALICE",
    )
    assert valid.status == 200
    [debate] = await bot.finished()
    assert debate.source == "modal"
    assert debate.question == "Adopt ADR-042?"
    assert '"budget_usd":0.5' in debate.spec_json


class CountingValidator:
    """DebateSpec's pydantic validator, counting the specs it validates (built or parsed)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.count = 0

    def validate_python(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.real.validate_python(*args, **kwargs)

    def validate_json(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.real.validate_json(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.mark.parametrize("length", [40, 40_000])
async def test_a_debate_command_builds_its_spec_once_and_stores_the_question_as_written(
    start_bot: BotFactory, monkeypatch: pytest.MonkeyPatch, length: int
) -> None:
    """From the listener to the queued row and its owed parent, with no worker to run it: one
    DebateSpec is validated (the intake's), never parsed back from its JSON on the way."""
    bot = await start_bot(worker_concurrency=0)
    counting = CountingValidator(DebateSpec.__pydantic_validator__)
    monkeypatch.setattr(DebateSpec, "__pydantic_validator__", counting)
    question = ("Should we adopt ADR-042 & move sessions to <Redis>? " * 1000)[: length - 1] + "?"

    assert (await bot.driver.command(question)).status == 200
    [debate] = await bot.wait_for(bot.debates, "the queued debate")
    await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")

    assert counting.count == 1
    assert debate.question == question
    monkeypatch.undo()
    assert DebateSpec.model_validate_json(debate.spec_json).question == question


async def test_a_40000_character_question_is_debated_whole_and_posted_in_parts(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(DebateScript(moderator=[confident()]))
    paragraph = "Clause {n}: the supplier shall keep customer data in the EU & report breaches."
    question = "\n\n".join(paragraph.format(n=n) for n in range(520))[:40_000]
    assert len(question) == 40_000

    reply = await bot.driver.command(question)

    assert reply.status == 200
    [debate] = await bot.finished()
    assert debate.error is None
    # Stored as written: whole, in the debate row and in its spec, with no document split off.
    assert debate.question == question
    spec = DebateSpec.model_validate_json(debate.spec_json)
    assert (spec.question, spec.context) == (question, [])
    parent = bot.emulator.posted(CHANNEL)[0]
    assert "the full text is in the thread" in parent["blocks"][0]["text"]["text"]
    parts = [
        m for m in bot.emulator.in_thread(CHANNEL, parent["ts"]) if "full question" in m["text"]
    ]
    assert len(parts) >= 1
    shown = "".join(b["text"]["text"] for m in parts for b in m["blocks"] if b["type"] == "section")
    # Every character arrived (escaped for Slack), split on paragraph breaks only.
    assert shown.replace("&amp;", "&").replace("\n", "") == question.replace("\n", "")
    every_message = bot.emulator.posted(CHANNEL)
    assert all(len(m["blocks"]) <= 50 for m in every_message)


async def test_forged_and_stale_requests_are_rejected(start_bot: BotFactory) -> None:
    bot = await start_bot()
    body = bot.driver.command_body("Should we adopt ADR-042?")

    forged = await bot.driver.send(
        body, "application/x-www-form-urlencoded", signature="v0=" + "0" * 64
    )

    stale = await bot.driver.send(
        body, "application/x-www-form-urlencoded", timestamp=int(time.time()) - 6 * 60
    )

    assert forged.status == 401
    assert stale.status == 401
    assert bot.debates() == []
    assert bot.emulator.posted(CHANNEL) == []
