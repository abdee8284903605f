"""A store that is down answers the same clear way from every entry point (Bolt's error
handler): the command through its response_url, the form by an ephemeral message in its
channel, an ADR post in its thread (which Slack will not send again, so it says to post it
again); nothing is queued, and the bot keeps serving."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import event

from bot.slack import failures
from bot.store import channels
from bot.store.channel_tables import ChannelSettings
from bot.store.errors import DatabaseUnavailableError
from tests.e2e.conftest import ADMIN, CHANNEL, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.test_triggers import ADR_TEXT, message_event


@pytest.fixture
def store_down(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Channel settings (read by every entry point) fail while `down["now"]` is true."""
    down = {"now": False}
    real = channels.channel_settings

    def settings(session: Any, *, channel_id: str) -> ChannelSettings:
        if down["now"]:
            raise DatabaseUnavailableError("the database at sqlite:///… is unavailable")
        return real(session, channel_id=channel_id)

    monkeypatch.setattr(channels, "channel_settings", settings)
    return down


async def test_every_entry_point_says_the_store_is_down(
    start_bot: BotFactory, store_down: dict[str, bool]
) -> None:
    bot = await start_bot()
    await bot.runtime.surfaces.get(WORKSPACE).db(
        lambda s: channels.save_channel_settings(
            s, channel_id=CHANNEL, updated_by=ADMIN, values={"adr_watch": True}
        )
    )
    store_down["now"] = True

    # Acknowledged, not a 404: the failure comes after the ack and must not undo it.
    assert (await bot.driver.command("Should we adopt ADR-042?")).status == 200
    [answer] = await bot.wait_for(lambda: bot.emulator.responses, "the command's answer")
    assert answer["text"] == failures.STORE_DOWN

    view = {"id": "V1", "type": "modal", "callback_id": "debate_modal", "private_metadata": CHANNEL}
    submitted = await bot.driver.submit(
        view,
        {
            "question": {"type": "plain_text_input", "value": "Should we adopt ADR-042?"},
            "protocol": {
                "type": "static_select",
                "selected_option": {"value": "adversarial"},
            },
            "rounds": {"type": "plain_text_input", "value": "1"},
        },
        user="UALICE",
    )
    assert submitted.status == 200
    told = await bot.wait_for(
        lambda: [e for e in bot.emulator.ephemeral if e["text"] == failures.STORE_DOWN],
        "the form's answer",
    )
    assert told[0]["user"] == "UALICE"

    ts = bot.emulator.seed_message(CHANNEL, ADR_TEXT)
    await bot.driver.event(message_event(ts, ADR_TEXT))
    notice = await bot.wait_for(
        lambda: [m for m in bot.emulator.in_thread(CHANNEL, ts) if m["ts"] != ts], "the notice"
    )
    told = failures.store_answer(DatabaseUnavailableError(), event={"type": "message"})
    assert told in str(notice[0]["blocks"])
    assert "nothing will be: post it again" in told
    assert bot.debates() == []

    store_down["now"] = False
    await bot.driver.command("Should we adopt ADR-042 now?")
    await bot.finished()


async def test_a_store_that_stops_answering_is_answered_at_its_deadline(
    start_bot: BotFactory,
) -> None:
    """The database stops answering (a statement that does not return: a frozen server or
    disk): the command is still acknowledged, its answer comes at the store's deadline (three
    database timeouts) instead of whenever the database answers, and once it answers the bot
    serves again."""
    bot = await start_bot(database_timeout_s=0.2)
    released = threading.Event()

    def stuck(_conn: object, _cursor: object, sql: str, *_args: object) -> None:
        if "FROM channel_settings" in sql and not released.is_set():
            released.wait(30)

    event.listen(bot.engine, "before_cursor_execute", stuck)
    try:
        assert (await bot.driver.command("Should we adopt ADR-042?")).status == 200
        [answer] = await bot.wait_for(lambda: bot.emulator.responses, "the command's answer")
        assert answer["text"] == failures.STORE_DOWN
    finally:
        released.set()
        event.remove(bot.engine, "before_cursor_execute", stuck)

    await bot.driver.command("Should we adopt ADR-042 now?")
    await bot.finished()
    # The first command queued nothing.
    assert [d.question for d in bot.debates()] == ["Should we adopt ADR-042 now?"]
