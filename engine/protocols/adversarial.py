"""The `adversarial` protocol: framing, then rounds of proposer, critic, rebuttal and moderator.

- Framing turns the question into a proposition (thesis, scope, criteria, key evidence).
- The critic must assume the proposition is wrong and rate its own challenge strength (1-10).
  Below `CRITIC_RETRY_BELOW` it is asked once more with a stronger adversarial instruction; if
  the final critique of any round stays below `WEAK_CHALLENGE_BELOW`, the result is flagged.
- The moderator scores argument quality per side, not positions; another round runs only when it
  recommends one, up to `spec.max_rounds` (default 1, hard maximum 3); `spec.min_rounds` forces
  rounds a human reviewer asked for ("Another round") even when the moderator does not.
- Every quote cited as evidence is checked against the context (`engine.citations`).
- A later round sees the earlier ones as a compact record with stable ids, built in code
  (`engine.protocols.record`), and its own turns in full.

Confidence is measured by `engine.scoring`, as for every protocol. What this protocol reports
for it (`evidence`): the critic's counter-arguments of the final round that neither a rebuttal
nor a concession answers (each answer names the id of the point it answers; one naming none
answers the next point not yet answered), the moderator's declared level, and the record an
independent judge reads again (the proposition, then each round's argument, critique and
rebuttal, for and against, with no moderation).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel

from engine.cache_plan import Planned, judges_planned
from engine.citations import CitationChecker
from engine.errors import LLMError
from engine.events import RoundFinished
from engine.evidence import (
    DECLARED,
    NO_VERDICT,
    BlindView,
    Entry,
    IndependentJudgment,
    Measure,
    ProtocolEvidence,
    share_note,
)
from engine.judging import judge_beside
from engine.ledger import BudgetExhausted, TurnLedger
from engine.models import (
    AdversarialRound,
    CitationCheck,
    ConfidenceLevel,
    CriticTurn,
    DebateFlag,
    DebateResult,
    DebateSpec,
    DebateStatus,
    Decision,
    ModeratorTurn,
    ProposerTurn,
    Proposition,
    RebuttalTurn,
    Role,
    Usage,
    Verdict,
    utcnow,
)
from engine.prompts import PromptLibrary
from engine.protocols.base import Asker
from engine.protocols.outputs import Outputs
from engine.protocols.record import (
    ADVERSARIAL_IDS,
    DebateSoFar,
    clip,
    full_line,
    indented,
    point_id,
    record_line,
)

T = TypeVar("T", bound=BaseModel)

CRITIC_RETRY_BELOW = 6
WEAK_CHALLENGE_BELOW = 5

OUTPUTS = Outputs.of(
    "adversarial",
    Proposition,
    ProposerTurn,
    CriticTurn,
    RebuttalTurn,
    ModeratorTurn,
    IndependentJudgment,
)
"""Every output type of the protocol, in the one envelope schema all its calls send."""


def _bullets(items: list[str], empty: str = "(none)") -> str:
    return "\n".join(f"- {indented(item)}" for item in items) if items else empty


def _points(number: int, kind: str, items: list[str], empty: str = "(none)") -> str:
    """A turn's points in full, each labelled with its id."""
    lines = [full_line(point_id(number, kind, n), item) for n, item in enumerate(items, 1)]
    return "\n".join(lines) if lines else empty


def render_proposition(p: Proposition) -> str:
    return (
        f"Thesis: {indented(p.thesis)}\nScope: {indented(p.scope)}\n"
        f"Criteria:\n{_bullets(p.criteria)}\nKey evidence:\n{_bullets(p.key_evidence)}"
    )


def _argued(turn: ProposerTurn | CriticTurn, heading: str, points: str) -> str:
    """A proposer's or critic's turn: its thesis, its labelled points under `heading`, and the
    evidence it cites."""
    return (
        f"Thesis: {indented(turn.thesis)}\n{heading}:\n{points}\n"
        f"Evidence cited:\n{_bullets(turn.evidence_cited)}"
    )


def render_proposer(turn: ProposerTurn, number: int) -> str:
    return _argued(turn, "Arguments", _points(number, "P", turn.supporting_arguments))


def render_critic(turn: CriticTurn, number: int) -> str:
    return _argued(turn, "Counter-arguments", _points(number, "C", turn.counter_arguments))


