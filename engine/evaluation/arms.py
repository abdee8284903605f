"""The arms of an eval, each run on one case: a single answer, a majority vote of k single
answers, best-of-n (a judge picks one of the vote's samples), and every debate protocol.

The fabricated-citation probe is put into the question as a claim someone made. An arm cites
it when a quote it gives as evidence reproduces most of the probe's words in order; the check
flags it when that quote's citation check is not verified (the case's documents are the
material; a claim made only in the question is not evidence, see engine.citations).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.calibration.current import recorded
from engine.citations import CitationChecker
from engine.evaluation.cases import EvalCase
from engine.evaluation.scoring import (
    CLEAN,
    PLANTED,
    ArmResult,
    cites_probe,
    decision_of,
    expected_for,
    flaws_in,
    majority_flaws,
)
from engine.events import DebateEvent, RoundFinished
from engine.ledger import LLMResolver
from engine.models import ContextDocument, DebateResult, DebateSpec, Role, TurnRecord
from engine.prompts import PromptLibrary
from engine.protocols import protocol_names
from engine.protocols.base import LEVEL_BASE
from engine.rounds import PanelRound
from engine.runner import run_debate
from engine.single import SingleReview, pick_best, single_review

SINGLE_ARMS = ("single", "vote", "best_of_n")


def all_arms() -> tuple[str, ...]:
    """Every arm, the single-model ones first, then each registered protocol."""
    return (*SINGLE_ARMS, *protocol_names())


SpecFor = Callable[[str, list[ContextDocument], str], DebateSpec]
"""Builds the spec of one run: (question, documents, protocol) -> spec with every role's model."""


def question_for(case: EvalCase, variant: str) -> str:
    """The question as the arm gets it; on the planted document, with the probe as a claim."""
    if variant == CLEAN:
        return case.clean_question or case.question
    if case.fabricated_citation_probe:
        return (
            f"{case.question}\n\nSomeone in the thread added, as a fact from the document:"
            f' "{case.fabricated_citation_probe}"'
        )
    return case.question


def documents_for(case: EvalCase, variant: str) -> list[ContextDocument]:
    text = case.clean_context if variant == CLEAN and case.clean_context else case.context
    return [ContextDocument(title=case.title, text=text)]


@dataclass
class Spend:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    providers: set[str] = field(default_factory=set)

    def add(self, turns: list[TurnRecord]) -> None:
        for turn in turns:
            self.providers.add(turn.provider)
            self.input_tokens += turn.usage.input_tokens
            self.output_tokens += turn.usage.output_tokens
            self.cost_usd += turn.cost_usd
            self.calls += 1 + turn.reasks


