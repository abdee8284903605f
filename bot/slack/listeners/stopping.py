"""The listeners that stop a debate from Slack (issue 44): the Stop button on its parent, and
Slack's own Stop on its agent session (`agent_session_stopped`). Both go through the one cancel
path (bot.slack.cancelling), which decides who may stop; the presser is answered alone."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck

from bot.slack.cancelling import stop_debate, stop_in_thread
from bot.slack.errors import CommandError, NotAllowedError, said
from bot.slack.listeners.actions import Clicker
from bot.slack.surface import Surface
from bot.store.debate_tables import CancelSource


async def on_stop_button(
    ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], surface: Surface
) -> None:
    """*Stop* under a running debate: stopped if the clicker may, else told why, alone."""
    await ack()
    clicker = Clicker.on_message(body)
    try:
        text = await stop_debate(
            surface,
            debate_id=int(action["value"]),
            user=clicker.user,
            source=CancelSource.SLACK_STOP,
        )
    except (CommandError, NotAllowedError) as error:
        text = f":no_entry: {said(error)}"
    await clicker.tell(surface, text)


async def on_session_stopped(event: dict[str, Any], surface: Surface) -> None:
    """Slack's Stop on a thread's agent session. Its event names the channel, the thread, who
    pressed and `streaming_message_ts` (the streams Slack stopped; the plan's end is then sent
    as a message update, bot.jobs.delivery.stream). The debate's ending moves the session out
    of `processing` ("the session status does not update automatically when the user clicks
    stop"); a person who may not stop it is told so, alone, and the debate runs on."""
    channel, user = event["channel"], event["user"]
    thread_ts = event.get("thread_ts") or ""
    try:
        text = await stop_in_thread(surface, channel=channel, thread_ts=thread_ts, user=user)
    except (CommandError, NotAllowedError) as error:
        text = f":no_entry: {said(error)}"
    await surface.poster.ephemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)
