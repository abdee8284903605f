"""The `consensus` protocol: debaters converge by phases and votes, under rules held by code.

Participant ids, the phase sequence (proposal, critique, revision, consensus), the speaker
schedule, the round count, the maximum rounds, the threshold, the tally and the decision rule are
all decided here; models only speak (stance, rationale, vote from the configured vote set).

Round 1 runs proposal, critique, revision and consensus; later rounds run critique, revision and
consensus again. Every debater speaks in every phase, in the declared order, and sees this
round's contributions in full and earlier rounds as a compact record (`engine.protocols.record`).
After each phase the latest vote of each distinct debater is tallied: the first option reaching
the threshold ends the debate (`decision_rule=threshold_vote`); when the maximum rounds pass
without it, the decision is `escalate` (`decision_rule=max_rounds_exhausted`).

Confidence is measured by `engine.scoring`. What this protocol reports for it: the votes not
behind the decision as what is left unanswered (for an exhausted run, those outside the largest
group), no declared level (nobody declares one), and every contribution's stance and rationale,
without its vote, for an independent judge, who picks one of the vote set.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from engine.errors import LLMError, SpecError
from engine.events import RoundFinished
from engine.evidence import (
    DECISION_GROUPS,
    NO_VERDICT,
    BlindView,
    Entry,
    IndependentJudgment,
    ProtocolEvidence,
    share_note,
)
from engine.ledger import BudgetExhausted, TurnLedger
from engine.models import (
    DebateResult,
    DebateSpec,
    Decision,
    LongText,
    Role,
    ShortText,
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
    named_debaters,
    no_verdict,
    options_for,
)
from engine.protocols.outputs import Outputs
from engine.protocols.record import (
    CONSENSUS_IDS,
    CONSENSUS_PHASE_KINDS,
    DebateSoFar,
    full_line,
    point_id,
    record_line,
)
from engine.rounds import ConsensusEntry, ConsensusPhase

__all__ = ["ConsensusEntry", "ConsensusProtocol"]

PHASES = ("proposal", "critique", "revision", "consensus")
LATER_ROUND_PHASES = PHASES[1:]
PHASE_INSTRUCTIONS = {
    "proposal": "Propose what the team should do and vote on it.",
    "critique": "Critique the proposals above: name the weakest point of each you doubt, by id.",
    "revision": "Revise your position in the light of the critiques; keep what survived.",
    "consensus": "State the position you can commit to and cast your vote for the decision.",
}
DEFAULT_DECISIONS = {"release": "accept", "revise": "revise", "escalate": "escalate"}


class ConsensusOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    votes: list[str] = Field(
        default_factory=lambda: ["release", "revise", "escalate"], min_length=2, max_length=8
    )
    threshold: int | None = Field(default=None, ge=1, description="default: a simple majority")
    decisions: dict[str, Decision] = Field(
        default_factory=lambda: {k: Decision(v) for k, v in DEFAULT_DECISIONS.items()},
        description="which verdict decision each vote stands for; others map to escalate",
    )

    @field_validator("votes")
    @classmethod
    def _unique(cls, votes: list[str]) -> list[str]:
        if len(set(votes)) != len(votes) or any(not v.strip() for v in votes):
            raise ValueError("votes must be distinct, non-empty names")
        return votes


class ConsensusTurnBase(BaseModel):
    stance: ShortText
    rationale: LongText
    vote: str


OUTPUTS = Outputs(
    "consensus",
    {"ConsensusTurn": ConsensusTurnBase, "IndependentJudgment": IndependentJudgment},
)
"""The envelope of every consensus debate: the vote is a string there (the vote set is an
option), restricted to the debate's votes by the turn's own type."""


@built_once
def turn_type(votes: list[str]) -> type[ConsensusTurnBase]:
    """The turn schema with `vote` restricted to the configured vote set."""
    return create_model(
        "ConsensusTurn", __base__=ConsensusTurnBase, vote=(choice_enum("Vote", votes), ...)
    )


class ConsensusReport(BaseModel):
    debater_ids: list[str]
    rounds_run: int
    max_rounds: int
    phase_sequence: list[str]
    threshold: int
    tally: dict[str, int]
    decision: str
    decision_rule: str
    speaker_schedule: list[str]
    entries: list[ConsensusEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> ConsensusReport:
        if sum(self.tally.values()) > len(self.debater_ids):
            raise ValueError("more votes tallied than debaters")
        return self

    def lines(self) -> list[str]:
        """The nine report lines, in the fixed order."""
        tally = ", ".join(f"{vote}={count}" for vote, count in self.tally.items())
        return [
            f"debater ids: {', '.join(self.debater_ids)}",
            f"rounds run: {self.rounds_run}",
            f"max rounds: {self.max_rounds}",
            f"phase sequence: {', '.join(self.phase_sequence)}",
            f"threshold: {self.threshold}",
            f"tally: {tally}",
            f"decision: {self.decision}",
            f"decision rule: {self.decision_rule}",
            f"speaker schedule: {', '.join(self.speaker_schedule)}",
        ]


def tally_votes(entries: list[ConsensusEntry], votes: list[str]) -> dict[str, int]:
    """The latest vote of each distinct debater, counted, in vote-set order (zeros left out)."""
    latest: dict[str, str] = {}
    for entry in entries:
        latest[entry.speaker] = entry.vote
    counts = Counter(latest.values())
    return {vote: counts[vote] for vote in votes if counts[vote]}


def entry_id(entry: ConsensusEntry, schedule: list[str]) -> str:
    """The contribution's id: its round, its phase's letter, the speaker's place in the order."""
    kind = CONSENSUS_PHASE_KINDS[entry.phase]
    return point_id(entry.round, kind, schedule.index(entry.speaker) + 1)


