"""Today's OpenAI models through the real `openai` SDK against a stand-in that enforces their
documented request rules (tests/integration/openai_standin.py): every protocol completes on a
current reasoning model and on an older one, each sent the request shape its model accepts;
a refused parameter or response format is switched once and remembered; usage counts reasoning
and cached tokens and prices them from the catalogue."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bot.settings import RoleModel, Settings
from bot.wiring import DebateServices, build_services
from engine.catalog import Catalog
from engine.errors import LLMError
from engine.llm import LLMRequest, Message
from engine.models import DebateResult, DebateStatus, ModelSettings, Usage
from engine.pricing import Pricing
from engine.providers.openai_chat import OpenAIChatLLM
from engine.providers.schemas import StructuredMode
from engine.runner import run_debate
from tests.integration.openai_standin import Exchange, OpenAIStandIn, Profile

KEY = "sk-test-openai-standin-0123456789"
QUESTION = "Should we move our nightly batch jobs from cron to Kubernetes CronJobs?"
PROTOCOLS = ["adversarial", "stances", "consensus", "structured", "panel"]
STANCES: dict[str, dict[str, Any]] = {
    "stances": {"stances_for": ["keep cron"], "stances_against": ["move to CronJobs"]}
}
CATALOG = Catalog.load()
CURRENT = {
    "debaters": RoleModel(model="gpt-6-luna", effort="low"),
    "moderator": RoleModel(model="gpt-6.2-sol", effort="high"),
}
EFFORTS = {"gpt-6-luna": "low", "gpt-6.2-sol": "high"}
OLDER = {"debaters": RoleModel(model="gpt-4.1"), "moderator": RoleModel(model="gpt-4.1")}
# A model the catalogue does not know yet, with the rules of a current reasoning model.
NEW_MODEL = "gpt-6.3-nova"
NEW_PROFILE = Profile(efforts=("low", "medium", "high", "xhigh", "max"), default_effort="medium")
NEW_PRICE = Pricing(input_per_mtok=2.0, output_per_mtok=10.0)


@pytest.fixture
async def standin() -> AsyncIterator[OpenAIStandIn]:
    server = OpenAIStandIn()
    await server.start()
    yield server
    await server.stop()


def settings_for(standin: OpenAIStandIn, roles: dict[str, RoleModel], **more: Any) -> Settings:
    return Settings(
        provider="openai",
        openai_api_key=SecretStr(KEY),
        openai_base_url=f"{standin.url}/v1",
        cross_family_moderator=False,
        roles=roles,
        llm_max_attempts=2,
        llm_backoff_base_s=0.01,
        **more,
    )


async def debate(
    services: DebateServices, protocol: str, *, check: bool = True, close: bool = True
) -> DebateResult:
    """One debate of one round; `close` closes the providers after it (and forgets what they
    learned, as a restart would)."""
    spec = services.policy.spec(QUESTION, protocol=protocol, rounds=1, **STANCES.get(protocol, {}))
    if check:
        services.registry.check({p.role.value: p.model for p in spec.participants})
    try:
        return await run_debate(spec, resolve_llm=services.resolve_llm, prompts=services.prompts)
    finally:
        if close:
            await services.registry.aclose()


def billed(exchanges: list[Exchange]) -> float:
    """What OpenAI bills for the answered exchanges, at the catalogue's prices: uncached input,
    cache reads and cache writes at their rates, output (reasoning included) at the output rate."""
    total = 0.0
    for exchange in exchanges:
        if exchange.status != 200:
            continue
        price = CATALOG.require_price("openai", exchange.model)
        usage = exchange.usage
        read = usage["prompt_tokens_details"]["cached_tokens"]
        written = usage["prompt_tokens_details"].get("cache_write_tokens", 0)
        uncached = usage["prompt_tokens"] - read - written
        total += (
            uncached * price.input_per_mtok
            + read * (price.cached_input_per_mtok or price.input_per_mtok)
            + written * (price.cache_write_per_mtok or price.input_per_mtok)
            + usage["completion_tokens"] * price.output_per_mtok
        ) / 1e6
    return total


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_protocol_completes_on_current_reasoning_models(
    standin: OpenAIStandIn, protocol: str
) -> None:
    services = build_services(settings_for(standin, CURRENT))
    result = await debate(services, protocol)

    assert result.status is DebateStatus.COMPLETE, result.error
    exchanges = standin.exchanges
    assert all(e.status == 200 for e in exchanges), "every request had a shape its model takes"
    assert len(exchanges) == sum(1 + turn.reasks for turn in result.transcript)
    used = {e.model for e in exchanges}
    assert "gpt-6-luna" in used
    # With one round, consensus and panel end on their debaters' votes; the others are judged.
    assert ("gpt-6.2-sol" in used) is (protocol in ("adversarial", "stances", "structured"))
    for exchange in exchanges:
        body = exchange.body
        assert "temperature" not in body, "a reasoning model takes no temperature"
        assert "max_tokens" not in body
        assert body["max_completion_tokens"] == 4096
        assert body["reasoning_effort"] == EFFORTS[exchange.model]
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["strict"] is True
    usage = result.usage
    served = [e.usage for e in exchanges]
    assert usage.reasoning_tokens == sum(
        u["completion_tokens_details"]["reasoning_tokens"] for u in served
    )
    assert usage.reasoning_tokens > 0
    assert usage.output_tokens == sum(u["completion_tokens"] for u in served)
    assert usage.cached_input_tokens == sum(
        u["prompt_tokens_details"]["cached_tokens"] for u in served
    )
    assert usage.cache_write_input_tokens == sum(
        u["prompt_tokens_details"]["cache_write_tokens"] for u in served
    )
    assert result.cost_usd == pytest.approx(billed(exchanges))


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_protocol_completes_on_an_older_model(
    standin: OpenAIStandIn, protocol: str
) -> None:
    services = build_services(settings_for(standin, OLDER, temperature=0.4))
    result = await debate(services, protocol)

    assert result.status is DebateStatus.COMPLETE, result.error
    assert all(e.status == 200 for e in standin.exchanges)
    for exchange in standin.exchanges:
        body = exchange.body
        assert body["model"] == "gpt-4.1"
        assert body["temperature"] == 0.4, "a model without reasoning samples at the role's"
        assert body["max_completion_tokens"] == 1024
        assert "reasoning_effort" not in body
    assert result.usage.reasoning_tokens == 0
    assert result.cost_usd == pytest.approx(billed(standin.exchanges))


async def test_effort_none_gives_a_model_that_offers_it_the_roles_temperature(
    standin: OpenAIStandIn,
) -> None:
    roles = {"debaters": RoleModel(model="gpt-6-luna", effort="none", temperature=0.7)}
    roles["moderator"] = CURRENT["moderator"]
    result = await debate(build_services(settings_for(standin, roles)), "adversarial")

    assert result.status is DebateStatus.COMPLETE, result.error
    luna = standin.of("gpt-6-luna")
    assert luna
    assert all(e.status == 200 for e in standin.exchanges)
    assert all(e.body["reasoning_effort"] == "none" for e in luna)
    assert all(e.body["temperature"] == 0.7 for e in luna)
    assert all("temperature" not in e.body for e in standin.of("gpt-6.2-sol"))
    assert all(e.usage["completion_tokens_details"]["reasoning_tokens"] == 0 for e in luna)


async def test_an_effort_the_model_does_not_take_is_refused_before_any_request(
    standin: OpenAIStandIn,
) -> None:
    roles = {**CURRENT, "moderator": RoleModel(model="gpt-6.2-sol", effort="none")}
    services = build_services(settings_for(standin, roles))
    with pytest.raises(LLMError) as refused:
        services.registry.check(services.policy.models())
    message = str(refused.value)
    assert "DEBATEBOT_ROLES__MODERATOR__EFFORT" in message
    assert "low, medium, high, xhigh, max" in message
    # A debate started without the check (from Slack) fails on it without asking the model.
    result = await debate(services, "adversarial", check=False)
    assert result.status is DebateStatus.FAILED
    assert "gpt-6.2-sol takes the effort levels" in (result.error or "")
    assert standin.of("gpt-6.2-sol") == []

    older = build_services(
        settings_for(standin, {"critic": RoleModel(model="gpt-4.1", effort="low")})
    )
    with pytest.raises(LLMError, match=r"gpt-4.1 takes no effort level.*CRITIC__EFFORT"):
        older.registry.check(older.policy.models())


async def test_refused_temperature_and_effort_are_dropped_once_and_remembered(
    standin: OpenAIStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="debatebot.providers")
    standin.profiles[NEW_MODEL] = NEW_PROFILE
    roles = {"debaters": RoleModel(model=NEW_MODEL, effort="none")}
    roles["moderator"] = RoleModel(model=NEW_MODEL)
    settings = settings_for(standin, roles, prices={f"openai:{NEW_MODEL}": NEW_PRICE})
    result = await debate(build_services(settings), "adversarial")

    assert result.status is DebateStatus.COMPLETE, result.error
    refused = [e.param for e in standin.exchanges if e.status != 200]
    assert refused == ["reasoning_effort", "temperature"], "each refused once, in that order"
    first, second, *rest = standin.exchanges
    assert first.body["reasoning_effort"] == "none"
    assert "reasoning_effort" not in second.body
    assert rest
    assert all("temperature" not in e.body and "reasoning_effort" not in e.body for e in rest)
    assert all(e.status == 200 for e in rest)
    warnings = [r.getMessage() for r in caplog.records]
    assert sum("refused reasoning_effort" in w for w in warnings) == 1
    assert sum("refused a temperature" in w for w in warnings) == 1
    assert any("DEBATEBOT_ROLES__<ROLE>__EFFORT" in w for w in warnings)


async def test_concurrent_refusals_switch_a_model_once(
    standin: OpenAIStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="debatebot.providers")
    standin.profiles[NEW_MODEL] = NEW_PROFILE
    roles = {"debaters": RoleModel(model=NEW_MODEL), "moderator": RoleModel(model=NEW_MODEL)}
    settings = settings_for(standin, roles, prices={f"openai:{NEW_MODEL}": NEW_PRICE})
    services = build_services(settings)
    try:
        results = await asyncio.gather(*(debate(services, "panel", close=False) for _ in range(3)))
    finally:
        await services.registry.aclose()

    assert all(r.status is DebateStatus.COMPLETE for r in results), [r.error for r in results]
    refused = [e for e in standin.exchanges if e.status != 200]
    # Three debates on one adapter start together: their first turns all went out with a
    # temperature before the first refusal came back.
    assert len(refused) >= 2
    assert {e.param for e in refused} == {"temperature"}
    answered = [e for e in standin.exchanges if e.status == 200]
    assert all("temperature" not in e.body for e in answered)
    warnings = [r.getMessage() for r in caplog.records]
    assert sum("refused a temperature" in w for w in warnings) == 1


async def test_a_server_refusing_max_tokens_gets_max_completion_tokens_from_then_on(
    standin: OpenAIStandIn,
) -> None:
    """An OpenAI-compatible proxy in front of a current model: no catalogue, so the role's
    settings go out as they are, and the server's refusals teach the adapter."""
    settings = Settings(
        provider="openai-compatible",
        openai_compatible_base_url=f"{standin.url}/v1",
        openai_compatible_model="gpt-6-luna",
        openai_compatible_api_key=SecretStr(KEY),
        llm_max_attempts=2,
    )
    result = await debate(build_services(settings), "adversarial")

    assert result.status is DebateStatus.COMPLETE, result.error
    refused = [e.param for e in standin.exchanges if e.status != 200]
    assert refused == ["max_tokens", "temperature"]
    answered = [e for e in standin.exchanges if e.status == 200]
    assert len(answered) == len(standin.exchanges) - 2
    assert all(e.body["max_completion_tokens"] == 1024 for e in answered)
    assert all("max_tokens" not in e.body and "temperature" not in e.body for e in answered)


