"""Domain models of a debate: what is asked (`DebateSpec`), what each agent said, and the verdict.

Agent outputs are pydantic models with tight bounds (lengths, list sizes, score ranges): the same
bounds feed the JSON schema sent to the model, so a constrained decoder cannot ramble, and any
out-of-range value a model produces is invalid output rather than data.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from engine.confidence import ConfidenceComponents, Contribution

MAX_CONTEXT_CHARS = 200_000
DEFAULT_PROTOCOL = "adversarial"
"""The protocol a debate runs when nobody chose one (a channel's setting, a request's flag)."""
MAX_JUDGES = 5
"""Independent judges of one verdict at most: judges of the same kind share blind spots, so more
add little information and only cost."""

ShortText = Annotated[str, Field(min_length=1, max_length=600)]
LongText = Annotated[str, Field(min_length=1, max_length=2_000)]
Score = Annotated[int, Field(ge=1, le=10)]


def visible(text: str) -> bool:
    """Whether `text` has a character a reader can see: not only whitespace, control or
    zero-width format characters (U+200B and friends)."""
    return any(not ch.isspace() and unicodedata.category(ch) not in ("Cc", "Cf") for ch in text)


def clean_text(text: str) -> str:
    """`text` without control characters (NUL and friends, which databases refuse), keeping
    newlines and tabs; Windows line ends become plain newlines. A lone surrogate (JSON's
    `"\\ud800"` decodes to one) cannot be encoded as UTF-8, so no database or Slack would
    take it: it becomes U+FFFD, the replacement character."""
    text = replace_surrogates(text.replace("\r\n", "\n"))
    return "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc")


def replace_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (only scanned when there is one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return text


def utcnow() -> datetime:
    """Timezone-aware now, so every timestamp in a record is comparable."""
    return datetime.now(UTC)


class Role(StrEnum):
    FRAMING = "framing"
    PROPOSER = "proposer"
    CRITIC = "critic"
    REBUTTAL = "rebuttal"
    MODERATOR = "moderator"
    DEBATER = "debater"
    JUDGE = "judge"
    SYNTHESIZER = "synthesizer"
    ROUTER = "router"
    TRIAGE = "triage"
    REVIEWER = "reviewer"
    """A single agent reviewing alone: the baseline a debate is measured against."""
    INDEPENDENT_JUDGE = "independent_judge"
    """A judge asked again after the debate, blind to its verdict, on the anonymized record
    (`engine.judging`): whether it reaches the same decision is the verdict's agreement."""


ADVERSARIAL_ROLES = (Role.FRAMING, Role.PROPOSER, Role.CRITIC, Role.REBUTTAL, Role.MODERATOR)


class ConfidenceLevel(StrEnum):
    HIGH = "HIGH"
    MODERATE = "MODERATE"
    LOW = "LOW"


class DebateStatus(StrEnum):
    COMPLETE = "COMPLETE"
    TRUNCATED_BUDGET = "TRUNCATED_BUDGET"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    """Stopped by a person (Slack's Stop, `/debate cancel`, the CLI): partial transcript kept."""


class Decision(StrEnum):
    ACCEPT = "accept"
    ACCEPT_WITH_CONDITIONS = "accept_with_conditions"
    REVISE = "revise"
    REJECT = "reject"
    ESCALATE = "escalate"


class ThresholdSource(StrEnum):
    """Where a debate's escalation threshold came from; its confidence line says which."""

    CHANNEL = "channel"
    GUARANTEED = "guaranteed"
    """The weights version's guaranteed threshold, adopted with it."""
    RECOMMENDED = "recommended"
    """The threshold the labels recommend, adopted with the version."""
    FIXED = "fixed"
    """The deployment's DEBATEBOT_ESCALATION_THRESHOLD."""


ADOPTABLE = (ThresholdSource.GUARANTEED, ThresholdSource.RECOMMENDED, ThresholdSource.FIXED)
"""What a workspace may adopt with a weights version (a channel's own threshold is set apart)."""


class DebateFlag(StrEnum):
    WEAK_CHALLENGE = "weak_challenge"
    FABRICATED_CITATION = "fabricated_citation"
    DEGENERATE_OUTPUT = "degenerate_output"
    CONFIDENCE_UNVERIFIED = "confidence_unverified"
    """No independent judge answered (judges set to 0, the budget, a failure): the confidence
    rests on what the debate itself shows."""
    POSITION_BIAS = "position_bias"
    """Swapping the sides flipped the decision of a judge on the deciding model."""


