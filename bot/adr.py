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

Anyone in a watched channel or the assistant pane chooses the text these rules read, so every
rule runs in time linear in the text: no pattern here has nested or adjacent quantifiers over
overlapping characters (the Y-statement's five parts are found one after another, each a plain
search from where the last ended, instead of one pattern with four `.+?` gaps, which
backtracked for minutes on repeated phrases), decoration is stripped by scanning rather than by
an end-anchored pattern, at most `MAX_SCAN_CHARS` are read, and a channel's own pattern runs
on RE2, which matches in linear time whatever the pattern.

Chat that mentions a context and a decision, meeting notes and incident reports lack the full
set of sections or labels; `tests/data/adr_corpus/` measures both kinds.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from engine.models import clean_text

MAX_SCAN_CHARS = 100_000
"""The recognisers read this much of a text: an ADR's sections and labels come well before."""
MAX_PATTERN_CHARS = 200
MAX_TITLE_CHARS = 300
_LEADING = frozenset("#*_>`~•-")
_TRAILING = frozenset("*_`~")
_TITLE = re.compile(r"^ADR(?:[\s-]*\d+)?(?:\s*[:.\-\u2013\u2014]|\s|$)")
# Section numbers some templates and tools put before headings ("## 2. Considered Options").
_NUMBERING = re.compile(r"^(?:\d+\.)+\s+|^\d+\)\s+")
_FRONT_MATTER_KEY = re.compile(r"[\w-]+:")
_NYGARD = ("context", "decision", "consequences")
_MADR_OUTCOME = "decision outcome"
_MADR_OTHERS = ("considered options", "context and problem statement")
_INLINE = re.compile(
    r"^[\s>•\-]*[*_]{0,2}(context|decision|consequences)[*_]{0,2}\s*:[*_]{0,2}\s*\S",
    re.IGNORECASE,
)
_Y_PARTS = tuple(
    re.compile(part, re.IGNORECASE)
    for part in (
        r"\bin the context of\b",
        r"\bfacing\b",
        r"\bwe\s+(?:have\s+)?(?:decided|chose|opted)\b",
        r"\bto achieve\b",
        r"\baccepting\b",
    )
)


class TitlePatternError(ValueError):
    """A channel's ADR title pattern that is not a usable regular expression."""


class TitleMatcher(Protocol):
    """A compiled channel title pattern (RE2)."""

    def match(self, text: str) -> Any: ...


def clean_line(line: str) -> str:
    """A line without Markdown or Slack decoration around it."""
    start, end = 0, len(line)
    while start < end and (line[start].isspace() or line[start] in _LEADING):
        start += 1
    while end > start and (line[end - 1].isspace() or line[end - 1] in _TRAILING):
        end -= 1
    return line[start:end]


def _headings(lines: list[str]) -> set[str]:
    return {_NUMBERING.sub("", clean_line(line)).rstrip(":").strip().lower() for line in lines}


def _without_front_matter(text: str) -> str:
    """`text` without a leading YAML front matter block (`---`, `key: value` lines, `---`)."""
    lines = text.split("\n")
    first = 0
    while first < len(lines) and not lines[first].strip():
        first += 1
    if first >= len(lines) or lines[first].lstrip().rstrip(" \t") != "---":
        return text
    for index in range(first + 1, len(lines)):
        line = lines[index]
        if line.rstrip(" \t") == "---":
            return "\n".join(lines[index + 1 :]) if index > first + 1 else text
        if not _FRONT_MATTER_KEY.match(line):
            return text
    return text


def _y_statement(text: str) -> bool:
    """The five parts of a Y-statement, in order, each after some text following the last."""
    position = 0
    for part in _Y_PARTS:
        found = part.search(text, position)
        if found is None:
            return False
        position = found.end() + 1
    return True


def compile_title_pattern(pattern: str) -> TitleMatcher:
    """A channel's title pattern, matched case-insensitively at the start of the first line.

    RE2 (Google's engine, through `google-re2`) runs it in time linear in the title whatever
    the pattern, so a channel owner's `(a+)+$` cannot stall the bot; the price is RE2's syntax:
    no backreferences or lookarounds."""
    import re2

    if not pattern.strip() or len(pattern) > MAX_PATTERN_CHARS:
        raise TitlePatternError(
            f"the ADR title pattern must be 1 to {MAX_PATTERN_CHARS} characters"
        )
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    try:
        compiled: TitleMatcher = re2.compile(pattern, options)
    except UnicodeEncodeError:
        raise TitlePatternError(
            "the ADR title pattern holds a character that is not valid Unicode text"
        ) from None
    except re2.error as error:
        detail = error.args[0] if error.args else error
        reason = detail.decode() if isinstance(detail, bytes) else detail
        raise TitlePatternError(
            f"`{pattern}` is not a regular expression RE2 accepts ({reason}); backreferences"
            " and lookarounds are not supported"
        ) from None
    return compiled


def adr_format(text: str, title_pattern: str | None = None) -> str | None:
    """The format `text` is written in (madr, y-statement, nygard, nygard-inline, title,
    channel), or None when it is not an ADR."""
    body = _without_front_matter(text[:MAX_SCAN_CHARS])
    lines = [line for line in body.splitlines() if line.strip()]
    if not lines:
        return None
    headings = _headings(lines)
    if _MADR_OUTCOME in headings and any(h in headings for h in _MADR_OTHERS):
        return "madr"
    if _y_statement(" ".join(lines)):
        return "y-statement"
    if {"context", "decision"} <= headings and headings & {"consequences", "status"}:
        return "nygard"
    labels = {m.group(1).lower() for line in lines if (m := _INLINE.match(line))}
    if all(section in labels for section in _NYGARD):
        return "nygard-inline"
    first = clean_line(lines[0])[:MAX_TITLE_CHARS]
    if _TITLE.match(first):
        return "title"
    if title_pattern and _channel_title(title_pattern, first):
        return "channel"
    return None


def _channel_title(pattern: str, first: str) -> bool:
    """Whether `first` matches the channel's stored pattern; one stored before patterns ran on
    RE2 that RE2 refuses matches nothing (the settings command names the problem when it is
    set again)."""
    try:
        matcher = compile_title_pattern(pattern)
    except TitlePatternError:
        return False
    # RE2 reads UTF-8, which a lone surrogate cannot be written in.
    return matcher.match(clean_text(first)) is not None


def is_adr(text: str, title_pattern: str | None = None) -> bool:
    return adr_format(text, title_pattern) is not None


def adr_title(text: str) -> str:
    """The first line that is not front matter or blank, without decoration, as the title."""
    for line in _without_front_matter(text[:MAX_SCAN_CHARS]).splitlines():
        if line.strip():
            return clean_line(line)[:200] or "ADR"
    return "ADR"
