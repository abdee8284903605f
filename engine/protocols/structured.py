"""The `structured` protocol: numbered arguments, cross-examination, closings, a scoring judge.

1. Openings: PRO then CON each make 3-5 numbered arguments (PRO-1…, CON-1…) with claim,
   reasoning and evidence; a reply with a wrong prefix or order, a too-short claim or reasoning,
   or missing evidence is rejected and re-asked.
2. Cross-examination: each side answers every opposing argument exactly once with refute,
   challenge, concede or partial plus a follow-up question; a reply that skips an argument or
   adds one is re-asked.
3. Closings: concessions, unrebutted arguments and final position, at most 200 words.
4. The judge scores every argument on logic, evidence, responsiveness and honesty (1-10) and
   gives the trace table (UPHELD / PARTIALLY_UPHELD / REFUTED / UNCERTAIN), one side per call;
   then, shown its scores, rules: decision, level, fallacies from the seven, unresolved
   questions and a recommendation. Three calls, not one: the whole judgment of ten arguments
   does not fit a small model's `max_tokens`, and a reply cut short loses its last fields.
   Weighted scores (logic .30, evidence .30, responsiveness .25, honesty .15) and side totals
   (the mean of a side's weighted scores) are computed here, never by the model.

The two sides are the spec's two debaters (first PRO, second CON) or, without debaters, two on
the default model. An argument's evidence given in quotation marks is checked against the
material (`engine.citations`), like every quote a debate cites.

Confidence is measured by `engine.scoring`. What this protocol reports for it: the opposing
arguments the judge's trace does not refute (those of CON for an accepting decision, of PRO for
revise or reject, of both for escalate; UPHELD and UNCERTAIN count whole, PARTIALLY_UPHELD
half), the judge's declared level, and the openings, cross-examination and closings, the sides'
names and argument ids hidden behind position letters, for an independent judge, who is asked
beside the ruling (the last of the judge's calls; its record holds none of them).
"""

from __future__ import annotations

import functools
import re
from typing import Any, TypeVar

from pydantic import BaseModel, Field, create_model, model_validator

from engine.citations import CitationChecker
from engine.errors import LLMError, SpecError
from engine.events import RoundFinished
from engine.evidence import (
    DECLARED,
    NO_VERDICT,
    BlindView,
    Entry,
    IndependentJudgment,
    ProtocolEvidence,
    mark,
)
from engine.judging import judge_beside
from engine.ledger import BudgetExhausted, TurnLedger
from engine.models import (
    CitationCheck,
    ConfidenceLevel,
    DebateResult,
    DebateSpec,
    Decision,
    Role,
    Verdict,
    utcnow,
)
from engine.prompts import PromptLibrary
from engine.protocols.base import (
    Asker,
    Ending,
    built_once,
    choice_enum,
    common_verdict,
    finish,
    list_of,
    no_verdict,
)
from engine.protocols.outputs import Outputs
from engine.protocols.record import DebateSoFar
from engine.protocols.structured_judge import (
    ANY_ARGUMENT_ID,
    ANY_RULING,
    ANY_SIDE_JUDGMENT,
    SIDES,
    SideJudgment,
    argument_id,
    plain,
    render_scores,
    ruling_type,
    scored,
    side_judgment_type,
    unrefuted,
)
from engine.rounds import (
    CLOSING_MAX_WORDS,
    WEIGHTS,
    Argument,
    Closing,
    Dimensions,
    Fallacy,
    FallacyFinding,
    Response,
    ScoredJudgment,
    StructuredPhase,
    TraceEntry,
)

__all__ = [
    "CLOSING_MAX_WORDS",
    "WEIGHTS",
    "Argument",
    "Closing",
    "Dimensions",
    "Fallacy",
    "FallacyFinding",
    "Response",
    "StructuredProtocol",
    "TraceEntry",
]

T = TypeVar("T", bound=BaseModel)

STRUCTURED_IDS = "Ids PRO-<n>, CON-<n>: the n-th argument of the PRO or CON side's opening."
SIDE_MEANING = {
    "PRO": "you argue FOR the proposal in the question",
    "CON": "you argue AGAINST the proposal in the question",
}


class Opening(BaseModel):
    arguments: list[Argument] = Field(min_length=3, max_length=5)


class CrossExamination(BaseModel):
    responses: list[Response] = Field(min_length=1, max_length=5)


