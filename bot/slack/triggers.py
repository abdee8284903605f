"""What starts a debate besides `/debate`: ADR posts and review reactions on threads. Pure helpers
plus the paginated thread reader. Which messages are ADRs is `bot.adr`'s rule.

Reading a thread is tried a few times when Slack fails for a moment (a 5xx, a 429, a timeout,
no connection: `classify`'s retryable failures), waiting as Slack's `Retry-After` asks (capped);
still failing, it raises SlackUnavailableError naming Slack's code, so the person is told the
actual cause and the trigger is tried again later (bot.slack.held). A refused token raises
TokenRefusedError; any other refusal (`not_in_channel`, `thread_not_found`, a `missing_scope`
for this method, …) the SlackApiError as Slack answered it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.adr import adr_title
from bot.messages.kit import unescape
from bot.slack.errors import SlackUnavailableError
from bot.slackweb.poster import SLACK_FAILURES, classify, token_refusal
from engine.models import ContextDocument, clean_text

MAX_THREAD_MESSAGES = 1000
READ_TRIES = 3
"""How many times one page of a thread is asked for before Slack's failure is told."""
READ_WAIT_S = 0.5
"""The wait before the second try, doubled before each next one."""
MAX_READ_WAIT_S = 5.0
"""The longest wait between tries, whatever Slack's `Retry-After` asks."""
ONE_METHOD = frozenset({"missing_scope"})
"""A refusal of the token for this method only (a scope it lacks, which Slack names): told with
its fix, not waited out like a token refused for every call."""


def adr_question(text: str) -> str:
    """The question an ADR's text is debated under."""
    return titled_adr_question(adr_title(text))


def titled_adr_question(title: str) -> str:
    """The question an ADR titled `title` is debated under (a linked or uploaded one)."""
    return f"Should the team accept this architecture decision record: {title}?"


def thread_question(messages: Sequence[dict[str, Any]]) -> str:
    first = next((m.get("text", "") for m in messages if m.get("text", "").strip()), "")
    first = clean_text(unescape(first))
    topic = " ".join(first.split())[:300] or "the decision in this thread"
    return f"Review the decision discussed in this Slack thread: {topic}"


def thread_document(messages: Sequence[dict[str, Any]]) -> ContextDocument:
    """The thread as one context document, one paragraph per message with its author.

    The protocols wrap it as untrusted material; nothing in it is treated as an instruction.
    """
    lines = []
    for message in messages:
        author = message.get("user") or message.get("bot_id") or "unknown"
        text = clean_text(unescape(message.get("text") or "")).strip()
        if text:
            lines.append(f"[{author} at {message.get('ts', '?')}]\n{text}")
    return ContextDocument(title="Slack thread", text="\n\n".join(lines) or "(empty thread)")


async def thread_root(client: AsyncWebClient, *, channel: str, ts: str) -> str:
    """The ts of the thread `ts` belongs to (its own ts when it is a top-level message)."""
    response = await _replies(client, channel=channel, ts=ts, limit=1)
    messages = response.get("messages") or []
    if not messages:
        return ts
    return str(messages[0].get("thread_ts") or messages[0].get("ts") or ts)


async def read_thread(
    client: AsyncWebClient, *, channel: str, thread_ts: str, page_size: int = 200
) -> list[dict[str, Any]]:
    """Every message of a thread, following `next_cursor` pages (up to MAX_THREAD_MESSAGES)."""
    messages: list[dict[str, Any]] = []
    cursor = None
    while len(messages) < MAX_THREAD_MESSAGES:
        response = await _replies(
            client, channel=channel, ts=thread_ts, limit=page_size, cursor=cursor
        )
        messages += response.get("messages") or []
        cursor = (response.get("response_metadata") or {}).get("next_cursor")
        if not cursor or not response.get("has_more", True):
            break
    return messages[:MAX_THREAD_MESSAGES]


async def _replies(
    client: AsyncWebClient, *, channel: str, wait_s: float = READ_WAIT_S, **arguments: Any
) -> AsyncSlackResponse:
    """One `conversations.replies` page, tried READ_TRIES times while Slack fails for a moment
    (Slack's *Rate limits*: wait the `Retry-After` seconds; a 5xx, a timeout or a lost
    connection is transient by Slack's own error docs: `internal_error`, `fatal_error`,
    `service_unavailable` say to try again)."""
    attempt = 1
    while True:
        try:
            return await client.conversations_replies(channel=channel, **arguments)
        except SLACK_FAILURES as error:
            refused = token_refusal(error, "conversations.replies")
            if refused is not None and refused.code not in ONE_METHOD:
                raise refused from error
            failure = classify(error, "conversations.replies", channel)
            if not failure.retryable:
                raise
            if attempt == READ_TRIES:
                raise SlackUnavailableError(
                    f"Slack had a temporary error reading this thread ({failure.code})",
                    code=failure.code,
                ) from error
            await asyncio.sleep(min(failure.retry_after_s or wait_s, MAX_READ_WAIT_S))
            attempt, wait_s = attempt + 1, wait_s * 2
