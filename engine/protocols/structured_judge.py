"""The `structured` protocol's judge: what it is asked (one side's scores and trace per call,
then its ruling), the schemas that hold it to the debate's argument ids, the scores weighted and
totalled in code (never by the model), and what its trace leaves standing for the confidence.

The sides and argument ids every structured schema shares are defined here too, since the
judge's schemas are built from them (`engine.protocols.structured` builds the debaters').
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from engine.evidence import Measure
from engine.models import ConfidenceLevel, Decision, LongText, ShortText
from engine.protocols.base import built_once, choice_enum, list_of
from engine.rounds import Dimensions, FallacyFinding, ScoredJudgment, TraceEntry

T = TypeVar("T", bound=BaseModel)
SIDES = ("PRO", "CON")
ARGUMENT_IDS = tuple(f"{side}-{n}" for side in SIDES for n in range(1, 6))
"""Every argument id a structured debate can have: three to five a side."""
MIN_ARGUMENTS = 3
ANY_ARGUMENT_ID = choice_enum("AnyArgumentId", ARGUMENT_IDS)


def argument_id(value: object) -> str:
    """An argument id, whether given as text or as a schema enum member."""
    return str(getattr(value, "value", value))


class SideJudgment(BaseModel):
    """The judge's scores and trace rows for one side's arguments. Both are objects keyed by
    argument id: a schema with one required key per argument cannot skip or repeat one, even
    under a constrained decoder."""

    scores: Any
    trace: Any


class Ruling(BaseModel):
    """The judge's ruling, asked once every argument is scored. The short decision fields come
    first, so a reply cut at max_tokens loses prose, not the decision."""

    decision: Decision
    confidence_level: ConfidenceLevel
    fallacies: list[FallacyFinding] = Field(default_factory=list, max_length=10)
    unresolved_questions: list[ShortText] = Field(default_factory=list, max_length=8)
    recommendation: LongText


@built_once
def side_judgment_type(ids: list[str]) -> type[SideJudgment]:
    """One side's judgment schema: a score and a trace row for each of its argument ids, and no
    others."""

    def keyed(name: str, value: type[BaseModel]) -> type[BaseModel]:
        fields: dict[str, Any] = {f"arg_{i}": (value, Field(alias=a)) for i, a in enumerate(ids)}
        # Dumped by alias: a stored turn keeps the argument ids, so a resumed run replays it.
        config = ConfigDict(extra="forbid", serialize_by_alias=True)
        return create_model(name, __config__=config, **fields)

    return create_model(
        "SideJudgment",
        __base__=SideJudgment,
        scores=(keyed("Scores", Dimensions), ...),
        trace=(keyed("Trace", TraceEntry), ...),
    )


@built_once
def ruling_type(ids: list[str]) -> type[Ruling]:
    """The ruling's schema: fallacies may name only the debate's argument ids."""
    fallacy = create_model(
        "IdFallacy", __base__=FallacyFinding, argument=(choice_enum("ArgumentId", ids), ...)
    )

    class KnownFallacies(Ruling):
        @model_validator(mode="after")
        def _known_fallacies(self) -> KnownFallacies:
            named = [argument_id(f.argument) for f in self.fallacies]
            unknown = [a for a in named if a not in ids]
            if unknown:
                raise ValueError(f"fallacies name unknown arguments {unknown}")
            return self

    return create_model(
        "Ruling",
        __base__=KnownFallacies,
        fallacies=(list_of(fallacy), Field(default_factory=list, max_length=10)),
    )


# The envelope (engine/envelope.py): one schema for every call of every structured debate, so
# the per-debate types above map to static supersets.


def _any_keyed(name: str, value: type[BaseModel], side: str) -> type[BaseModel]:
    """An object with a key per possible argument id of `side`. The first three always exist;
    the fourth and fifth are nullable (null when the side made fewer): only those, since
    Anthropic refuses a schema with more than 16 union-typed parameters."""
    ids = [f"{side}-{n}" for n in range(1, 6)]
    fields: dict[str, Any] = {
        f"arg_{i}": (value if int(a[-1]) <= MIN_ARGUMENTS else value | None, Field(alias=a))
        for i, a in enumerate(ids)
    }
    return create_model(f"{name}{side.title()}", __config__=ConfigDict(extra="forbid"), **fields)


ANY_SCORES: Any = _any_keyed("AnyScores", Dimensions, "PRO") | _any_keyed(
    "AnyScores", Dimensions, "CON"
)
ANY_TRACE: Any = _any_keyed("AnyTrace", TraceEntry, "PRO") | _any_keyed(
    "AnyTrace", TraceEntry, "CON"
)
ANY_SIDE_JUDGMENT = create_model(
    "AnySideJudgment",
    __base__=SideJudgment,
    __doc__="Either side's judgment: one side's keys (the judge scores one side per call).",
    scores=(ANY_SCORES, ...),
    trace=(ANY_TRACE, ...),
)
ANY_RULING = create_model(
    "AnyRuling",
    __base__=Ruling,
    fallacies=(
        list_of(
            create_model("AnyFallacy", __base__=FallacyFinding, argument=(ANY_ARGUMENT_ID, ...))
        ),
        Field(default_factory=list, max_length=10),
    ),
)


def keyed_rows(value: Any, model: type[T]) -> dict[str, T]:
    """A judgment's keyed object (a model or plain dict) as argument id -> `model`."""
    raw = value.model_dump(by_alias=True) if isinstance(value, BaseModel) else dict(value)
    return {key: model.model_validate(row) for key, row in raw.items()}


