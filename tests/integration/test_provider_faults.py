"""The real OpenAI and Anthropic SDKs against a loopback server that injects faults: rate limits
with Retry-After, 5xx bursts, hangs past the timeout, malformed and truncated JSON, refused
response formats, and an outage that outlasts the retries."""

from __future__ import annotations

import time
from typing import Any

import pytest

from engine.catalog import Catalog
from engine.errors import LLMError
from engine.llm import LLM, LLMRequest, Message, complete_structured
from engine.models import DebateSpec, DebateStatus, ModelSettings, ProposerTurn, Role, Usage
from engine.pricing import FREE
from engine.providers.anthropic_messages import AnthropicLLM
from engine.providers.openai_chat import OpenAIChatLLM
from engine.providers.retry import RetryPolicy
from engine.providers.schemas import StructuredMode
from engine.runner import run_debate
from tests.helpers import shipped_prompts
from tests.integration.llm_server import ModelServer, Step, schema_name

KEY = "sk-test-fault-injection-key-0123456789"
FAST = RetryPolicy(max_attempts=5, base_delay_s=0.01, max_delay_s=0.05, total_budget_s=30)
PRICES = Catalog.load()
OPENAI_MODEL = "gpt-4.1-mini"
ANTHROPIC_MODEL = "claude-haiku-4-5"


def openai_llm(
    server: ModelServer,
    *,
    provider: str = "openai",
    modes: tuple[StructuredMode, ...] = (StructuredMode.JSON_SCHEMA,),
    timeout_s: float = 10.0,
    retry: RetryPolicy = FAST,
) -> OpenAIChatLLM:
    return OpenAIChatLLM(
        provider=provider,
        api_key=KEY,
        base_url=f"{server.url}/v1",
        modes=modes,
        price_of=lambda model: PRICES.price(provider, model) or FREE,
        facts_of=lambda model: PRICES.find(provider, model),
        timeout_s=timeout_s,
        retry=retry,
        key_variable="DEBATEBOT_OPENAI_API_KEY",
    )


def anthropic_llm(
    server: ModelServer, *, timeout_s: float = 10.0, retry: RetryPolicy = FAST
) -> AnthropicLLM:
    return AnthropicLLM(
        api_key=KEY,
        base_url=server.url,
        price_of=lambda model: PRICES.require_price("anthropic", model),
        facts_of=lambda model: PRICES.find("anthropic", model),
        timeout_s=timeout_s,
        retry=retry,
    )


def build(api: str, server: ModelServer, **options: Any) -> tuple[LLM, str]:
    if api == "openai":
        return openai_llm(server, **options), OPENAI_MODEL
    return anthropic_llm(server, **options), ANTHROPIC_MODEL


def proposer_request(model: str) -> LLMRequest:
    return LLMRequest(
        model=model,
        messages=[
            Message(role="system", content="You debate. Question: adopt ADR-42?"),
            Message(role="user", content="Argue for it as JSON."),
        ],
    )


APIS = ["openai", "anthropic"]


@pytest.mark.parametrize("api", APIS)
async def test_429_with_retry_after_waits_as_told_then_succeeds(
    server: ModelServer, api: str
) -> None:
    server.script(api, Step(status=429, headers={"Retry-After": "1"}, error="slow down"))
    llm, model = build(api, server)
    started = time.monotonic()
    result = await complete_structured(llm, proposer_request(model), ProposerTurn)
    elapsed = time.monotonic() - started
    assert elapsed >= 1.0, "the client came back before Retry-After"
    assert len(server.requests) == 2
    assert result.value.thesis
    assert result.reasks == 0


@pytest.mark.parametrize("api", APIS)
async def test_three_500s_then_success(server: ModelServer, api: str) -> None:
    server.script(api, Step(status=500), Step(status=500), Step(status=500))
    llm, model = build(api, server)
    result = await complete_structured(llm, proposer_request(model), ProposerTurn)
    assert len(server.requests) == 4
    assert result.value.supporting_arguments


