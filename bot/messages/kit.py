"""Block Kit primitives within Slack's limits: long content is split across sections (3,000
characters each) and across messages (50 blocks and 12,000 characters of block text each, well
under the 40,000 of `text`); it is never cut off.

Slack sends `&`, `<` and `>` escaped; `unescape` undoes that once on the way in, so questions are
stored as people wrote them. On the way out, all text that came from people or models is escaped
once, in the blocks and in the notification `text`, so neither a thread nor a model's output can
produce a mention such as `<!channel>` or a disguised link.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

MAX_BLOCKS = 50


MAX_VIEW_BLOCKS = 100


MAX_MESSAGE_CHARS = 12_000


MAX_SECTION_CHARS = 3000


MAX_HEADER_CHARS = 150


MAX_CONTEXT_ELEMENT_CHARS = 2000


MAX_FALLBACK_CHARS = 3000


MAX_MODAL_TITLE_CHARS = 24


Block = dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One chat message: notification text plus blocks."""

    text: str
    blocks: list[Block]


def escape(text: str) -> str:
    """Slack's mrkdwn escaping; stops model or user text from forming mentions and links."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Undo the escaping Slack applies to what people type (`&amp;` last, so `&amp;lt;` stays
    `&lt;` as typed). Mentions and links keep Slack's `<…>` form; `escape` shows them as text."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def fit(escaped: str, limit: int) -> str:
    """Escaped text cut to `limit` characters at a break, never inside an escape sequence;
    for a message that must stay one message (its buttons are updated in place)."""
    pieces = split_text(escaped, limit - 1)
    return pieces[0] + "\u2026" if len(pieces) > 1 else escaped


def split_text(text: str, limit: int = MAX_SECTION_CHARS) -> list[str]:
    """`text` in pieces of at most `limit` characters, cut at paragraph, line or word breaks."""
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        window = rest[:limit]
        cut = max(window.rfind("\n\n"), -1)
        if cut < limit // 2:
            cut = window.rfind("\n")
        if cut < limit // 2:
            cut = window.rfind(" ")
        if cut < limit // 4:
            cut = limit
        # Never split an escape sequence such as "&amp;" in two.
        amp = window.rfind("&", max(0, cut - 5), cut)
        if amp != -1 and ";" not in window[amp:cut]:
            cut = amp
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces


def sections(mrkdwn: str, limit: int = MAX_SECTION_CHARS) -> list[Block]:
    """As many section blocks as `mrkdwn` needs."""
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": p}}
        for p in split_text(mrkdwn, limit)
    ]


def header(text: str) -> Block:
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": clip(text, MAX_HEADER_CHARS), "emoji": True},
    }


def context(mrkdwn: str) -> Block:
    return {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": clip(mrkdwn, MAX_CONTEXT_ELEMENT_CHARS)}],
    }


def divider() -> Block:
    return {"type": "divider"}


def block_chars(value: Any) -> int:
    """Characters of text a block carries (every `text` string in it, however nested)."""
    if isinstance(value, dict):
        own = len(value["text"]) if isinstance(value.get("text"), str) else 0
        return own + sum(block_chars(v) for k, v in value.items() if k != "text" or own == 0)
    if isinstance(value, list):
        return sum(block_chars(item) for item in value)
    return 0


def paginate(
    text: str,
    blocks: Sequence[Block],
    max_blocks: int = MAX_BLOCKS,
    max_chars: int = MAX_MESSAGE_CHARS,
) -> list[Message]:
    """Split a block list into messages of at most `max_blocks` blocks and `max_chars`
    characters of block text each. `text` is mrkdwn the caller has escaped."""
    pages: list[list[Block]] = [[]]
    size = 0
    for block in blocks:
        chars = block_chars(block)
        if pages[-1] and (len(pages[-1]) >= max_blocks or size + chars > max_chars):
            pages.append([])
            size = 0
        pages[-1].append(block)
        size += chars
    fallback = clip(text, MAX_FALLBACK_CHARS)
    if len(pages) == 1:
        return [Message(fallback, pages[0])]
    return [
        Message(fallback if n == 1 else f"{clip(text, 200)} (part {n} of {len(pages)})", page)
        for n, page in enumerate(pages, start=1)
    ]


PART_LABEL = re.compile(r" \(part [0-9]{1,4} of [0-9]{1,4}\)\Z")
"""The label `paginate` ends a later page's notification text with (anchored, bounded)."""


def resplit(message: Message) -> list[Message]:
    """A message Slack refused for its size, in smaller pieces: sections of at most 1,500
    characters, messages of at most 25 blocks and 6,000 characters. The pieces are labelled
    within the message they replace ("(part 2 of 5, piece 1 of 3)"), or as pieces of an
    unlabelled one ("(piece 2 of 3)"), so no label repeats another message's."""
    smaller: list[Block] = []
    for block in message.blocks:
        body = block.get("text")
        if block.get("type") == "section" and isinstance(body, dict) and len(body["text"]) > 1500:
            smaller += sections(body["text"], limit=MAX_SECTION_CHARS // 2)
        else:
            smaller.append(block)
    pages = paginate(
        message.text, smaller, max_blocks=MAX_BLOCKS // 2, max_chars=MAX_MESSAGE_CHARS // 2
    )
    if len(pages) == 1:
        return [Message(message.text, pages[0].blocks)]
    found = PART_LABEL.search(message.text)
    base = message.text[: found.start()] if found else message.text
    count = len(pages)
    pieces = []
    for n, page in enumerate(pages, start=1):
        if found:
            label = f"{found.group()[:-1]}, piece {n} of {count})"
        else:
            label = f" (piece {n} of {count})" if n > 1 else ""
        pieces.append(
            Message(f"{clip(base, 200 if label else MAX_FALLBACK_CHARS)}{label}", page.blocks)
        )
    return pieces


def bullets(items: Iterable[str]) -> str:
    return "\n".join(f"\u2022 {escape(item)}" for item in items)


def mention(person: str) -> str:
    return f"<!subteam^{person}>" if person.startswith("S") else f"<@{person}>"


def plain(text: str) -> dict[str, Any]:
    """A plain_text object (button labels, modal titles)."""
    return {"type": "plain_text", "text": text}