@dataclass
class ArmRunner:
    """Runs arms on cases with one resolver, prompt library and spec factory."""

    resolve_llm: LLMResolver
    prompts: PromptLibrary
    spec_for: SpecFor
    vote_k: int = 5
    run_id: str = ""

    def _base(self, case: EvalCase, arm: str, variant: str) -> ArmResult:
        return ArmResult(
            case_id=case.id,
            task_type=case.task_type,
            arm=arm,
            variant=variant,
            run_id=self.run_id,
            expected=expected_for(case, variant),
            flaws_planted=len(case.planted_flaws) if variant == PLANTED else 0,
        )

    def _probe(
        self, case: EvalCase, variant: str, quotes: list[str], checker: CitationChecker | None
    ) -> tuple[bool | None, bool | None]:
        """(cited, flagged) of the probe among `quotes`; None on the clean document."""
        probe = case.fabricated_citation_probe
        if variant == CLEAN or not probe:
            return None, None
        cited = [q for q in quotes if cites_probe(q, probe)]
        if not cited:
            return False, None
        if checker is None:
            return True, None
        return True, any(not checker.check(q, round=1, role=Role.REVIEWER).verified for q in cited)

    async def single(self, case: EvalCase, variant: str) -> tuple[ArmResult, SingleReview]:
        spec = self.spec_for(question_for(case, variant), documents_for(case, variant), "single")
        started = time.monotonic()
        review, turn = await single_review(spec, resolve_llm=self.resolve_llm, prompts=self.prompts)
        result = self._from_review(case, "single", variant, spec, review)
        spend = Spend()
        spend.add([turn])
        _charge(result, spend, time.monotonic() - started)
        return result, review

    def _from_review(
        self, case: EvalCase, arm: str, variant: str, spec: DebateSpec, review: SingleReview
    ) -> ArmResult:
        result = self._base(case, arm, variant)
        text = review_text(review)
        result.decision = review.decision.value
        result.confidence = LEVEL_BASE[review.confidence_level]
        result.escalated = (
            result.confidence < spec.escalation_threshold or review.decision.value == "escalate"
        )
        result.output_text = text
        # On the clean document a planted flaw named is a false alarm.
        result.flaws_found = flaws_in(text, case.planted_flaws)
        checker = CitationChecker(spec.context, spec.question)
        result.probe_cited, result.probe_flagged = self._probe(
            case, variant, list(review.evidence_cited), checker
        )
        return result

    async def samples(
        self, case: EvalCase, variant: str, k: int
    ) -> tuple[list[SingleReview], DebateSpec, Spend, float]:
        """k independent single reviews of the case."""
        spec = self.spec_for(question_for(case, variant), documents_for(case, variant), "single")
        started = time.monotonic()
        spend = Spend()
        reviews = []
        for _ in range(k):
            review, turn = await single_review(
                spec, resolve_llm=self.resolve_llm, prompts=self.prompts, asked_again=True
            )
            reviews.append(review)
            spend.add([turn])
        return reviews, spec, spend, time.monotonic() - started

    async def vote(self, case: EvalCase, variant: str, k: int) -> ArmResult:
        reviews, spec, spend, wall = await self.samples(case, variant, k)
        result = self._base(case, "vote", variant)
        texts = [review_text(r) for r in reviews]
        result.samples = [r.model_dump_json() for r in reviews]
        result.decision = decision_of(r.decision.value for r in reviews)
        low = sum(1 for r in reviews if LEVEL_BASE[r.confidence_level] < spec.escalation_threshold)
        split = sum(1 for r in reviews if r.decision.value == result.decision) * 2 <= k
        result.escalated = split or low * 2 > k or result.decision == "escalate"
        result.confidence = sum(LEVEL_BASE[r.confidence_level] for r in reviews) / k
        result.output_text = "\n\n".join(texts)
        result.flaws_found = majority_flaws(texts, case.planted_flaws)
        checker = CitationChecker(spec.context, spec.question)
        per_sample = [self._probe(case, variant, list(r.evidence_cited), checker) for r in reviews]
        if variant == PLANTED and case.fabricated_citation_probe:
            cited = [p for p in per_sample if p[0]]
            result.probe_cited = len(cited) * 2 > k
            result.probe_flagged = (
                sum(1 for p in cited if p[1]) * 2 > len(cited) if result.probe_cited else None
            )
        _charge(result, spend, wall)
        return result

    async def best_of_n(
        self, case: EvalCase, variant: str, k: int, vote: ArmResult | None
    ) -> ArmResult:
        """A judge picks one of the samples: the vote's, when it ran, else k drawn now. Either
        way the samples are charged here too (tokens, cost, calls, time), since best-of-n cannot
        pick without them: its budget is the vote's plus one call."""
        if vote is None:
            samples, spec, spend, drawing_s = await self.samples(case, variant, k)
        else:
            spec = self.spec_for(
                question_for(case, variant), documents_for(case, variant), "single"
            )
            samples = [SingleReview.model_validate_json(s) for s in vote.samples]
            spend = Spend(
                vote.input_tokens,
                vote.output_tokens,
                vote.cost_usd,
                vote.calls,
                set(vote.providers),
            )
            drawing_s = vote.wall_s
        started = time.monotonic()
        index, turn = await pick_best(
            spec, samples, resolve_llm=self.resolve_llm, prompts=self.prompts
        )
        spend.add([turn])
        result = self._from_review(case, "best_of_n", variant, spec, samples[index])
        _charge(result, spend, drawing_s + time.monotonic() - started)
        if vote is not None:
            result.reused_cost_usd = vote.cost_usd
        return result

    async def debate(self, case: EvalCase, variant: str, protocol: str) -> ArmResult:
        spec = self.spec_for(question_for(case, variant), documents_for(case, variant), protocol)
        rounds: list[str] = []

        async def watch(event: DebateEvent) -> None:
            if isinstance(event, RoundFinished):
                decision = round_decision(event)
                if decision is not None:
                    rounds.append(decision)

        started = time.monotonic()
        outcome = await run_debate(
            spec, resolve_llm=self.resolve_llm, prompts=self.prompts, sink=watch
        )
        result = self._from_debate(case, protocol, variant, outcome)
        result.round_decisions = rounds
        spend = Spend()
        spend.add(outcome.transcript)
        _charge(result, spend, time.monotonic() - started)
        return result

    def _from_debate(
        self, case: EvalCase, protocol: str, variant: str, outcome: DebateResult
    ) -> ArmResult:
        result = self._base(case, protocol, variant)
        verdict = outcome.verdict
        result.decision = verdict.decision.value
        result.confidence = verdict.confidence
        components, result.weights_version = recorded(verdict.model_dump(mode="json"))
        if components is not None:
            result.components = {str(c): v for c, v in components.values.items()}
        result.escalated = verdict.escalate
        text = debate_text(outcome)
        result.output_text = text
        result.flaws_found = flaws_in(text, case.planted_flaws)
        probe = case.fabricated_citation_probe
        if variant == PLANTED and probe:
            cited = [c for c in outcome.citations if cites_probe(c.quote, probe)]
            result.probe_cited = bool(cited)
            result.probe_flagged = any(not c.verified for c in cited) if cited else None
        if outcome.error:
            result.error = outcome.error
        return result


def _charge(result: ArmResult, spend: Spend, wall_s: float) -> None:
    result.input_tokens += spend.input_tokens
    result.output_tokens += spend.output_tokens
    result.cost_usd += spend.cost_usd
    result.calls += spend.calls
    result.providers = sorted(set(result.providers) | spend.providers)
    result.wall_s += wall_s


def review_text(review: SingleReview) -> str:
    """What a single review says, as scored: decision, synthesis, risks, evidence."""
    return "\n".join(
        [review.decision.value, review.synthesis, *review.risks, *review.evidence_cited]
    )


def debate_text(outcome: DebateResult) -> str:
    """A debate's final output, as scored: verdict, synthesis, unresolved points,
    uncertainties, escalation reasons and the protocol's report."""
    verdict = outcome.verdict
    parts = [
        verdict.decision.value,
        verdict.synthesis,
        *verdict.unresolved_points,
        *verdict.uncertainties,
        *verdict.escalation_reasons,
    ]
    if outcome.report:
        parts.append(_flatten(outcome.report))
    return "\n".join(parts)


def _flatten(value: object) -> str:
    if isinstance(value, dict):
        return "\n".join(_flatten(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(_flatten(v) for v in value)
    return str(value)


def round_decision(event: RoundFinished) -> str | None:
    """The decision a round reached, where its record has one: the adversarial moderator's,
    or the panel's majority."""
    record = event.record
    moderator = getattr(record, "moderator", None)
    if moderator is not None:
        return str(moderator.decision.value)
    if isinstance(record, PanelRound):
        return decision_of(spoken.answer.decision.value for spoken in record.answers)
    return None
