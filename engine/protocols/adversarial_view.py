"""The `adversarial` protocol as the application knows it (`DEFINITION`): its rounds, flags,
labels, live-plan tasks, how a round reads, and what its confidence components mean."""

from __future__ import annotations

from engine.events import TurnStarted
from engine.models import (
    AdversarialRound,
    ArgumentQuality,
    DebateSpec,
    Role,
    RoundRecordBase,
    TurnRecord,
)
from engine.protocols.adversarial import AdversarialProtocol
from engine.protocols.definition import (
    TURNS,
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
    round_where,
)
from engine.views import (
    Bullets,
    Icon,
    Line,
    Note,
    RoundView,
    Section,
    code,
    emphasis,
    line,
    section,
    strong,
)

NAME = "adversarial"
TURN_ROLES = (Role.PROPOSER, Role.CRITIC, Role.REBUTTAL, Role.MODERATOR)
DOING = {
    Role.PROPOSER: "proposer makes the case",
    Role.CRITIC: "critic challenges the proposal",
    Role.REBUTTAL: "proposer answers the critic",
    Role.MODERATOR: "moderator weighs the arguments",
}
"""A round's tasks, as the plan titles them."""
SPEAKING = {
    Role.FRAMING: "framing is turning the question into a proposition",
    Role.PROPOSER: "proposer is making the case",
    Role.CRITIC: "critic is challenging the proposal",
    Role.REBUTTAL: "proposer is answering the critic",
    Role.MODERATOR: "moderator is weighing the arguments",
}
"""Who is speaking, as the parent's live line says it."""


def _quality(label: str, quality: ArgumentQuality) -> str:
    return (
        f"{label}: logic {quality.logic}, evidence {quality.evidence},"
        f" completeness {quality.completeness}, consistency {quality.consistency}"
        f" (mean {quality.mean:.1f})"
    )


class AdversarialView(ProtocolView):
    """A round: the proposer, the critic, the rebuttal and the moderation; the verdict is the
    moderator's, with no outcome of its own."""

    def round(self, record: RoundRecordBase, max_rounds: int) -> RoundView:
        played = expect(record, AdversarialRound, NAME)
        p, c, r, m = played.proposer, played.critic, played.rebuttal, played.moderator
        asked = f" (asked {played.critic_attempts}\u00d7)" if played.critic_attempts > 1 else ""
        rebuttal: list[Line | Bullets] = [
            line(strong("Rebuttal", Icon.FOR)),
            line(r.thesis),
            Bullets(tuple(r.rebuttals)),
        ]
        if r.concessions:
            rebuttal += [line(emphasis("Concedes:")), Bullets(tuple(r.concessions))]
        moderation: list[Line | Bullets] = [
            line(
                strong("Moderator", Icon.SCALES),
                " \u2014 ",
                code(m.decision.value),
                f", {m.confidence_level.value}",
            ),
            line(m.synthesis),
        ]
        if m.unresolved_points:
            moderation += [line(emphasis("Unresolved:")), Bullets(tuple(m.unresolved_points))]
        quality = (
            f"{_quality('proposer', m.proposer_quality)} \u00b7"
            f" {_quality('critic', m.critic_quality)} \u00b7 round cost ${played.cost_usd:.4f}"
        )
        return RoundView(
            f"Round {played.round} of {max_rounds}",
            (
                section(
                    line(strong("Proposer", Icon.FOR)),
                    line(p.thesis),
                    Bullets(tuple(p.supporting_arguments)),
                ),
                section(
                    line(
                        strong("Critic", Icon.AGAINST),
                        f" \u2014 challenge strength {c.challenge_strength}/10{asked}",
                    ),
                    line(c.thesis),
                    Bullets(tuple(c.counter_arguments)),
                ),
                Section(tuple(rebuttal)),
                Section(tuple(moderation)),
                Note((quality,)),
            ),
        )


class AdversarialPlan(PlanTasks):
    """Framing, then each round's proposer, critic, rebuttal and moderator."""

    def expected(self, spec: DebateSpec, number: int, phase: str, group: str) -> list[TurnKey]:
        return [(number, role, "", "", 1) for role in TURN_ROLES] if group == TURNS else []

    def title(self, spec: DebateSpec, key: TurnKey) -> str:
        number, role, _speaker, _phase, attempt = key
        if role is Role.FRAMING:
            return "Framing the question as a proposition"
        if role not in DOING:
            return super().title(spec, key)
        doing = DOING[role]
        if role is Role.CRITIC and attempt > 1:
            doing = "critic presses a stronger challenge"
        return f"Round {number}: {doing}"

    def summary(self, spec: DebateSpec, turn: TurnRecord) -> str:
        p, role = turn.parsed, turn.role
        if role is Role.FRAMING:
            return (
                f"framing: {plural(count(p, 'criteria'), 'criterion', 'criteria')},"
                f" {plural(count(p, 'key_evidence'), 'piece')} of evidence"
            )
        if role is Role.PROPOSER:
            return f"proposer: {plural(count(p, 'supporting_arguments'), 'argument')}"
        if role is Role.CRITIC:
            return (
                f"critic: {plural(count(p, 'counter_arguments'), 'objection')},"
                f" strength {p.get('challenge_strength', '?')}/10"
            )
        if role is Role.REBUTTAL:
            return (
                f"rebuttal: {plural(count(p, 'rebuttals'), 'answer')},"
                f" {plural(count(p, 'concessions'), 'concession')}"
            )
        if role is Role.MODERATOR:
            more = "another round" if p.get("recommend_another_round") else "no more rounds"
            return f"moderator: {p.get('decision')}, {p.get('confidence_level')}; {more}"
        return super().summary(spec, turn)

    def progress(self, event: TurnStarted, spec: DebateSpec) -> str:
        if event.role not in SPEAKING:
            return super().progress(event, spec)
        doing = SPEAKING[event.role]
        if event.role is Role.FRAMING:
            return doing
        if event.role is Role.CRITIC and event.attempt > 1:
            doing = "critic is pressing a stronger challenge"
        return f"{doing} \u00b7 {round_where(spec, event.round)}"


DEFINITION = ProtocolDefinition(
    name=NAME,
    engine=AdversarialProtocol,
    default_rounds=1,
    max_rounds=3,
    labels=Labels(
        display_name="Adversarial",
        description="a proposal against a critic that must disagree, judged by a moderator.",
        advice="For a yes/no decision such as an ADR.",
    ),
    view=AdversarialView(),
    plan=AdversarialPlan(),
    confidence=Confidence(
        unanswered="the critic's final counter-arguments that no rebuttal or concession answers",
        declared="the moderator's level",
    ),
    flags=Flags(another_round=True, configured_rounds=True),
    deciding_slot="moderator",
    calls_per_run=5,
)
