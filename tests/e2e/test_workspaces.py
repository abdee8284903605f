"""Two workspaces on one deployment, end to end (issue 37): each installs over OAuth, debates,
reviews and configures with its own token and sees only its own records; uninstalling one stops
its debate at the next turn and drops what it is owed while the other goes on; installing it
again resumes the debate where it stopped. When Slack refuses one workspace's token with no
uninstall heard of, that workspace alone waits (its debates unclaimed, what it is owed held,
its requests refused with the reason, `/healthz` still healthy, counting it), until Slack takes
the token again or the app is installed there again."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlmodel import col, select

from bot.messages import action_ids
from bot.store import channels, installations, refusals
from bot.store.db import session_scope
from bot.store.debate_tables import Debate, DebateState
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.review_tables import Review
from bot.store.tenancy import EVERY_WORKSPACE, Workspace
from engine.llm import LLMRequest
from engine.models import utcnow
from engine.providers.fake import FunctionLLM
from tests.e2e.conftest import ADMIN, BOT_TOKEN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.slack_emulator import SlackEmulator
from tests.e2e.slack_workspaces import REFUSALS, SCOPES_HEADER, Workspaces
from tests.e2e.test_oauth_installs import (
    OTHER,
    command,
    install,
    open_home,
    post_event,
    published_with,
    start_many,
    tenancy,
)
from tests.helpers import DebateScript

T1 = Workspace(team_id="T1")
T2 = Workspace(team_id="T2")
NOTE = {"note": {"type": "plain_text_input", "value": "Checked with the owners."}}


def debates(bot: Bot) -> list[Debate]:
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        return list(session.exec(select(Debate).order_by(col(Debate.id))))


def owed(bot: Bot) -> list[Outbox]:
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        open_states = (OutboxState.PENDING, OutboxState.SENDING)
        return list(session.exec(select(Outbox).where(col(Outbox.state).in_(open_states))))


async def settled(bot: Bot, count: int) -> list[Debate]:
    """`count` debates finished, every message owed delivered."""

    def done() -> list[Debate] | None:
        rows = debates(bot)
        ready = len(rows) == count and all(d.state == DebateState.FINISHED for d in rows)
        return rows if ready and not owed(bot) else None

    return await bot.wait_for(done, f"{count} finished debates")  # type: ignore[no-any-return]


def writes(bot: Bot) -> list[tuple[str, str]]:
    """(channel, token) of every chat write the bot made."""
    return [
        (str(call.params.get("channel")), call.token)
        for call in bot.emulator.calls
        if call.method.startswith("chat.") and call.params.get("channel") in (CHANNEL, OTHER)
    ]


def review_request(bot: Bot, channel: str) -> dict[str, Any] | None:
    return next((m for m in bot.emulator.posted(channel) if "Review needed" in m["text"]), None)


class Gate:
    """The scripted model, held at questions holding `word` until opened."""

    def __init__(self, word: str) -> None:
        self.word = word
        self.opened = asyncio.Event()
        self.waiting = asyncio.Event()
        self.script = DebateScript()

    async def __call__(self, request: LLMRequest) -> Any:
        if self.word in str(request.messages):
            self.waiting.set()
            await self.opened.wait()
        return self.script(request)


async def test_two_workspaces_debate_review_and_configure_apart_and_an_uninstall_pauses_one(
    start_bot: BotFactory,
) -> None:
    gate = Gate("ADR-900")
    bot = await start_many(start_bot, llm=FunctionLLM(gate))
    await install(bot, "T1")
    await install(bot, "T2")
    [t2_first] = tenancy(bot).tokens_of("T2")

    # Settings: T2's channel gets a reviewer; T1's stays as it was.
    reply = await command(bot, "T2", OTHER, f"config set reviewers <@{REVIEWER}|rev>", ADMIN)
    assert reply == 200
    await bot.wait_for(lambda: bot.emulator.responses, "the settings confirmation")
    with session_scope(bot.engine, workspace=T2) as session:
        assert channels.channel_settings(session, channel_id=OTHER).reviewers == [REVIEWER]
    with session_scope(bot.engine, workspace=T1) as session:
        assert channels.channel_settings(session, channel_id=OTHER).reviewers == []

    # Each workspace debates; every write goes out with its own workspace's token.
    assert await command(bot, "T1", CHANNEL, "Should we adopt ADR-042?", "UALICE") == 200
    assert await command(bot, "T2", OTHER, "Should we adopt ADR-777?", "UBOB") == 200
    first, second = await settled(bot, 2)
    assert (first.team_id, second.team_id) == ("T1", "T2")
    assert {token for channel, token in writes(bot) if channel == CHANNEL} == {BOT_TOKEN}
    assert {token for channel, token in writes(bot) if channel == OTHER} == {t2_first}

    # T2's review request names its reviewer, who decides it from T2.
    request = await bot.wait_for(lambda: review_request(bot, OTHER), "T2's review request")
    assert f"<@{REVIEWER}>" in str(request["blocks"])
    bot.driver.team = "T2"
    await bot.driver.click(
        copy.deepcopy(request), action_ids.ACTION_APPROVE, user=REVIEWER, channel=OTHER
    )
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "modal")
    assert (await bot.driver.submit(view, NOTE, user=REVIEWER)).status == 200

    def reviews() -> list[Review]:
        with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
            return list(session.exec(select(Review)))

    [review] = await bot.wait_for(reviews, "T2's review")
    assert (review.team_id, review.debate_id) == ("T2", second.id)

    # App Home lists only the viewer's workspace's debates.
    assert await open_home(bot, "T1", "UALICE") == 200
    assert await open_home(bot, "T2", "UBOB") == 200
    await bot.wait_for(lambda: published_with(bot, "UALICE"), "T1's App Home")
    await bot.wait_for(lambda: published_with(bot, "UBOB"), "T2's App Home")
    homes = {
        call.params["user_id"]: str(call.params["view"])
        for call in bot.emulator.calls_of("views.publish")
    }
    assert "ADR-777" not in homes["UALICE"]
    assert "ADR-042" not in homes["UBOB"]

    # T2 debates again; the app is uninstalled while its first model call runs.
    assert await command(bot, "T2", OTHER, "Should we adopt ADR-900?", "UBOB") == 200
    await asyncio.wait_for(gate.waiting.wait(), 30)
    revoked, uninstalled = tenancy(bot).uninstall("T2")
    assert await post_event(bot, revoked) == 200
    assert await post_event(bot, uninstalled) == 200

    def suspended() -> Debate | None:
        third = debates(bot)[-1]
        return third if third.suspended_at is not None else None

    third = await bot.wait_for(suspended, "the debate suspended")
    gate.opened.set()

    # Its worker stops at the next turn and hands it back: not finished, not claimed again.
    def handed_back() -> bool:
        row = debates(bot)[-1]
        return row.lease_expires_at is not None and row.lease_expires_at <= utcnow()

    await bot.wait_for(handed_back, "the hand-back")
    await asyncio.sleep(0.5)
    [row] = [d for d in debates(bot) if d.id == third.id]
    assert row.state != DebateState.FINISHED
    with session_scope(bot.engine, workspace=T2) as session:
        dropped = session.exec(select(Outbox).where(col(Outbox.state) == OutboxState.FAILED)).all()
    assert all((o.last_error or "").startswith("dropped: ") for o in dropped)

    # T1 is untouched: it debates as before.
    assert await command(bot, "T1", CHANNEL, "Should we adopt ADR-043?", "UALICE") == 200

    def t1_done() -> bool:
        return any(
            d.team_id == "T1" and "ADR-043" in d.question and d.state == DebateState.FINISHED
            for d in debates(bot)
        )

    await bot.wait_for(t1_done, "T1's second debate")

    # Installed again: the suspended debate resumes and finishes, posting with the new token.
    await install(bot, "T2")
    [t2_second] = tenancy(bot).tokens_of("T2")
    assert t2_second != t2_first

    def resumed() -> bool:
        return next(d for d in debates(bot) if d.id == third.id).state == DebateState.FINISHED

    await bot.wait_for(resumed, "the resumed debate")
    await bot.wait_for(lambda: not owed(bot), "its messages delivered")
    tokens = {token for channel, token in writes(bot) if channel == OTHER}
    assert tokens <= {t2_first, t2_second}
    assert t2_second in tokens
    assert {token for channel, token in writes(bot) if channel == CHANNEL} == {BOT_TOKEN}


# --- one workspace's token refused, no uninstall heard of -------------------------------------


def refused_count(bot: Bot) -> int:
    with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
        return refusals.refused_count(session)


def about(bot: Bot, word: str) -> Debate:
    return next(d for d in debates(bot) if word in d.question)


def delivered(bot: Bot, channel: str) -> list[tuple[str, str]]:
    """(token, text) of every chat write Slack took in `channel`."""
    return [
        (call.token, str(call.params.get("text")))
        for call in bot.emulator.calls
        if call.method.startswith("chat.")
        and call.params.get("channel") == channel
        and call.status == 200
    ]


async def refused_while_t2_debates(bot: Bot, gate: Gate, code: str) -> Debate:
    """T2's debate holds the one worker; Slack refuses T1's token; T1 asks, and the delivery of
    its debate's parent finds the refusal: T1's debate is queued, T1 held. Returns it."""
    await install(bot, "T1")
    await install(bot, "T2")
    assert await command(bot, "T2", OTHER, "Should we adopt ADR-900?", "UBOB") == 200
    await asyncio.wait_for(gate.waiting.wait(), 30)
    tenancy(bot).refuse("T1", code)
    assert await command(bot, "T1", CHANNEL, "Should we adopt ADR-042?", "UALICE") == 200
    await bot.wait_for(lambda: refused_count(bot) == 1, "T1's refused token noted")
    return about(bot, "ADR-042")


def t1_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and "bot token of workspace T1" in r.getMessage()
    ]


@pytest.mark.parametrize("code", sorted(REFUSALS))
async def test_a_workspace_whose_token_slack_refuses_waits_alone_and_resumes_once_taken(
    start_bot: BotFactory, code: str, caplog: pytest.LogCaptureFixture
) -> None:
    """For `missing_scope` (chat:write here), `auth.test` answers (it needs no scope): the
    probes go by the scopes it names, and the workspace stays held, with one ERROR."""
    caplog.set_level(logging.WARNING)
    gate = Gate("ADR-900")
    # Probes a tenth as far apart as the defaults, so the waits below are short.
    bot = await start_many(
        start_bot, llm=FunctionLLM(gate), slack_token_probe_s=0.2, slack_token_probe_max_s=1.5
    )
    held = await refused_while_t2_debates(bot, gate, code)
    since = len(bot.emulator.calls)
    [t1_token] = tenancy(bot).tokens_of("T1")
    [t2_token] = tenancy(bot).tokens_of("T2")

    # The deployment stays in the load balancer, and says how many, naming none.
    status, report = await bot.driver.health()
    assert (status, report["ok"], report["installs_token_refused"]) == (200, True, 1)
    assert "T1" not in json.dumps(report)

    # A new request from T1 is refused with the reason; nothing is queued or paid for.
    assert await command(bot, "T1", CHANNEL, "Should we adopt ADR-043?", "UALICE") == 200
    [told] = await bot.wait_for(
        lambda: [r for r in bot.emulator.responses if "refused my bot token" in r["text"]],
        "T1's refusal",
    )
    assert f"({code})" in told["text"]
    assert "nothing was queued" in told["text"]
    assert not [d for d in debates(bot) if "ADR-043" in d.question]

    # T2 goes on: its next debate is claimed ahead of T1's older one, run and delivered.
    assert await command(bot, "T2", OTHER, "Should we adopt ADR-901?", "UBOB") == 200
    gate.opened.set()

    def t2_done() -> bool:
        done = [d for d in debates(bot) if d.team_id == "T2" and d.state == DebateState.FINISHED]
        return len(done) == 2 and not [o for o in owed(bot) if o.team_id == "T2"]

    await bot.wait_for(t2_done, "T2's debates delivered")
    waiting = about(bot, "ADR-042")
    assert (waiting.state, waiting.claims) == (DebateState.QUEUED, 0), "never claimed"
    [parent] = [o for o in owed(bot) if o.debate_id == held.id]
    assert (parent.state, parent.attempts) == (OutboxState.PENDING, 0), "held, no retry spent"
    assert not delivered(bot, CHANNEL)
    assert {token for token, _ in delivered(bot, OTHER)} == {t2_token}

    # Slack is asked about T1's token now and then, and still refuses it: held, one ERROR.
    def probes() -> list[int]:
        return [
            call.status
            for call in bot.emulator.calls[since:]
            if call.method == "auth.test" and call.token == t1_token
        ]

    await bot.wait_for(lambda: len(probes()) >= 2, "two probes of T1's token")
    assert set(probes()) == ({200} if code == "missing_scope" else {400})
    assert refused_count(bot) == 1
    waiting = about(bot, "ADR-042")
    assert (waiting.state, waiting.claims) == (DebateState.QUEUED, 0), "still never claimed"
    assert len(t1_errors(caplog)) == 1, t1_errors(caplog)

    # Slack takes T1's token again: a probe finds it, T1's debate runs and what it is owed goes
    # out once.
    tenancy(bot).accept("T1")
    await settled(bot, 3)
    assert refused_count(bot) == 0
    assert (await bot.driver.health())[1]["installs_token_refused"] == 0
    posts = delivered(bot, CHANNEL)
    assert {token for token, _ in posts} == {BOT_TOKEN}
    thread_ts = about(bot, "ADR-042").thread_ts
    assert thread_ts is not None
    parents = [m for m in bot.emulator.posted(CHANNEL) if "thread_ts" not in m]
    assert len(parents) == 1
    verdicts = [
        m
        for m in bot.emulator.in_thread(CHANNEL, thread_ts)
        if "Verdict of debate" in str(m["blocks"])
    ]
    assert len(verdicts) == 1
    assert len(t1_errors(caplog)) == 1


async def test_the_emulator_withholds_a_scope_from_one_workspaces_token() -> None:
    """As Slack does for a token lacking a scope: the methods that need it answer
    `missing_scope`, naming it as `needed` and the token's scopes as `provided`; `auth.test`
    (which needs none) answers, naming the token's scopes in `x-oauth-scopes`; another
    workspace's token goes on. Granted again, the token has it."""
    emulator = SlackEmulator()
    await emulator.start()
    emulator.tenancy = Workspaces()
    emulator.tenancy.add("T1", channels={CHANNEL}, token=BOT_TOKEN)
    emulator.tenancy.add("T2", channels={OTHER}, token="xoxb-t2-token")
    t1 = AsyncWebClient(token=BOT_TOKEN, base_url=emulator.api_url)
    t2 = AsyncWebClient(token="xoxb-t2-token", base_url=emulator.api_url)
    try:
        emulator.tenancy.refuse("T1", "missing_scope", scope="chat:write")
        with pytest.raises(SlackApiError) as refused:
            await t1.chat_postMessage(channel=CHANNEL, text="hello")
        assert refused.value.response.data == {
            "ok": False,
            "error": "missing_scope",
            "needed": "chat:write",
            "provided": "commands",
        }
        auth = await t1.auth_test()
        assert (auth["ok"], auth.headers[SCOPES_HEADER]) == (True, "commands")
        assert (await t2.chat_postMessage(channel=OTHER, text="hello"))["ok"]
        assert (await t2.auth_test()).headers[SCOPES_HEADER] == "commands,chat:write"

        emulator.tenancy.accept("T1")
        assert (await t1.auth_test()).headers[SCOPES_HEADER] == "commands,chat:write"
        assert (await t1.chat_postMessage(channel=CHANNEL, text="hello"))["ok"]
    finally:
        await emulator.stop()


