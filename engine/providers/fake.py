"""Fake models for tests and demos: a scripted one and a function-driven one.

Both record every request they receive (`calls`), count tokens roughly (4 characters a token,
or exactly as a test dictates) and price them, so budget and audit logic run unchanged.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from pydantic import BaseModel

from engine.errors import LLMError
from engine.llm import Completion, LLMRequest
from engine.models import Usage
from engine.pricing import FREE, Pricing

Reply = str | dict[str, Any] | BaseModel | Exception
ReplyFunction = Callable[[LLMRequest], Reply | Awaitable[Reply]]


def _as_text(reply: str | dict[str, Any] | BaseModel) -> str:
    if isinstance(reply, BaseModel):
        return reply.model_dump_json()
    if isinstance(reply, dict):
        return json.dumps(reply)
    return reply


def estimate_tokens(text: str) -> int:
    """A rough token count (about four characters a token) for fakes that have no tokenizer."""
    return max(1, len(text) // 4)


class _RecordingLLM:
    def __init__(
        self,
        *,
        provider: str,
        model: str,
        pricing: Pricing,
        delay_s: float,
        usage: Usage | None,
    ) -> None:
        self._provider = provider
        self.model = model
        self.pricing = pricing
        self.delay_s = delay_s
        self.fixed_usage = usage
        self.calls: list[LLMRequest] = []

    @property
    def provider(self) -> str:
        return self._provider

    def _completion(self, request: LLMRequest, reply: Reply) -> Completion:
        if isinstance(reply, Exception):
            raise reply
        text = _as_text(reply)
        usage = self.fixed_usage or Usage(
            input_tokens=sum(estimate_tokens(m.content) for m in request.messages),
            output_tokens=estimate_tokens(text),
        )
        return Completion(
            text=text,
            usage=usage,
            cost_usd=self.pricing.cost(usage),
            provider=self.provider,
            model=request.model,
            latency_s=self.delay_s,
            finish_reason="stop",
        )


class ScriptedLLM(_RecordingLLM):
    """Hands out queued replies in order; an Exception in the queue is raised instead."""

    def __init__(
        self,
        replies: Iterable[Reply],
        *,
        provider: str = "fake",
        model: str = "fake-model",
        pricing: Pricing = FREE,
        delay_s: float = 0.0,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(
            provider=provider, model=model, pricing=pricing, delay_s=delay_s, usage=usage
        )
        self.replies: deque[Reply] = deque(replies)

    async def complete(self, request: LLMRequest) -> Completion:
        self.calls.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if not self.replies:
            raise LLMError(
                f"ScriptedLLM ran out of replies after {len(self.calls) - 1} calls;"
                " queue one reply per expected call"
            )
        return self._completion(request, self.replies.popleft())


class FunctionLLM(_RecordingLLM):
    """Answers each request with `function(request)`, which may be sync or async."""

    def __init__(
        self,
        function: ReplyFunction,
        *,
        provider: str = "fake",
        model: str = "fake-model",
        pricing: Pricing = FREE,
        delay_s: float = 0.0,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(
            provider=provider, model=model, pricing=pricing, delay_s=delay_s, usage=usage
        )
        self.function = function

    async def complete(self, request: LLMRequest) -> Completion:
        self.calls.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        reply = self.function(request)
        if inspect.isawaitable(reply):
            reply = await reply
        return self._completion(request, reply)


CANNED_DEBATE_REPLIES: dict[str, dict[str, Any]] = {
    "Proposition": {
        "thesis": "[fake] The team should adopt the proposal as written.",
        "scope": "[fake] The proposal under discussion and nothing else.",
        "criteria": ["[fake] correctness", "[fake] operational risk", "[fake] cost"],
        "key_evidence": [],
    },
    "ProposerTurn": {
        "thesis": "[fake] The proposal meets the criteria.",
        "supporting_arguments": ["[fake] It addresses the stated problem directly."],
        "evidence_cited": [],
    },
    "CriticTurn": {
        "thesis": "[fake] The proposal leaves a failure mode unaddressed.",
        "counter_arguments": ["[fake] Nothing covers the case where the new component fails."],
        "evidence_cited": [],
        "challenge_strength": 7,
    },
    "RebuttalTurn": {
        "thesis": "[fake] The failure mode is real and can be mitigated.",
        "rebuttals": ["[fake] A fallback path answers the failure-mode objection."],
        "concessions": ["[fake] The proposal as written has no fallback."],
    },
    "ModeratorTurn": {
        "proposer_quality": {"logic": 6, "evidence": 5, "completeness": 5, "consistency": 7},
        "critic_quality": {"logic": 7, "evidence": 5, "completeness": 6, "consistency": 7},
        "resolved_points": ["[fake] A fallback is needed."],
        "unresolved_points": ["[fake] Who owns the fallback."],
        "recommend_another_round": False,
        "decision": "revise",
        "synthesis": "[fake] Revise the proposal to add a fallback path, then adopt it.",
        "confidence_level": "MODERATE",
        "uncertainties": ["[fake] Real load figures are unknown."],
    },
}


def canned_debate_reply(request: LLMRequest) -> dict[str, Any]:
    """A fixed, clearly labelled reply per debate role, for `--provider fake` dry runs.

    Lets someone try the whole pipeline (CLI, events, JSON record) in a second with no model.
    Every text starts with "[fake]" so no one mistakes it for analysis.
    """
    try:
        return CANNED_DEBATE_REPLIES[request.schema_name or ""]
    except KeyError:
        raise LLMError(
            f"the fake provider has no canned reply for {request.schema_name!r};"
            " use a real provider for this protocol"
        ) from None
