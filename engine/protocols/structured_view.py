"""The `structured` protocol as the application knows it (`DEFINITION`): its single round of
phases, flags, labels, live-plan tasks, how each phase and the totals read, and what its
confidence components mean."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from engine.events import TurnStarted
from engine.models import DebateResult, DebateSpec, Role, RoundRecordBase, TurnRecord
from engine.protocols.definition import (
    JUDGING,
    TURNS,
    Confidence,
    Labels,
    PlanTasks,
    ProtocolDefinition,
    ProtocolView,
    TurnKey,
    count,
    expect,
    plural,
    speaking,
)
from engine.protocols.structured import StructuredProtocol
from engine.protocols.structured_judge import SIDES
from engine.rounds import (
    STRUCTURED_PHASES,
    Argument,
    Closing,
    Response,
    ScoredJudgment,
    StructuredPhase,
)
from engine.views import (
    Block,
    Bullets,
    Inline,
    Part,
    RoundView,
    Table,
    code,
    emphasis,
    line,
    section,
    shortened,
    strong,
)

NAME = "structured"
T = TypeVar("T")
PHASE_TITLES = {
    "openings": "Openings",
    "cross_examination": "Cross-examination",
    "closings": "Closings",
    "judgment": "The judge's scores",
}
STEPS = {1: "opening", 2: "cross-examination", 3: "closing"}
"""A debater's turn by its round, as the plan titles it."""


def _side(record: StructuredPhase, side: str) -> str:
    speaker = record.speakers.get(side, side.lower())
    return f"{side} ({speaker})" if speaker.upper() != side else side


def _by_side(
    record: StructuredPhase, said: Mapping[str, T], parts: Callable[[str, T], list[Part]]
) -> list[Block]:
    """A phase as one section per side that spoke in it, each under its side and speaker."""
    return [section(*parts(_side(record, side), one)) for side, one in said.items()]


def _opening(side: str, arguments: list[Argument]) -> list[Part]:
    parts: list[Part] = [line(strong(side))]
    for n, a in enumerate(arguments):
        parts += [line()] * (n > 0)
        parts += [
            line(code(a.id), " ", strong(a.claim)),
            line(a.reasoning),
            line(emphasis("evidence:"), " ", a.evidence),
        ]
    return parts


def _answers(side: str, answers: list[Response]) -> list[Part]:
    parts: list[Part] = [line(strong(f"{side} answers"))]
    for r in answers:
        parts += [
            line(code(r.target), " ", strong(r.response.upper()), " \u2014 ", r.explanation),
            line(emphasis("asks:"), " ", r.follow_up_question),
        ]
    return parts


def _closing(side: str, closing: Closing) -> list[Part]:
    parts: list[Part] = [line(strong(side)), line(closing.final_position)]
    if closing.concessions:
        parts += [line(emphasis("Concedes:")), Bullets(tuple(closing.concessions))]
    if closing.unrebutted:
        parts += [line(emphasis("Unrebutted:")), Bullets(tuple(closing.unrebutted))]
    return parts


def _judgment(judged: ScoredJudgment) -> list[Block]:
    scores = tuple(
        (
            arg,
            str(d.logic),
            str(d.evidence),
            str(d.responsiveness),
            str(d.honesty),
            f"{judged.weighted[arg]:.2f}",
        )
        for arg, d in judged.scores.items()
    )
    totals: list[Inline] = []
    for n, (side, total) in enumerate(judged.totals.items()):
        totals += [" \u00b7 "] * (n > 0) + [f"{side} ", strong(f"{total:.2f}")]
    found = tuple(
        f"{f.argument}: {f.fallacy.value} \u2014 {f.explanation}" for f in judged.fallacies
    )
    trace = tuple((arg, t.status, shortened(t.note, 60)) for arg, t in judged.trace.items())
    return [
        section(
            line(
                strong("Weighted scores"),
                " (logic .30, evidence .30, responsiveness .25, honesty .15)",
            ),
            Table(("argument", "logic", "evid.", "resp.", "hon.", "weighted"), scores),
        ),
        section(
            line(
                strong("Side totals:"),
                " ",
                *totals,
                f" \u2014 leading: {judged.leading_side or 'neither (a tie)'}",
            )
        ),
        section(
            line(strong(f"Fallacies found ({len(found)})")),
            Bullets(found) if found else line(emphasis("none")),
        ),
        section(line(strong("Argument trace")), Table(("argument", "status", "note"), trace)),
        section(
            line(
                strong("Judge:"),
                " ",
                code(judged.decision.value),
                f", {judged.confidence_level.value}",
            ),
            line(judged.recommendation),
        ),
    ]


