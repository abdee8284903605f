"""debatebot in the app's Messages tab: Slack's Agent messaging experience (`agent_view`), and
the older assistant pane (`assistant_view`, which Slack will deprecate) for workspaces whose app
manifest has not moved yet; both event shapes are accepted.

- Opening the Messages tab (`app_home_opened`, tab `messages`; formerly
  `assistant_thread_started`) greets the person once and offers suggested prompts.
- A message in the assistant thread starts a debate there, the pasted text (an ADR, a design, a
  clause) as its material; `/debate`'s options work in it. The thread is titled after the
  question, and while the debate runs `assistant.threads.setStatus` shows who is speaking (an
  owed status the delivery loop sends, paced like every write).
- Rounds and the verdict are posted in the assistant thread exactly as in a channel.
- The review request goes to the channel named with `--review-in #channel`, else to the
  workspace's review channel (`DEBATEBOT_REVIEW_CHANNEL`), else by DM to the person who asked.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAssistant, AsyncSay, AsyncSetSuggestedPrompts
from slack_bolt.context.set_title.async_set_title import AsyncSetTitle
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError

from bot.messages import helptext, kit
from bot.slack.errors import CommandError, NotAllowedError, RefusedTokenError
from bot.slack.surface import Surface
from bot.store import dedupe
from engine.models import clean_text

log = logging.getLogger(__name__)

GREETING = (
    "Hi! Paste a decision, a design or an ADR and I will run a structured debate on it right"
    " here, then post the verdict with its confidence. Options such as `--protocol structured`"
    " or `--review-in #arch-reviews` work as in `/debate`."
)
PROTOCOL_QUESTION = "Which protocol should I use?"
ADR_REQUEST = "I want to review an ADR; I will paste it in my next message."
PASTE_THE_ADR = (
    "Paste the ADR as your next message: its title line (`# ADR-NNN: …`) and its Context,"
    " Decision and Consequences sections. I will debate the decision it records."
)
SUGGESTED_PROMPTS = [
    {
        "title": "Debate this decision",
        "message": "Should we move billing retries from cron jobs to a message queue?",
    },
    {"title": "Review an ADR (paste it)", "message": ADR_REQUEST},
    {"title": PROTOCOL_QUESTION, "message": PROTOCOL_QUESTION},
]
TITLE_CHARS = 80
Listener = Callable[..., Awaitable[None]]


def build_assistant(
    wrap: Callable[[Listener], Listener] = lambda listener: listener,
) -> AsyncMiddleware:
    """The assistant middleware with debatebot's listeners, each passed through `wrap` (the
    listeners' acknowledgement first and store-failure answer), for events only; `app.use` it
    after the middleware that provides `surface`."""
    assistant = AsyncAssistant()
    assistant.thread_started(wrap(on_thread_started))
    assistant.user_message(wrap(on_user_message))
    # Bolt's own listener, which saves the new context with Slack calls, after the answer too.
    assistant.thread_context_changed(wrap(AsyncAssistant.default_thread_context_changed))
    return EventsOnly(assistant)


class EventsOnly(AsyncMiddleware):
    """`middleware` for Events API requests, which are all the assistant's: Bolt's assistant
    middleware otherwise tries its listeners' four matchers on every command and click too,
    each with a fresh set of injected arguments, before the request is answered."""

    def __init__(self, middleware: AsyncMiddleware) -> None:
        self.middleware = middleware

    async def async_process(
        self,
        *,
        req: AsyncBoltRequest,
        resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],
    ) -> BoltResponse | None:
        if req.body.get("type") != "event_callback":
            return await next()
        return await self.middleware.async_process(req=req, resp=resp, next=next)


async def on_thread_started(say: AsyncSay, set_suggested_prompts: AsyncSetSuggestedPrompts) -> None:
    """The assistant was opened: greet, and offer what people come for."""
    await say(GREETING)
    await set_suggested_prompts(prompts=SUGGESTED_PROMPTS, title="Try one of these")


async def on_user_message(
    payload: dict[str, Any],
    say: AsyncSay,
    set_title: AsyncSetTitle,
    surface: Surface,
) -> None:
    """A message in an assistant thread (or a thread of the Messages tab): protocol advice, or
    a debate in this thread."""
    await answer(
        surface,
        text=payload.get("text") or "",
        channel=payload["channel"],
        thread_ts=payload["thread_ts"],
        user=payload["user"],
        ts=payload["ts"],
        reply=lambda text: say(text),
        title=lambda text: set_title(text),
    )


async def on_dm_message(event: dict[str, Any], surface: Surface) -> None:
    """A top-level message in the app's Messages tab under `agent_view`: each one opens a
    thread of its own (its ts), answered like an assistant thread's."""
    channel, ts = event["channel"], event["ts"]
    client = surface.poster.client

    async def reply(text: str) -> None:
        await client.chat_postMessage(channel=channel, thread_ts=ts, text=text)

    async def title(text: str) -> None:
        await client.assistant_threads_setTitle(channel_id=channel, thread_ts=ts, title=text)

    await answer(
        surface,
        text=event.get("text") or "",
        channel=channel,
        thread_ts=ts,
        user=event["user"],
        ts=ts,
        reply=reply,
        title=title,
    )


async def answer(
    surface: Surface,
    *,
    text: str,
    channel: str,
    thread_ts: str,
    user: str,
    ts: str,
    reply: Callable[[str], Awaitable[Any]],
    title: Callable[[str], Awaitable[Any]],
) -> None:
    """Protocol advice, the ask to paste an ADR, or a debate in the thread, titled after its
    question."""
    text = clean_text(kit.unescape(text)).strip()
    if text.rstrip("?").lower() == PROTOCOL_QUESTION.rstrip("?").lower():
        await reply(helptext.protocol_advice())
        return
    if text == ADR_REQUEST:
        await reply(PASTE_THE_ADR)
        return
    try:
        started = await surface.starts.start_from_assistant(
            channel=channel, thread_ts=thread_ts, user=user, text=text, ts=ts
        )
    except RefusedTokenError:
        raise  # the reply could not be posted: kept until the token works (bot.slack.held)
    except (CommandError, NotAllowedError) as error:
        await reply(f":warning: {kit.escape(str(error))}")
        return
    if not started.created:
        return
    try:
        # Escaped like every text the bot sends: a title is no place for a mention or a link.
        await title(kit.escape(kit.clip(started.debate.question, TITLE_CHARS)))
    except SlackApiError as error:
        # A title is a nicety: the debate goes on without one.
        log.warning("assistant thread title not set: %s", error.response.get("error"))


async def on_messages_tab(
    event: dict[str, Any],
    say: AsyncSay,
    set_suggested_prompts: AsyncSetSuggestedPrompts,
    surface: Surface,
) -> None:
    """The person opened the app's Messages tab (`agent_view`'s replacement for
    `assistant_thread_started`): the suggested prompts every time, the greeting once."""
    await set_suggested_prompts(prompts=SUGGESTED_PROMPTS, title="Try one of these")
    if await surface.db(lambda s: dedupe.mark_processed(s, key=f"greeted:{event['user']}")):
        await say(GREETING)


async def on_context_changed(event: dict[str, Any]) -> None:
    """What the person looks at beside the Messages tab changed (`app_context_changed`). It
    decides nothing: who reviews a debate is the server's choice, never the viewer's channel."""
    entities = (event.get("context") or {}).get("entities") or []
    log.debug("app context changed: %d entities", len(entities))