# --- what is asked -------------------------------------------------------------------------


Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
"""How hard a thinking model thinks: every level a vendor names (Anthropic's
`output_config.effort`, OpenAI's `reasoning_effort`); each model takes the subset its catalogue
entry lists."""


class ModelSettings(BaseModel):
    """Which model speaks for a role, and how."""

    model_config = ConfigDict(frozen=True)

    provider: str = "local"
    model: str = "smollm2-135m-instruct"
    temperature: float = Field(default=0.3, ge=0.0, le=2.0)
    max_tokens: int = Field(default=1024, ge=16, le=32_768)
    effort: Effort | None = None


class Participant(BaseModel):
    """An agent taking part: its role, optional name and stance, and its model.

    Debaters (role `debater`) are told apart by `name`; `weight` and `role_hint` serve the
    `panel` protocol (vote weight, and a perspective such as "security reviewer").
    """

    role: Role
    name: str | None = Field(default=None, max_length=60)
    stance: str | None = Field(default=None, max_length=600)
    model: ModelSettings = Field(default_factory=ModelSettings)
    weight: float = Field(default=1.0, gt=0.0, le=100.0)
    role_hint: str | None = Field(default=None, max_length=300)

    @field_validator("name", "stance", "role_hint", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        # Stances are typed by people (`--for`); pydantic refuses a lone surrogate outright.
        return clean_text(value) if isinstance(value, str) else value


class ContextDocument(BaseModel):
    """A piece of evidence the debate may cite (an ADR, a thread, a contract clause)."""

    title: str = Field(min_length=1, max_length=300)
    text: str = Field(min_length=1)

    @field_validator("title", "text", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        # Before pydantic's own string check, which refuses a lone surrogate outright.
        return clean_text(value) if isinstance(value, str) else value


class DebateSpec(BaseModel):
    """Everything a protocol needs to run one debate; validated before any model is called."""

    question: str
    protocol: str = DEFAULT_PROTOCOL
    context: list[ContextDocument] = Field(default_factory=list)
    participants: list[Participant] = Field(default_factory=list)
    default_model: ModelSettings = Field(default_factory=ModelSettings)
    max_rounds: int = Field(default=1, ge=1)
    min_rounds: int = Field(
        default=1, ge=1, description="rounds that run even without the moderator asking for more"
    )
    budget_usd: float | None = Field(default=None, gt=0)
    escalation_threshold: float = Field(default=0.6, ge=0.0, le=1.0)
    threshold_source: ThresholdSource = ThresholdSource.FIXED
    judges: int = Field(
        default=1,
        ge=0,
        le=MAX_JUDGES,
        description="independent judges who judge the record again, blind to the verdict; 0"
        " leaves the confidence unverified",
    )
    task_type: str | None = None
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="protocol settings, validated by the protocol's own options model",
    )

    @field_validator("question", mode="before")
    @classmethod
    def _question_cleaned(cls, value: Any) -> Any:
        # Before pydantic's own string check, which refuses a lone surrogate outright.
        return clean_text(value) if isinstance(value, str) else value

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls, value: str) -> str:
        stripped = value.strip()
        if not visible(stripped):
            raise ValueError("the question is empty: say what the debate should decide")
        return stripped

    @model_validator(mode="after")
    def _material_within_limit(self) -> DebateSpec:
        # The one rule for long questions: a question is kept whole, however long, and counts
        # with the documents against what a debate can read.
        total = len(self.question) + sum(len(doc.text) for doc in self.context)
        if total > MAX_CONTEXT_CHARS:
            raise ValueError(
                f"the question and documents are {total:,} characters; at most"
                f" {MAX_CONTEXT_CHARS:,} fit a debate. Pass the relevant sections only"
            )
        return self

    @model_validator(mode="after")
    def _rounds_consistent(self) -> DebateSpec:
        if self.min_rounds > self.max_rounds:
            raise ValueError(f"min_rounds {self.min_rounds} is above max_rounds {self.max_rounds}")
        return self

    def participant_for(self, role: Role, name: str = "") -> Participant:
        """The configured participant for `role` (and `name`, for debaters), or one on the
        default model."""
        for participant in self.participants:
            if participant.role == role and (not name or participant.name == name):
                return participant
        return Participant(role=role, name=name or None, model=self.default_model)

    def debaters(self) -> list[Participant]:
        """The debaters in declared order (the speaking order of the protocols that use them)."""
        return [p for p in self.participants if p.role is Role.DEBATER]