@functools.lru_cache(maxsize=16)
def opening_type(prefix: str) -> type[Opening]:
    """The opening schema of one side: ids must run PREFIX-1, PREFIX-2, … in order (the id
    pattern is in the schema too, so constrained decoders keep the prefix)."""
    side_argument = create_model(
        "SideArgument", __base__=Argument, id=(str, Field(pattern=rf"^{prefix}-[1-5]$"))
    )

    class Numbered(Opening):
        @model_validator(mode="after")
        def _numbered(self) -> Numbered:
            ids = [a.id for a in self.arguments]
            expected = [f"{prefix}-{n}" for n in range(1, len(ids) + 1)]
            if ids != expected:
                raise ValueError(f"argument ids must be {expected} in order; got {ids}")
            return self

    return create_model(
        "Opening",
        __base__=Numbered,
        arguments=(list_of(side_argument), Field(min_length=3, max_length=5)),
    )


@built_once
def cross_type(opposing: list[str]) -> type[CrossExamination]:
    """The cross-examination schema: exactly one response per opposing argument, no others."""
    side_response = create_model(
        "SideResponse", __base__=Response, target=(choice_enum("Target", opposing), ...)
    )

    class Complete(CrossExamination):
        @model_validator(mode="after")
        def _complete(self) -> Complete:
            targets = [argument_id(r.target) for r in self.responses]
            skipped = [a for a in opposing if a not in targets]
            added = [t for t in targets if t not in opposing]
            repeated = sorted({t for t in targets if targets.count(t) > 1})
            problems = []
            if skipped:
                problems.append(f"answer every argument; skipped {', '.join(skipped)}")
            if added:
                problems.append(f"answer only {', '.join(opposing)}; not {', '.join(added)}")
            if repeated:
                problems.append(f"answer each argument once; repeated {', '.join(repeated)}")
            if problems:
                raise ValueError("; ".join(problems))
            return self

    return create_model(
        "CrossExamination",
        __base__=Complete,
        responses=(
            list_of(side_response),
            Field(min_length=len(opposing), max_length=len(opposing)),
        ),
    )


# The envelope (engine/envelope.py): one schema for every call of every structured debate, so
# the per-debate types map to static supersets. A new output type goes into OUTPUTS with its
# static type (itself, when nothing in it is decided per debate).
ANY_OPENING = create_model(
    "AnyOpening",
    __base__=Opening,
    arguments=(
        list_of(
            create_model(
                "AnyArgument", __base__=Argument, id=(str, Field(pattern=r"^(PRO|CON)-[1-5]$"))
            )
        ),
        Field(min_length=3, max_length=5),
    ),
)
ANY_CROSS_EXAMINATION = create_model(
    "AnyCrossExamination",
    __base__=CrossExamination,
    responses=(
        list_of(create_model("AnyResponse", __base__=Response, target=(ANY_ARGUMENT_ID, ...))),
        Field(min_length=1, max_length=5),
    ),
)


OUTPUTS = Outputs(
    "structured",
    {
        "Opening": ANY_OPENING,
        "CrossExamination": ANY_CROSS_EXAMINATION,
        "Closing": Closing,
        "SideJudgment": ANY_SIDE_JUDGMENT,
        "Ruling": ANY_RULING,
        "IndependentJudgment": IndependentJudgment,
    },
)


def render_arguments(opening: Opening) -> str:
    return "\n".join(
        f"{a.id}: {a.claim}\n   reasoning: {a.reasoning}\n   evidence: {a.evidence}"
        for a in opening.arguments
    )


def render_cross(side: str, cross: CrossExamination) -> str:
    return "\n".join(
        f"{side} on {r.target}: {r.response.upper()} - {r.explanation}"
        f" (asks: {r.follow_up_question})"
        for r in cross.responses
    )


def judge_so_far(
    openings: dict[str, Opening],
    crosses: dict[str, CrossExamination],
    closings: dict[str, Closing],
) -> DebateSoFar:
    """What each of the judge's three calls is shown before its instructions: the whole debate,
    one section per phase. The same bytes on all three calls, ahead of what differs (the side
    judged, the scores), so the vendor's prompt cache serves the second and third from the
    first."""
    so_far = DebateSoFar("THE DEBATE SO FAR", STRUCTURED_IDS, [], [])
    so_far.add(f"PRO ARGUMENTS:\n{render_arguments(openings['PRO'])}")
    so_far.add(f"CON ARGUMENTS:\n{render_arguments(openings['CON'])}")
    so_far.add("CROSS-EXAMINATION:\n" + "\n".join(render_cross(s, c) for s, c in crosses.items()))
    so_far.add(
        "CLOSINGS:\n"
        + "\n".join(
            f"{s}: {c.final_position} (concedes: {'; '.join(c.concessions) or '-'})"
            for s, c in closings.items()
        )
    )
    return so_far


