"""A debate's receipt as a file in its thread (issue 46 item 4), over HTTP and Socket Mode: shared
after the verdict by Slack's three upload steps, its bytes verifying with the public keys the
server serves; a reviewer's decision shares the receipt again with the decision inside. A 5xx
on `files.completeUploadExternal` is retried and the file appears once; an app without
`files:write` gets the download command in the thread with one warning, and every other
message is delivered; a redirect of the upload address is not followed and sends nothing."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import select

from bot.messages import action_ids
from bot.receipt_verifier import verify
from bot.receipting import receipt_keys
from bot.settings import Settings
from bot.store.db import session_scope
from bot.store.debate_tables import Debate
from bot.store.outbox_tables import Outbox, OutboxState
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.host_emulators import OtherHost
from tests.e2e.slack_emulator import Fault, SlackEmulator
from tests.e2e.test_post_once import settled
from tests.e2e.test_reviews import NOTE, escalated
from tests.e2e.test_socket_mode import command, socket_bot, until

TRANSPORTS = ("http", "socket")


@dataclass
class Running:
    """The bot over one transport, how a person asks, and the public keys it serves."""

    emulator: SlackEmulator
    engine: Engine
    settings: Settings
    ask: Callable[[str], Awaitable[Any]]
    keys: Callable[[], Awaitable[Any]]


@pytest.fixture(params=TRANSPORTS)
async def running(
    request: pytest.FixtureRequest, start_bot: BotFactory, tmp_path: Path
) -> AsyncIterator[Running]:
    if request.param == "http":
        bot = await start_bot(outbox_backoff_max_s=0.3)

        async def served() -> Any:
            url = f"{bot.driver.bot_url}/.well-known/debatebot-keys.json"
            async with bot.driver.session.get(url) as answer:
                assert answer.status == 200
                return await answer.json(content_type=None)

        yield Running(bot.emulator, bot.engine, bot.settings, bot.driver.command, served)
        return
    asked = 0
    async with socket_bot(
        tmp_path, admins={ADMIN}, outbox_backoff_max_s=0.3, slack_timeout_s=2.0
    ) as socket:

        async def ask(text: str) -> None:
            nonlocal asked
            asked += 1
            await socket.emulator.push("slash_commands", command(text, asked))

        async def keys() -> Any:
            # Over Socket Mode the keys are served on the ops port; the same document, read
            # from the keys folder the server signs with.
            ring = receipt_keys(socket.settings)
            assert ring is not None
            return ring.public_document()

        yield Running(socket.emulator, socket.engine, socket.settings, ask, keys)


async def finished(running: Running) -> Debate:
    found: list[Debate] = await until(
        lambda: settled(running.engine), "a finished debate, nothing owed"
    )
    [debate] = found
    return debate


def shared(running: Running, debate: Debate) -> list[tuple[dict[str, Any], bytes]]:
    assert debate.thread_ts is not None
    return running.emulator.shared_files(CHANNEL, debate.thread_ts)


def thread_texts(running: Running, debate: Debate) -> list[str]:
    assert debate.thread_ts is not None
    return [m["text"] for m in running.emulator.in_thread(CHANNEL, debate.thread_ts)]


async def test_the_receipt_is_attached_in_the_thread_and_verifies_with_the_served_keys(
    running: Running,
) -> None:
    await running.ask("Should we adopt ADR-042?")
    debate = await finished(running)

    [(info, content)] = shared(running, debate)
    assert info["name"] == f"debate-{debate.id}-receipt.json"
    texts = thread_texts(running, debate)
    verdict = next(t for t in texts if t.startswith("Verdict"))
    # The file follows the verdict, introduced by who signed it and how to check it offline.
    comment = texts[texts.index(verdict) + 1]
    keys = await running.keys()
    [key] = keys["keys"]
    assert comment.startswith(f":receipt: Receipt of debate #{debate.id} as issued, signed with")
    assert f"`{key['key_id']}`" in comment
    assert "python tools/verify_receipt.py FILE --keys KEYS.json" in comment
    report = verify(json.loads(content), keys)
    assert report.ok, report.lines()
    # The verdict says the receipt is attached, no longer only how to download it.
    verdict_blocks = json.dumps(
        next(m for m in running.emulator.posted(CHANNEL) if m["text"] == verdict)["blocks"]
    )
    assert f"attached below in this thread as `debate-{debate.id}-receipt.json`" in verdict_blocks
    # The bytes went tokenless to the address Slack gave; the token only to the Web API.
    [arrived] = running.emulator.uploads.values()
    assert arrived.authorization == ""
    assert arrived.body == content


async def test_a_reviewers_decision_shares_the_receipt_again_with_the_decision(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    request = await escalated(bot)
    [debate] = bot.debates()
    assert debate.thread_ts is not None

    await bot.driver.click(request, action_ids.ACTION_APPROVE, user=REVIEWER)
    view = await bot.wait_for(lambda: bot.emulator.views and bot.emulator.views[-1], "note modal")
    await bot.driver.submit(view, NOTE, user=REVIEWER)
    await bot.wait_for(
        lambda: len(bot.emulator.shared_files(CHANNEL, debate.thread_ts or "")) == 2,
        "the receipt shared again with the decision",
    )

    (_, issued), (_, decided) = bot.emulator.shared_files(CHANNEL, debate.thread_ts)
    served = f"{bot.driver.bot_url}/.well-known/debatebot-keys.json"
    async with bot.driver.session.get(served) as answer:
        keys = await answer.json(content_type=None)
    assert json.loads(issued)["decisions"] == []
    [decision] = json.loads(decided)["decisions"]
    assert decision["statement"]["decision"] == "approved"
    assert decision["statement"]["by"] == REVIEWER
    assert verify(json.loads(decided), keys).ok
    comment = bot.emulator.in_thread(CHANNEL, debate.thread_ts)[-1]["text"]
    assert "with the review decision `approved` joined" in comment


async def test_a_5xx_on_complete_is_retried_and_the_file_appears_once(
    running: Running,
) -> None:
    running.emulator.fail("files.completeUploadExternal", Fault(status=503))

    await running.ask("Should we adopt ADR-042?")
    debate = await finished(running)

    assert len(shared(running, debate)) == 1
    completes = running.emulator.calls_of("files.completeUploadExternal", ok_only=False)
    assert [call.status for call in completes] == [503, 200]


async def test_without_files_write_the_thread_gets_the_command_with_one_warning(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    missing = Fault(error="missing_scope", needed="files:write")
    running.emulator.fail("files.getUploadURLExternal", missing, missing)

    await running.ask("Should we adopt ADR-042?")
    first = await finished(running)
    await running.ask("Should we adopt ADR-043?")
    await until(
        lambda: ((found := settled(running.engine)) is not None and len(found) == 2) or None,
        "two finished debates",
    )

    assert shared(running, first) == []
    fallback = [t for t in thread_texts(running, first) if "could not be attached" in t]
    assert fallback == [
        f":receipt: The receipt of debate #{first.id} could not be attached (the app lacks"
        f" Slack's `files:write` scope): `debatebot export {first.id} --format receipt`"
        " downloads it; check it with `python tools/verify_receipt.py FILE --keys KEYS.json`"
        " (the keys: `/.well-known/debatebot-keys.json`)"
    ]
    warnings = [r for r in caplog.records if "files:write" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].levelno == logging.WARNING
    # Not a refusal of the token: nothing is held, every message of both debates went out.
    with session_scope(running.engine, workspace=WORKSPACE) as session:
        states = {row.state for row in session.exec(select(Outbox))}
    assert states <= {OutboxState.SENT}
    assert len(running.emulator.calls_of("files.getUploadURLExternal", ok_only=False)) == 1


async def test_a_redirected_upload_address_sends_nothing_and_the_file_goes_later(
    running: Running,
) -> None:
    other = OtherHost()
    await other.start()
    try:
        running.emulator.fail(
            "files.upload", Fault(status=307, redirect=f"{other.url}/upload"), None
        )
        await running.ask("Should we adopt ADR-042?")
        debate = await finished(running)
    finally:
        await other.stop()

    assert other.requests == [], "the redirect was not followed"
    assert running.emulator.moved == []
    [(_, content)] = shared(running, debate)
    [arrived] = running.emulator.uploads.values()
    assert (arrived.authorization, arrived.body) == ("", content)