class StructuredView(ProtocolView):
    """A phase: the openings' numbered arguments, the cross-examination's answers, the closings
    or the judge's scores; the outcome: the weighted side totals."""

    def round(self, record: RoundRecordBase, max_rounds: int) -> RoundView:
        played = expect(record, StructuredPhase, NAME)
        body = (
            _by_side(played, played.openings, _opening)
            + _by_side(played, played.answers, _answers)
            + _by_side(played, played.closings, _closing)
        )
        if played.judgment is not None:
            body += _judgment(played.judgment)
        number = STRUCTURED_PHASES.index(played.phase) + 1
        title = f"{PHASE_TITLES[played.phase]} \u00b7 phase {number} of {len(STRUCTURED_PHASES)}"
        return RoundView(title, tuple(body))

    def outcome(self, result: DebateResult) -> tuple[Block, ...]:
        report = result.report or {}
        totals = report.get("side_totals")
        if not totals:
            return ()
        leading = report.get("leading_side") or "neither (a tie)"
        return (
            section(
                line(
                    strong("Structured outcome:"),
                    f" PRO {totals['PRO']:.2f} \u00b7 CON {totals['CON']:.2f}"
                    f" \u2014 leading: {leading} \u00b7 {len(report.get('fallacies', []))}"
                    f" fallacies \u00b7 {len(report.get('trace', []))} arguments traced",
                )
            ),
        )


def speakers(names: Sequence[str]) -> list[str]:
    """Who speaks for each side, as the protocol names them (the first two debaters, else the
    sides' names)."""
    if names:
        return list(names[: len(SIDES)])
    return [side.lower() for side in SIDES]


def _side_of(spec: DebateSpec, speaker: str) -> str:
    named = speakers([d.name or "" for d in spec.debaters()])
    return SIDES[named.index(speaker)] if speaker in named else speaker


class StructuredPlan(PlanTasks):
    """Openings, cross-examination and closings, one turn a side; then the judge scores each
    side and rules. Its rounds are phases: the live line counts phases."""

    def expected(self, spec: DebateSpec, number: int, phase: str, group: str) -> list[TurnKey]:
        if group == TURNS:
            names = speakers([d.name or "" for d in spec.debaters()])
            return [(number, Role.DEBATER, name, "", 1) for name in names]
        if group == JUDGING:
            return [(number, Role.JUDGE, "", part, 1) for part in (*SIDES, "ruling")]
        return []

    def title(self, spec: DebateSpec, key: TurnKey) -> str:
        number, role, speaker, phase, _attempt = key
        if role is Role.JUDGE:
            return "Judge rules" if phase == "ruling" else f"Judge scores the {phase} arguments"
        if role is not Role.DEBATER:
            return super().title(spec, key)
        step = STEPS.get(number, STRUCTURED_PHASES[min(number, 4) - 1])
        return f"{step.capitalize()}: {_side_of(spec, speaker)} ({speaker})"

    def summary(self, spec: DebateSpec, turn: TurnRecord) -> str:
        p, who = turn.parsed, turn.speaker
        if turn.role is Role.JUDGE:
            if turn.phase == "ruling":
                return (
                    f"judge: {p.get('decision')}, {p.get('confidence_level')},"
                    f" {plural(count(p, 'fallacies'), 'fallacy', 'fallacies')}"
                )
            return f"judge: scored {plural(count(p, 'scores'), 'argument')}"
        if turn.role is not Role.DEBATER:
            return super().summary(spec, turn)
        if turn.round == 1:
            return f"{who}: {plural(count(p, 'arguments'), 'argument')}"
        if turn.round == 2:
            return f"{who}: {plural(count(p, 'responses'), 'answer')}"
        return f"{who}: {plural(count(p, 'concessions'), 'concession')}"

    def progress(self, event: TurnStarted, spec: DebateSpec) -> str:
        phases = len(STRUCTURED_PHASES)
        where = f"phase {min(event.round, phases)} of {phases}"
        doing = "judge is scoring the arguments" if event.role is Role.JUDGE else speaking(event)
        return f"{doing} \u00b7 {where}"


DEFINITION = ProtocolDefinition(
    name=NAME,
    engine=StructuredProtocol,
    default_rounds=1,
    max_rounds=1,
    labels=Labels(
        display_name="Structured",
        description="numbered PRO and CON arguments, cross-examination, closings, a judge who"
        " scores every argument.",
        advice="For a decision someone must audit argument by argument.",
    ),
    view=StructuredView(),
    plan=StructuredPlan(),
    confidence=Confidence(
        unanswered="the opposing arguments the judge's trace does not refute",
        declared="the judge's level",
    ),
    deciding_slot="judge",
)
