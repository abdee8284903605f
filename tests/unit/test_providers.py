"""Provider plumbing without the network: prices, retry policy, request building, role models."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from bot.providers import ProviderRegistry, role_models
from bot.settings import RoleModel, Settings, SettingsError
from engine.catalog import Catalog, check_effort
from engine.errors import LLMError, ProviderUnavailableError, RetriesExhaustedError
from engine.llm import LLMRequest, Message
from engine.models import Effort, ModelSettings, Usage
from engine.pricing import Pricing, PricingError, read_prices
from engine.providers.fake import FunctionLLM
from engine.providers.openai_chat import usage_of
from engine.providers.openai_refusals import refused_parameter
from engine.providers.openai_request import Learned, response_format, sampling_params
from engine.providers.retry import RetryPolicy, parse_retry_after, with_retries
from engine.providers.schemas import StructuredMode, strict_schema

# --- cost --------------------------------------------------------------------------------


def test_cost_prices_cache_reads_and_writes_apart() -> None:
    price = Pricing(
        input_per_mtok=3.0,
        cached_input_per_mtok=0.3,
        cache_write_per_mtok=3.75,
        output_per_mtok=15.0,
    )
    usage = Usage(
        input_tokens=10_000,
        cached_input_tokens=6_000,
        cache_write_input_tokens=2_000,
        output_tokens=1_000,
    )
    # 2,000 plain input at $3, 6,000 cache reads at $0.30, 2,000 writes at $3.75, 1,000 out at $15
    assert price.cost(usage) == pytest.approx((6_000 + 1_800 + 7_500 + 15_000) / 1e6)


def test_cost_without_cache_rates_charges_cached_tokens_as_input() -> None:
    usage = Usage(input_tokens=1_000, cached_input_tokens=400, output_tokens=10)
    assert Pricing(input_per_mtok=1.0, output_per_mtok=2.0).cost(usage) == pytest.approx(1_020e-6)


def test_catalogue_prices_dated_snapshots_of_a_listed_model_and_nothing_else() -> None:
    catalog = Catalog.load()
    mini = catalog.price("openai", "gpt-4.1-mini")
    assert catalog.price("openai", "gpt-4.1-mini-2025-04-14") == mini
    assert catalog.price("anthropic", "claude-opus-4-5-20251101") == catalog.price(
        "anthropic", "claude-opus-4-5"
    )
    # A name that merely starts like a listed one is not that model.
    assert catalog.price("anthropic", "claude-opus-5-6") is None
    assert catalog.price("anthropic", "no-such-model") is None
    with pytest.raises(PricingError, match="DEBATEBOT_PRICES"):
        catalog.require_price("anthropic", "no-such-model")


def test_a_prices_file_and_overrides_price_over_the_catalogue(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"openai:house": {"input_per_mtok": 9, "output_per_mtok": 9}}))
    prices = {**read_prices(path), "openai:gpt-6-luna": Pricing(input_per_mtok=1)}
    catalog = Catalog.load(prices=prices)
    assert catalog.require_price("openai", "house").input_per_mtok == 9
    assert catalog.require_price("openai", "gpt-6-luna").input_per_mtok == 1
    assert catalog.require_price("openai", "gpt-6.2-sol").input_per_mtok == 2
    path.write_text("{not json")
    with pytest.raises(PricingError, match="cannot read the prices file"):
        read_prices(path)


# --- retries -----------------------------------------------------------------------------


def test_retry_after_header_forms() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_grows_is_capped_and_honours_retry_after() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0)
    rng = random.Random(1)
    delays = [policy.delay(n, None, rng) for n in range(1, 7)]
    for attempt, delay in enumerate(delays, start=1):
        ceiling = min(8.0, 2.0 ** (attempt - 1))
        assert ceiling / 2 <= delay <= ceiling
    assert 5.0 <= policy.delay(1, 5.0, rng) <= 5.25


async def test_retries_stop_at_the_attempt_limit_and_say_why() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def failing() -> str:
        raise LLMError("HTTP 503", retryable=True, retry_after_s=0.5)

    policy = RetryPolicy(max_attempts=3)
    with pytest.raises(RetriesExhaustedError, match=r"failed 3 times.*HTTP 503"):
        await with_retries(failing, policy=policy, what="model x", sleep=sleep)
    assert len(waits) == 2
    assert all(w >= 0.5 for w in waits)


async def test_retries_stop_when_the_time_budget_would_be_passed() -> None:
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    async def failing() -> str:
        raise LLMError("HTTP 429", retryable=True, retry_after_s=4.0)

    policy = RetryPolicy(max_attempts=100, total_budget_s=10.0)
    with pytest.raises(RetriesExhaustedError):
        await with_retries(failing, policy=policy, what="m", sleep=sleep, clock=lambda: now[0])
    assert now[0] <= 10.0


async def test_non_retryable_errors_are_raised_at_once() -> None:
    calls = []

    async def refused() -> str:
        calls.append(1)
        raise LLMError("HTTP 400")

    with pytest.raises(LLMError, match="HTTP 400"):
        await with_retries(refused, policy=RetryPolicy(), what="m")
    assert len(calls) == 1


# --- request building --------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "thesis": {"type": "string", "minLength": 1, "maxLength": 2000},
        "points": {"type": "array", "items": {"type": "string"}, "maxItems": 6},
        "score": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["thesis", "points", "score"],
    "additionalProperties": False,
}


def request(stable: int = 1) -> LLMRequest:
    return LLMRequest(
        model="m",
        messages=[
            Message(role="system", content="preamble with question and context"),
            Message(role="user", content="role prompt"),
        ],
        output_schema=SCHEMA,
        schema_name="Proposer Turn!",
        stable_prefix_messages=stable,
    )


def test_openai_modes_build_the_formats_servers_expect() -> None:
    strict = response_format(StructuredMode.JSON_SCHEMA, request())
    assert strict is not None
    assert strict["json_schema"]["strict"] is True
    assert strict["json_schema"]["name"] == "Proposer_Turn_", "OpenAI's name pattern"
    assert "maxLength" not in json.dumps(strict), "strict mode refuses length keywords"
    assert strict_schema(SCHEMA)["properties"]["score"]["maximum"] == 10
    llama = response_format(StructuredMode.JSON_OBJECT_SCHEMA, request())
    assert llama is not None
    assert llama["type"] == "json_object"
    assert llama["schema"]["properties"]["score"] == {"enum": list(range(1, 11))}
    assert response_format(StructuredMode.JSON_OBJECT, request()) == {"type": "json_object"}
    assert response_format(StructuredMode.PROMPT, request()) is None


def shape(
    model: str, *, effort: Effort | None = None, learned: Learned | None = None
) -> dict[str, Any]:
    entry = Catalog.load().find("openai", model)
    request = LLMRequest(
        model=model,
        messages=[Message(role="user", content="q")],
        temperature=0.2,
        max_tokens=900,
        effort=effort,
    )
    return sampling_params(
        request, entry, learned or Learned(), tokens_field="max_completion_tokens"
    )


def test_openai_request_shape_follows_the_model() -> None:
    # A current reasoning model: no temperature, the role's effort.
    assert shape("gpt-6.2-sol", effort="high") == {
        "max_completion_tokens": 900,
        "reasoning_effort": "high",
    }
    assert shape("gpt-6-luna") == {"max_completion_tokens": 900}
    # Effort none on a model that offers it: sampling at the role's temperature.
    assert shape("gpt-6-luna", effort="none") == {
        "max_completion_tokens": 900,
        "reasoning_effort": "none",
        "temperature": 0.2,
    }
    # Older and unknown models take the role's temperature; the unknown one its effort too.
    assert shape("gpt-4.1") == {"max_completion_tokens": 900, "temperature": 0.2}
    assert shape("gpt-7", effort="low") == {
        "max_completion_tokens": 900,
        "reasoning_effort": "low",
        "temperature": 0.2,
    }
    # What a server refused is not sent again.
    learned = Learned(refused={"temperature", "reasoning_effort"})
    assert shape("gpt-7", effort="low", learned=learned) == {"max_completion_tokens": 900}
    legacy = LLMRequest(model="m", messages=[Message(role="user", content="q")], max_tokens=5)
    assert sampling_params(legacy, None, Learned(), tokens_field="max_tokens")["max_tokens"] == 5
    switched = Learned(refused={"max_tokens"})
    assert "max_completion_tokens" in sampling_params(
        legacy, None, switched, tokens_field="max_tokens"
    )


def test_an_effort_a_catalogued_model_does_not_take_is_refused_naming_the_setting() -> None:
    catalog = Catalog.load()
    sol = catalog.find("openai", "gpt-6.2-sol")
    with pytest.raises(LLMError, match=r"low, medium, high, xhigh, max, not 'none'.*<ROLE>"):
        check_effort(sol, "none")
    check_effort(sol, "high")
    check_effort(None, "none")
    check_effort(catalog.find("openai", "gpt-4.1"), None)
    registry = ProviderRegistry(Settings(openai_api_key=SecretStr("sk-real-looking-0123456789")))
    judge = ModelSettings(provider="openai", model="gpt-6.2-sol", effort="minimal")
    with pytest.raises(LLMError, match="DEBATEBOT_ROLES__JUDGE__EFFORT"):
        registry.check({"judge": judge})
    debater = ModelSettings(provider="openai", model="gpt-4.1", effort="low")
    with pytest.raises(LLMError, match=r"no effort level.*DEBATEBOT_ROLES__DEBATERS__EFFORT"):
        registry.check({"debater": debater})


def test_openai_refusals_are_told_by_param_and_code_before_the_message() -> None:
    temperature = (
        "Unsupported value: 'temperature' does not support 0.3 with this model. Only the"
        " default (1) value is supported."
    )
    assert refused_parameter(400, "temperature", "unsupported_value", temperature) == "temperature"
    assert refused_parameter(400, "max_tokens", "unsupported_parameter", "") == "max_tokens"
    assert refused_parameter(400, "reasoning_effort", None, "") == "reasoning_effort"
    # A proxy that keeps only the message.
    assert refused_parameter(400, None, None, temperature) == "temperature"
    # Other refusals of the same fields are not something to drop them for.
    assert refused_parameter(400, "temperature", "decimal_above_max_value", "") is None
    assert refused_parameter(400, "messages", None, temperature) is None
    assert refused_parameter(500, "temperature", "unsupported_value", temperature) is None
    assert refused_parameter(400, "response_format", None, "'response_format'") is None


def test_openai_usage_counts_cache_reads_writes_and_reasoning() -> None:
    from openai.types.completion_usage import CompletionUsage

    usage = CompletionUsage.model_validate(
        {
            "prompt_tokens": 2_000,
            "completion_tokens": 700,
            "total_tokens": 2_700,
            "prompt_tokens_details": {"cached_tokens": 1_024, "cache_write_tokens": 896},
            "completion_tokens_details": {"reasoning_tokens": 512},
        }
    )
    counted = usage_of(usage)
    assert counted == Usage(
        input_tokens=2_000,
        output_tokens=700,
        cached_input_tokens=1_024,
        cache_write_input_tokens=896,
        reasoning_tokens=512,
    )
    bare = CompletionUsage(prompt_tokens=10, completion_tokens=3, total_tokens=13)
    assert usage_of(bare) == Usage(input_tokens=10, output_tokens=3)
    assert usage_of(None) == Usage()
    # gpt-6-luna: 80 uncached at $0.10, 1,024 read at $0.01, 896 written at $0.125, 700 out at
    # $0.50 per million tokens (reasoning is output).
    luna = Catalog.load().require_price("openai", "gpt-6-luna")
    assert luna.cost(counted) == pytest.approx((8 + 10.24 + 112 + 350) / 1e6)


# --- settings: keys and role models -------------------------------------------------------


def test_missing_and_placeholder_keys_name_the_variable() -> None:
    with pytest.raises(SettingsError, match="DEBATEBOT_OPENAI_API_KEY"):
        Settings(openai_api_key=None).provider_key("openai")
    with pytest.raises(SettingsError, match=r"DEBATEBOT_ANTHROPIC_API_KEY.*placeholder"):
        Settings(anthropic_api_key=SecretStr("your-key-here")).provider_key("anthropic")
    assert Settings().provider_key("local") is None


def test_registry_turns_a_missing_key_into_a_provider_error_naming_it() -> None:
    registry = ProviderRegistry(Settings(openai_api_key=None))
    with pytest.raises(ProviderUnavailableError, match="DEBATEBOT_OPENAI_API_KEY"):
        registry.resolve(ModelSettings(provider="openai", model="gpt-4.1"))


async def test_the_fake_provider_keeps_no_request_it_answered() -> None:
    """`--provider fake` serves demos and benchmarks that run for hours; unlike a test's fake,
    it must not hold on to every prompt it was sent."""
    registry = ProviderRegistry(Settings(provider="fake"))
    llm = registry.resolve(ModelSettings(provider="fake", model="fake-model"))
    request = LLMRequest(
        model="fake-model",
        messages=[Message(role="user", content="Should we adopt ADR-042?")],
        schema_name="ProposerTurn",
    )
    for _ in range(3):
        assert (await llm.complete(request)).text
    assert llm.calls == []  # type: ignore[attr-defined]
    assert FunctionLLM(lambda _r: "{}").record, "a test's fake still records"


CATALOG = Catalog.load()


def test_role_models_default_per_provider_with_the_moderator_on_the_other_family() -> None:
    alone = role_models(Settings(provider="openai"), CATALOG)
    assert alone["proposer"].model == "gpt-6-luna"
    assert alone["moderator"] == alone["judge"]
    assert alone["moderator"].model == "gpt-6.2-sol"
    claude = role_models(Settings(provider="anthropic"), CATALOG)
    assert (claude["critic"].model, claude["judge"].model) == (
        "claude-haiku-5-5",
        "claude-opus-5-5",
    )
    assert claude["critic"].max_tokens == 4096, "thinking models default to room to think"
    both = role_models(
        Settings(provider="openai", anthropic_api_key=SecretStr("sk-ant-real-looking-1234")),
        CATALOG,
    )
    assert both["moderator"].provider == "anthropic"
    assert both["judge"].provider == "anthropic"
    assert both["critic"].provider == "openai"
    off = Settings(
        provider="openai",
        anthropic_api_key=SecretStr("sk-ant-real-looking-1234"),
        cross_family_moderator=False,
    )
    assert role_models(off, CATALOG)["moderator"].provider == "openai"


def test_role_model_precedence_cli_over_settings_over_inherited_slot() -> None:
    settings = Settings(
        provider="openai",
        temperature=0.2,
        roles={
            "debaters": RoleModel(model="gpt-4o-mini", temperature=0.9),
            "critic": RoleModel(provider="anthropic", model="claude-haiku-4-5"),
        },
    )
    models = role_models(
        settings, CATALOG, overrides={"moderator": RoleModel.parse("anthropic:claude-opus-4-5")}
    )
    assert models["proposer"] == ModelSettings(
        provider="openai", model="gpt-4o-mini", temperature=0.9, max_tokens=1024
    )
    assert models["critic"].provider == "anthropic"
    assert models["critic"].temperature == 0.9
    assert models["moderator"].model == "claude-opus-4-5"
    assert models["judge"].model == "claude-opus-4-5", "the judge inherits the moderator"
    assert role_models(settings, CATALOG, model="gpt-4.1")["framing"].model == "gpt-4o-mini"


def test_role_model_errors_say_what_to_fix() -> None:
    with pytest.raises(SettingsError, match=r"unknown role.*umpire"):
        role_models(Settings(), CATALOG, overrides={"umpire": RoleModel(model="x")})
    with pytest.raises(SettingsError, match="unknown provider 'gemini'"):
        role_models(Settings(), CATALOG, overrides={"critic": RoleModel.parse("gemini:pro")})
    with pytest.raises(SettingsError, match="DEBATEBOT_OPENAI_COMPATIBLE_MODEL"):
        role_models(Settings(provider="openai-compatible"), CATALOG)
    assert RoleModel.parse("gpt-4.1") == RoleModel(model="gpt-4.1")
    assert RoleModel.parse("local:") == RoleModel(provider="local")


# --- concurrency limits ------------------------------------------------------------------


def test_provider_concurrency_comes_from_the_environment_with_defaults_for_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEBATEBOT_PROVIDER_CONCURRENCY__OPENAI_COMPATIBLE", "3")
    monkeypatch.setenv("DEBATEBOT_PROVIDER_CONCURRENCY__ANTHROPIC", "2")
    limits = Settings().provider_concurrency
    assert limits == {"openai": 256, "anthropic": 2, "openai-compatible": 3}
    monkeypatch.setenv("DEBATEBOT_PROVIDER_CONCURRENCY__OPENAI", "0")
    with pytest.raises(ValidationError, match="at least 1 call at a time"):
        Settings()


def test_hosted_providers_limit_their_models_from_a_start_under_the_ceiling() -> None:
    """Each hosted or OpenAI-compatible provider gets adaptive limits per model: from its start,
    never above DEBATEBOT_PROVIDER_CONCURRENCY__<PROVIDER>, which also lowers the start."""
    settings = Settings(
        openai_api_key=SecretStr("sk-test-key-for-limits"),
        anthropic_api_key=SecretStr("sk-ant-test-key-for-limits"),
        openai_compatible_base_url="http://127.0.0.1:9/v1",
        provider_concurrency={"anthropic": 3},
    )
    registry = ProviderRegistry(settings)
    expected = {"openai": (8, 256), "anthropic": (3, 3), "openai-compatible": (4, 64)}
    for provider, (start, ceiling) in expected.items():
        llm = registry.resolve(ModelSettings(provider=provider, model="some-model"))
        limits = getattr(llm, "limits", None)
        assert limits is not None, provider
        limiter = limits.of("some-model")
        assert (limiter.size, limiter.ceiling) == (start, ceiling), provider
        assert limits.of("another-model") is not limiter, "each model has its own"
    fake = registry.resolve(ModelSettings(provider="fake", model="fake-model"))
    assert getattr(fake, "limits", None) is None, "the fake runs any number at once"


def test_the_model_setting_names_every_role_of_the_base_provider() -> None:
    """DEBATEBOT_MODEL, like --model, is every role's model of the base provider; a role's own
    model wins, and the cross-family moderator keeps its family's default."""
    settings = Settings(provider="openai", model="gpt-6.1-sol")
    models = role_models(settings, CATALOG)
    assert {m.model for m in models.values()} == {"gpt-6.1-sol"}
    assert role_models(settings, CATALOG, model="gpt-6-luna")["critic"].model == "gpt-6-luna"
    claude = Settings(provider="openai", model="claude-opus-5-5", roles={})
    assert role_models(claude, CATALOG)["critic"].provider == "openai"
    by_role = Settings(roles={"moderator": RoleModel(model="claude-opus-5-5")})
    assert role_models(by_role, CATALOG)["moderator"].provider == "anthropic", (
        "a model the catalogue knows under one vendor needs no provider: prefix"
    )
