"""What a person is told when their request meets a failure, and Bolt's error handler.

`on_error` gives every listener (and, as Bolt's error handler, every middleware) the same clear
answer when the store fails: what is wrong (down, full, read-only, a refusal), what became of
the request and what to do (`store_answer`). A request turned away because its workspace's
token could not be renewed is answered `unrenewed_answer`; an event that met a refused bot
token is kept for later (`Surface.keep`, bot.slack.held); anything else is logged.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncBoltContext, AsyncRespond
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError

from bot.messages import kit, posts
from bot.slack.errors import TokenNotRenewedError
from bot.slack.installs import unrenewed_answer
from bot.slack.surface import Surface
from bot.slackweb.errors import PostError
from bot.store.errors import (
    DatabaseUnavailableError,
    StoreError,
    StoreFullError,
    StoreNoAnswerError,
    StoreReadOnlyError,
    StoreRefusedError,
)

log = logging.getLogger(__name__)


def store_answer(
    error: StoreError, *, event: dict[str, Any] | None = None, unchecked_resend: bool = False
) -> str:
    """What the person whose request met `error` is told: what is wrong, what became of the
    request, and what to do. `event` is the Slack event that was the request (an ADR post, a
    reaction), which Slack will not send again; `unchecked_resend` when it is a resend the
    store could not check, so an earlier delivery may have queued its debate."""
    if isinstance(error, StoreNoAnswerError) and error.may_have_stored:
        where = "this thread" if event is not None else "this channel"
        return (
            ":hourglass: The debate store stopped answering while this was being queued, so I"
            f" cannot tell whether it was. If it was, the debate starts in {where} once the store"
            " answers; if nothing appears there in a few minutes, try again. An admin should"
            " check the bot's database server and the network to it."
        )
    if isinstance(error, StoreRefusedError):
        cause = "The debate store refused this request"
        fix = "Remove unusual characters from it; if it keeps happening, tell the bot's admin"
    elif isinstance(error, StoreFullError):
        cause = "The bot's disk is full"
        fix = "An admin must free space on the disk that holds the debate store"
    elif isinstance(error, StoreReadOnlyError):
        cause = f"The debate store is read-only ({kit.escape(error.where)})"
        fix = "An admin must make it writable for the bot"
    else:
        cause = "The debate store is unavailable"
        fix = "An admin should check the bot's DEBATEBOT_DATABASE_URL"
    if event is None:
        return f":x: {cause}, so nothing was queued. {fix}; then try again."
    again = (
        "remove the reaction and add it again"
        if event.get("type") == "reaction_added"
        else "post it again"
    )
    if unchecked_resend:
        return (
            f":x: {cause}. If an earlier delivery of this already started a debate, it goes on"
            f" in this thread; if not, nothing was queued: {again} once this is fixed. {fix}."
        )
    return (
        f":x: {cause}, so nothing was queued, and nothing will be: {again} once this is fixed."
        f" {fix}."
    )


STORE_DOWN = store_answer(DatabaseUnavailableError())
"""What a command's sender is told while the store is down."""


async def on_error(
    error: Exception,
    body: dict[str, Any],
    context: AsyncBoltContext,
    respond: AsyncRespond | None,
) -> BoltResponse | None:
    """Every listener's failure ends here, and, as Bolt's error handler, every middleware's. A
    store failure is told to the person who asked, the same way from every entry point
    (`store_answer`), and logged for the operator with what to do; a request turned away
    because its workspace's token could not be renewed is answered `unrenewed_answer`;
    anything else is logged with its payload kind."""
    if isinstance(error, TokenNotRenewedError):
        return await unrenewed_answer(body, context)
    surface: Surface | None = context.get("surface")
    if surface is not None and await surface.keep(error, body, context):
        return None  # an event Slack will not send again, kept for later (bot.slack.held)
    kind = body.get("type") or ("command" if body.get("command") else "request")
    if not isinstance(error, StoreError):
        log.error("listener failed on a %s payload", kind, exc_info=error)
        return None
    log.error("store failure on a %s payload: %s", kind, error)
    event = (body.get("event") or {}) if kind == "event_callback" else None
    text = store_answer(error, event=event, unchecked_resend=bool(context.get("unchecked_resend")))
    try:
        if respond is not None and context.response_url:
            await respond(response_type="ephemeral", text=text)
            return None
        # A form keeps the channel it was opened in as its private metadata.
        metadata = str((body.get("view") or {}).get("private_metadata") or "")
        channel = context.channel_id or (metadata if metadata[:1] in ("C", "G") else None)
        user = context.user_id
        if surface is None or channel is None:
            return None
        if event is not None and event.get("ts"):
            thread = event.get("thread_ts") or event["ts"]
            await surface.poster.post(channel=channel, thread_ts=thread, message=posts.notice(text))
        elif user and (event is None or event.get("type") == "reaction_added"):
            await surface.poster.ephemeral(channel=channel, user=user, text=text)
    except (PostError, SlackApiError) as failure:
        log.error("could not tell the user about the store failure: %s", failure)
    return None