def render_entry(entry: ConsensusEntry, schedule: list[str]) -> str:
    """A contribution of the current round in full."""
    return full_line(
        entry_id(entry, schedule),
        f"[{entry.speaker}, {entry.phase} phase, vote: {entry.vote}] stance: {entry.stance}\n"
        f"rationale: {entry.rationale}",
    )


def round_record(number: int, entries: list[ConsensusEntry], schedule: list[str]) -> str:
    """A finished round as a compact record: one line per contribution, in speaking order."""
    lines = [f"ROUND {number} RECORD:"]
    lines += [
        record_line(
            entry_id(e, schedule), f"[{e.speaker}, vote: {e.vote}] {e.stance} | {e.rationale}"
        )
        for e in entries
        if e.round == number
    ]
    return "\n".join(lines)


class ConsensusProtocol:
    """Phased discussion with code-held rules and a counted vote."""

    def validate(self, spec: DebateSpec) -> None:
        options = options_for(ConsensusOptions, spec)
        debaters = named_debaters(spec)
        threshold = self._threshold(options, len(debaters))
        majority = len(debaters) // 2 + 1
        if not majority <= threshold <= len(debaters):
            raise SpecError(
                f"the consensus threshold must be between a majority ({majority}) and the number"
                f" of debaters ({len(debaters)}); got {threshold}"
            )

    @staticmethod
    def _threshold(options: ConsensusOptions, debaters: int) -> int:
        return options.threshold if options.threshold is not None else debaters // 2 + 1

    async def run(
        self, spec: DebateSpec, *, ledger: TurnLedger, prompts: PromptLibrary
    ) -> DebateResult:
        started_at = utcnow()
        options = options_for(ConsensusOptions, spec)
        schedule = [d.name or "" for d in spec.debaters()]
        hints = {d.name: d.role_hint or "" for d in spec.debaters()}
        threshold = self._threshold(options, len(schedule))
        output_type = turn_type(options.votes)
        asker = Asker(spec=spec, ledger=ledger, prompts=prompts, outputs=OUTPUTS)
        ending = Ending()
        entries: list[ConsensusEntry] = []
        records: list[str] = []
        phases_run: list[str] = []
        rounds_run = 0
        tally: dict[str, int] = {}
        winner: str | None = None
        try:
            for number in range(1, spec.max_rounds + 1):
                rounds_run = number
                so_far = DebateSoFar("THE DISCUSSION SO FAR", CONSENSUS_IDS, [], records)
                for phase in PHASES if number == 1 else LATER_ROUND_PHASES:
                    phases_run.append(phase)
                    for speaker in schedule:
                        turn = await asker.ask(
                            "consensus/turn.md",
                            round=number,
                            role=Role.DEBATER,
                            speaker=speaker,
                            phase=phase,
                            step=f"speaking in the {phase} phase",
                            output_type=output_type,
                            values={
                                "speaker": speaker,
                                "role_hint": hints.get(speaker, ""),
                                "round": str(number),
                                "phase": phase,
                                "phase_instruction": PHASE_INSTRUCTIONS[phase],
                                "votes": ", ".join(options.votes),
                            },
                            so_far=so_far.sections(),
                        )
                        entry = ConsensusEntry(
                            speaker=speaker,
                            round=number,
                            phase=phase,
                            stance=turn.stance,
                            rationale=turn.rationale,
                            vote=str(getattr(turn.vote, "value", turn.vote)),
                        )
                        first = not entries or entries[-1].round < number
                        entries.append(entry)
                        heading = f"ROUND {number}, IN FULL:\n" if first else ""
                        so_far.add(heading + render_entry(entry, schedule))
                    tally = tally_votes(entries, options.votes)
                    winner = next((v for v, n in tally.items() if n >= threshold), None)
                    await ledger.emit(
                        RoundFinished(
                            record=ConsensusPhase(
                                round=number,
                                max_rounds=spec.max_rounds,
                                phase=phase,
                                contributions=[
                                    e for e in entries if e.round == number and e.phase == phase
                                ],
                                votes=options.votes,
                                tally=tally,
                                threshold=threshold,
                                debaters=len(schedule),
                                reached=winner,
                            )
                        )
                    )
                    if winner is not None:
                        break
                if winner is not None:
                    break
                records.append(round_record(number, entries, schedule))
        except (BudgetExhausted, LLMError) as stop:
            ending.record(stop)
        report = ConsensusReport(
            debater_ids=schedule,
            rounds_run=rounds_run,
            max_rounds=spec.max_rounds,
            phase_sequence=phases_run,
            threshold=threshold,
            tally=tally,
            decision=winner or "escalate",
            decision_rule="threshold_vote" if winner else "max_rounds_exhausted",
            speaker_schedule=schedule,
            entries=entries,
        )
        return finish(
            spec,
            ledger,
            ending,
            self._verdict(spec, ending, report, options),
            started_at=started_at,
            report=report.model_dump(mode="json") | {"lines": report.lines()},
        )

    def evidence(self, result: DebateResult) -> ProtocolEvidence:
        """The votes against the decision, and the discussion for an independent judge."""
        data = dict(result.report or {})
        data.pop("lines", None)
        report = ConsensusReport.model_validate(data)
        if not report.entries:
            return NO_VERDICT
        debaters = len(report.debater_ids)
        if report.decision_rule == "threshold_vote":
            behind = report.tally.get(report.decision, 0)
            unanswered = share_note(debaters - behind, debaters, "debaters not behind the decision")
        else:
            largest = max(report.tally.values(), default=0)
            unanswered = share_note(
                debaters - largest, debaters, "debaters outside the largest group (no consensus)"
            )
        return ProtocolEvidence(
            reached=True, unanswered=unanswered, view=self._blind_view(result, report)
        )

    @staticmethod
    def _blind_view(result: DebateResult, report: ConsensusReport) -> BlindView:
        spec = result.spec
        options = options_for(ConsensusOptions, spec)
        schedule = report.speaker_schedule
        groups = dict(DECISION_GROUPS)
        groups |= {
            vote: DECISION_GROUPS[options.decisions.get(vote, Decision.ESCALATE).value]
            for vote in options.votes
        }
        decided = report.decision if report.decision_rule == "threshold_vote" else "escalate"
        return BlindView(
            positions=tuple("a participant in the discussion" for _ in schedule),
            entries=tuple(
                Entry(
                    schedule.index(e.speaker),
                    e.round,
                    f"({e.phase} phase) stance: {e.stance}\nrationale: {e.rationale}",
                )
                for e in report.entries
            ),
            choices=tuple(options.votes),
            explain=f"one of {', '.join(options.votes)}: what the team should do",
            decided=decided,
            decided_by=spec.debaters()[0].model,
            outputs=OUTPUTS,
            round=report.rounds_run,
            names=tuple(schedule),
            groups=groups,
        )

    @staticmethod
    def _verdict(
        spec: DebateSpec, ending: Ending, report: ConsensusReport, options: ConsensusOptions
    ) -> Verdict:
        debaters = len(report.debater_ids)
        largest = max(report.tally.values(), default=0)
        if not report.entries:
            return no_verdict(spec, ending)
        if report.decision_rule == "threshold_vote":
            decision = options.decisions.get(report.decision, Decision.ESCALATE)
            backers = [e for e in report.entries if e.vote == report.decision]
            synthesis = (
                f"{largest} of {debaters} debaters reached {report.decision!r} in round"
                f" {report.rounds_run} ({report.phase_sequence[-1]} phase). Last stance for it:"
                f" {backers[-1].stance}"
            )
            reasons = []
        else:
            decision = Decision.ESCALATE
            synthesis = (
                f"No option reached the threshold of {report.threshold} in {report.rounds_run}"
                f" rounds; final tally {report.tally}."
            )
            reasons = [f"no consensus after {report.rounds_run} rounds (max_rounds_exhausted)"]
        return common_verdict(spec, ending, decision=decision, synthesis=synthesis, reasons=reasons)