def render_rebuttal(turn: RebuttalTurn, number: int) -> str:
    return (
        f"Thesis: {indented(turn.thesis)}\nRebuttals:\n{_bullets(turn.rebuttals)}\n"
        f"Concessions:\n{_points(number, 'K', turn.concessions)}"
    )


def round_record(past: AdversarialRound) -> str:
    """One earlier round as a compact record, from its structured turns alone: a line per
    argument, counter-argument, concession, settled and open point, then the decision."""
    number, moderator = past.round, past.moderator
    lines = [f"ROUND {number} RECORD:"]
    for kind, items in (
        ("P", past.proposer.supporting_arguments),
        ("C", past.critic.counter_arguments),
        ("K", past.rebuttal.concessions),
        ("S", moderator.resolved_points),
        ("U", moderator.unresolved_points),
    ):
        lines += [record_line(point_id(number, kind, n), item) for n, item in enumerate(items, 1)]
    lines.append(
        f"Round {number} decision: {moderator.decision.value}"
        f" ({moderator.confidence_level.value}): {clip(moderator.synthesis)}"
    )
    return "\n".join(lines)


class RoundSoFar(DebateSoFar):
    """What a turn of adversarial round `number` is shown before its instructions: the
    proposition in full, the record of each earlier round, this round's turns so far in full."""

    def __init__(self, proposition: Proposition, records: list[str], number: int) -> None:
        shared = [f"PROPOSITION:\n{render_proposition(proposition)}"]
        super().__init__("THE DEBATE SO FAR", ADVERSARIAL_IDS, shared, records)
        self.number = number

    def turn(self, label: str, text: str) -> None:
        self.add(f"{label} (round {self.number}):\n{text}")


@dataclass
class _DebateState:
    proposition: Proposition | None = None
    rounds: list[AdversarialRound] = field(default_factory=list)
    records: list[str] = field(default_factory=list)
    """The compact record of each round in `rounds`, built once when the round ends."""
    citations: list[CitationCheck] = field(default_factory=list)
    weakest_final_challenge: int | None = None
    status: DebateStatus = DebateStatus.COMPLETE
    error: str | None = None


