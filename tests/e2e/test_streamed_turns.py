"""Streamed turns in the live plan: a turn's text shows in the plan while the model writes it,
before the turn is stored; a reply shown and then found invalid is shown as re-asked. The fake
model writes the observed turn at 20 tokens a second (the others fast, to keep the test short)
and holds it mid-reply until the test has seen what Slack was sent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bot.messages.plan import REASKED, WRITING, task_id
from bot.store import turns
from bot.store.db import session_scope
from engine.llm import Completion, LLMRequest, TextSink
from engine.models import Role
from engine.providers.fake import FunctionLLM, StreamRate
from tests.e2e.conftest import CHANNEL, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.helpers import SCHEMA_BY_ROLE, DebateScript, reply_for

ASKED = "Should we move billing retries to a queue?"
OBSERVED = StreamRate(tokens_per_s=20, first_token_s=0.2)
OTHERS = StreamRate(tokens_per_s=2_000)
CRITIC_TASK = task_id((1, Role.CRITIC, "", "", 1))


class HeldFake(FunctionLLM):
    """The scripted debate, streamed: the critic at 20 tokens a second, and held when
    `hold(request, text)` says so until the test sets `go_on`."""

    def __init__(self, script: DebateScript, hold: Callable[[LLMRequest, str], bool]) -> None:
        super().__init__(script)
        self.hold = hold
        self.go_on = asyncio.Event()

    def rate_for(self, request: LLMRequest) -> StreamRate:
        return OBSERVED if request.schema_name == SCHEMA_BY_ROLE["critic"] else OTHERS

    async def stream(self, request: LLMRequest, on_text: TextSink) -> Completion:
        async def held(text: str) -> None:
            await on_text(text)
            if not self.go_on.is_set() and self.hold(request, text):
                await self.go_on.wait()

        return await super().stream(request, held)


def critic_outputs(bot: Bot) -> list[str]:
    """Every output Slack was sent for the critic's task, in order."""
    found = []
    for stream in bot.emulator.streams(CHANNEL):
        for chunk in stream["chunks"]:
            if chunk.get("type") == "task_update" and chunk.get("id") == CRITIC_TASK:
                found.append(str(chunk.get("output", "")))
    return found


def stored_roles(bot: Bot) -> list[Role]:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        return [turn.role for turn in turns.stored_turns(session, debate_id=1)]


def is_critic(request: LLMRequest) -> bool:
    return request.schema_name == SCHEMA_BY_ROLE["critic"]


async def test_a_turns_text_shows_in_the_live_plan_before_the_turn_is_stored(
    start_bot: BotFactory,
) -> None:
    thesis = reply_for("critic")["thesis"]
    llm = HeldFake(DebateScript(), hold=lambda r, text: is_critic(r) and len(text) > 80)
    bot = await start_bot(llm=llm)
    await bot.driver.command(ASKED)

    shown = await bot.wait_for(
        lambda: [o for o in critic_outputs(bot) if o.startswith(WRITING + "[fake] The proposal")],
        "the critic's text being written in the live plan",
    )
    # Slack shows the critic's words while its turn is not stored (its model is still writing).
    assert Role.CRITIC not in stored_roles(bot)
    assert Role.PROPOSER in stored_roles(bot)
    assert thesis.startswith(shown[0].removeprefix(WRITING))
    assert all("{" not in o and '"' not in o for o in critic_outputs(bot))
    llm.go_on.set()

    await bot.finished()
    assert Role.CRITIC in stored_roles(bot)
    tasks = bot.emulator.tasks(bot.emulator.streams(CHANNEL)[0])
    assert tasks[CRITIC_TASK]["status"] == "complete"
    assert tasks[CRITIC_TASK]["output"].startswith("critic:")


async def test_a_streamed_reply_that_fails_validation_is_shown_as_reasked(
    start_bot: BotFactory,
) -> None:
    bad = reply_for("critic", challenge_strength=99)
    script = DebateScript(critic=[bad, reply_for("critic")])
    # The second critic reply (a re-ask: it carries the first and the problem) waits at its
    # first text until Slack has been sent the re-ask.
    llm = HeldFake(script, hold=lambda r, _text: is_critic(r) and len(r.messages) > 2)
    bot = await start_bot(llm=llm)
    await bot.driver.command(ASKED)

    await bot.wait_for(lambda: REASKED in critic_outputs(bot), "the re-ask in the live plan")
    outputs = critic_outputs(bot)
    assert any(o.startswith(WRITING) for o in outputs[: outputs.index(REASKED)])
    assert Role.CRITIC not in stored_roles(bot)
    llm.go_on.set()

    await bot.finished()
    tasks = bot.emulator.tasks(bot.emulator.streams(CHANNEL)[0])
    assert tasks[CRITIC_TASK]["status"] == "complete"
    # After the re-ask, the new reply's text says it is a second try, then the turn's summary.
    later = critic_outputs(bot)[critic_outputs(bot).index(REASKED) + 1 :]
    assert later[-1].startswith("critic:")
    assert all(o.startswith("re-asked 1 time") for o in later[:-1]), later
