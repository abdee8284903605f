"""The cost ceiling: a call starts only when its worst case fits beside what is spent and what
the calls in flight could still cost, so no debate, concurrent calls included, spends past its
budget, and a debate cut by it never reports COMPLETE."""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any

import pytest

from engine.catalog import Catalog
from engine.ledger import BudgetExhausted, CallBound, CostMeter
from engine.llm import (
    MESSAGE_OVERHEAD_TOKENS,
    REQUEST_OVERHEAD_TOKENS,
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
    Participant,
    Role,
    TurnRecord,
    Usage,
)
from engine.pricing import Pricing
from engine.protocols import PROTOCOLS
from engine.providers.fake import FunctionLLM, SchemaFillingLLM
from engine.runner import run_debate
from tests.helpers import DebateScript, shipped_prompts
from tests.tokenizer import LineTokenizer

FAKE = ModelSettings(provider="fake", model="fake-model")
COSTS = re.compile(r"could cost up to \$([0-9.]+)")
PANELIST = re.compile(r'panelist "([^"]+)"')


def worst_quoted(error: str | None) -> float:
    """The worst case a refusal quotes for the call it refused."""
    assert error is not None
    found = COSTS.search(error)
    assert found, error
    return float(found.group(1))


def test_the_input_bound_is_every_byte_of_the_messages_and_schema_plus_the_framing() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    request = LLMRequest(
        messages=[
            Message(role="system", content="règles"),  # 7 bytes in UTF-8 for 6 characters
            Message(role="user", content="€ 5"),  # 5 bytes
        ],
        model="m",
        output_schema=schema,
    )
    schema_bytes = len('{"type": "object", "properties": {"answer": {"type": "string"}}}')
    expected = 7 + 5 + schema_bytes + 2 * MESSAGE_OVERHEAD_TOKENS + REQUEST_OVERHEAD_TOKENS
    assert input_token_bound(request) == expected


def test_the_worst_case_bills_every_input_token_at_the_dearest_input_rate() -> None:
    # Anthropic's shape: cache writes cost more than plain input.
    pricing = Pricing(
        input_per_mtok=3.0,
        cached_input_per_mtok=0.3,
        cache_write_per_mtok=3.75,
        output_per_mtok=15.0,
    )
    worst = pricing.worst_case(input_tokens=1_000, output_tokens=100)
    assert worst == pytest.approx((1_000 * 3.75 + 100 * 15.0) / 1e6)
    for cached, written in [(0, 0), (1_000, 0), (0, 1_000), (400, 600)]:
        usage = Usage(
            input_tokens=1_000,
            output_tokens=100,
            cached_input_tokens=cached,
            cache_write_input_tokens=written,
        )
        assert pricing.cost(usage) <= worst


def test_the_meter_holds_each_call_in_flight_and_releases_it_when_it_ends() -> None:
    meter = CostMeter(1.0)
    call = CallBound(what="a call", input_tokens=1, output_tokens=1, usd=0.4)
    first, second = meter.hold(call), meter.hold(call)
    with pytest.raises(BudgetExhausted, match=r"\$0\.80 held for calls in flight"):
        meter.hold(call)
    meter.release(first, 0.1)  # answered, for less than its worst case
    meter.release(second, 0.0)  # failed: vendors do not bill a failed request
    assert meter.spent_usd == pytest.approx(0.1)
    assert meter.held_usd == 0.0
    meter.hold(call)
    meter.hold(call)
    with pytest.raises(BudgetExhausted, match=r"\$0\.10 spent"):
        meter.hold(call)


async def test_a_first_call_that_could_pass_the_default_budget_is_refused_before_any_request() -> (
    None
):
    """The issue's first case: a long case on Opus 4.1 under the default $1 budget, whose first
    call could cost about $2.60, went out and spent past the budget."""
    opus = Catalog.load().require_price("anthropic", "claude-opus-4-1")
    case = ContextDocument(title="contract.md", text="Clause 7.2 caps liability. " * 4_800)
    spec = DebateSpec(
        question="Should we sign this contract?",
        context=[case],
        default_model=FAKE,
        budget_usd=1.0,
    )
    llm = DebateScript().llm(pricing=opus)

    result = await run_debate(spec, resolve_llm=lambda _: llm, prompts=shipped_prompts())

    assert llm.calls == [], "nothing was asked of the model"
    assert result.status is DebateStatus.TRUNCATED_BUDGET
    assert result.cost_usd == 0.0
    assert result.transcript == []
    assert result.verdict.escalate
    error = result.error or ""
    assert error.startswith("nothing was spent: the framing call to fake:fake-model could cost")
    assert "more than the whole $1.00 budget" in error
    worst = worst_quoted(error)
    assert 2.5 < worst < 2.8
    asked = re.search(r"Raise the budget to at least \$([0-9.]+) \(--budget \1;", error)
    assert asked, error
    assert "DEBATEBOT_BUDGET_USD sets the default of every debate" in error
    needed = float(asked.group(1))
    assert worst <= needed < worst + 0.01

    # With the budget it asks for, that call runs and costs no more than was quoted.
    enough = DebateScript().llm(pricing=opus)
    spec = spec.model_copy(update={"budget_usd": needed})
    paid = await run_debate(spec, resolve_llm=lambda _: enough, prompts=shipped_prompts())
    assert paid.transcript[0].role is Role.FRAMING
    assert 0 < paid.transcript[0].cost_usd <= worst
    assert paid.cost_usd <= needed


