"""The `panel` protocol: independent answers, peer critique, convergence and aggregation.

- Each debater has its own model and temperature (its participant's `model`), a vote `weight`
  and a `role_hint`. Round 1: all answer independently and concurrently, with a confidence.
  Later rounds: each restates its answer, critiques every peer by name, and may change its answer
  only with a stated reason (`changed_from_previous`, `change_justification`); an answer given
  without that flag is held at the previous one. Each sees every panelist's last answer in full,
  older rounds as a compact record (`engine.protocols.record`), and the critiques of its own
  last answer.
- After each round answers are clustered by word-set Jaccard similarity (>= `similarity`,
  default 0.4) against each cluster's first answer; the convergence score is the largest
  cluster's share. At or above `convergence_threshold` (0.8) the debate stops early.
- Aggregation: `majority` (largest cluster), `weighted` (largest sum of weight x confidence) or
  `judge` (a judge picks an answer; unparseable output falls back to majority, recorded).
- Convergence below `escalate_below` (0.5) escalates.
- Adaptive routing: with a `router` participant (a fast model), it answers first; at confidence
  >= `route_confidence` (0.85) the panel is skipped and the report says `routing=single_agent`.

Confidence is measured by `engine.scoring`. What this protocol reports for it: the panelists
outside the chosen cluster (1 - convergence) as what is left unanswered, the mean stated
confidence of the chosen cluster as the declared level (single-agent routing: the router's own,
with nothing measured unanswered), and the final answers, without their decisions or stated
confidence, for an independent judge; with `judge` aggregation it is asked beside that judge,
whose choice its record does not hold.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from engine.errors import LLMError, StructuredOutputError
from engine.events import RoundFinished
from engine.evidence import (
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
    DebateResult,
    DebateSpec,
    Decision,
    LongText,
    ModelSettings,
    Participant,
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
    list_of,
    named_debaters,
    no_verdict,
    options_for,
)
from engine.protocols.outputs import Outputs
from engine.protocols.record import (
    PANEL_IDS,
    DebateSoFar,
    full_line,
    point_id,
    record_line,
)
from engine.rounds import PanelAnswer, PanelRound, PanelSpoken

__all__ = ["PanelAnswer", "PanelProtocol"]

_WORD = re.compile(r"[a-z0-9']+")


class PanelOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    aggregation: Literal["majority", "weighted", "judge"] = "majority"
    similarity: float = Field(default=0.4, gt=0.0, le=1.0)
    convergence_threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    escalate_below: float = Field(default=0.5, ge=0.0, le=1.0)
    route_confidence: float = Field(default=0.85, ge=0.0, le=1.0)


class PeerCritique(BaseModel):
    peer: str
    critique: ShortText


class PanelRevision(PanelAnswer):
    critiques: list[PeerCritique] = Field(default_factory=list, max_length=12)
    changed_from_previous: bool
    change_justification: str | None = None

    @model_validator(mode="after")
    def _justified(self) -> PanelRevision:
        if self.changed_from_previous and not (self.change_justification or "").strip():
            raise ValueError("changed_from_previous is true but change_justification is empty")
        return self


@built_once
def revision_type(peers: list[str]) -> type[PanelRevision]:
    """The revision schema, rejecting a reply that skips a peer's critique. The peers' names are
    an enum and the list as long as the panel, so a constrained decoder names each peer."""
    expected = set(peers)
    named = create_model(
        "NamedCritique", __base__=PeerCritique, peer=(choice_enum("Peer", peers), ...)
    )

    class EveryPeer(PanelRevision):
        @model_validator(mode="after")
        def _every_peer(self) -> EveryPeer:
            missing = expected - {str(getattr(c.peer, "value", c.peer)) for c in self.critiques}
            if missing:
                raise ValueError(f"critique every panelist; missing: {', '.join(sorted(missing))}")
            return self

    return create_model(
        "PanelRevision",
        __base__=EveryPeer,
        critiques=(
            list_of(named),
            Field(min_length=len(peers), max_length=max(len(peers), 12)),
        ),
    )


class PanelJudgment(BaseModel):
    chosen: int = Field(ge=1)
    reasoning: LongText


OUTPUTS = Outputs.of("panel", PanelAnswer, PanelRevision, PanelJudgment, IndependentJudgment)
"""The envelope of every panel debate: a critique's peer is a string there, restricted to the
panelist's peers by the revision's own type."""


def words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def cluster(answers: list[str], threshold: float) -> list[list[int]]:
    """Indices grouped greedily: each answer joins the first cluster whose first answer it
    resembles (Jaccard >= threshold), else starts a cluster."""
    sets = [words(a) for a in answers]
    clusters: list[list[int]] = []
    for index, answer in enumerate(sets):
        for group in clusters:
            if jaccard(answer, sets[group[0]]) >= threshold:
                group.append(index)
                break
        else:
            clusters.append([index])
    return clusters


def convergence(clusters: list[list[int]], total: int) -> float:
    return max((len(c) for c in clusters), default=0) / total if total else 0.0


class PanelProtocol:
    """Independent panelists, peer critique, counted convergence."""

    def validate(self, spec: DebateSpec) -> None:
        options_for(PanelOptions, spec)
        named_debaters(spec)

    async def run(
        self, spec: DebateSpec, *, ledger: TurnLedger, prompts: PromptLibrary
    ) -> DebateResult:
        started_at = utcnow()
        options = options_for(PanelOptions, spec)
        debaters = spec.debaters()
        asker = Asker(spec=spec, ledger=ledger, prompts=prompts, outputs=OUTPUTS)
        ending = Ending()
        report: dict[str, Any] = {"routing": "debate", "aggregation": options.aggregation}
        answers: dict[str, PanelAnswer] = {}
        history: list[dict[str, Any]] = []
        chosen: int | None = None
        try:
            router = next((p for p in spec.participants if p.role is Role.ROUTER), None)
            if router is not None:
                quick = await self._answer(asker, router, 0, Role.ROUTER)
                report["router"] = quick.model_dump(mode="json")
                if quick.confidence >= options.route_confidence:
                    report["routing"] = "single_agent"
                    return finish(
                        spec,
                        ledger,
                        ending,
                        self._single_agent_verdict(spec, ending, quick),
                        started_at=started_at,
                        report=report,
                    )
            names = [d.name or "" for d in debaters]
            rounds: list[PanelRoundText] = []
            for number in range(1, spec.max_rounds + 1):
                previous = answers
                answers, critiques = await self._round(asker, debaters, number, answers, rounds)
                rounds.append(PanelRoundText(number, names, answers, previous, critiques))
                clusters = cluster([answers[n].answer for n in names], options.similarity)
                score = convergence(clusters, len(names))
                grouped = [[names[i] for i in c] for c in clusters]
                history.append({"round": number, "clusters": grouped, "convergence": score})
                converged = score >= options.convergence_threshold
                await ledger.emit(
                    RoundFinished(
                        record=PanelRound(
                            round=number,
                            max_rounds=spec.max_rounds,
                            answers=[
                                PanelSpoken(
                                    speaker=n,
                                    answer=answers[n],
                                    changed=answers[n].answer != previous[n].answer
                                    if n in previous
                                    else None,
                                )
                                for n in names
                            ],
                            clusters=grouped,
                            convergence=score,
                            threshold=options.convergence_threshold,
                            early_stop=converged and number < spec.max_rounds,
                        )
                    )
                )
                if converged:
                    break
            chosen = await self._aggregate(
                asker, spec, options, debaters, answers, report, rounds=len(history)
            )
        except (BudgetExhausted, LLMError) as stop:
            ending.record(stop)
        report["rounds"] = history
        report["answers"] = {n: a.model_dump(mode="json") for n, a in answers.items()}
        if chosen is not None:
            report["chosen"] = debaters[chosen].name
        return finish(
            spec,
            ledger,
            ending,
            self._verdict(spec, ending, options, debaters, answers, history, chosen),
            started_at=started_at,
            report=report,
        )

    async def _answer(
        self, asker: Asker, who: Participant, number: int, role: Role = Role.DEBATER
    ) -> PanelAnswer:
        return await asker.ask(
            "panel/answer.md",
            round=number,
            role=role,
            speaker=who.name or "" if role is Role.DEBATER else "",
            step="answering on its own",
            output_type=PanelAnswer,
            values={"speaker": who.name or role.value, "role_hint": who.role_hint or ""},
        )

    async def _round(
        self,
        asker: Asker,
        debaters: list[Participant],
        number: int,
        previous: dict[str, PanelAnswer],
        rounds: list[PanelRoundText],
    ) -> tuple[dict[str, PanelAnswer], list[Critique]]:
        """One round, every panelist's call in flight together: the answers, and the critiques
        in speaking order (none in round 1). Every revision is first shown the same panel so
        far (`rounds`), then the critiques of its own last answer."""
        so_far = panel_so_far(rounds)

        async def speak(who: Participant) -> tuple[PanelAnswer, list[Critique]]:
            name = who.name or ""
            if number == 1:
                return await self._answer(asker, who, number), []
            peers = [d.name or "" for d in debaters if d.name != name]
            revision = await asker.ask(
                "panel/revise.md",
                round=number,
                role=Role.DEBATER,
                speaker=name,
                step="revising after the peers' critique",
                output_type=revision_type(peers),
                values={
                    "speaker": name,
                    "role_hint": who.role_hint or "",
                    "round": str(number),
                    "critiques": rounds[-1].critiques_of(name),
                },
                so_far=so_far,
            )
            critiques = [
                Critique(name, str(getattr(c.peer, "value", c.peer)), c.critique)
                for c in revision.critiques
            ]
            said: PanelAnswer = revision if revision.changed_from_previous else previous[name]
            answer = PanelAnswer(
                decision=said.decision, answer=said.answer, confidence=revision.confidence
            )
            return answer, critiques

        async def together(group: list[Participant]) -> list[Any]:
            tasks = [asyncio.create_task(speak(who)) for who in group]
            try:
                # A panelist refused for budget or failed does not cancel the others: their
                # calls are already paid for, and a call cut off unanswered could be billed
                # unmetered.
                return await asyncio.gather(*tasks, return_exceptions=True)
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

        # A vendor's prefix cache serves a call only what an earlier call wrote once that call
        # is under way (Anthropic: "a cache entry only becomes available after the first
        # response begins"), so panelists asked at once would each write the case. In the first
        # round one answers first and the others read it: one call's wait, for the others'
        # input at the cache's price. Later rounds find it written.
        lead = debaters[:1] if number == 1 and len(debaters) > 1 else []
        outcomes = await together(lead)
        if not any(isinstance(outcome, BaseException) for outcome in outcomes):
            outcomes += await together(debaters[len(lead) :])
        results: list[tuple[PanelAnswer, list[Critique]]] = []
        stops: list[BaseException] = []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                stops.append(outcome)
            else:
                results.append(outcome)
        if stops:
            # A failure says more than a budget stop beside it.
            raise next((s for s in stops if not isinstance(s, BudgetExhausted)), stops[0])
        answers = {
            who.name or "": answer for who, (answer, _) in zip(debaters, results, strict=True)
        }
        return answers, [critique for _, critiques in results for critique in critiques]

    async def _aggregate(
        self,
        asker: Asker,
        spec: DebateSpec,
        options: PanelOptions,
        debaters: list[Participant],
        answers: dict[str, PanelAnswer],
        report: dict[str, Any],
        *,
        rounds: int,
    ) -> int:
        """The index (into `debaters`) of the answer the panel settles on, after `rounds`."""
        names = [d.name or "" for d in debaters]
        clusters = cluster([answers[n].answer for n in names], options.similarity)
        if options.aggregation == "judge":
            # The independent judges read the final answers alone, which the judge choosing
            # among them cannot change: they run beside it.
            view = record_view(answers, spec.debaters()[0].model, rounds=rounds, decided="")
            judge_beside(view, ledger=asker.ledger, prompts=asker.prompts)
            try:
                judgment = await asker.ask(
                    "panel/judge.md",
                    round=spec.max_rounds,
                    role=Role.JUDGE,
                    output_type=PanelJudgment,
                    values={
                        "answers": "\n".join(
                            f"{i}. {render_answer(answers[n])}" for i, n in enumerate(names, 1)
                        )
                    },
                )
                if judgment.chosen <= len(names):
                    report["judge_reasoning"] = judgment.reasoning
                    return judgment.chosen - 1
                problem = f"the judge chose answer {judgment.chosen} of {len(names)}"
            except StructuredOutputError as unparseable:
                problem = f"the judge's output was unparseable: {unparseable}"
            report["aggregation_fallback"] = f"majority ({problem})"
        if options.aggregation == "weighted":
            weight = {d.name: d.weight for d in debaters}
            scores = [
                sum(weight[names[i]] * answers[names[i]].confidence for i in group)
                for group in clusters
            ]
            best = clusters[scores.index(max(scores))]
            report["cluster_weights"] = scores
        else:
            best = max(clusters, key=len)
        return max(best, key=lambda i: answers[names[i]].confidence)

    def evidence(self, result: DebateResult) -> ProtocolEvidence:
        """The panelists outside the chosen answer, its stated confidence, and the final
        answers for an independent judge."""
        report = result.report or {}
        spec = result.spec
        if report.get("routing") == "single_agent":
            quick = PanelAnswer.model_validate(report["router"])
            router = next(p for p in spec.participants if p.role is Role.ROUTER)
            return ProtocolEvidence(
                reached=True,
                unanswered=Measure(None),
                declared=quick.confidence,
                declared_note=f"the fast model declared {quick.confidence:.2f}",
                view=record_view(
                    {"the fast model": quick},
                    router.model,
                    rounds=0,
                    decided=result.verdict.decision.value,
                ),
            )
        chosen, history = report.get("chosen"), report.get("rounds") or []
        if chosen is None or not history:
            return NO_VERDICT
        answers = {n: PanelAnswer.model_validate(a) for n, a in report["answers"].items()}
        group = next(c for c in history[-1]["clusters"] if chosen in c)
        mean = sum(answers[n].confidence for n in group) / len(group)
        return ProtocolEvidence(
            reached=True,
            unanswered=share_note(
                len(answers) - len(group), len(answers), "panelists outside the chosen answer"
            ),
            declared=mean,
            declared_note=f"the chosen answer's panelists declared {mean:.2f}",
            view=record_view(
                answers,
                spec.debaters()[0].model,
                rounds=len(history),
                decided=result.verdict.decision.value,
            ),
        )

    @staticmethod
    def _single_agent_verdict(spec: DebateSpec, ending: Ending, quick: PanelAnswer) -> Verdict:
        return common_verdict(spec, ending, decision=quick.decision, synthesis=quick.answer)

    @staticmethod
    def _verdict(
        spec: DebateSpec,
        ending: Ending,
        options: PanelOptions,
        debaters: list[Participant],
        answers: dict[str, PanelAnswer],
        history: list[dict[str, Any]],
        chosen: int | None,
    ) -> Verdict:
        if chosen is None or not history:
            return no_verdict(spec, ending)
        names = [d.name or "" for d in debaters]
        winner = answers[names[chosen]]
        score = float(history[-1]["convergence"])
        group = next(c for c in history[-1]["clusters"] if names[chosen] in c)
        decisions = Counter(answers[n].decision for n in group)
        reasons = []
        if score < options.escalate_below:
            reasons.append(
                f"the panel did not converge: convergence {score:.2f} is below"
                f" {options.escalate_below:.2f}"
            )
        return common_verdict(
            spec,
            ending,
            decision=decisions.most_common(1)[0][0] if decisions else winner.decision,
            synthesis=winner.answer,
            reasons=reasons,
        )


def record_view(
    answers: dict[str, PanelAnswer], decider: ModelSettings, *, rounds: int, decided: str
) -> BlindView:
    """The final answers after `rounds`, one per position, without their decisions or
    confidence: the same before a judge chooses among them and after."""
    names = list(answers)
    return BlindView(
        positions=tuple("a panelist" for _ in names),
        entries=tuple(
            Entry(n, 1, f"FINAL ANSWER: {answers[name].answer}") for n, name in enumerate(names)
        ),
        choices=tuple(d.value for d in Decision),
        explain=(
            "one of accept, accept_with_conditions, revise, reject, escalate: what the team"
            " should do (escalate: people must decide what the answers cannot)"
        ),
        decided=decided,
        decided_by=decider,
        outputs=OUTPUTS,
        round=max(1, rounds),
        names=tuple(names),
    )


def render_answer(answer: PanelAnswer) -> str:
    return f"[{answer.decision.value}, confidence {answer.confidence:.2f}] {answer.answer}"


def panel_so_far(rounds: list[PanelRoundText]) -> str:
    """What every revision of the round after `rounds` is shown first: the record of each round
    but the last, then the last round's answers in full."""
    if not rounds:
        return ""
    so_far = DebateSoFar("THE PANEL SO FAR", PANEL_IDS, [], [r.record for r in rounds[:-1]])
    so_far.add(rounds[-1].answers_in_full)
    return so_far.text()


