"""The single path from a protocol to its models: metering, turn records, events and replay.

Every model call of a debate goes through one `TurnLedger`. The ledger
- checks the cost ceiling before every call (re-asks included),
- turns each validated output into a `TurnRecord` and emits `TurnStarted`/`TurnFinished`,
- replays turns already recorded (a resumed debate) without calling any model.

Budget rule: a call starts only when the money spent, plus the worst case of every call still
in flight, plus its own worst case (its input bound in at the dearest input rate and `max_tokens`
out, at its model's price) fits in the ceiling. The input bound is one token per byte
(`input_token_bound`), or, for a prompt that extends one an earlier call of the debate was billed
for on the same model, that call's reported input tokens plus one per byte of the rest
(`engine.bound.PromptHistory`). Its worst case is held while it runs
and replaced by what it really cost when it ends, so calls made together (a panel's answers)
cannot pass the ceiling together either: a debate never spends more than its budget. A refused
call raises `BudgetExhausted`; protocols then end with TRUNCATED_BUDGET and the latest state they
had. Provider-level retries of a failed request are not billed and are not checked again.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from engine.bound import PromptHistory
from engine.cache_plan import CacheMarks, Plan, Planned
from engine.envelope import Envelope
from engine.errors import DebateHaltedError, EngineError, LLMError
from engine.events import DebateEvent, EventSink, TurnFinished, TurnStarted
from engine.llm import (
    LLM,
    Completion,
    LLMRequest,
    Message,
    StreamingLLM,
    TextSink,
    ask,
    complete_structured,
    output_schema,
)
from engine.models import DebateSpec, ModelSettings, Role, TurnRecord
from engine.pricing import Pricing
from engine.prompts import PromptTemplate
from engine.streaming import TurnWatch

T = TypeVar("T", bound=BaseModel)
LLMResolver = Callable[[ModelSettings], LLM]
HaltCheck = Callable[[], Awaitable[str | None]]
"""Asked before every new model call: a reason to stop the debate there, or None to go on."""


class BudgetExhausted(EngineError):
    """Raised inside a protocol when the next call could pass the cost ceiling."""


def _usd(amount: float) -> str:
    """Dollars to the hundredth of a cent, without trailing zeros past the cents."""
    digits = f"{amount:.4f}".rstrip("0")
    return "$" + digits + "0" * (2 - len(digits.partition(".")[2]))


@dataclass(frozen=True)
class CallBound:
    """The most one call can cost, and which call it is, for the ceiling check and its
    message."""

    what: str
    input_tokens: int
    output_tokens: int
    usd: float

    @classmethod
    def of(cls, request: LLMRequest, pricing: Pricing, *, what: str, tokens: int) -> CallBound:
        """The bound of `request` at `pricing`, for at most `tokens` input tokens."""
        worst = pricing.worst_case(input_tokens=tokens, output_tokens=request.max_tokens)
        return cls(what=what, input_tokens=tokens, output_tokens=request.max_tokens, usd=worst)

    def __str__(self) -> str:
        return (
            f"{self.what} could cost up to {_usd(self.usd)} (at most {self.input_tokens:,} input"
            f" tokens and max_tokens {self.output_tokens:,})"
        )


class CostMeter:
    """Money spent so far in one debate, the worst cases of its calls in flight, and the
    ceiling check made before each call."""

    def __init__(self, budget_usd: float | None, *, spent_usd: float = 0.0) -> None:
        self.budget_usd = budget_usd
        self.spent_usd = spent_usd
        self._held: dict[int, float] = {}
        self._tickets = itertools.count()

    @property
    def held_usd(self) -> float:
        """The worst cases of the calls in flight."""
        return sum(self._held.values())

    def check(self, call: CallBound) -> None:
        """Raise BudgetExhausted unless `call` fits beside what is spent and held."""
        budget = self.budget_usd
        held = self.held_usd
        if budget is None or self.spent_usd + held + call.usd <= budget:
            return
        spent = "nothing was spent" if self.spent_usd == 0 else f"{_usd(self.spent_usd)} spent"
        if call.usd > budget:
            # No amount of waiting lets this call fit: say what would.
            needed = math.ceil(round(call.usd * 100, 6)) / 100
            raise BudgetExhausted(
                f"{spent}: {call}, more than the whole {_usd(budget)} budget. Raise the budget to"
                f" at least ${needed:.2f} (--budget {needed:.2f}; DEBATEBOT_BUDGET_USD sets the"
                " default of every debate), or give that role a cheaper model or a lower"
                " max_tokens"
            )
        in_flight = f" and {_usd(held)} held for calls in flight" if self._held else ""
        left = max(0.0, budget - self.spent_usd - held)
        raise BudgetExhausted(
            f"{call}, and {spent}{in_flight} leave {_usd(left)} of the {_usd(budget)} budget:"
            " it was not started"
        )

    def hold(self, call: CallBound) -> int:
        """Check `call` and hold its worst case until `release`; returns the ticket to release."""
        self.check(call)
        ticket = next(self._tickets)
        self._held[ticket] = call.usd
        return ticket

    def release(self, ticket: int, cost_usd: float) -> None:
        """The call of `ticket` ended: drop its worst case and count what it cost."""
        del self._held[ticket]
        self.spent_usd += cost_usd


class MeteredLLM:
    """Wraps a model so every single call holds its worst case against the ceiling while it
    runs, and counts its real cost when it ends (and its reported input tokens, which bound a
    later call extending its prompt)."""

    def __init__(
        self,
        inner: LLM,
        meter: CostMeter,
        *,
        what: str,
        history: PromptHistory | None = None,
        held: Callable[[], None] | None = None,
    ) -> None:
        self.inner = inner
        self.meter = meter
        self.what = what
        self.history = history if history is not None else PromptHistory()
        self.held = held
        """Told each time a call holds its worst case."""

    def _hold(self, request: LLMRequest) -> int:
        ticket = self.meter.hold(self.bound(request))
        if self.held is not None:
            self.held()
        return ticket

    @property
    def provider(self) -> str:
        return self.inner.provider

    def price_of(self, model: str) -> Pricing:
        return self.inner.price_of(model)

    def bound(self, request: LLMRequest) -> CallBound:
        tokens = self.history.bound(self.provider, request)
        return CallBound.of(request, self.price_of(request.model), what=self.what, tokens=tokens)

    async def complete(self, request: LLMRequest) -> Completion:
        ticket = self._hold(request)
        cost = 0.0
        try:
            completion = await self.inner.complete(request)
            cost = completion.cost_usd
            self.history.record(self.provider, request, completion)
        finally:
            # A call that ended without a reply has no usage to count (and vendors do not
            # bill failed requests): it is released at no cost.
            self.meter.release(ticket, cost)
        return completion

    def streams(self, request: LLMRequest) -> bool:
        return isinstance(self.inner, StreamingLLM) and self.inner.streams(request)

    async def stream(self, request: LLMRequest, on_text: TextSink) -> Completion:
        """As `complete`, streamed: the same worst case is held while the stream runs, and a
        stream refused before any text releases it at no cost (the whole reply is then asked
        by `complete`, held anew)."""
        ticket = self._hold(request)
        cost = 0.0
        try:
            completion = await ask(self.inner, request, on_text)
            cost = completion.cost_usd
        finally:
            self.meter.release(ticket, cost)
        return completion


def request_digest(messages: Sequence[Message], settings: ModelSettings) -> str:
    """A stable hash of exactly what was asked, for the audit row."""
    payload = "\x1e".join(f"{m.role}\x1f{m.content}" for m in messages)
    payload += f"\x1e{settings.provider}:{settings.model}:{settings.temperature}:"
    payload += str(settings.max_tokens)
    if settings.effort is not None:
        # Only when set, so a turn asked without an effort hashes as it always did.
        payload += f":{settings.effort}"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class TurnLedger:
    """The single path from a protocol to the models: metering, records, events and replay."""

    def __init__(
        self,
        *,
        spec: DebateSpec,
        resolve_llm: LLMResolver,
        sink: EventSink,
        recorded: Sequence[TurnRecord] = (),
        halt: HaltCheck | None = None,
    ) -> None:
        self.spec = spec
        self.halt = halt
        self.resolve_llm = resolve_llm
        self.sink = sink
        self.transcript: list[TurnRecord] = []
        self._recorded = {turn.key: turn for turn in recorded}
        # What is stored was paid for, replayed here or not (a triage turn stored before the
        # debate's own turns is never replayed by the debate, and still counts).
        self.meter = CostMeter(
            spec.budget_usd, spent_usd=sum(t.cost_usd for t in self._recorded.values())
        )
        self.history = PromptHistory()
        self.plan: Plan | None = None
        self.judging: asyncio.Future[dict[str, str | LLMError]] | None = None
        """The independent judges, when the protocol started them beside its last call
        (`engine.judging.judge_beside`): their decisions or failures by judge."""
        self._beside: list[asyncio.Future[None]] = []

    def planned(self, calls: Sequence[Planned]) -> None:
        """The calls the protocol will make, in order, so each is marked for the vendor's
        cache only where a later call reads it (`engine/cache_plan.py`)."""
        self.plan = Plan(self.spec, calls)

    def next_call_under_way(self) -> asyncio.Future[None]:
        """Done once the ledger's next call holds its worst case against the budget, is
        replayed, or ends without a call (refused, halted, failed): calls that wait for it
        before they start cannot take the room that call needs, so the budget affords it as it
        would had they come after it."""
        under_way: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._beside.append(under_way)
        return under_way

    async def emit(self, event: DebateEvent) -> None:
        await self.sink(event)

    async def call(
        self,
        *,
        round: int,
        role: Role,
        template: PromptTemplate,
        messages: list[Message],
        output_type: type[T],
        attempt: int = 1,
        speaker: str = "",
        phase: str = "",
        step: str = "",
        envelope: Envelope | None = None,
        shared_breaks: Sequence[int] = (),
        model: ModelSettings | None = None,
    ) -> T:
        """One agent turn: replayed from the record if stored, otherwise asked of its model.

        `speaker` names the debater when the role has several; it selects the debater's model.
        `step` says what the turn is for in the live status (a phase), when the role does not.
        `envelope` is the protocol's shared output schema with this turn's key, and
        `shared_breaks` where the text later turns repeat ends (`LLMRequest` says more).
        `model` is the model to ask instead of the one the spec gives the role and speaker.
        """
        beside, self._beside = self._beside, []

        def under_way() -> None:
            for waiting in beside:
                if not waiting.done():
                    waiting.set_result(None)

        try:
            stored = self._recorded.get((round, role, speaker, phase, attempt))
            if stored is not None:
                under_way()
                value = output_type.model_validate(stored.parsed)
                self.transcript.append(stored)
                await self.emit(TurnFinished(turn=stored, replayed=True))
                return value

            if self.halt is not None and (reason := await self.halt()) is not None:
                raise DebateHaltedError(f"stopped before the {role.value} turn: {reason}")
            settings = model or self.spec.participant_for(role, speaker).model
            who = f"{speaker}'s {role.value} call" if speaker else f"the {role.value} call"
            llm = MeteredLLM(
                self.resolve_llm(settings),
                self.meter,
                what=f"{who} to {settings.provider}:{settings.model}",
                history=self.history,
                held=under_way,
            )
            marks = CacheMarks()
            if self.plan is not None:
                marks = self.plan.marks(
                    round=round,
                    role=role,
                    speaker=speaker,
                    model=settings,
                    breaks=list(shared_breaks),
                )
            request = LLMRequest(
                messages=messages,
                model=settings.model,
                temperature=settings.temperature,
                max_tokens=settings.max_tokens,
                effort=settings.effort,
                output_schema=output_schema(output_type),
                schema_name=output_type.__name__,
                envelope=envelope,
                shared_breaks=list(shared_breaks),
                cache_preamble=marks.preamble,
                cache_breaks=marks.so_far,
            )
            # Checked before the turn is announced; the call itself holds its worst case (a
            # concurrent call may have taken the room meanwhile).
            self.meter.check(llm.bound(request))
            announced = TurnStarted(
                round=round,
                role=role,
                speaker=speaker,
                step=step,
                phase=phase,
                attempt=attempt,
                provider=llm.provider,
                model=settings.model,
            )
            await self.emit(announced)
            started = time.perf_counter()
            watch = TurnWatch(
                self.emit, announced, request.output_schema or {}, envelope.key if envelope else ""
            )
            result = await complete_structured(llm, request, output_type, watch=watch)
            turn = TurnRecord(
                round=round,
                role=role,
                speaker=speaker,
                phase=phase,
                attempt=attempt,
                provider=llm.provider,
                # The model that answered, as its provider names it (the local provider names its
                # file), not only the one the spec asked for.
                model=result.completions[-1].model,
                prompt_sha256=template.sha256,
                request_sha256=request_digest(messages, settings),
                usage=result.usage,
                cost_usd=result.cost_usd,
                latency_s=time.perf_counter() - started,
                reasks=result.reasks,
                raw_text=result.raw_text,
                parsed=result.value.model_dump(mode="json"),
            )
            self.transcript.append(turn)
            await self.emit(TurnFinished(turn=turn))
            return result.value
        finally:
            under_way()
