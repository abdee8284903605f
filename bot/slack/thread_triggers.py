"""The listeners of the triggers that post in a thread of their own: a top-level post in a
channel that watches for ADRs (or in the app's Messages tab), the channel's review reaction,
and the *Debate this thread* shortcut.

What they tell people names the actual cause: a thread Slack failed to give for a moment
(SlackUnavailableError, after a few quick tries) is not the bot's lack of access, so it is not
answered with "add me to the channel"; an event that met it is tried again later, and one that
met a refused bot token is kept until the token works (bot.slack.held, through `on_error`).
Neither is marked handled, so a resend of it is handled too.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncRespond
from slack_sdk.errors import SlackApiError

from bot.messages import kit, posts
from bot.slack.assistant import on_dm_message
from bot.slack.errors import CommandError, RefusedTokenError, SlackUnavailableError, said
from bot.slack.surface import Surface
from bot.slackweb.errors import PostError
from bot.store import dedupe
from bot.store.debate_tables import DebateSource
from bot.store.errors import StoreError
from engine.models import clean_text

log = logging.getLogger(__name__)

CANNOT_READ = {
    "not_in_channel": "I am not in this channel: `/invite` me to it and ask again",
    "channel_not_found": "I cannot see this channel: `/invite` me to it and ask again",
    "missing_scope": (
        "I may not read threads here: ask an admin to reinstall the app with the scopes in"
        " slack/manifest.yml"
    ),
    "thread_not_found": "the message was deleted before I could read its thread",
    "message_not_found": "the message was deleted before I could read its thread",
}
"""What the person does about each refusal of `conversations.replies` Slack documents."""


async def on_message(event: dict[str, Any], body: dict[str, Any], surface: Surface) -> None:
    """A top-level post in a channel that watches for ADRs (its text, or a file it shares), or
    in the app's Messages tab (a question for the agent)."""
    if event.get("subtype") not in (None, "file_share") or event.get("bot_id"):
        return
    if event.get("thread_ts") and event["thread_ts"] != event.get("ts"):
        return
    if event.get("channel_type") == "im" and event.get("subtype") is None:
        await on_dm_message(event, surface)
        await handled(surface, body)
        return
    channel, ts = event["channel"], event["ts"]
    text = clean_text(kit.unescape(event.get("text") or ""))
    files = [f for f in event.get("files") or [] if isinstance(f, dict)]
    try:
        if files:
            await surface.starts.start_from_upload(
                channel=channel, ts=ts, user=event.get("user"), text=text, files=files
            )
        else:
            await surface.starts.start_from_adr(
                channel=channel, ts=ts, user=event.get("user"), text=text
            )
    except RefusedTokenError:
        raise  # kept until the token works (`on_error`)
    except CommandError as error:
        await tell_thread(
            surface,
            channel,
            ts,
            f":warning: This looks like an ADR, but I cannot debate it: {said(error)}",
        )
    await handled(surface, body)


async def on_reaction(event: dict[str, Any], body: dict[str, Any], surface: Surface) -> None:
    """The channel's review reaction debates the thread of the message it was put on."""
    item = event.get("item") or {}
    if item.get("type") != "message":
        return
    channel, ts = item["channel"], item["ts"]
    try:
        await surface.starts.start_from_reaction(
            channel=channel, ts=ts, user=event["user"], reaction=event["reaction"]
        )
    except RefusedTokenError:
        raise  # kept until the token works (`on_error`)
    except CommandError as error:
        await tell_thread(
            surface, channel, ts, f":warning: I cannot debate this thread: {said(error)}"
        )
    except SlackApiError as error:
        await tell_thread(surface, channel, ts, unreadable_thread(error, channel, ts))
    await handled(surface, body)


async def on_shortcut(
    ack: Any, shortcut: dict[str, Any], respond: AsyncRespond, surface: Surface
) -> None:
    """The message shortcut debates the thread; answers go through response_url, which works
    where the bot is not a member."""
    await ack()
    channel, ts = shortcut["channel"]["id"], shortcut["message"]["ts"]
    user = shortcut["user"]["id"]
    try:
        await surface.starts.start_from_thread(
            channel=channel, ts=ts, user=user, source=DebateSource.SHORTCUT
        )
    except CommandError as error:
        await respond(response_type="ephemeral", text=f":warning: {said(error)}")
    except SlackUnavailableError as error:
        log.warning("the shortcut on %s in %s was not handled: %s", ts, channel, error)
        await respond(
            response_type="ephemeral",
            text=f":hourglass: {error}, so nothing was queued: use the shortcut again in a minute.",
        )
    except SlackApiError as error:
        await respond(response_type="ephemeral", text=unreadable_thread(error, channel, ts))


async def handled(surface: Surface, body: dict[str, Any]) -> None:
    """Mark the event handled. Failing to is only logged: what it started is stored, so telling
    the person the store failed would be false, and a redelivery finds it by its trigger key."""
    if event_id := body.get("event_id"):
        try:
            await surface.db(lambda s: dedupe.mark_processed(s, key=dedupe.event_key(event_id)))
        except StoreError as error:
            log.warning("event %s was handled but could not be marked so: %s", event_id, error)


def unreadable_thread(error: SlackApiError, channel: str, ts: str) -> str:
    """Log a thread Slack refused to give, and say what to do about it, by Slack's code."""
    code = str(error.response.get("error"))
    log.error("reading thread %s in %s failed: %s", ts, channel, code)
    fix = CANNOT_READ.get(
        code, "ask an admin to check the app's install (the scopes in slack/manifest.yml)"
    )
    return f":warning: I could not read this thread ({code}): {fix}."


async def tell_thread(surface: Surface, channel: str, ts: str, text: str) -> None:
    try:
        await surface.poster.post(channel=channel, thread_ts=ts, message=posts.notice(text))
    except PostError as error:
        log.error("could not tell thread %s in %s: %s", ts, channel, error)