class StructuredProtocol:
    """Formal debate: openings, cross-examination, closings, and a judge scored in code."""

    def validate(self, spec: DebateSpec) -> None:
        debaters = spec.debaters()
        if debaters and len(debaters) != 2:
            raise SpecError(
                f"the structured protocol has two sides (PRO, CON); {len(debaters)} debaters given"
            )

    def _speakers(self, spec: DebateSpec) -> dict[str, str]:
        debaters = spec.debaters()
        if debaters:
            return {side: d.name or side.lower() for side, d in zip(SIDES, debaters, strict=True)}
        return {side: side.lower() for side in SIDES}

    async def run(
        self, spec: DebateSpec, *, ledger: TurnLedger, prompts: PromptLibrary
    ) -> DebateResult:
        started_at = utcnow()
        asker = Asker(spec=spec, ledger=ledger, prompts=prompts, outputs=OUTPUTS)
        speakers = self._speakers(spec)
        ending = Ending()
        openings: dict[str, Opening] = {}
        crosses: dict[str, CrossExamination] = {}
        closings: dict[str, Closing] = {}
        judged: ScoredJudgment | None = None
        citations: list[CitationCheck] = []

        def sided(side: str) -> dict[str, str]:
            return {"side": side, "side_meaning": SIDE_MEANING[side], "prefix": side}

        async def posted(**phase: Any) -> None:
            record = StructuredPhase.model_validate({"speakers": speakers, **phase})
            await ledger.emit(RoundFinished(record=record))

        async def argued(
            side: str, template: str, number: int, step: str, output: type[T], **values: str
        ) -> T:
            """`side`'s debater's turn: the side's own values, then `values`."""
            return await asker.ask(
                f"structured/{template}.md",
                round=number,
                role=Role.DEBATER,
                speaker=speakers[side],
                step=step,
                output_type=output,
                values={**sided(side), **values},
            )

        try:
            for side in SIDES:
                openings[side] = await argued(
                    side, "opening", 1, "making the opening", opening_type(side)
                )
            checker = CitationChecker(spec.context, spec.question)
            for opening in openings.values():
                citations += checker.check_all(
                    [q for a in opening.arguments for q in quotes_in(a.evidence)],
                    round=1,
                    role=Role.DEBATER,
                )
            await posted(
                phase="openings",
                openings={s: plain(o.arguments) for s, o in openings.items()},
            )
            for side, other in zip(SIDES, reversed(SIDES), strict=True):
                crosses[side] = await argued(
                    side,
                    "cross_exam",
                    2,
                    "cross-examining",
                    cross_type([a.id for a in openings[other].arguments]),
                    own=render_arguments(openings[side]),
                    opposing=render_arguments(openings[other]),
                )
            await posted(
                phase="cross_examination",
                answers={s: plain(c.responses) for s, c in crosses.items()},
            )
            for side, other in zip(SIDES, reversed(SIDES), strict=True):
                closings[side] = await argued(
                    side,
                    "closing",
                    3,
                    "closing",
                    Closing,
                    own=render_arguments(openings[side]),
                    answers_to_you=render_cross(other, crosses[other]),
                )
            await posted(phase="closings", closings=closings)
            so_far = judge_so_far(openings, crosses, closings).sections()
            sides: dict[str, SideJudgment] = {}
            for side in SIDES:
                side_ids = [a.id for a in openings[side].arguments]
                sides[side] = await asker.ask(
                    "structured/judge_side.md",
                    round=4,
                    role=Role.JUDGE,
                    phase=side,
                    step=f"scoring the {side} arguments",
                    output_type=side_judgment_type(side_ids),
                    values={"side": side, "ids": ", ".join(side_ids)},
                    so_far=so_far,
                )
            # The independent judges read the debaters' record alone, which the judge's calls
            # cannot change: they run beside the last of them.
            record = self._report(openings, crosses, closings, None)
            judge_beside(record_view(spec, record, decided=""), ledger=ledger, prompts=prompts)
            ruling = await asker.ask(
                "structured/judge.md",
                round=4,
                role=Role.JUDGE,
                phase="ruling",
                step="ruling",
                output_type=ruling_type([a.id for s in SIDES for a in openings[s].arguments]),
                values={"scored": render_scores(sides)},
                so_far=so_far,
            )
            judged = scored(ruling, sides)
            await posted(phase="judgment", judgment=judged)
        except (BudgetExhausted, LLMError) as stop:
            ending.record(stop)
        report = self._report(openings, crosses, closings, judged)
        return finish(
            spec,
            ledger,
            ending,
            self._verdict(spec, ending, judged, report),
            started_at=started_at,
            report=report,
            citations=citations,
        )

    def evidence(self, result: DebateResult) -> ProtocolEvidence:
        """The opposing arguments the trace leaves standing, the judge's level, the record."""
        report = result.report or {}
        if "side_totals" not in report:
            return NO_VERDICT
        level = result.verdict.moderator_level or ConfidenceLevel.LOW
        return ProtocolEvidence(
            reached=True,
            unanswered=unrefuted(report["trace"], result.verdict.decision),
            declared=DECLARED[level],
            declared_note=f"judge declared {level.value}",
            view=blind_view(result),
        )

    @staticmethod
    def _report(
        openings: dict[str, Opening],
        crosses: dict[str, CrossExamination],
        closings: dict[str, Closing],
        judged: ScoredJudgment | None,
    ) -> dict[str, Any]:
        report: dict[str, Any] = {
            "openings": {s: o.model_dump(mode="json") for s, o in openings.items()},
            "cross_examination": {s: c.model_dump(mode="json") for s, c in crosses.items()},
            "closings": {s: c.model_dump(mode="json") for s, c in closings.items()},
        }
        if judged is not None:
            report |= {
                "weighted_scores": {a: round(w, 4) for a, w in judged.weighted.items()},
                "side_totals": {side: round(t, 4) for side, t in judged.totals.items()},
                "leading_side": judged.leading_side,
                "fallacies": [f.model_dump(mode="json") for f in judged.fallacies],
                "trace": [
                    {"argument": a} | t.model_dump(mode="json") for a, t in judged.trace.items()
                ],
                "unresolved_questions": judged.unresolved_questions,
                "recommendation": judged.recommendation,
            }
        return report

    @staticmethod
    def _verdict(
        spec: DebateSpec, ending: Ending, judgment: ScoredJudgment | None, report: dict[str, Any]
    ) -> Verdict:
        if judgment is None:
            return no_verdict(spec, ending)
        totals = report["side_totals"]
        synthesis = (
            f"{judgment.recommendation} (weighted side totals: PRO {totals['PRO']:.2f},"
            f" CON {totals['CON']:.2f})"
        )
        return common_verdict(
            spec,
            ending,
            decision=judgment.decision,
            synthesis=synthesis,
            unresolved=judgment.unresolved_questions,
            declared=judgment.confidence_level,
        )