async def test_a_refused_response_format_is_switched_once_and_no_debate_fails(
    standin: OpenAIStandIn, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="debatebot.providers")
    model = "gpt-4-house"
    standin.profiles[model] = Profile(takes_max_tokens=True, structured_outputs=False)
    entry = {
        "provider": "openai",
        "id": model,
        "prices": {"input_per_mtok": 1, "output_per_mtok": 2},
        "structured": ["json_schema", "json_object", "prompt"],
        "temperature": True,
        "thinking": "none",
        "source": "a team's own deployment",
        "checked": "2026-11-25",
    }
    models_file = tmp_path / "models.json"
    models_file.write_text(json.dumps({"models": [entry]}))
    roles = {"debaters": RoleModel(model=model), "moderator": RoleModel(model=model)}
    services = build_services(settings_for(standin, roles, models_file=models_file))
    spec_model = ModelSettings(provider="openai", model=model)
    # The stand-in answers JSON mode from the field list in the prompt, which names the output
    # type for these protocols (the structured protocol's per-debate types it cannot tell apart).
    for protocol in ("adversarial", "stances"):
        result = await debate(services, protocol, close=False)
        assert result.status is DebateStatus.COMPLETE, result.error

    kinds = [e.body["response_format"]["type"] for e in standin.exchanges]
    assert kinds.count("json_schema") == 1, "refused once, then remembered"
    assert standin.exchanges[0].status == 400
    assert all(e.status == 200 for e in standin.exchanges[1:])
    assert set(kinds[1:]) == {"json_object"}
    adapter = services.resolve_llm(spec_model)
    assert isinstance(adapter, OpenAIChatLLM)
    assert adapter.mode_for(model) is StructuredMode.JSON_OBJECT
    warnings = [r.getMessage() for r in caplog.records]
    assert sum("refused structured output mode json_schema" in w for w in warnings) == 1
    await services.registry.aclose()