# --- what agents say (structured outputs) --------------------------------------------------


class Proposition(BaseModel):
    """The framing agent's restatement of the question as a debatable proposition."""

    thesis: LongText
    scope: ShortText
    criteria: list[ShortText] = Field(min_length=1, max_length=6)
    key_evidence: list[ShortText] = Field(default_factory=list, max_length=6)


class ProposerTurn(BaseModel):
    thesis: LongText
    supporting_arguments: list[LongText] = Field(min_length=1, max_length=6)
    evidence_cited: list[ShortText] = Field(default_factory=list, max_length=6)


class CriticTurn(BaseModel):
    thesis: LongText
    counter_arguments: list[LongText] = Field(min_length=1, max_length=6)
    evidence_cited: list[ShortText] = Field(default_factory=list, max_length=6)
    challenge_strength: Score


class RebuttalTurn(BaseModel):
    thesis: LongText
    rebuttals: list[LongText] = Field(default_factory=list, max_length=6)
    concessions: list[ShortText] = Field(default_factory=list, max_length=6)


class ArgumentQuality(BaseModel):
    """Quality of one side's arguments, scored 1-10 per dimension; positions are not scored."""

    logic: Score
    evidence: Score
    completeness: Score
    consistency: Score

    @property
    def mean(self) -> float:
        return (self.logic + self.evidence + self.completeness + self.consistency) / 4


class ModeratorTurn(BaseModel):
    proposer_quality: ArgumentQuality
    critic_quality: ArgumentQuality
    resolved_points: list[ShortText] = Field(default_factory=list, max_length=8)
    unresolved_points: list[ShortText] = Field(default_factory=list, max_length=8)
    recommend_another_round: bool
    decision: Decision
    synthesis: LongText
    confidence_level: ConfidenceLevel
    uncertainties: list[ShortText] = Field(default_factory=list, max_length=8)


# --- records -------------------------------------------------------------------------------


class Usage(BaseModel):
    """Token counts of one or more calls. `input_tokens` counts every prompt token; the tokens
    read from a prompt cache and those written to one are subsets of it, priced apart."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    cache_write_input_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int = Field(default=0, ge=0)
    """Of the output tokens, those the model spent thinking (billed as output by both vendors,
    never shown as the answer)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @staticmethod
    def of(usages: Iterable[Usage]) -> Usage:
        """The sum of `usages` (zero when there are none)."""
        return sum(usages, Usage())

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_input_tokens=self.cache_write_input_tokens + other.cache_write_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class TurnRecord(BaseModel):
    """One agent output as the audit trail keeps it; (round, role, speaker, phase, attempt)
    identifies it. `speaker` names the debater when a role has several, `phase` the phase of a
    round when a debater speaks more than once in it (consensus) or the part of an answer given
    in several calls (the structured judge); both empty otherwise."""

    round: int = Field(ge=0)
    role: Role
    speaker: str = ""
    phase: str = ""
    attempt: int = Field(default=1, ge=1)
    provider: str
    model: str
    prompt_sha256: str
    request_sha256: str
    usage: Usage
    cost_usd: float = Field(ge=0)
    latency_s: float = Field(ge=0)
    reasks: int = Field(default=0, ge=0)
    raw_text: str
    parsed: dict[str, Any]
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def key(self) -> tuple[int, Role, str, str, int]:
        return (self.round, self.role, self.speaker, self.phase, self.attempt)


class CitationCheck(BaseModel):
    """Whether one cited piece of evidence is found in the debate's context."""

    round: int
    role: Role
    quote: str
    verified: bool
    score: float = Field(ge=0.0, le=1.0)
    source: str | None = None