@pytest.mark.parametrize("api", APIS)
async def test_a_hang_past_the_timeout_is_abandoned_and_retried(
    server: ModelServer, api: str
) -> None:
    server.script(api, Step(hang_s=5.0))
    llm, model = build(api, server, timeout_s=0.5)
    started = time.monotonic()
    result = await complete_structured(llm, proposer_request(model), ProposerTurn)
    assert time.monotonic() - started < 4.0, "the client waited for the hanging response"
    assert len(server.requests) == 2
    assert result.value.thesis


async def test_a_hang_on_every_attempt_gives_a_timeout_error(server: ModelServer) -> None:
    server.script("openai", Step(hang_s=3.0), Step(hang_s=3.0))
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.01, total_budget_s=30)
    llm = openai_llm(server, timeout_s=0.3, retry=policy)
    with pytest.raises(LLMError, match=r"failed 2 times.*did not answer within 0.3s"):
        await llm.complete(proposer_request(OPENAI_MODEL))


@pytest.mark.parametrize("api", APIS)
async def test_malformed_json_is_reasked_with_the_problem(server: ModelServer, api: str) -> None:
    server.script(api, Step(text="Sure! My answer: {thesis: adopt it, because reasons"))
    llm, model = build(api, server)
    result = await complete_structured(llm, proposer_request(model), ProposerTurn)
    assert result.reasks == 1
    reask = server.requests[1].body["messages"][-1]
    reask_text = reask["content"] if isinstance(reask["content"], str) else str(reask["content"])
    assert "Your reply was invalid" in reask_text


async def test_truncated_json_is_repaired_when_the_rest_validates(server: ModelServer) -> None:
    cut = '{"thesis": "Adopt ADR-42", "supporting_arguments": ["It halves the on-call load"'
    server.script("openai", Step(text=cut, finish="length"))
    result = await complete_structured(
        openai_llm(server), proposer_request(OPENAI_MODEL), ProposerTurn
    )
    assert result.reasks == 0
    assert result.value.supporting_arguments == ["It halves the on-call load"]


async def test_truncated_json_that_does_not_validate_is_reasked(server: ModelServer) -> None:
    server.script("openai", Step(text='{"thesis": "Adopt ADR-42", "suppo', finish="length"))
    result = await complete_structured(
        openai_llm(server), proposer_request(OPENAI_MODEL), ProposerTurn
    )
    assert result.reasks == 1
    assert len(server.requests) == 2


async def test_a_refused_response_format_falls_back_and_is_remembered(
    server: ModelServer,
) -> None:
    llama_refusal = (
        "1 validation error:\n {'type': 'literal_error', 'loc': ('body', 'response_format',"
        " 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}"
    )
    server.script("openai", Step(status=500, error=llama_refusal))
    llm = openai_llm(
        server,
        provider="openai-compatible",
        modes=(StructuredMode.JSON_SCHEMA, StructuredMode.JSON_OBJECT_SCHEMA),
    )
    first = await complete_structured(llm, proposer_request("smollm2"), ProposerTurn)
    second = await complete_structured(llm, proposer_request("smollm2"), ProposerTurn)
    assert first.value.thesis
    assert second.value.thesis
    formats = [r.body["response_format"] for r in server.requests]
    assert [f["type"] for f in formats] == ["json_schema", "json_object", "json_object"]
    assert "properties" in formats[1]["schema"]
    assert llm.mode_for("smollm2") is StructuredMode.JSON_OBJECT_SCHEMA


async def test_the_last_mode_refused_is_a_clear_error(server: ModelServer) -> None:
    server.script("openai", Step(status=400, error="response_format json_schema not supported"))
    llm = openai_llm(server, provider="openai-compatible")
    with pytest.raises(LLMError, match="add `json_object` or `prompt`"):
        await llm.complete(proposer_request("m").model_copy(update={"output_schema": {}}))


async def test_a_refused_key_is_not_retried_and_names_the_variable(server: ModelServer) -> None:
    server.script("openai", Step(status=401, error=f"Incorrect API key provided: {KEY}"))
    with pytest.raises(LLMError) as failure:
        await openai_llm(server).complete(proposer_request(OPENAI_MODEL))
    assert len(server.requests) == 1
    assert "DEBATEBOT_OPENAI_API_KEY" in str(failure.value)
    assert KEY not in str(failure.value)


