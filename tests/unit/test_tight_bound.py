"""The budget's input bound, tight as well as safe (issue 47 item 5): a prompt extending one an
earlier call on the same model was billed for is bounded by that call's reported input tokens
plus one token per byte of the rest, never below what the call is billed."""

from __future__ import annotations

import random
import string
from typing import Any

import pytest

from engine.bound import PromptHistory
from engine.catalog import Catalog
from engine.envelope import Envelope
from engine.llm import (
    MESSAGE_OVERHEAD_TOKENS,
    Completion,
    LLMRequest,
    Message,
    input_token_bound,
)
from engine.models import (
    ContextDocument,
    DebateFlag,
    DebateSpec,
    DebateStatus,
    ModelSettings,
    Usage,
)
from engine.pricing import Pricing
from engine.providers.fake import SchemaFillingLLM
from engine.runner import run_debate
from tests.helpers import shipped_prompts
from tests.tokenizer import LineTokenizer

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"answer": {"type": "string"}}}
OTHER_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"score": {"type": "integer"}}}
ENVELOPE = Envelope(
    name="demo_reply",
    json_schema={"type": "object", "properties": {"answer": SCHEMA, "score": OTHER_SCHEMA}},
    key="answer",
    size_bytes=120,
)
WORDS = ["clause", "règle", "条款", "🙂", "liability", "cap", "R1.C2", "-", "\t", "  "]


def words(rng: random.Random, count: int) -> str:
    """Random text with line breaks, multi-byte characters and stray whitespace."""
    out = []
    for _ in range(count):
        out.append(rng.choice([*WORDS, rng.choice(string.printable)]))
        out.append(rng.choice([" ", " ", " ", "\n", "\n\n", ""]))
    return "".join(out)


def request(system: str, user: str, *, schema: dict[str, Any] = SCHEMA) -> LLMRequest:
    return LLMRequest(
        messages=[Message(role="system", content=system), Message(role="user", content=user)],
        model="m",
        output_schema=schema,
    )


def next_request(rng: random.Random, earlier: LLMRequest) -> LLMRequest:
    """A request as a debate makes them after `earlier`: the same prompt grown by a turn, cut
    somewhere and continued, re-asked with the reply and a correction, or with another schema,
    envelope or preamble."""
    system, user = earlier.messages[0].content, earlier.messages[-1].content
    kind = rng.randrange(6)
    if kind == 0:
        return request(
            system, user + words(rng, rng.randint(0, 80)), schema=earlier.output_schema or SCHEMA
        )
    if kind == 1:
        cut = rng.randint(0, len(user))
        return request(system, user[:cut] + words(rng, rng.randint(0, 80)))
    if kind == 2:
        return earlier.model_copy(
            update={
                "messages": [
                    *earlier.messages,
                    Message(role="assistant", content=words(rng, 30)),
                    Message(role="user", content=words(rng, 10)),
                ]
            }
        )
    if kind == 3:
        return request(system, user + words(rng, 20), schema=OTHER_SCHEMA)
    if kind == 4:
        grown = request(system, user + words(rng, 20))
        return grown.model_copy(update={"envelope": ENVELOPE})
    return request(words(rng, 60), user)


def answered(input_tokens: int, *, enveloped: bool = False) -> Completion:
    """A reply billed `input_tokens` input tokens, sent with the envelope or not."""
    usage = Usage(input_tokens=input_tokens, output_tokens=10)
    return Completion(text="{}", usage=usage, provider="fake", model="m", enveloped=enveloped)


@pytest.mark.parametrize("seed", range(120))
def test_the_bound_is_never_below_what_a_byte_level_tokenizer_bills(seed: int) -> None:
    rng = random.Random(seed)
    tokenizer = LineTokenizer(
        seed=seed, longest=rng.choice([1, 2, 4, 8]), worst_share=rng.choice([0.0, 0.3, 1.0])
    )
    history = PromptHistory()
    asked = [request(words(rng, 200), words(rng, rng.randint(0, 150)))]
    for _ in range(12):
        current = next_request(rng, rng.choice(asked))
        billed = tokenizer.prompt_tokens(current)
        bound = history.bound("fake", current)
        assert bound >= billed, (seed, bound, billed)
        assert bound <= input_token_bound(current)
        history.record("fake", current, answered(billed, enveloped=current.envelope is not None))
        asked.append(current)


def test_a_prompt_extending_an_earlier_one_is_its_reported_tokens_plus_a_token_per_byte() -> None:
    history = PromptHistory()
    first = request("The rules.\nThe case.", "Turn one.\n")
    history.record("fake", first, answered(40))
    grown = request("The rules.\nThe case.", "Turn one.\nTurn two: é.")

    # The shared lines end where the user message's last line starts: the rest is that line.
    rest = len("Turn two: é.".encode())
    assert history.bound("fake", grown) == 40 + rest + MESSAGE_OVERHEAD_TOKENS

    # Another model's count, or a prompt sharing no line, leaves the byte bound.
    assert history.bound("other", grown) == input_token_bound(grown)
    unrelated = request("Other rules.", "Turn one.\n")
    assert history.bound("fake", unrelated) == input_token_bound(unrelated)

    # Another schema is counted whole, by the byte, with the request's framing allowance.
    other = grown.model_copy(update={"output_schema": OTHER_SCHEMA})
    assert history.bound("fake", other) > history.bound("fake", grown) + len(str(OTHER_SCHEMA))


class Tokenized(SchemaFillingLLM):
    """Schema-filled replies billed at Claude Haiku's prices for the input tokens a byte-level
    tokenizer counts (about three bytes a token, as English text runs)."""

    def __init__(self, pricing: Pricing) -> None:
        super().__init__(seed=3, record=False, pricing=pricing)
        self.tokenizer = LineTokenizer(seed=3, longest=5, worst_share=0.0)
        self.spent = 0.0

    async def complete(self, request: LLMRequest) -> Completion:
        reply = await super().complete(request)
        usage = reply.usage.model_copy(
            update={"input_tokens": self.tokenizer.prompt_tokens(request)}
        )
        cost = self.price_of(request.model).cost(usage)
        self.spent += cost
        return reply.model_copy(update={"usage": usage, "cost_usd": cost})


async def test_a_debate_near_its_budget_completes_instead_of_ending_with_most_of_it_unspent() -> (
    None
):
    """The issue's case: a budget a debate's calls fit in, with room to spare, ended it
    TRUNCATED_BUDGET while the worst case of the next call counted every byte as a token."""
    haiku = Catalog.load().require_price("anthropic", "claude-haiku-4-5")
    model = ModelSettings(provider="fake", model="fake-model", max_tokens=512)
    case = ContextDocument(title="case.md", text="Clause 7.2 caps liability at fees paid.\n" * 400)
    spec = DebateSpec(
        question="Should we sign this contract?",
        context=[case],
        default_model=model,
        max_rounds=1,
        judges=1,
    )
    unlimited = Tokenized(haiku)
    full = await run_debate(spec, resolve_llm=lambda _: unlimited, prompts=shipped_prompts())
    assert full.status is DebateStatus.COMPLETE, full.error

    budget = round(full.cost_usd * 1.35, 6)
    near = Tokenized(haiku)
    result = await run_debate(
        spec.model_copy(update={"budget_usd": budget}),
        resolve_llm=lambda _: near,
        prompts=shipped_prompts(),
    )
    assert result.status is DebateStatus.COMPLETE, (budget, result.error)
    assert near.spent <= budget
    assert len(result.transcript) == len(full.transcript)
    assert DebateFlag.CONFIDENCE_UNVERIFIED not in result.flags, "the judge was asked too"