class RoundRecordBase(BaseModel):
    """What a protocol reports when a round (or a phase) ends, carried by `RoundFinished`. Each
    protocol's record subclasses it with `kind` set to the protocol's name, so the view that
    renders it is found by it (`engine.protocols.definition_for`)."""

    kind: str

    @property
    def slot(self) -> str:
        """Names the round among the debate's round messages (each record says how)."""
        raise NotImplementedError(f"{type(self).__name__} does not name its slot")


class AdversarialRound(RoundRecordBase):
    kind: Literal["adversarial"] = "adversarial"
    round: int = Field(ge=1)
    proposer: ProposerTurn
    critic: CriticTurn
    critic_attempts: int = Field(ge=1)
    rebuttal: RebuttalTurn
    moderator: ModeratorTurn
    usage_by_role: dict[Role, Usage]
    cost_usd: float = Field(ge=0)

    @property
    def slot(self) -> str:
        """Names the round among the debate's round messages."""
        return str(self.round)


class ConfidenceAdjustment(BaseModel):
    """One step of how the confidence was reached, as people read it. For a verdict scored by
    weights (`Verdict.weights_version` set) each step is one component's contribution to the
    logit, the first the intercept; before, each step added `delta` to the confidence."""

    reason: str
    delta: float


class Verdict(BaseModel):
    """The common outcome every protocol returns; escalation works off it alone."""

    status: DebateStatus
    decision: Decision
    synthesis: str
    confidence: float = Field(ge=0.0, le=1.0)
    level: ConfidenceLevel
    moderator_level: ConfidenceLevel | None = None
    """The level the deciding model (the moderator, or a judge) declared, when it declared one:
    recorded, and one small input of the confidence."""
    confidence_method: list[ConfidenceAdjustment] = Field(default_factory=list)
    components: ConfidenceComponents | None = None
    """What the confidence is made of, each measured in code (`engine.scoring`); None for a
    verdict scored before components existed, or for a run that reached no verdict."""
    contributions: list[Contribution] = Field(default_factory=list)
    """Each component's share of the logit under `weights_version`."""
    weights_version: str | None = None
    """The version of the weights that turned the components into `confidence`."""
    unresolved_points: list[str] = Field(default_factory=list)
    uncertainties: list[str] = Field(default_factory=list)
    threshold: float | None = None
    """The escalation threshold the confidence was held against (None: verdicts before)."""
    threshold_source: ThresholdSource | None = None
    """Where that threshold came from (`DebateSpec.threshold_source`)."""
    escalate: bool
    escalation_reasons: list[str] = Field(default_factory=list)


class JudgeCheck(BaseModel):
    """What one independent judge decided, and whether it is the verdict's decision."""

    judge: str
    provider: str
    model: str
    same_model: bool
    """On the model that decided the debate (then the sides it saw were swapped, so a different
    decision is position bias)."""
    swapped: bool
    decision: str | None = None
    """As the debate states it: a decision, a debater's name, a vote; None when not answered."""
    agrees: bool | None = None
    error: str | None = None
    """Why it gave no decision (the budget, a model failure)."""


class DebateResult(BaseModel):
    """A whole debate: the spec, every turn with its usage, the rounds, checks and verdict."""

    spec: DebateSpec
    proposition: Proposition | None = None
    rounds: list[AdversarialRound] = Field(default_factory=list)
    transcript: list[TurnRecord] = Field(default_factory=list)
    citations: list[CitationCheck] = Field(default_factory=list)
    judgments: list[JudgeCheck] = Field(default_factory=list)
    flags: list[DebateFlag] = Field(default_factory=list)
    verdict: Verdict
    report: dict[str, Any] | None = Field(
        default=None, description="the protocol's own outcome (tallies, scores, clusters)"
    )
    error: str | None = None
    started_at: datetime
    finished_at: datetime

    @property
    def status(self) -> DebateStatus:
        return self.verdict.status

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects decorated properties: mypy#1362
    @property
    def usage(self) -> Usage:
        return Usage.of(turn.usage for turn in self.transcript)

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects decorated properties: mypy#1362
    @property
    def cost_usd(self) -> float:
        return sum(turn.cost_usd for turn in self.transcript)

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects decorated properties: mypy#1362
    @property
    def cost_by_role(self) -> dict[str, float]:
        costs: dict[str, float] = {}
        for turn in self.transcript:
            costs[turn.role.value] = costs.get(turn.role.value, 0.0) + turn.cost_usd
        return costs