async def test_openai_usage_counts_cached_tokens_and_prices_them(server: ModelServer) -> None:
    server.script("openai", Step(text="{}"))
    completion = await openai_llm(server).complete(
        proposer_request(OPENAI_MODEL).model_copy(update={"output_schema": {}})
    )
    assert completion.usage == Usage(input_tokens=1_000, output_tokens=100, cached_input_tokens=600)
    # gpt-4.1-mini: $0.40 input, $0.10 cached input, $1.60 output per million tokens.
    assert completion.cost_usd == pytest.approx((400 * 0.40 + 600 * 0.10 + 100 * 1.60) / 1e6)


@pytest.mark.parametrize(
    ("model", "asked"),
    [("claude-opus-5-5", "output_config"), (ANTHROPIC_MODEL, "tool_choice")],
)
async def test_anthropic_cache_control_and_cache_pricing_in_either_structured_mode(
    server: ModelServer, model: str, asked: str
) -> None:
    result = await complete_structured(anthropic_llm(server), proposer_request(model), ProposerTurn)
    body = server.requests[0].body
    if asked == "tool_choice":
        # An older model: structured output is a forced tool call, and thinking stays off.
        assert body["tool_choice"] == {"type": "tool", "name": "ProposerTurn"}
        assert body["tools"][0]["input_schema"]["properties"].keys() >= {"thesis"}
        assert "thinking" not in body
        assert "output_config" not in body
    else:
        # A current model: structured outputs, adaptive thinking, no tools.
        schema = body["output_config"]["format"]["schema"]
        assert body["output_config"]["format"]["type"] == "json_schema"
        assert schema["properties"].keys() >= {"thesis"}
        assert body["thinking"] == {"type": "adaptive"}
        assert "tools" not in body
        assert "tool_choice" not in body
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all(isinstance(m["content"], str) for m in body["messages"])
    thinking = 40 if "thinking" in body else 0
    assert result.usage == Usage(
        input_tokens=1_000,
        output_tokens=100,
        cached_input_tokens=700,
        cache_write_input_tokens=100,
        reasoning_tokens=thinking,
    )
    price = PRICES.require_price("anthropic", model)
    assert price.cached_input_per_mtok is not None
    assert price.cache_write_per_mtok is not None
    # 200 plain input, 700 cache reads, 100 cache writes, 100 output (thinking included):
    # claude-opus-5-5 $4 / $0.20 / $5 / $20, claude-haiku-4-5 $1 / $0.10 / $1.25 / $5 per MTok.
    expected = (
        200 * price.input_per_mtok
        + 700 * price.cached_input_per_mtok
        + 100 * price.cache_write_per_mtok
        + 100 * price.output_per_mtok
    ) / 1e6
    assert result.cost_usd == pytest.approx(expected)


@pytest.mark.parametrize("api", APIS)
async def test_an_outage_outlasting_the_retries_fails_the_debate_with_its_transcript(
    server: ModelServer, api: str
) -> None:
    server.always_fail("ModeratorTurn", Step(status=503, error="overloaded"))
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.01, total_budget_s=30)
    llm, model = build(api, server, retry=policy)
    spec = DebateSpec(
        question="Should we adopt ADR-42?",
        default_model=ModelSettings(provider=api, model=model),
        budget_usd=1.0,
    )
    result = await run_debate(spec, resolve_llm=lambda _: llm, prompts=shipped_prompts())
    assert result.status is DebateStatus.FAILED
    # The independent judge is asked beside the last moderation (it reads the record blind to
    # it), so it answered, and was paid, before the moderator's outage failed the debate.
    assert [turn.role for turn in result.transcript] == [
        Role.FRAMING,
        Role.PROPOSER,
        Role.CRITIC,
        Role.REBUTTAL,
        Role.INDEPENDENT_JUDGE,
    ]
    assert result.error is not None
    assert "failed 3 times" in result.error
    asked = [schema_name(r.api, r.body) for r in server.requests]
    assert asked.count("ModeratorTurn") == 3
    assert result.verdict.escalate
    assert result.cost_usd > 0
