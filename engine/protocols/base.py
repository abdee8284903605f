"""What every protocol provides, and the untrusted-material framing they share."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum, EnumMeta
from types import GenericAlias
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from engine.errors import LLMError, SpecError
from engine.evidence import ProtocolEvidence
from engine.ledger import BudgetExhausted, TurnLedger
from engine.llm import Message, describe_output
from engine.models import (
    CitationCheck,
    ConfidenceLevel,
    ContextDocument,
    DebateFlag,
    DebateResult,
    DebateSpec,
    DebateStatus,
    Decision,
    ModelSettings,
    Role,
    Verdict,
    utcnow,
)
from engine.prompts import PromptLibrary
from engine.protocols.outputs import Outputs
from engine.readable import readable

T = TypeVar("T", bound=BaseModel)
OptionsT = TypeVar("OptionsT", bound=BaseModel)
M = TypeVar("M", bound=BaseModel)

MATERIAL_OPEN = "<<<MATERIAL"
MATERIAL_CLOSE = "MATERIAL>>>"


class DebateProtocol(Protocol):
    """A protocol's engine; what else the application knows of it (its name, rounds, flags,
    views) is its `engine.protocols.definition.ProtocolDefinition`."""

    def validate(self, spec: DebateSpec) -> None:
        """Raise SpecError when `spec` cannot run under this protocol; called before any call."""

    async def run(
        self, spec: DebateSpec, *, ledger: TurnLedger, prompts: PromptLibrary
    ) -> DebateResult:
        """Run the debate; model failures and the budget end it with a status, not an error.
        The verdict's confidence is left for `engine.scoring` to measure (0 until then)."""
        ...

    def evidence(self, result: DebateResult) -> ProtocolEvidence:
        """What `result`, this protocol's own, says for its confidence: whether it reached a
        verdict, what it left unanswered, the decider's declared level, the record an
        independent judge reads."""
        ...


def _defang(text: str) -> str:
    # User material must not be able to close the data block and speak as the system.
    return text.replace(MATERIAL_OPEN, "<<MATERIAL").replace(MATERIAL_CLOSE, "MATERIAL>>")


def render_context(documents: list[ContextDocument]) -> str:
    """The context documents as delimited, defanged text (or a note that there are none)."""
    if not documents:
        return "(no documents were supplied; argue from the question alone and cite nothing)"
    return "\n\n".join(
        f"--- document: {_defang(doc.title)} ---\n{_defang(doc.text)}" for doc in documents
    )


def render_material(prompts: PromptLibrary, spec: DebateSpec) -> str:
    """The system preamble: rules, then question and context as untrusted data.

    It is identical for every turn of a debate, so it forms the cacheable prompt prefix.
    """
    return prompts.get("common/preamble.md").render(
        question=_defang(spec.question),
        context=render_context(spec.context),
        material_open=MATERIAL_OPEN,
        material_close=MATERIAL_CLOSE,
    )


LEVEL_BASE = {
    ConfidenceLevel.HIGH: 0.85,
    ConfidenceLevel.MODERATE: 0.60,
    ConfidenceLevel.LOW: 0.35,
}
"""A single review's declared level as a confidence (the eval's single-answer arms, which have
nothing else to go on); a debate's confidence is measured (`engine.scoring`)."""


THRESHOLD_REASON = "is below the escalation threshold"


def threshold_reason(confidence: float, threshold: float) -> str:
    """The escalation reason of a confidence under the threshold, as people read it."""
    return f"confidence {confidence:.2f} {THRESHOLD_REASON} {threshold:.2f}"


def level_for(confidence: float) -> ConfidenceLevel:
    """The level of a confidence: >= 0.75 HIGH, >= 0.50 MODERATE, else LOW."""
    if confidence >= 0.75:
        return ConfidenceLevel.HIGH
    if confidence >= 0.50:
        return ConfidenceLevel.MODERATE
    return ConfidenceLevel.LOW


class Asker:
    """Builds a turn's messages (the shared preamble, then the role's prompt) and asks the
    ledger; the preamble is the same for every turn, so providers can cache it. With the
    protocol's `outputs`, every call carries the protocol's one envelope schema too."""

    def __init__(
        self,
        *,
        spec: DebateSpec,
        ledger: TurnLedger,
        prompts: PromptLibrary,
        outputs: Outputs | None = None,
    ) -> None:
        self.ledger = ledger
        self.prompts = prompts
        self.outputs = outputs
        self.preamble = render_material(prompts, spec)

    async def ask(
        self,
        template: str,
        *,
        round: int,
        role: Role,
        output_type: type[T],
        values: dict[str, str] | None = None,
        speaker: str = "",
        phase: str = "",
        step: str = "",
        attempt: int = 1,
        extra: str = "",
        so_far: str | Sequence[str] = "",
        model: ModelSettings | None = None,
    ) -> T:
        """One turn: `so_far` (what the debate has said, the same for every turn of a round up
        to this one; its sections, when given as several), then `template` filled with `values`
        and the output's fields (+ `extra`). Putting what turns share first, and the role's own
        instructions last, lets providers serve the shared part from their prompt cache; the
        request says where each section ends, so a provider caching by content block can
        split there and a later turn finds the earlier turn's blocks. `model` overrides the
        model the spec gives the role (an independent judge's)."""
        prompt = self.prompts.get(template)
        user = prompt.render(output_format=describe_output(output_type), **(values or {}))
        sections = [so_far] if isinstance(so_far, str) else list(so_far)
        shared = "".join(f"{section}\n\n" for section in sections if section)
        breaks = list(itertools.accumulate(len(s) + 2 for s in sections if s))
        user = shared + user
        if extra:
            user = f"{user}\n\n{extra}"
        return await self.ledger.call(
            round=round,
            role=role,
            speaker=speaker,
            phase=phase,
            step=step,
            attempt=attempt,
            template=prompt,
            messages=[
                Message(role="system", content=self.preamble),
                Message(role="user", content=user),
            ],
            output_type=output_type,
            envelope=self.outputs.envelope(output_type) if self.outputs else None,
            shared_breaks=breaks,
            model=model,
        )