class AdversarialProtocol:
    """Proposer against a critic that must disagree, judged by a neutral moderator."""

    def validate(self, spec: DebateSpec) -> None:
        """Nothing beyond the round cap every protocol has (see `checked_protocol`)."""

    def evidence(self, result: DebateResult) -> ProtocolEvidence:
        """The final round's unanswered counter-arguments, the moderator's level, the record."""
        if not result.rounds or result.proposition is None:
            return NO_VERDICT
        level = result.rounds[-1].moderator.confidence_level
        return ProtocolEvidence(
            reached=True,
            unanswered=unanswered_objections(result.rounds[-1]),
            declared=DECLARED[level],
            declared_note=f"moderator declared {level.value}",
            view=blind_view(result),
        )

    async def run(
        self, spec: DebateSpec, *, ledger: TurnLedger, prompts: PromptLibrary
    ) -> DebateResult:
        started_at = utcnow()
        state = _DebateState()
        ledger.planned(planned_calls(spec))
        turns = _Turns(spec=spec, ledger=ledger, prompts=prompts)
        checker = CitationChecker(spec.context, spec.question)
        try:
            state.proposition = await turns.ask(Role.FRAMING, 0, Proposition)
            state.citations += checker.check_all(
                state.proposition.key_evidence, round=0, role=Role.FRAMING
            )
            for number in range(1, spec.max_rounds + 1):
                record = await self._round(number, state, turns, checker, ledger)
                state.rounds.append(record)
                state.records.append(round_record(record))
                await ledger.emit(RoundFinished(record=record))
                more = record.moderator.recommend_another_round or number < spec.min_rounds
                if not more:
                    break
        except BudgetExhausted as stop:
            state.status = DebateStatus.TRUNCATED_BUDGET
            state.error = str(stop)
        except LLMError as failure:
            state.status = DebateStatus.FAILED
            state.error = str(failure)
        flags = self._flags(state)
        return DebateResult(
            spec=spec,
            proposition=state.proposition,
            rounds=state.rounds,
            transcript=list(ledger.transcript),
            citations=state.citations,
            flags=flags,
            verdict=build_verdict(spec, state, flags),
            error=state.error,
            started_at=started_at,
            finished_at=utcnow(),
        )

    async def _round(
        self,
        number: int,
        state: _DebateState,
        turns: _Turns,
        checker: CitationChecker,
        ledger: TurnLedger,
    ) -> AdversarialRound:
        assert state.proposition is not None
        so_far = RoundSoFar(state.proposition, state.records, number)
        proposer = await turns.ask(Role.PROPOSER, number, ProposerTurn, so_far.sections())
        state.citations += checker.check_all(
            proposer.evidence_cited, round=number, role=Role.PROPOSER
        )
        so_far.turn("PROPOSER'S ARGUMENT", render_proposer(proposer, number))
        critic, attempts = await turns.critic(number, so_far.sections())
        state.citations += checker.check_all(critic.evidence_cited, round=number, role=Role.CRITIC)
        if state.weakest_final_challenge is None:
            state.weakest_final_challenge = critic.challenge_strength
        else:
            state.weakest_final_challenge = min(
                state.weakest_final_challenge, critic.challenge_strength
            )
        so_far.turn("CRITIC'S ARGUMENT", render_critic(critic, number))
        rebuttal = await turns.ask(Role.REBUTTAL, number, RebuttalTurn, so_far.sections())
        so_far.turn("REBUTTAL", render_rebuttal(rebuttal, number))
        if number == ledger.spec.max_rounds and ledger.spec.judges:
            # The last round's moderation cannot change the record the judges read (they read
            # it blind to the moderator), so they are asked beside it, not after it.
            spoken: list[Spoken] = [*state.rounds, (number, proposer, critic, rebuttal)]
            view = record_view(ledger.spec, state.proposition, spoken, decided="")
            judge_beside(view, ledger=ledger, prompts=turns.prompts)
        moderator = await turns.ask(Role.MODERATOR, number, ModeratorTurn, so_far.sections())
        usage_by_role: dict[Role, Usage] = {}
        cost = 0.0
        for turn in ledger.transcript:
            if turn.round == number:
                usage_by_role[turn.role] = usage_by_role.get(turn.role, Usage()) + turn.usage
                cost += turn.cost_usd
        return AdversarialRound(
            round=number,
            proposer=proposer,
            critic=critic,
            critic_attempts=attempts,
            rebuttal=rebuttal,
            moderator=moderator,
            usage_by_role=usage_by_role,
            cost_usd=cost,
        )

    @staticmethod
    def _flags(state: _DebateState) -> list[DebateFlag]:
        flags = []
        if (
            state.weakest_final_challenge is not None
            and state.weakest_final_challenge < WEAK_CHALLENGE_BELOW
        ):
            flags.append(DebateFlag.WEAK_CHALLENGE)
        if any(not check.verified for check in state.citations):
            flags.append(DebateFlag.FABRICATED_CITATION)
        return flags


def planned_calls(spec: DebateSpec) -> list[Planned]:
    """The calls of an adversarial debate in order, every round it may run included: the
    framing, each round's proposer, critic, rebuttal and moderator (each extending the round's
    debate so far), then the independent judges."""
    rounds = [
        Planned(number, role)
        for number in range(1, spec.max_rounds + 1)
        for role in (Role.PROPOSER, Role.CRITIC, Role.REBUTTAL, Role.MODERATOR)
    ]
    return [Planned(0, Role.FRAMING), *rounds, *judges_planned(spec)]


class _Turns:
    """Builds each role's messages (shared preamble + role prompt) and asks the ledger."""

    def __init__(self, *, spec: DebateSpec, ledger: TurnLedger, prompts: PromptLibrary) -> None:
        self.prompts = prompts
        self.asker = Asker(spec=spec, ledger=ledger, prompts=prompts, outputs=OUTPUTS)

    async def ask(
        self,
        role: Role,
        number: int,
        output_type: type[T],
        so_far: Sequence[str] = (),
        *,
        attempt: int = 1,
        extra: str = "",
    ) -> T:
        """One turn of `role` in round `number`: the debate so far, then the role's prompt
        (+ `extra`)."""
        return await self.asker.ask(
            f"adversarial/{role.value}.md",
            round=number,
            role=role,
            output_type=output_type,
            so_far=so_far,
            attempt=attempt,
            extra=extra,
        )

    async def critic(self, number: int, so_far: Sequence[str]) -> tuple[CriticTurn, int]:
        """The critique, re-asked once with a stronger instruction when it rates itself weak."""
        critique = await self.ask(Role.CRITIC, number, CriticTurn, so_far)
        if critique.challenge_strength >= CRITIC_RETRY_BELOW:
            return critique, 1
        escalation = self.prompts.get("adversarial/critic_escalation.md").render(
            previous_strength=str(critique.challenge_strength),
            previous_critique=render_critic(critique, number),
        )
        stronger = await self.ask(
            Role.CRITIC, number, CriticTurn, so_far, attempt=2, extra=escalation
        )
        return stronger, 2


