"""What starts a debate besides `/debate`: ADR posts and review reactions on threads. Pure helpers
plus the paginated thread reader. Which messages are ADRs is `bot.adr`'s rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.adr import adr_title
from bot.messages.kit import unescape
from engine.models import ContextDocument, clean_text

MAX_THREAD_MESSAGES = 1000


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
    response = await client.conversations_replies(channel=channel, ts=ts, limit=1)
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
        response = await client.conversations_replies(
            channel=channel, ts=thread_ts, limit=page_size, cursor=cursor
        )
        messages += response.get("messages") or []
        cursor = (response.get("response_metadata") or {}).get("next_cursor")
        if not cursor or not response.get("has_more", True):
            break
    return messages[:MAX_THREAD_MESSAGES]
