"""Whether a message is an architecture decision record, and in which of the formats teams use.

Pure text rules, checked in this order (the first that holds names the format):

- **madr** (MADR 2 to 4): the heading `Decision Outcome` with `Considered Options` or
  `Context and Problem Statement`; MADR 4's YAML front matter (`status:`, `date:`…) is allowed
  before it.
- **y-statement**: "In the context of …, facing …, we decided … to achieve …, accepting …",
  those five parts in that order ("and neglected …" optional).
- **nygard**: the headings `Context` and `Decision` with `Consequences` or `Status`, each on a
  line of its own (Markdown `#`, Slack `*bold*`, a trailing colon and `>` quotes allowed).
- **nygard-inline**: the labels `Context:`, `Decision:` and `Consequences:` each starting a line
  and followed by text, as people type them in Slack (`*Context:* …`, `**Decision:** …`,
  `• *Consequences*: …`).
- Section numbers before headings (`## 2. Considered Options`) are ignored, and a Y-statement
  may say "we decided", "we have decided", "we chose" or "we opted".
- **title**: a first line that starts with `ADR` as a word, optionally numbered (`ADR-042:`,
  `ADR 7 -`).
- **channel**: a first line that matches the channel's own title pattern (a regular expression
  set with `/debate config set adr_pattern …`), such as `RFC-\\d+`.

Chat that mentions a context and a decision, meeting notes and incident reports lack the full
set of sections or labels; `tests/data/adr_corpus/` measures both kinds.
"""

from __future__ import annotations

import re

_DECORATION = re.compile(r"^[\s#*_>`~•\-]+|[\s*_`~]+$")
_TITLE = re.compile(r"^ADR(?:[\s-]*\d+)?(?:\s*[:.\-\u2013\u2014]|\s|$)")
# Section numbers some templates and tools put before headings ("## 2. Considered Options").
_NUMBERING = re.compile(r"^(?:\d+\.)+\s+|^\d+\)\s+")
_FRONT_MATTER = re.compile(r"\A\s*---[ \t]*\n(?:[\w-]+:[^\n]*\n)+---[ \t]*(?:\n|\Z)")
_NYGARD = ("context", "decision", "consequences")
_MADR_OUTCOME = "decision outcome"
_MADR_OTHERS = ("considered options", "context and problem statement")
_INLINE = re.compile(
    r"^[\s>•\-]*[*_]{0,2}(context|decision|consequences)[*_]{0,2}\s*:[*_]{0,2}\s*\S",
    re.IGNORECASE,
)
_Y_STATEMENT = re.compile(
    r"\bin the context of\b.+?\bfacing\b.+?\bwe\s+(?:have\s+)?(?:decided|chose|opted)\b.+?\bto"
    r" achieve\b.+?\baccepting\b",
    re.IGNORECASE | re.DOTALL,
)
MAX_PATTERN_CHARS = 200
MAX_TITLE_CHARS = 300


class TitlePatternError(ValueError):
    """A channel's ADR title pattern that is not a usable regular expression."""


def clean_line(line: str) -> str:
    """A line without Markdown or Slack decoration around it."""
    return _DECORATION.sub("", line)


def _headings(lines: list[str]) -> set[str]:
    return {_NUMBERING.sub("", clean_line(line)).rstrip(":").strip().lower() for line in lines}


def compile_title_pattern(pattern: str) -> re.Pattern[str]:
    """A channel's title pattern, matched case-insensitively at the start of the first line."""
    if not pattern.strip() or len(pattern) > MAX_PATTERN_CHARS:
        raise TitlePatternError(
            f"the ADR title pattern must be 1 to {MAX_PATTERN_CHARS} characters"
        )
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as error:
        raise TitlePatternError(f"`{pattern}` is not a regular expression: {error}") from None


def adr_format(text: str, title_pattern: str | None = None) -> str | None:
    """The format `text` is written in (madr, y-statement, nygard, nygard-inline, title,
    channel), or None when it is not an ADR."""
    body = _FRONT_MATTER.sub("", text, count=1)
    lines = [line for line in body.splitlines() if line.strip()]
    if not lines:
        return None
    headings = _headings(lines)
    if _MADR_OUTCOME in headings and any(h in headings for h in _MADR_OTHERS):
        return "madr"
    if _Y_STATEMENT.search(" ".join(lines)):
        return "y-statement"
    if {"context", "decision"} <= headings and headings & {"consequences", "status"}:
        return "nygard"
    labels = {m.group(1).lower() for line in lines if (m := _INLINE.match(line))}
    if all(section in labels for section in _NYGARD):
        return "nygard-inline"
    first = clean_line(lines[0])[:MAX_TITLE_CHARS]
    if _TITLE.match(first):
        return "title"
    if title_pattern and compile_title_pattern(title_pattern).match(first):
        return "channel"
    return None


def is_adr(text: str, title_pattern: str | None = None) -> bool:
    return adr_format(text, title_pattern) is not None


def adr_title(text: str) -> str:
    """The first line that is not front matter or blank, without decoration, as the title."""
    for line in _FRONT_MATTER.sub("", text, count=1).splitlines():
        if line.strip():
            return clean_line(line)[:200] or "ADR"
    return "ADR"