def panel_spec(budget_usd: float, max_tokens: int) -> DebateSpec:
    model = FAKE.model_copy(update={"max_tokens": max_tokens})
    return DebateSpec(
        question="Adopt a message queue for billing retries?",
        protocol="panel",
        max_rounds=2,
        default_model=model,
        budget_usd=budget_usd,
        participants=[
            Participant(role=Role.DEBATER, name=name, model=model)
            for name in ("architect", "security", "operator")
        ],
    )


async def test_a_panel_never_spends_past_its_budget_nor_completes_with_answers_refused() -> None:
    """The issue's second case: `panel --budget 0.30` spent $0.43 and reported COMPLETE: its
    three answers, asked together, each passed a check that saw nothing spent yet."""
    # Each answer is billed its worst case: its 1,000 output tokens at $143 per million.
    pricing = Pricing(input_per_mtok=0.0, output_per_mtok=143.0)

    def answer(request: LLMRequest) -> dict[str, Any]:
        return {"decision": "accept", "answer": "Adopt the queue.", "confidence": 0.9}

    llm = FunctionLLM(
        answer, pricing=pricing, usage=Usage(input_tokens=900, output_tokens=1_000), delay_s=0.01
    )

    result = await run_debate(
        panel_spec(0.30, 1_000), resolve_llm=lambda _: llm, prompts=shipped_prompts()
    )

    assert result.status is DebateStatus.TRUNCATED_BUDGET
    assert len(llm.calls) == 2, "two answers fit in $0.30 together; the third was not asked"
    assert result.cost_usd == pytest.approx(0.286)
    assert result.cost_usd <= 0.30
    # The two answers already asked were waited for and recorded: they are paid for.
    asked = sorted(PANELIST.findall(call.messages[-1].content)[0] for call in llm.calls)
    assert sorted(turn.speaker for turn in result.transcript) == asked
    assert "held for calls in flight" in (result.error or "")
    assert result.verdict.escalate
    assert any("budget" in reason for reason in result.verdict.escalation_reasons)


async def test_what_stored_turns_cost_counts_even_when_the_debate_does_not_replay_them() -> None:
    """A triage turn is stored before the debate and never replayed by it, and was paid for."""
    triage = TurnRecord(
        round=0,
        role=Role.TRIAGE,
        provider="fake",
        model="fake-model",
        prompt_sha256="0" * 64,
        request_sha256="0" * 64,
        usage=Usage(input_tokens=1_000),
        cost_usd=0.99,
        latency_s=1.0,
        raw_text="{}",
        parsed={},
    )
    pricing = Pricing(input_per_mtok=10.0)
    llm = DebateScript().llm(pricing=pricing, usage=Usage(input_tokens=1_000))
    spec = DebateSpec(question="Ship it?", default_model=FAKE, budget_usd=1.0)

    result = await run_debate(
        spec, resolve_llm=lambda _: llm, prompts=shipped_prompts(), recorded=[triage]
    )

    assert llm.calls == []
    assert result.status is DebateStatus.TRUNCATED_BUDGET
    assert "$0.99 spent" in (result.error or "")


# --- the property: over random debates, nothing passes the ceiling ---------------------------