@dataclass
class Ending:
    """How a protocol run ended: complete, cut by the budget, or failed (with why)."""

    status: DebateStatus = DebateStatus.COMPLETE
    error: str | None = None

    def record(self, error: BudgetExhausted | LLMError) -> None:
        self.status = (
            DebateStatus.TRUNCATED_BUDGET
            if isinstance(error, BudgetExhausted)
            else DebateStatus.FAILED
        )
        self.error = str(error)


def common_verdict(
    spec: DebateSpec,
    ending: Ending,
    *,
    decision: Decision | None,
    synthesis: str | None,
    unresolved: list[str] | None = None,
    reasons: list[str] | None = None,
    declared: ConfidenceLevel | None = None,
) -> Verdict:
    """The common verdict, its confidence not yet measured (`engine.scoring` does, and adds the
    threshold's reason): escalated when the run did not complete, the protocol asks for it
    (`reasons`) or the decision is `escalate`. `declared` is the decider's own level."""
    escalation = list(reasons or [])
    if ending.status is DebateStatus.FAILED:
        escalation.insert(0, f"the debate failed: {ending.error}")
    elif ending.status is DebateStatus.TRUNCATED_BUDGET:
        escalation.insert(0, f"the budget cut the debate short: {ending.error}")
    if decision is None or synthesis is None:
        decision = Decision.ESCALATE
        synthesis = "The debate ended before a verdict was reached."
    if decision is Decision.ESCALATE and not escalation:
        escalation.append("the protocol's decision is to escalate")
    return Verdict(
        status=ending.status,
        decision=decision,
        synthesis=synthesis,
        confidence=0.0,
        level=level_for(0.0),
        moderator_level=declared,
        unresolved_points=unresolved or [],
        escalate=bool(escalation),
        escalation_reasons=escalation,
    )


def no_verdict(spec: DebateSpec, ending: Ending) -> Verdict:
    """The verdict of a run that ended before its protocol reached one (always escalated)."""
    return common_verdict(spec, ending, decision=None, synthesis=None)


def named_debaters(spec: DebateSpec, minimum: int = 2) -> list[str]:
    """The debaters' names in declared order; SpecError unless there are `minimum` of them,
    each named, no name twice."""
    names = [d.name or "" for d in spec.debaters()]
    if len(names) < minimum:
        raise SpecError(f"the {spec.protocol} protocol needs at least {minimum} debaters")
    if any(not n.strip() for n in names) or len(set(names)) != len(names):
        raise SpecError(f"{spec.protocol} debaters need unique names; got {names}")
    return names


def finish(
    spec: DebateSpec,
    ledger: TurnLedger,
    ending: Ending,
    verdict: Verdict,
    *,
    started_at: datetime,
    report: dict[str, Any] | None = None,
    citations: Sequence[CitationCheck] = (),
) -> DebateResult:
    """The run's result; a citation not found in the material flags it."""
    flags = [DebateFlag.FABRICATED_CITATION] if any(not c.verified for c in citations) else []
    return DebateResult(
        spec=spec,
        transcript=list(ledger.transcript),
        citations=list(citations),
        flags=flags,
        verdict=verdict,
        report=report,
        error=ending.error,
        started_at=started_at,
        finished_at=utcnow(),
    )


def choice_enum(name: str, values: Iterable[str]) -> type[Enum]:
    """A str enum whose members are `values` (each its own name and value): the type of a schema
    field that allows only them (a debate's argument ids, labels, peers, votes). Built through
    the metaclass's call, which is what `Enum(name, names)` does, so it is typed as the class it
    is."""
    return EnumMeta.__call__(Enum, name, {v: v for v in values}, module=__name__, type=str)


def built_once(factory: Callable[[list[str]], type[M]]) -> Callable[[Sequence[str]], type[M]]:
    """`factory` (a schema type restricted to a debate's names: ids, labels, peers, votes,
    judges' choices) built once per distinct list of names, when first asked for. A type built
    anew per debate had its JSON schema and prose description generated anew too (each is
    cached per type): with 200 debates that was a quarter of a worker's CPU. The type depends
    only on the names, so every debate with the same names can share it."""

    @functools.lru_cache(maxsize=256)
    def cached(names: tuple[str, ...]) -> type[M]:
        return factory(list(names))

    @functools.wraps(factory)
    def build(names: Sequence[str]) -> type[M]:
        return cached(tuple(names))

    return build


def list_of(item: type) -> Any:
    """`list[item]` for an item type built at run time (a field's annotation in
    `pydantic.create_model`, which reads it at run time)."""
    return GenericAlias(list, (item,))


def options_for(model: type[OptionsT], spec: DebateSpec) -> OptionsT:
    """The protocol's options from `spec.options`, as a SpecError naming what to fix: a key the
    protocol does not know is refused with the keys it does (the options models forbid extra
    keys, so a misspelt option is never stored and silently ignored)."""
    try:
        return model.model_validate(spec.options)
    except ValidationError as error:
        unknown = [str(e["loc"][0]) for e in error.errors() if e["type"] == "extra_forbidden"]
        if unknown:
            raise SpecError(
                f"the {spec.protocol} protocol has no option {', '.join(unknown)}; its options"
                f" are {', '.join(model.model_fields)}"
            ) from error
        raise SpecError(
            readable(error, lambda where: f"the {spec.protocol} option {where}")
        ) from error