async def test_a_model_the_account_cannot_use_is_a_clear_error_not_retried(
    standin: OpenAIStandIn,
) -> None:
    settings = settings_for(standin, {}, prices={"openai:gpt-6-astra-pro": NEW_PRICE})
    services = build_services(settings)
    llm = services.resolve_llm(ModelSettings(provider="openai", model="gpt-6-astra-pro"))
    request = LLMRequest(model="gpt-6-astra-pro", messages=[Message(role="user", content="Hi")])
    with pytest.raises(LLMError, match=r"model not available: .*retired or misspelt.*HTTP 404"):
        await llm.complete(request)
    assert len(standin.exchanges) == 1
    await services.registry.aclose()


async def test_usage_counts_reasoning_cache_reads_and_writes_and_prices_them(
    standin: OpenAIStandIn,
) -> None:
    services = build_services(settings_for(standin, {}))
    llm = services.resolve_llm(ModelSettings(provider="openai", model="gpt-6-luna"))
    # Over 1,024 tokens of shared prefix, so the second call reads it from the cache.
    preamble = "Context for the debate. " * 400
    request = LLMRequest(
        model="gpt-6-luna",
        effort="high",
        messages=[
            Message(role="system", content=preamble),
            Message(role="user", content="Reply in JSON with one field, answer."),
        ],
        output_schema={
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        },
        schema_name="Answer",
    )
    first = await llm.complete(request)
    second = await llm.complete(request)
    await services.registry.aclose()

    served = standin.exchanges[1].usage
    assert second.usage == Usage(
        input_tokens=served["prompt_tokens"],
        output_tokens=served["completion_tokens"],
        cached_input_tokens=served["prompt_tokens_details"]["cached_tokens"],
        cache_write_input_tokens=served["prompt_tokens_details"]["cache_write_tokens"],
        reasoning_tokens=served["completion_tokens_details"]["reasoning_tokens"],
    )
    assert second.usage.cached_input_tokens >= 1_024
    assert second.usage.reasoning_tokens == 512, "effort high"
    assert first.usage.cached_input_tokens == 0
    assert first.usage.cache_write_input_tokens > 0
    # gpt-6-luna: $0.10 input, $0.01 cache read, $0.125 cache write, $0.50 output per MTok.
    for completion, exchange in zip((first, second), standin.exchanges, strict=True):
        usage = completion.usage
        uncached = usage.input_tokens - usage.cached_input_tokens - usage.cache_write_input_tokens
        expected = (
            uncached * 0.10
            + usage.cached_input_tokens * 0.01
            + usage.cache_write_input_tokens * 0.125
            + usage.output_tokens * 0.50
        ) / 1e6
        assert completion.cost_usd == pytest.approx(expected)
        assert completion.cost_usd == pytest.approx(billed([exchange]))