def side_totals(scores: dict[str, Dimensions]) -> dict[str, float]:
    """The mean weighted score of each side's arguments."""
    totals: dict[str, float] = {}
    for side in SIDES:
        weighted = [d.weighted for a, d in scores.items() if a.startswith(f"{side}-")]
        totals[side] = sum(weighted) / len(weighted) if weighted else 0.0
    return totals


def scored(ruling: Ruling, sides: dict[str, SideJudgment]) -> ScoredJudgment:
    """The judgment as one record, with the weighted scores and side totals computed here,
    never by the model."""
    scores = {
        a: d for side in sides.values() for a, d in keyed_rows(side.scores, Dimensions).items()
    }
    totals = side_totals(scores)
    return ScoredJudgment(
        decision=ruling.decision,
        confidence_level=ruling.confidence_level,
        scores=scores,
        weighted={a: d.weighted for a, d in scores.items()},
        totals=totals,
        leading_side=max(totals, key=lambda side: totals[side])
        if totals["PRO"] != totals["CON"]
        else None,
        fallacies=plain(ruling.fallacies, FallacyFinding),
        trace={
            a: t for side in sides.values() for a, t in keyed_rows(side.trace, TraceEntry).items()
        },
        unresolved_questions=list(ruling.unresolved_questions),
        recommendation=ruling.recommendation,
    )


def plain(items: list[Any], model: type[T] | None = None) -> list[Any]:
    """Schema-specific subclasses (enum-typed ids) as plain records, for the round record."""
    dumped = [item.model_dump(mode="json") for item in items]
    return [model.model_validate(row) for row in dumped] if model else dumped


def render_scores(sides: dict[str, SideJudgment]) -> str:
    """The sides' scores and trace rows, with the weighted scores and totals computed here, for
    the judge's ruling."""
    lines = []
    for side, judged in sides.items():
        trace = keyed_rows(judged.trace, TraceEntry)
        weighted = []
        for argument, d in keyed_rows(judged.scores, Dimensions).items():
            weighted.append(d.weighted)
            row = trace[argument]
            lines.append(
                f"{argument}: logic {d.logic}, evidence {d.evidence}, responsiveness"
                f" {d.responsiveness}, honesty {d.honesty}; weighted {d.weighted:.2f};"
                f" {row.status}: {row.note}"
            )
        lines.append(f"{side} total (mean weighted score): {sum(weighted) / len(weighted):.2f}")
    return "\n".join(lines)


STANDING = {"UPHELD": 1.0, "UNCERTAIN": 1.0, "PARTIALLY_UPHELD": 0.5, "REFUTED": 0.0}
"""How much of an opposing argument the trace leaves standing."""


def unrefuted(trace: list[dict[str, Any]], decision: Decision) -> Measure:
    """The share of the arguments against `decision` that the judge's trace leaves standing."""
    against: tuple[str, ...] = SIDES
    if decision in (Decision.ACCEPT, Decision.ACCEPT_WITH_CONDITIONS):
        against = ("CON",)
    elif decision in (Decision.REVISE, Decision.REJECT):
        against = ("PRO",)
    rows = [row for row in trace if str(row["argument"]).split("-")[0] in against]
    if not rows:
        return Measure(None)
    standing = [STANDING[row["status"]] for row in rows]
    whole = sum(1 for value in standing if value == 1.0)
    partly = sum(1 for value in standing if 0.0 < value < 1.0)
    note = f"{whole} of {len(rows)} objections unanswered"
    if partly:
        note += f", {partly} partly"
    return Measure(sum(standing) / len(rows), note)
