"""The `consensus` protocol as the application knows it (`DEFINITION`): its rounds, options,
flags, labels, live-plan tasks, how a phase and the report read, and what its confidence
components mean."""

from __future__ import annotations

from engine.models import DebateResult, DebateSpec, Role, RoundRecordBase, TurnRecord
from engine.protocols.consensus import ConsensusOptions, ConsensusProtocol
from engine.protocols.definition import (
    Confidence,
    DefaultDebater,
    Labels,
    PlanTasks,
    ProtocolDefinition,
    ProtocolView,
    TurnKey,
    expect,
)
from engine.rounds import ConsensusPhase
from engine.views import (
    Block,
    Icon,
    Preformatted,
    RoundView,
    Table,
    code,
    line,
    section,
    strong,
)

NAME = "consensus"


def _mark(vote: str, record: ConsensusPhase) -> str:
    return "reached" if record.tally.get(vote, 0) >= record.threshold else ""


class ConsensusView(ProtocolView):
    """A phase: every contribution with its vote, then the tally; the outcome: the report's
    nine lines."""

    def round(self, record: RoundRecordBase, max_rounds: int) -> RoundView:
        played = expect(record, ConsensusPhase, NAME)
        body: list[Block] = [
            section(
                line(strong(entry.speaker), " votes ", code(entry.vote), " \u2014 ", entry.stance),
                line(entry.rationale),
            )
            for entry in played.contributions
        ]
        rows = tuple(
            (vote, f"{played.tally.get(vote, 0)}/{played.debaters}", _mark(vote, played))
            for vote in played.votes
        )
        outcome = (
            line(
                Icon.REACHED,
                " ",
                code(played.reached),
                " reached the threshold; the vote ends here.",
            )
            if played.reached
            else line("No option has reached the threshold yet.")
        )
        body.append(
            section(
                line(strong(f"Tally after the {played.phase} phase")),
                Table(("vote", "votes", f"threshold {played.threshold}"), rows),
                outcome,
            )
        )
        title = f"Round {played.round} of {played.max_rounds} \u00b7 {played.phase} phase"
        return RoundView(title, tuple(body))

    def outcome(self, result: DebateResult) -> tuple[Block, ...]:
        lines = (result.report or {}).get("lines")
        if not lines:
            return ()
        return (section(line(strong("Consensus report")), Preformatted("\n".join(lines))),)


class ConsensusPlan(PlanTasks):
    """Each phase of a round is a stage: every debater in the speaking order."""

    phased = True

    def title(self, spec: DebateSpec, key: TurnKey) -> str:
        number, role, speaker, phase, _attempt = key
        if role is not Role.DEBATER:
            return super().title(spec, key)
        return f"Round {number}, {phase} phase: {speaker}"

    def summary(self, spec: DebateSpec, turn: TurnRecord) -> str:
        if turn.role is Role.DEBATER:
            return f"{turn.speaker} votes {turn.parsed.get('vote')}"
        return super().summary(spec, turn)


DEFINITION = ProtocolDefinition(
    name=NAME,
    engine=ConsensusProtocol,
    default_rounds=2,
    max_rounds=6,
    labels=Labels(
        display_name="Consensus",
        description="three debaters propose, critique and revise, then vote; code counts the vote.",
        advice="For a team that needs agreement, not a winner.",
    ),
    view=ConsensusView(),
    plan=ConsensusPlan(),
    confidence=Confidence(
        unanswered="the debaters not behind the decision", declared="none (nobody declares one)"
    ),
    options=ConsensusOptions,
    default_debaters=(
        DefaultDebater("planner", hint="You plan the change and own its delivery."),
        DefaultDebater("critic", hint="You look for what will break and who gets hurt."),
        DefaultDebater("operator", hint="You will run this in production at 3 a.m."),
    ),
    calls_per_run=7,
)
