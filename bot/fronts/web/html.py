"""The engine's neutral views (`engine.views`) as HTML, as `bot.messages.render` makes them Block
Kit: every text escaped once here (markupsafe), styles as elements, icons as small words, tables
as tables. Nothing a model or a person wrote becomes markup or a link."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

from engine.views import (
    Block,
    Bullets,
    Icon,
    Inline,
    Line,
    Note,
    Part,
    Section,
    Span,
    Style,
    Table,
)

ICONS = {
    Icon.FOR: "\u25cf",
    Icon.AGAINST: "\u25cb",
    Icon.SCALES: "\u2696",
    Icon.SPEECH: "\u2026",
    Icon.REACHED: "\u2713",
    Icon.FINISHED: "\u2691",
}
"""Each icon as one character, marked as decoration (`aria-hidden`)."""


def _icon(icon: Icon) -> Markup:
    return Markup('<span class="icon" aria-hidden="true">{}</span>').format(ICONS[icon])


def inline(piece: Inline) -> Markup:
    if isinstance(piece, Icon):
        return _icon(piece)
    if isinstance(piece, str):
        return escape(piece)
    return _span(piece)


def _span(span: Span) -> Markup:
    text = escape(span.text)
    if span.icon is not None:
        text = _icon(span.icon) + Markup(" ") + text
    tag = {Style.STRONG: "strong", Style.EMPHASIS: "em", Style.CODE: "code"}.get(span.style)
    return Markup("<{0}>{1}</{0}>").format(Markup(tag), text) if tag else text


def part(piece: Part) -> Markup:
    if isinstance(piece, Line):
        return Markup("<p>{}</p>").format(Markup("").join(inline(s) for s in piece.spans))
    if isinstance(piece, Bullets):
        items = Markup("").join(Markup("<li>{}</li>").format(item) for item in piece.items)
        return Markup("<ul>{}</ul>").format(items)
    if isinstance(piece, Table):
        head = Markup("").join(Markup("<th scope='col'>{}</th>").format(h) for h in piece.headings)
        rows = Markup("").join(
            Markup("<tr>{}</tr>").format(
                Markup("").join(Markup("<td>{}</td>").format(str(cell)) for cell in row)
            )
            for row in piece.rows
        )
        return Markup(
            "<div class='table'><table><thead><tr>{}</tr></thead><tbody>{}</tbody></table></div>"
        ).format(head, rows)
    return Markup("<pre>{}</pre>").format(piece.text)  # Preformatted


def blocks(view: Sequence[Block]) -> Markup:
    """View blocks as HTML: a section as a group of paragraphs, lists and tables; a note as
    small print."""
    found: list[Markup] = []
    for block in view:
        if isinstance(block, Section):
            found.append(
                Markup("<div class='section'>{}</div>").format(
                    Markup("").join(part(p) for p in block.parts)
                )
            )
        elif isinstance(block, Note):
            found.append(
                Markup("<p class='note'>{}</p>").format(
                    Markup("").join(inline(s) for s in block.spans)
                )
            )
    return Markup("").join(found)
