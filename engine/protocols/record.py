"""The compact record of earlier rounds, the ids that tie it to the full text, and the one
compaction rule every protocol with rounds follows (`DebateSoFar`).

A turn is shown the debate so far before its own instructions: a title with the id legend,
what every round shares (the proposition, the stances), one compact record per earlier round,
then this round's turns in full. A record is built in code from the round's structured turns
(no model call): one line per point, labelled with its id, its text on one line and cut at a
word boundary to `LINE_CHARS` (an ellipsis marks the cut), so a round's record has a bound
whatever the models wrote. Records are only appended, so each round's prompt starts with what
the previous round's prompts held before their round-specific part and a prefix cache serves it.

Ids (the one place the scheme is defined): `R<round>.<kind><n>`, n counting from 1 in the
order the turn gave its points; a point keeps its id in the full text and in the record. Each
protocol's legend below (`*_IDS`) tells its speakers the same, under the title.
- adversarial: P the proposer's supporting arguments, C the critic's counter-arguments, K the
  rebuttal's concessions, S the points the moderator settled, U the points it left open. The
  round's decision closes its record, without an id; the rebuttal's answers are not points
  (they name the C they answer), so the record leaves them out.
- stances: the kind is the stance's letter in the declared order (A, B, ...): `R<round>.<letter>`
  is that stance's argument, `R<round>.<letter><n>` its key point n.
- consensus: the phase's letter (P proposal, C critique, R revision, V consensus), n the
  speaker's place in the speaking order.
- panel: A a panelist's answer, n the panelist's place in the panel; C the critiques of a
  round, numbered in speaking order, each panelist's in the order it gave them.
"""

from __future__ import annotations

LINE_CHARS = 120
ELLIPSIS = "\u2026"

ADVERSARIAL_IDS = (
    "Ids R<round>.<kind><n>: P proposer's argument, C critic's counter-argument, K rebuttal's"
    " concession, S point the moderator settled, U point left open."
)
STANCES_IDS = "Ids R<round>.<letter>: a stance's argument; R<round>.<letter><n>: its key points."
CONSENSUS_IDS = (
    "Ids R<round>.<phase><n>: P proposal, C critique, R revision, V consensus; n the speaker's"
    " place in the order."
)
CONSENSUS_PHASE_KINDS = {"proposal": "P", "critique": "C", "revision": "R", "consensus": "V"}
PANEL_IDS = "Ids R<round>.<kind><n>: A<n> the answer of panelist n, C the round's critiques."


def point_id(round: int, kind: str, n: int | None = None) -> str:
    """`R<round>.<kind><n>`; without `n` for a kind that has one point per round and speaker."""
    return f"R{round}.{kind}{'' if n is None else n}"


def clip(text: str, limit: int = LINE_CHARS) -> str:
    """`text` on one line (every run of whitespace, line breaks included, becomes one space),
    cut at a word boundary to at most `limit` characters with an ellipsis; a single word longer
    than half the limit is cut inside it."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    head = flat[: limit - 1]
    if flat[limit - 1] != " ":
        space = head.rfind(" ")
        if space > limit // 2:
            head = head[:space]
    return head.rstrip() + ELLIPSIS


def record_line(id: str, text: str) -> str:
    """One line of a compact record: the id, then `text` clipped."""
    return f"{id}: {clip(text)}"


def indented(text: str) -> str:
    """`text` in full with its further lines indented, so no line of what a model wrote can
    read as a point's label."""
    return "\n    ".join(text.splitlines())


def full_line(id: str, text: str) -> str:
    """A point of the current round in full."""
    return f"{id}: {indented(text)}"


class DebateSoFar:
    """What a turn is shown before its instructions: the one compaction rule.

    A title with the id legend, what every round shares, the compact record of each earlier
    round, then the sections of this round's turns so far, in full. Earlier records are only
    appended and this round's sections only grow, so each turn's prompt starts with everything
    the previous turn's prompt held before its instructions, and each round's with what every
    turn of the previous round held before its round's sections.
    """

    def __init__(self, title: str, ids: str, shared: list[str], records: list[str]) -> None:
        self.parts = [f"{title}\n{ids}", *shared]
        if records:
            self.parts += [f"EARLIER ROUNDS, ONE LINE PER ID ({ELLIPSIS} marks a cut):", *records]

    def add(self, section: str) -> None:
        """A section of this round, after everything shown so far."""
        self.parts.append(section)

    def text(self) -> str:
        return "\n\n".join(self.parts)

    def sections(self) -> tuple[str, ...]:
        """The parts as they stand, for a turn's prompt: `Asker.ask` joins them as `text` does
        and tells providers where each ends, so a provider caching by content block can split
        there and a later turn finds the earlier turn's blocks."""
        return tuple(self.parts)