QUOTED = re.compile(r"[\"\u201c]([^\"\u201c\u201d]{12,})[\"\u201d]")
"""A quotation of at least twelve characters, in straight or curly double quotes."""


def quotes_in(evidence: str) -> list[str]:
    """The quotations in an argument's evidence (a concrete fact given without quotation
    marks is not checked)."""
    return QUOTED.findall(evidence)


_SIDE_ID = re.compile(r"\b(PRO|CON)-(\d)")


def _hidden(text: str) -> str:
    """`text` with each argument id's side replaced by its position's mark."""
    return _SIDE_ID.sub(lambda m: f"{mark(SIDES.index(m.group(1)))}-{m.group(2)}", text)


def blind_view(result: DebateResult) -> BlindView:
    """The record of a finished debate as the judges read it (`record_view`)."""
    return record_view(result.spec, result.report or {}, decided=result.verdict.decision.value)


def record_view(spec: DebateSpec, report: dict[str, Any], *, decided: str) -> BlindView:
    """Openings, cross-examination and closings (as `report` keeps them) under the position
    they argue for, the sides and their argument ids hidden; no scores, trace or ruling, so
    the same before the judge answers and after."""
    entries: list[Entry] = []
    for side, opening in report["openings"].items():
        position = SIDES.index(side)
        for argument in opening["arguments"]:
            entries.append(
                Entry(
                    position,
                    1,
                    _hidden(
                        f"{argument['id']}: {argument['claim']}\nreasoning:"
                        f" {argument['reasoning']}\nevidence: {argument['evidence']}"
                    ),
                )
            )
    for side, cross in report["cross_examination"].items():
        for r in cross["responses"]:
            entries.append(
                Entry(
                    SIDES.index(side),
                    2,
                    _hidden(
                        f"on {r['target']}: {r['response'].upper()} - {r['explanation']}"
                        f" (asks: {r['follow_up_question']})"
                    ),
                )
            )
    for side, closing in report["closings"].items():
        concedes = "; ".join(closing["concessions"]) or "-"
        unrebutted = "; ".join(closing["unrebutted"]) or "-"
        entries.append(
            Entry(
                SIDES.index(side),
                3,
                _hidden(
                    f"final position: {closing['final_position']}\nconcedes: {concedes}\n"
                    f"unrebutted: {unrebutted}"
                ),
            )
        )
    return BlindView(
        positions=("argues for the proposal in the question", "argues against it"),
        entries=tuple(entries),
        choices=tuple(d.value for d in Decision),
        explain=(
            "one of accept, accept_with_conditions, revise, reject, escalate: what the team"
            " should do with the proposal (escalate: people must decide what the record cannot)"
        ),
        decided=decided,
        decided_by=spec.participant_for(Role.JUDGE).model,
        outputs=OUTPUTS,
        round=4,
        phases=("Openings", "Cross-examination", "Closings"),
    )