class BilledWithinWorstCase:
    """Schema-filled replies billed at random usage no larger than the request's worst case
    (input as a byte-level tokenizer counts it, at random from one token per byte to about one
    per three, split at random into plain, cached and written input; output within
    `max_tokens`, often exactly at it), after a random short delay so that concurrent calls end
    in a random order."""

    provider = "fake"

    def __init__(self, pricing: Pricing, rng: random.Random) -> None:
        self.pricing = pricing
        self.rng = rng
        self.inner = SchemaFillingLLM(seed=rng.randrange(1_000), record=False)
        self.tokenizer = LineTokenizer(
            seed=rng.randrange(1_000),
            longest=rng.choice([1, 2, 6]),
            worst_share=rng.choice([0.0, 0.2, 1.0]),
        )
        self.billed: list[float] = []

    def price_of(self, model: str) -> Pricing:
        return self.pricing

    def _upto(self, most: int) -> int:
        return most if self.rng.random() < 0.4 else self.rng.randint(0, most)

    async def complete(self, request: LLMRequest) -> Completion:
        await asyncio.sleep(self.rng.choice([0.0, 0.0, 0.0005, 0.001, 0.002]))
        reply = await self.inner.complete(request)
        input_tokens = self.tokenizer.prompt_tokens(request)
        written = self._upto(input_tokens)
        cached = self.rng.randint(0, input_tokens - written)
        usage = Usage(
            input_tokens=input_tokens,
            output_tokens=self._upto(request.max_tokens),
            cached_input_tokens=cached,
            cache_write_input_tokens=written,
        )
        cost = self.pricing.cost(usage)
        self.billed.append(cost)
        return reply.model_copy(update={"usage": usage, "cost_usd": cost})


def random_pricing(rng: random.Random) -> Pricing:
    if rng.random() < 0.1:
        return Pricing()
    plain = rng.uniform(0.05, 15.0)
    return Pricing(
        input_per_mtok=plain,
        output_per_mtok=rng.uniform(0.2, 75.0),
        cached_input_per_mtok=rng.choice([None, plain / 10]),
        cache_write_per_mtok=rng.choice([None, plain * 1.25]),
    )


def random_spec(rng: random.Random) -> DebateSpec:
    protocol = rng.choice(list(PROTOCOLS))
    model = FAKE.model_copy(update={"max_tokens": rng.choice([16, 64, 256, 1024, 4096])})
    count = {"structured": 2, "stances": rng.randint(2, 4)}.get(protocol, rng.randint(2, 5))
    debaters = [
        Participant(
            role=Role.DEBATER,
            name=f"p{index}",
            stance=f"p{index} is right" if protocol == "stances" else None,
            model=model,
        )
        for index in range(count)
    ]
    options: dict[str, Any] = {}
    extra: list[Participant] = []
    if protocol == "panel":
        options["aggregation"] = rng.choice(["majority", "weighted", "judge"])
        if rng.random() < 0.3:
            extra.append(Participant(role=Role.ROUTER, model=model))
    size = rng.choice([0, 200, 5_000, 30_000])
    text = "".join(rng.choice(["clause ", "règle ", "条款 ", "🙂 "]) for _ in range(size // 7))
    return DebateSpec(
        question="Should we adopt the proposal?",
        protocol=protocol,
        context=[ContextDocument(title="case", text=text)] if text else [],
        default_model=model,
        participants=[*(debaters if protocol != "adversarial" else []), *extra],
        max_rounds=rng.randint(1, min(3, PROTOCOLS[protocol].max_rounds)),
        budget_usd=round(10 ** rng.uniform(-2.5, 1.0), 6),
        options=options,
    )


@pytest.fixture
def refusals(monkeypatch: pytest.MonkeyPatch) -> list[BudgetExhausted]:
    """Every refusal the meter makes, wherever the protocol catches it."""
    seen: list[BudgetExhausted] = []
    check = CostMeter.check

    def watched(meter: CostMeter, call: CallBound) -> None:
        try:
            check(meter, call)
        except BudgetExhausted as refusal:
            seen.append(refusal)
            raise

    monkeypatch.setattr(CostMeter, "check", watched)
    return seen


@pytest.mark.parametrize("seed", range(60))
async def test_no_debate_spends_past_its_budget(seed: int, refusals: list[BudgetExhausted]) -> None:
    rng = random.Random(seed)
    spec = random_spec(rng)
    llm = BilledWithinWorstCase(random_pricing(rng), rng)

    result = await run_debate(spec, resolve_llm=lambda _: llm, prompts=shipped_prompts())

    assert spec.budget_usd is not None
    spent = sum(llm.billed)
    assert spent <= spec.budget_usd + 1e-12, f"{spec.protocol}: ${spent} of ${spec.budget_usd}"
    assert result.cost_usd <= spent + 1e-12
    # A refused independent judge leaves the debate complete, its confidence unverified.
    judges = [r for r in refusals if "independent_judge call" in str(r)]
    if len(judges) < len(refusals):
        assert result.status is DebateStatus.TRUNCATED_BUDGET, (spec.protocol, result.error)
        assert result.verdict.escalate
    else:
        assert result.status is DebateStatus.COMPLETE, (spec.protocol, result.error)
        # A judge asked beside the deciding call and refused there (the calls in flight held
        # part of the budget) is asked again after the verdict, and may then answer.
        unanswered = [j for j in result.judgments if j.decision is None]
        assert (DebateFlag.CONFIDENCE_UNVERIFIED in result.flags) == bool(unanswered)
        assert len(judges) >= len(unanswered)
