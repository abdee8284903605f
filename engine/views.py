"""A small, neutral vocabulary for how a debate reads: what each protocol's view renders its
round records and verdict outcome into (`engine.protocols.definition.ProtocolView`).

Values only, with no markup and nothing escaped: text is kept as the models and people wrote
it. Each surface turns the values into its own format and escapes there, once: the Slack bot
into Block Kit (`bot.messages.render`), a web page into HTML. A surface decides its own limits
too (how many rows of a table a thread shows, where a long section splits).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Icon(StrEnum):
    """A small picture beside a speaker or an outcome; the value is its emoji short code."""

    FOR = "large_blue_circle"
    AGAINST = "red_circle"
    SCALES = "scales"
    SPEECH = "speech_balloon"
    REACHED = "white_check_mark"
    FINISHED = "checkered_flag"


class Style(StrEnum):
    PLAIN = "plain"
    STRONG = "strong"
    EMPHASIS = "emphasis"
    CODE = "code"
    """A short value shown as typed: an id, a decision, a vote."""


@dataclass(frozen=True)
class Span:
    """A run of text in one style; a strong span may lead with an icon."""

    text: str
    style: Style = Style.PLAIN
    icon: Icon | None = None


Inline = str | Span | Icon
"""A piece of a line: plain text, styled text, or an icon alone."""


def strong(text: str, icon: Icon | None = None) -> Span:
    return Span(text, Style.STRONG, icon)


def emphasis(text: str) -> Span:
    return Span(text, Style.EMPHASIS)


def code(text: str) -> Span:
    return Span(text, Style.CODE)


@dataclass(frozen=True)
class Line:
    """One line of inline pieces; no pieces is an empty line (a gap between paragraphs)."""

    spans: tuple[Inline, ...] = ()


def line(*spans: Inline) -> Line:
    return Line(spans)


@dataclass(frozen=True)
class Bullets:
    """A bulleted list, one item a line (an empty list shows nothing)."""

    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A small table shown monospaced; a surface may show only its first rows."""

    headings: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Preformatted:
    """Text shown monospaced, line breaks kept."""

    text: str


Part = Line | Bullets | Table | Preformatted


@dataclass(frozen=True)
class Section:
    """Related lines read together (a speaker's turn, a tally); a surface may split a long one
    but keeps its parts in order."""

    parts: tuple[Part, ...]


def section(*parts: Part) -> Section:
    return Section(parts)


@dataclass(frozen=True)
class Note:
    """Small print under a round: costs, scores of the arguments' quality."""

    spans: tuple[Inline, ...]


Block = Section | Note


@dataclass(frozen=True)
class RoundView:
    """One round (or phase) of a debate as people read it: a title and its blocks."""

    title: str
    body: tuple[Block, ...]


def shortened(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with an ellipsis (for a table cell)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
