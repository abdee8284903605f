"""The engine's neutral views (`engine.views`) as Block Kit: every text escaped once here,
styles as mrkdwn, icons as emoji, tables monospaced and cut to what a thread can hold (the
export has everything), long sections split within Slack's limits (`bot.messages.kit`)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.messages.kit import Block, Message, context, escape, header, paginate, sections
from engine.views import Block as ViewBlock
from engine.views import (
    Bullets,
    Icon,
    Inline,
    Line,
    Note,
    Part,
    RoundView,
    Section,
    Span,
    Style,
    Table,
)

TABLE_ROWS = 24
"""A table in a thread shows at most this many rows, then says how many more there are."""


def table(headings: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A small monospaced table as mrkdwn (cells escaped, at most `TABLE_ROWS` rows)."""
    shown = [list(headings), *[[str(c) for c in row] for row in rows[:TABLE_ROWS]]]
    widths = [max(len(row[i]) for row in shown) for i in range(len(headings))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in shown]
    more = f"\n\u2026 {len(rows) - TABLE_ROWS} more rows" if len(rows) > TABLE_ROWS else ""
    return "```\n" + escape("\n".join(line.rstrip() for line in lines)) + more + "\n```"


def inline(piece: Inline) -> str:
    """One piece of a line as mrkdwn."""
    if isinstance(piece, Icon):
        return f":{piece.value}:"
    if isinstance(piece, str):
        return escape(piece)
    return _span(piece)


def _span(span: Span) -> str:
    text = escape(span.text)
    if span.icon is not None:
        text = f":{span.icon.value}: {text}"
    if span.style is Style.STRONG:
        return f"*{text}*"
    if span.style is Style.EMPHASIS:
        return f"_{text}_"
    if span.style is Style.CODE:
        return f"`{text}`"
    return text


def part(piece: Part) -> str:
    """One part of a section as mrkdwn."""
    if isinstance(piece, Line):
        return "".join(inline(s) for s in piece.spans)
    if isinstance(piece, Bullets):
        return "\n".join(f"\u2022 {escape(item)}" for item in piece.items)
    if isinstance(piece, Table):
        return table(piece.headings, piece.rows)
    return "```\n" + escape(piece.text) + "\n```"  # Preformatted


def blocks(view: Sequence[ViewBlock]) -> list[Block]:
    """View blocks as Block Kit: a section as as many section blocks as it needs, a note as a
    context block."""
    found: list[Block] = []
    for block in view:
        if isinstance(block, Section):
            found += sections("\n".join(part(p) for p in block.parts))
        elif isinstance(block, Note):
            found.append(context("".join(inline(s) for s in block.spans)))
    return found


def round_messages(view: RoundView) -> list[Message]:
    """A round's view as one threaded message under its title (more only if it is huge)."""
    return paginate(escape(view.title), [header(view.title), *blocks(view.body)])