def build_verdict(spec: DebateSpec, state: _DebateState, flags: list[DebateFlag]) -> Verdict:
    """The verdict from the latest moderation; its confidence is measured afterwards
    (`engine.scoring`)."""
    reasons: list[str] = []
    if state.status is DebateStatus.TRUNCATED_BUDGET:
        reasons.append(f"the debate was cut short by the budget ceiling ({state.error})")
    elif state.status is DebateStatus.FAILED:
        reasons.append(f"the debate failed: {state.error}")

    if not state.rounds:
        reasons.append("no moderation was reached, so there is no synthesis to rely on")
        return Verdict(
            status=state.status,
            decision=Decision.ESCALATE,
            synthesis="The debate ended before the moderator could weigh the arguments.",
            confidence=0.0,
            level=ConfidenceLevel.LOW,
            escalate=True,
            escalation_reasons=reasons,
        )

    moderation = state.rounds[-1].moderator
    if moderation.decision is Decision.ESCALATE:
        reasons.append("the moderator's decision is to escalate")
    return Verdict(
        status=state.status,
        decision=moderation.decision,
        synthesis=moderation.synthesis,
        confidence=0.0,
        level=ConfidenceLevel.LOW,
        moderator_level=moderation.confidence_level,
        unresolved_points=list(moderation.unresolved_points),
        uncertainties=list(moderation.uncertainties),
        escalate=bool(reasons),
        escalation_reasons=reasons,
    )


def unanswered_objections(last: AdversarialRound) -> Measure:
    """The critic's counter-arguments of `last` that no rebuttal or concession answers. An
    answer naming a counter-argument's id (`R1.C2`, or `C2`) answers it; one naming none
    answers the next counter-argument not yet answered."""
    number, count = last.round, len(last.critic.counter_arguments)
    ids = {
        n: re.compile(rf"(?<![\w.])(?:R{number}\.)?C{n}(?!\d)", re.IGNORECASE)
        for n in range(1, count + 1)
    }
    named: set[int] = set()
    unnamed = 0
    for answer in [*last.rebuttal.rebuttals, *last.rebuttal.concessions]:
        hits = {n for n, pattern in ids.items() if pattern.search(answer)}
        named |= hits
        unnamed += not hits
    left = count - len(named) - min(count - len(named), unnamed)
    return share_note(left, count, "objections unanswered")


Spoken = AdversarialRound | tuple[int, ProposerTurn, CriticTurn, RebuttalTurn]
"""A round as the judges read it: a finished one, or the last one before its moderation."""


def blind_view(result: DebateResult) -> BlindView:
    """The record an independent judge reads (`record_view`) of a finished debate."""
    assert result.proposition is not None
    return record_view(
        result.spec, result.proposition, result.rounds, decided=result.verdict.decision.value
    )


def record_view(
    spec: DebateSpec, proposition: Proposition, rounds: Sequence[Spoken], *, decided: str
) -> BlindView:
    """The proposition, then each round's argument, critique and rebuttal under the position
    they speak for; no moderation, so the same before the last moderator speaks and after."""
    entries: list[Entry] = []
    number = 0
    for past in rounds:
        if isinstance(past, AdversarialRound):
            number, proposer, critic, rebuttal = (
                past.round,
                past.proposer,
                past.critic,
                past.rebuttal,
            )
        else:
            number, proposer, critic, rebuttal = past
        entries += [
            Entry(0, number, f"ARGUMENT:\n{render_proposer(proposer, number)}"),
            Entry(1, number, f"CRITIQUE:\n{render_critic(critic, number)}"),
            Entry(0, number, f"REBUTTAL:\n{render_rebuttal(rebuttal, number)}"),
        ]
    return BlindView(
        positions=("argues for the proposition", "argues against the proposition"),
        preface=f"PROPOSITION:\n{render_proposition(proposition)}",
        entries=tuple(entries),
        choices=tuple(d.value for d in Decision),
        explain=(
            "one of accept, accept_with_conditions, revise, reject, escalate: what the team"
            " should do with the proposition (escalate: people must decide what the record"
            " cannot)"
        ),
        decided=decided,
        decided_by=spec.participant_for(Role.MODERATOR).model,
        outputs=OUTPUTS,
        round=number,
    )