@dataclass(frozen=True)
class Critique:
    """One panelist's critique of a peer's answer of the round before."""

    by: str
    peer: str
    text: str


@dataclass
class PanelRoundText:
    """A finished round as later rounds read it: the next one its answers in full (and each
    panelist the critiques of its own answer), the ones after it a record; built once."""

    number: int
    names: list[str]
    answers: dict[str, PanelAnswer]
    previous: dict[str, PanelAnswer]
    critiques: list[Critique]
    answers_in_full: str = field(init=False)
    record: str = field(init=False)

    def __post_init__(self) -> None:
        answers = [
            (point_id(self.number, "A", n), f"{self._lead(name)}: {self.answers[name].answer}")
            for n, name in enumerate(self.names, 1)
        ]
        critiques = self._critiques()
        self.answers_in_full = "\n".join(
            [f"ROUND {self.number} ANSWERS, IN FULL:", *(full_line(*a) for a in answers)]
        )
        self.record = "\n".join(
            [
                f"ROUND {self.number} RECORD:",
                *(record_line(*a) for a in answers),
                *(record_line(id, f"{c.by} on {c.peer}: {c.text}") for id, c in critiques),
            ]
        )

    def _lead(self, name: str) -> str:
        answer = self.answers[name]
        change = ""
        if name in self.previous:
            change = ", changed" if answer.answer != self.previous[name].answer else ", kept"
        return f"{name} [{answer.decision.value}, confidence {answer.confidence:.2f}{change}]"

    def _critiques(self) -> list[tuple[str, Critique]]:
        return [(point_id(self.number, "C", n), c) for n, c in enumerate(self.critiques, 1)]

    def critiques_of(self, name: str) -> str:
        """The critiques of `name`'s answer made in this round, in full, with their ids."""
        lines = [
            full_line(id, f"{c.by}: {c.text}") for id, c in self._critiques() if c.peer == name
        ]
        return "\n".join(lines) or "(none)"
