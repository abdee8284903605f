"""What each protocol reports when a round (or a phase) ends: one record type per protocol, each a
`RoundRecordBase` whose `kind` is its protocol's name, which `RoundFinished` carries.

The records hold what a reader of the thread needs, typed, so the bot renders every protocol the
same way it renders the adversarial one. The agents' own output types the records embed live here
too, because the events module must not import the protocol modules (they import it).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from engine.models import (
    ConfidenceLevel,
    Decision,
    LongText,
    RoundRecordBase,
    Score,
    ShortText,
)


class NumberedRound(RoundRecordBase):
    """A record of one numbered round out of the debate's `max_rounds` (stances, consensus,
    panel); it is named by its number unless a protocol says otherwise."""

    round: int = Field(ge=1)
    max_rounds: int = Field(ge=1)

    @property
    def slot(self) -> str:
        return str(self.round)


# --- stances -----------------------------------------------------------------------------------


class StanceArgument(BaseModel):
    argument: LongText
    key_points: list[ShortText] = Field(min_length=1, max_length=5)


class StanceSpoken(BaseModel):
    speaker: str
    stance: str
    argument: StanceArgument


class StancesRound(NumberedRound):
    """Every debater's argument of one round, in speaking order."""

    kind: Literal["stances"] = "stances"
    arguments: list[StanceSpoken]


# --- consensus ---------------------------------------------------------------------------------


class ConsensusEntry(BaseModel):
    speaker: str
    round: int
    phase: str
    stance: str
    rationale: str
    vote: str


class ConsensusPhase(NumberedRound):
    """One phase's contributions and the tally of everyone's latest vote after it."""

    kind: Literal["consensus"] = "consensus"
    phase: str
    contributions: list[ConsensusEntry]
    votes: list[str]
    tally: dict[str, int]
    threshold: int = Field(ge=1)
    debaters: int = Field(ge=1)
    reached: str | None = None

    @property
    def slot(self) -> str:
        return f"{self.round}.{self.phase}"


# --- structured --------------------------------------------------------------------------------

WEIGHTS = {"logic": 0.30, "evidence": 0.30, "responsiveness": 0.25, "honesty": 0.15}
CLOSING_MAX_WORDS = 200
STRUCTURED_PHASES = ("openings", "cross_examination", "closings", "judgment")


class Fallacy(StrEnum):
    STRAW_MAN = "straw_man"
    APPEAL_TO_AUTHORITY = "appeal_to_authority"
    SLIPPERY_SLOPE = "slippery_slope"
    FALSE_DILEMMA = "false_dilemma"
    ANECDOTAL_EVIDENCE = "anecdotal_evidence"
    CIRCULAR_REASONING = "circular_reasoning"
    AD_HOMINEM = "ad_hominem"


class Argument(BaseModel):
    id: str
    claim: str = Field(min_length=15, max_length=600)
    reasoning: str = Field(min_length=40, max_length=2_000)
    evidence: str = Field(min_length=3, max_length=600)


class Response(BaseModel):
    target: str
    response: Literal["refute", "challenge", "concede", "partial"]
    explanation: LongText
    follow_up_question: ShortText


class Closing(BaseModel):
    concessions: list[ShortText] = Field(default_factory=list, max_length=5)
    unrebutted: list[str] = Field(default_factory=list, max_length=5)
    final_position: LongText

    @model_validator(mode="after")
    def _within_limit(self) -> Closing:
        text = " ".join([*self.concessions, *self.unrebutted, self.final_position])
        count = len(text.split())
        if count > CLOSING_MAX_WORDS:
            raise ValueError(f"the closing has {count} words; at most {CLOSING_MAX_WORDS}")
        return self


class Dimensions(BaseModel):
    """One argument's scores; the weighted score is computed here, never asked of the model."""

    logic: Score
    evidence: Score
    responsiveness: Score
    honesty: Score

    @property
    def weighted(self) -> float:
        return float(sum(getattr(self, name) * weight for name, weight in WEIGHTS.items()))


class FallacyFinding(BaseModel):
    argument: str
    fallacy: Fallacy
    explanation: ShortText


class TraceEntry(BaseModel):
    status: Literal["UPHELD", "PARTIALLY_UPHELD", "REFUTED", "UNCERTAIN"]
    note: ShortText


class ScoredJudgment(BaseModel):
    """The judge's reply with what code computed from it: weighted scores and side totals."""

    decision: Decision
    confidence_level: ConfidenceLevel
    scores: dict[str, Dimensions]
    weighted: dict[str, float]
    totals: dict[str, float]
    leading_side: str | None
    fallacies: list[FallacyFinding]
    trace: dict[str, TraceEntry]
    unresolved_questions: list[str]
    recommendation: str


class StructuredPhase(RoundRecordBase):
    """One phase of a formal debate; only the part of that phase is filled."""

    kind: Literal["structured"] = "structured"
    phase: Literal["openings", "cross_examination", "closings", "judgment"]
    speakers: dict[str, str]
    openings: dict[str, list[Argument]] = Field(default_factory=dict)
    answers: dict[str, list[Response]] = Field(default_factory=dict)
    closings: dict[str, Closing] = Field(default_factory=dict)
    judgment: ScoredJudgment | None = None

    @property
    def round(self) -> int:
        return STRUCTURED_PHASES.index(self.phase) + 1

    @property
    def slot(self) -> str:
        return self.phase


# --- panel -------------------------------------------------------------------------------------


class PanelAnswer(BaseModel):
    decision: Decision
    answer: LongText
    confidence: float = Field(ge=0.0, le=1.0)


class PanelSpoken(BaseModel):
    speaker: str
    answer: PanelAnswer
    changed: bool | None = None
    """Whether a later-round answer changed (None in round 1, where everyone answers fresh)."""


class PanelRound(NumberedRound):
    """Every panelist's answer of one round, the clusters they form and the convergence."""

    kind: Literal["panel"] = "panel"
    answers: list[PanelSpoken]
    clusters: list[list[str]]
    convergence: float = Field(ge=0.0, le=1.0)
    threshold: float = Field(ge=0.0, le=1.0)
    early_stop: bool = False
