"""The `stances` protocol as the application knows it (`DEFINITION`): its rounds, options,
flags, labels, live-plan tasks, how a round and the judgment read, and what its confidence
components mean."""

from __future__ import annotations

from engine.models import DebateResult, DebateSpec, Role, RoundRecordBase, TurnRecord
from engine.protocols.definition import (
    Confidence,
    Flags,
    Labels,
    PlanTasks,
    ProtocolDefinition,
    ProtocolView,
    TurnKey,
    count,
    expect,
    plural,
)
from engine.protocols.stances import StancesOptions, StancesProtocol
from engine.rounds import StancesRound
from engine.views import Block, Bullets, Icon, Part, RoundView, emphasis, line, section, strong

NAME = "stances"


class StancesView(ProtocolView):
    """A round: every debater's argument under its stance; the outcome: the judge's winner (or
    a synthesis) and any projected answer."""

    def round(self, record: RoundRecordBase, max_rounds: int) -> RoundView:
        played = expect(record, StancesRound, NAME)
        body = tuple(
            section(
                line(strong(spoken.speaker, Icon.SPEECH), " \u2014 for ", emphasis(spoken.stance)),
                line(spoken.argument.argument),
                Bullets(tuple(spoken.argument.key_points)),
            )
            for spoken in played.arguments
        )
        return RoundView(f"Round {played.round} of {played.max_rounds}", body)

    def outcome(self, result: DebateResult) -> tuple[Block, ...]:
        report = result.report or {}
        if not report.get("judgment"):
            return ()
        winner = report.get("winner")
        shown = (strong(winner), " prevails") if winner else ("a synthesis of the stances",)
        parts: list[Part] = [line(strong("Judgment:"), " ", *shown)]
        if report.get("synthesis"):
            pairs = tuple(f"{k}: {v}" for k, v in report["synthesis"].items())
            parts += [line(strong("Projected answer")), Bullets(pairs)]
        return (section(*parts),)


class StancesPlan(PlanTasks):
    """Each round, every debater in the declared order; then the judge (and a synthesizer)."""

    def title(self, spec: DebateSpec, key: TurnKey) -> str:
        number, role, speaker, _phase, _attempt = key
        if role is not Role.DEBATER:
            return super().title(spec, key)
        stance = next((d.stance for d in spec.debaters() if (d.name or "") == speaker), None)
        return f"Round {number}: {speaker} argues \u201c{stance or 'a stance'}\u201d"

    def summary(self, spec: DebateSpec, turn: TurnRecord) -> str:
        p = turn.parsed
        if turn.role is Role.JUDGE:
            scored = plural(count(p, "scores"), "stance")
            return f"judge: scores {scored}, confidence {p.get('confidence_level', 'not given')}"
        if turn.role is Role.DEBATER:
            return f"{turn.speaker}: {plural(count(p, 'key_points'), 'key point')}"
        return super().summary(spec, turn)


DEFINITION = ProtocolDefinition(
    name=NAME,
    engine=StancesProtocol,
    default_rounds=2,
    max_rounds=6,
    labels=Labels(
        display_name="Stances",
        description="debaters defend stances you name (`--for`, `--against`), one judge decides.",
        advice="For choosing between known options.",
    ),
    view=StancesView(),
    plan=StancesPlan(),
    confidence=Confidence(
        unanswered="the judge's missing lead of the winner over the next stance, from its scores",
        declared="the judge's level",
    ),
    options=StancesOptions,
    flags=Flags(takes_stances=True),
    deciding_slot="judge",
)