async def test_installing_again_clears_a_refused_token_at_once(start_bot: BotFactory) -> None:
    gate = Gate("ADR-900")
    bot = await start_many(start_bot, llm=FunctionLLM(gate))
    await refused_while_t2_debates(bot, gate, "invalid_auth")
    gate.opened.set()

    await install(bot, "T1")
    [new] = [t for t in tenancy(bot).tokens_of("T1") if t != BOT_TOKEN]
    assert refused_count(bot) == 0, "the install's new tokens are worth trying"
    await settled(bot, 2)
    assert {token for token, _ in delivered(bot, CHANNEL)} == {new}
    assert len([m for m in bot.emulator.posted(CHANNEL) if "thread_ts" not in m]) == 1


async def test_an_uninstall_of_a_refused_workspace_drops_what_it_is_owed(
    start_bot: BotFactory,
) -> None:
    gate = Gate("ADR-900")
    bot = await start_many(start_bot, llm=FunctionLLM(gate))
    held = await refused_while_t2_debates(bot, gate, "token_revoked")

    revoked, uninstalled = tenancy(bot).uninstall("T1")
    assert await post_event(bot, revoked) == 200
    assert await post_event(bot, uninstalled) == 200

    def dropped() -> int:
        with session_scope(bot.engine, workspace=EVERY_WORKSPACE) as session:
            history = installations.events(session, enterprise_id=None, team_id="T1")
        return sum(event.dropped_messages for event in history)

    await bot.wait_for(dropped, "the record of what was dropped")
    assert about(bot, "ADR-042").suspended_at is not None
    assert refused_count(bot) == 0, "the mark went with the bot"
    assert not [o for o in owed(bot) if o.debate_id == held.id]
    gate.opened.set()
    await bot.wait_for(lambda: about(bot, "ADR-900").state == DebateState.FINISHED, "T2's debate")
