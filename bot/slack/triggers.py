"""What starts a debate besides `/debate`: ADR posts and review reactions on threads. Pure helpers
plus the paginated thread reader.

ADR rule: a message is an ADR when, after stripping Markdown decoration (`#`, `*`, `_`, `>`,
backticks), either its first non-blank line starts with `ADR` as a word, optionally numbered
(`ADR-012: Use Kafka`, `ADR 7 - ...`, `ADR: ...`), or it has the three section headings of
Nygard's template, `Context`, `Decision` and `Consequences`, each on a line of its own (an
optional trailing colon; any case).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import unescape
from engine.models import ContextDocument, clean_text

_DECORATION = re.compile(r"^[\s#*_>`~]+|[\s*_`~]+$")
_TITLE = re.compile(r"^ADR(?:[\s-]*\d+)?(?:\s*[:.\-\u2013\u2014]|\s|$)")
_SECTIONS = ("context", "decision", "consequences")
MAX_THREAD_MESSAGES = 1000


def _clean(line: str) -> str:
    return _DECORATION.sub("", line)


def is_adr(text: str) -> bool:
    lines = [_clean(line) for line in text.splitlines() if line.strip()]
    if not lines:
        return False
    if _TITLE.match(lines[0]):
        return True
    headings = {line.rstrip(":").strip().lower() for line in lines}
    return all(section in headings for section in _SECTIONS)


def adr_title(text: str) -> str:
    """The first non-blank line, without decoration, as the ADR's title."""
    for line in text.splitlines():
        if line.strip():
            return _clean(line)[:200] or "ADR"
    return "ADR"


def adr_question(text: str) -> str:
    return f"Should the team accept this architecture decision record: {adr_title(text)}?"


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
