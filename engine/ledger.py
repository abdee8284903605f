"""The single path from a protocol to its models: metering, turn records, events and replay.

Every model call of a debate goes through one `TurnLedger`. The ledger
- checks the cost ceiling before every call (re-asks included),
- turns each validated output into a `TurnRecord` and emits `TurnStarted`/`TurnFinished`,
- replays turns already recorded (a resumed debate) without calling any model.

Budget rule: a call is not started when the money spent plus the average cost of the calls made
so far would pass the ceiling, so the ceiling is not knowingly crossed. Protocols then end with
TRUNCATED_BUDGET and the latest state they had.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from engine.errors import DebateHaltedError, EngineError
from engine.events import DebateEvent, EventSink, TurnFinished, TurnStarted
from engine.llm import LLM, Completion, LLMRequest, Message, complete_structured
from engine.models import DebateSpec, ModelSettings, Role, TurnRecord
from engine.prompts import PromptTemplate

T = TypeVar("T", bound=BaseModel)
LLMResolver = Callable[[ModelSettings], LLM]
HaltCheck = Callable[[], Awaitable[str | None]]
"""Asked before every new model call: a reason to stop the debate there, or None to go on."""


class BudgetExhausted(EngineError):
    """Raised inside a protocol when the next call would pass the cost ceiling."""


class CostMeter:
    """Money spent so far in one debate, and the ceiling check made before each call."""

    def __init__(self, budget_usd: float | None) -> None:
        self.budget_usd = budget_usd
        self.spent_usd = 0.0
        self.calls = 0

    def add(self, cost_usd: float, *, calls: int = 1) -> None:
        self.spent_usd += cost_usd
        self.calls += calls

    def check(self) -> None:
        if self.budget_usd is None:
            return
        expected_next = self.spent_usd / self.calls if self.calls else 0.0
        if self.spent_usd + expected_next > self.budget_usd or self.spent_usd >= self.budget_usd:
            raise BudgetExhausted(
                f"cost ceiling ${self.budget_usd:.4f} reached: ${self.spent_usd:.4f} spent in"
                f" {self.calls} calls, next call expected ${expected_next:.4f}"
            )


class MeteredLLM:
    """Wraps a model so every single call is budget-checked first and its cost counted after."""

    def __init__(self, inner: LLM, meter: CostMeter) -> None:
        self.inner = inner
        self.meter = meter

    @property
    def provider(self) -> str:
        return self.inner.provider

    async def complete(self, request: LLMRequest) -> Completion:
        self.meter.check()
        completion = await self.inner.complete(request)
        self.meter.add(completion.cost_usd)
        return completion


def request_digest(messages: Sequence[Message], settings: ModelSettings) -> str:
    """A stable hash of exactly what was asked, for the audit row."""
    payload = "\x1e".join(f"{m.role}\x1f{m.content}" for m in messages)
    payload += f"\x1e{settings.provider}:{settings.model}:{settings.temperature}:"
    payload += str(settings.max_tokens)
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
        self.meter = CostMeter(spec.budget_usd)
        self.transcript: list[TurnRecord] = []
        self._recorded = {turn.key: turn for turn in recorded}

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
    ) -> T:
        """One agent turn: replayed from the record if stored, otherwise asked of its model.

        `speaker` names the debater when the role has several; it selects the debater's model.
        `step` says what the turn is for in the live status (a phase), when the role does not.
        """
        stored = self._recorded.get((round, role, speaker, phase, attempt))
        if stored is not None:
            value = output_type.model_validate(stored.parsed)
            self.meter.add(stored.cost_usd, calls=stored.reasks + 1)
            self.transcript.append(stored)
            await self.emit(TurnFinished(turn=stored, replayed=True))
            return value

        if self.halt is not None and (reason := await self.halt()) is not None:
            raise DebateHaltedError(f"stopped before the {role.value} turn: {reason}")
        settings = self.spec.participant_for(role, speaker).model
        llm = MeteredLLM(self.resolve_llm(settings), self.meter)
        self.meter.check()
        await self.emit(
            TurnStarted(
                round=round,
                role=role,
                speaker=speaker,
                step=step,
                attempt=attempt,
                provider=llm.provider,
                model=settings.model,
            )
        )
        request = LLMRequest(
            messages=messages,
            model=settings.model,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
        )
        started = time.perf_counter()
        result = await complete_structured(llm, request, output_type)
        turn = TurnRecord(
            round=round,
            role=role,
            speaker=speaker,
            phase=phase,
            attempt=attempt,
            provider=llm.provider,
            model=settings.model,
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
