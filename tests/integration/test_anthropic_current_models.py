"""Debates through the real `anthropic` SDK against the stand-in for the late-2026 Messages API
(`anthropic_standin.py`): every protocol on current Claude models (structured outputs, adaptive
thinking with each role's effort, thinking tokens counted and priced), the forced-tool path of
an older model, and the fallbacks when a model refuses a mode, thinking or an effort.

Each debate's calls, tokens and cost are logged at INFO (`-o log_cli=true --log-cli-level=INFO`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anthropic
import pytest
from pydantic import SecretStr

from bot.settings import RoleModel, Settings
from bot.wiring import DebateServices, build_services
from engine.catalog import Catalog
from engine.errors import LLMError
from engine.llm import LLMRequest, Message, output_schema
from engine.models import (
    ContextDocument,
    DebateResult,
    DebateStatus,
    ModelSettings,
    Proposition,
    Role,
    Usage,
)
from engine.pricing import Pricing
from engine.runner import run_debate
from tests.integration.anthropic_standin import (
    FORCED_TOOL,
    GATEWAY,
    NO_ADAPTIVE,
    NO_EFFORT,
    NO_OUTPUT_FORMAT,
    PROFILES,
    SAMPLING,
    THINKING_TOKENS,
    THINKING_TYPE,
    AnthropicStandIn,
    Exchange,
)

log = logging.getLogger("tests.anthropic")
KEY = "sk-ant-api03-standin-0123456789"
PROTOCOLS = ["adversarial", "stances", "consensus", "structured", "panel"]
CURRENT_MODELS = ["claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"]
GATEWAY_MODEL = "claude-gateway-alias"
GATEWAY_PRICE = Pricing(input_per_mtok=3.0, output_per_mtok=15.0)
CATALOG = Catalog.load()


@pytest.fixture
async def standin() -> AsyncIterator[AnthropicStandIn]:
    server = AnthropicStandIn(profiles={**PROFILES, GATEWAY_MODEL: GATEWAY})
    await server.start()
    yield server
    await server.stop()


def settings(standin: AnthropicStandIn, **values: Any) -> Settings:
    return Settings(
        provider="anthropic",
        anthropic_api_key=SecretStr(KEY),
        anthropic_base_url=standin.url,
        prices={f"anthropic:{GATEWAY_MODEL}": GATEWAY_PRICE},
        llm_max_attempts=2,
        llm_backoff_base_s=0.01,
        **values,
    )


ADR = ContextDocument(
    title="ADR-7: nightly batch jobs on Kubernetes CronJobs",
    text=" ".join(
        f"Job {n} exports the billing ledger for region {n % 5}, retries twice on failure,"
        " must finish before 06:00 UTC, and pages the on-call engineer when it does not."
        for n in range(1, 25)
    ),
)
"""An ADR long enough that a debate's stable prefix passes the minimum cacheable length."""


async def debate(
    services: DebateServices,
    protocol: str = "adversarial",
    model: str | None = None,
    context: Sequence[ContextDocument] = (),
) -> DebateResult:
    stances: dict[str, Any] = (
        {"stances_for": ["adopt it now"], "stances_against": ["wait a quarter"]}
        if protocol == "stances"
        else {}
    )
    spec = services.policy.spec(
        "Should we move our nightly batch jobs from cron to Kubernetes CronJobs?",
        protocol=protocol,
        model=model,
        context=context,
        **stances,
    )
    services.registry.check({p.role.value: p.model for p in spec.participants})
    return await run_debate(spec, resolve_llm=services.resolve_llm, prompts=services.prompts)


def reported(exchange: Exchange) -> Usage:
    """The usage the stand-in reported, as debatebot counts it."""
    usage = exchange.answer["usage"]
    read, write = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
    return Usage(
        input_tokens=usage["input_tokens"] + read + write,
        output_tokens=usage["output_tokens"],
        cached_input_tokens=read,
        cache_write_input_tokens=write,
        reasoning_tokens=usage["output_tokens_details"]["thinking_tokens"],
    )


def price_of(model: str) -> Pricing:
    return GATEWAY_PRICE if model == GATEWAY_MODEL else CATALOG.require_price("anthropic", model)


def summary(label: str, result: DebateResult, exchanges: list[Exchange]) -> str:
    usage = result.usage
    return (
        f"{label}: {result.status.value}, {len(exchanges)} calls"
        f" ({sum(e.refused for e in exchanges)} refused), input {usage.input_tokens}"
        f" (cache read {usage.cached_input_tokens}, write {usage.cache_write_input_tokens}),"
        f" output {usage.output_tokens} (thinking {usage.reasoning_tokens}),"
        f" ${result.cost_usd:.6f}"
    )


def assert_paid_as_reported(result: DebateResult, exchanges: list[Exchange]) -> None:
    """The debate's tokens and cost are what the server reported, priced by the catalogue."""
    answered = [e for e in exchanges if not e.refused]
    assert len(answered) == sum(1 + turn.reasks for turn in result.transcript)
    total = Usage()
    for exchange in answered:
        total = total + reported(exchange)
    assert result.usage == total
    expected = sum(price_of(e.body["model"]).cost(reported(e)) for e in answered)
    assert result.cost_usd == pytest.approx(expected)


@pytest.mark.parametrize("model", CURRENT_MODELS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_protocol_completes_on_a_current_claude_model(
    standin: AnthropicStandIn, protocol: str, model: str
) -> None:
    services = build_services(settings(standin))
    try:
        result = await debate(services, protocol, model)
    finally:
        await services.registry.aclose()

    assert result.status is DebateStatus.COMPLETE, result.error
    exchanges = standin.exchanges
    assert not any(e.refused for e in exchanges), [e.answer for e in exchanges if e.refused]
    assert {e.body["model"] for e in exchanges} == {model}
    for exchange in exchanges:
        body = exchange.body
        assert body["output_config"]["format"]["type"] == "json_schema"
        assert body["thinking"] == {"type": "adaptive"}
        assert "tool_choice" not in body
        assert "tools" not in body
        assert "temperature" not in body
        first_block = exchange.answer["content"][0]
        assert (first_block["type"], first_block["thinking"]) == ("thinking", "")
    assert all(turn.reasks == 0 for turn in result.transcript), "the reduced schema lost a bound"
    assert result.usage.reasoning_tokens > 0
    assert_paid_as_reported(result, exchanges)
    log.info(summary(f"{protocol} on {model}", result, exchanges))


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_older_model_answers_through_a_forced_tool_without_thinking(
    standin: AnthropicStandIn, protocol: str
) -> None:
    services = build_services(settings(standin))
    try:
        result = await debate(services, protocol, "claude-haiku-4-5")
    finally:
        await services.registry.aclose()

    assert result.status is DebateStatus.COMPLETE, result.error
    assert not any(e.refused for e in standin.exchanges)
    for exchange in standin.exchanges:
        body = exchange.body
        assert body["tool_choice"]["type"] == "tool"
        assert "thinking" not in body
        assert "output_config" not in body
        assert exchange.answer["content"][-1]["type"] == "tool_use"
    assert result.usage.reasoning_tokens == 0
    assert_paid_as_reported(result, standin.exchanges)


async def test_a_refused_mode_is_left_once_and_remembered_for_every_later_debate(
    standin: AnthropicStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    """A model the catalogue does not know (a gateway's alias) starts with structured outputs;
    its server refuses them, so it moves to the forced tool after one refused request, and no
    later call, in this debate or the next (a panel, whose first round asks three at once),
    tries structured outputs again."""
    caplog.set_level(logging.WARNING, logger="debatebot.providers")
    services = build_services(settings(standin))
    try:
        first = await debate(services, "adversarial", GATEWAY_MODEL)
        first_calls = len(standin.exchanges)
        refused_then = len([e for e in standin.exchanges if e.refused])
        second = await debate(services, "panel", GATEWAY_MODEL)
    finally:
        await services.registry.aclose()

    assert first.status is DebateStatus.COMPLETE, first.error
    assert second.status is DebateStatus.COMPLETE, second.error
    exchanges = standin.exchanges
    assert refused_then == 1
    assert exchanges[0].refused
    assert exchanges[0].answer["error"] == {
        "type": "invalid_request_error",
        "message": NO_OUTPUT_FORMAT,
    }
    assert "output_config" in exchanges[0].body
    assert all(not e.refused and "tool_choice" in e.body for e in exchanges[1:])
    assert all("output_config" not in e.body for e in exchanges[1:])
    assert "refused structured output mode output_format; falling back to tool" in caplog.text
    assert_paid_as_reported(first, exchanges[:first_calls])
    log.info(summary(f"adversarial on {GATEWAY_MODEL}", first, exchanges[:first_calls]))


def catalogue_file(tmp_path: Path, model: str, **changes: Any) -> Path:
    """A DEBATEBOT_MODELS_FILE whose entry for `model` says what `changes` say (an outdated
    catalogue a deployment kept)."""
    entry = CATALOG.find("anthropic", model)
    assert entry is not None
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": [{**entry.model_dump(mode="json"), **changes}]}))
    return path


async def test_the_documented_refusal_of_forced_tools_moves_a_current_model_to_structured_outputs(
    standin: AnthropicStandIn, tmp_path: Path
) -> None:
    path = catalogue_file(tmp_path, "claude-sonnet-5-5", structured=["tool", "output_format"])
    services = build_services(settings(standin, models_file=path))
    try:
        result = await debate(services, "adversarial", "claude-sonnet-5-5")
    finally:
        await services.registry.aclose()

    assert result.status is DebateStatus.COMPLETE, result.error
    first, *rest = standin.exchanges
    # The protocol's envelope as the one tool, named the same for every role.
    assert first.body["tool_choice"] == {"type": "tool", "name": "adversarial_reply"}
    assert first.answer["error"] == {"type": "invalid_request_error", "message": FORCED_TOOL}
    assert rest
    assert all(not e.refused and "format" in e.body["output_config"] for e in rest)


async def test_a_refusal_of_adaptive_thinking_stops_it_for_that_model(
    standin: AnthropicStandIn, tmp_path: Path
) -> None:
    path = catalogue_file(tmp_path, "claude-haiku-4-5", thinking="always")
    services = build_services(settings(standin, models_file=path))
    try:
        result = await debate(services, "adversarial", "claude-haiku-4-5")
    finally:
        await services.registry.aclose()

    assert result.status is DebateStatus.COMPLETE, result.error
    first, *rest = standin.exchanges
    assert first.body["thinking"] == {"type": "adaptive"}
    assert first.answer["error"]["message"] == NO_ADAPTIVE
    assert rest
    assert all(not e.refused and "thinking" not in e.body for e in rest)


async def test_a_refused_effort_is_dropped_with_a_warning_naming_the_setting(
    standin: AnthropicStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="debatebot.providers")
    roles = {"debaters": RoleModel(effort="high"), "moderator": RoleModel(effort="high")}
    services = build_services(settings(standin, roles=roles))
    try:
        result = await debate(services, "adversarial", GATEWAY_MODEL)
    finally:
        await services.registry.aclose()

    assert result.status is DebateStatus.COMPLETE, result.error
    refused = [e for e in standin.exchanges if e.refused]
    assert [e.answer["error"]["message"] for e in refused] == [NO_EFFORT, NO_OUTPUT_FORMAT]
    assert refused[0].body["output_config"]["effort"] == "high"
    later = standin.exchanges[len(refused) :]
    assert all(not e.refused and "output_config" not in e.body for e in later)
    assert "refused effort high" in caplog.text
    assert "DEBATEBOT_ROLES__<ROLE>__EFFORT" in caplog.text


async def test_each_role_thinks_at_its_own_effort_and_never_sends_disabled(
    standin: AnthropicStandIn,
) -> None:
    """Models that always think get `{"type": "adaptive"}` and their role's effort (none when
    the role sets none); a model whose entry says thinking is optional gets no `thinking`
    field and no effort; the thinking tokens each turn reports are counted and paid."""
    roles = {
        "framing": RoleModel(model="claude-opus-5-5"),
        "proposer": RoleModel(model="claude-haiku-5-5", effort="low"),
        "critic": RoleModel(model="claude-sonnet-5-5", effort="high"),
        "rebuttal": RoleModel(model="claude-haiku-4-5"),
        "moderator": RoleModel(model="claude-opus-5-5", effort="max"),
    }
    services = build_services(settings(standin, roles=roles))
    try:
        result = await debate(services)
    finally:
        await services.registry.aclose()

    assert result.status is DebateStatus.COMPLETE, result.error
    expected = {
        # role: (thinking field, effort sent, thinking tokens)
        Role.FRAMING: ({"type": "adaptive"}, None, THINKING_TOKENS["medium"]),
        Role.PROPOSER: ({"type": "adaptive"}, "low", THINKING_TOKENS["low"]),
        Role.CRITIC: ({"type": "adaptive"}, "high", THINKING_TOKENS["high"]),
        Role.REBUTTAL: (None, None, 0),
        Role.MODERATOR: ({"type": "adaptive"}, "max", THINKING_TOKENS["max"]),
        # The independent judge runs on the debaters' default model, with no effort set.
        Role.INDEPENDENT_JUDGE: ({"type": "adaptive"}, None, THINKING_TOKENS["medium"]),
    }
    assert len(standin.exchanges) == len(result.transcript)
    for turn, exchange in zip(result.transcript, standin.exchanges, strict=True):
        thinking, effort, thought = expected[turn.role]
        assert exchange.body["model"] == turn.model
        assert exchange.body.get("thinking") == thinking, turn.role
        assert (exchange.body.get("output_config") or {}).get("effort") == effort, turn.role
        assert turn.usage.reasoning_tokens == thought, turn.role
        assert '"disabled"' not in json.dumps(exchange.body)
    assert_paid_as_reported(result, standin.exchanges)


async def test_an_effort_the_model_does_not_take_is_refused_before_any_request(
    standin: AnthropicStandIn,
) -> None:
    roles = {"critic": RoleModel(model="claude-haiku-4-5", effort="xhigh")}
    services = build_services(settings(standin, roles=roles))
    spec = services.policy.spec("Adopt ADR-7?")
    try:
        with pytest.raises(LLMError) as refused:
            services.registry.check({p.role.value: p.model for p in spec.participants})
        message = str(refused.value)
        assert "claude-haiku-4-5 does not take effort 'xhigh'" in message
        assert "DEBATEBOT_ROLES__CRITIC__EFFORT" in message
        # Past the check (a caller that skipped it), the adapter refuses it just the same.
        result = await run_debate(spec, resolve_llm=services.resolve_llm, prompts=services.prompts)
    finally:
        await services.registry.aclose()
    assert result.status is DebateStatus.FAILED
    assert result.error is not None
    assert "does not take effort 'xhigh'" in result.error
    assert not [e for e in standin.exchanges if e.body["model"] == "claude-haiku-4-5"]


async def test_a_reply_that_thought_through_all_its_tokens_is_paid_and_names_the_setting(
    standin: AnthropicStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="debatebot.providers")
    roles = {"framing": RoleModel(model="claude-opus-5-5", effort="max", max_tokens=256)}
    services = build_services(settings(standin, roles=roles))
    request = LLMRequest(
        model="claude-opus-5-5",
        max_tokens=256,
        effort="max",
        messages=[Message(role="user", content="Frame the question as JSON.")],
        output_schema=output_schema(Proposition),
        schema_name="Proposition",
    )
    try:
        llm = services.resolve_llm(ModelSettings(provider="anthropic", model="claude-opus-5-5"))
        completion = await llm.complete(request)
        result = await debate(services)
    finally:
        await services.registry.aclose()

    # The call is returned, not raised, so the thinking it was billed for reaches the budget.
    assert completion.text == ""
    assert completion.finish_reason == "max_tokens"
    assert completion.usage.reasoning_tokens == completion.usage.output_tokens == 256
    assert completion.cost_usd == pytest.approx(
        CATALOG.require_price("anthropic", "claude-opus-5-5").cost(completion.usage)
    )
    assert completion.cost_usd > 0
    assert "spent all 256 output tokens thinking" in caplog.text
    assert "DEBATEBOT_ROLES__<ROLE>__MAX_TOKENS" in caplog.text
    assert result.status is DebateStatus.FAILED
    assert result.error is not None
    assert "higher max_tokens for this role" in result.error
    assert [e.answer["stop_reason"] for e in standin.exchanges] == ["max_tokens"] * 4


async def test_the_stable_prefix_is_cached_and_cache_reads_and_writes_priced_apart(
    standin: AnthropicStandIn,
) -> None:
    """Every request marks its system blocks with `cache_control`; the consensus debaters share
    one prefix and one schema, so after the first writes it, the others read it; each is
    billed at its own rate."""
    services = build_services(settings(standin))
    try:
        result = await debate(services, "consensus", "claude-opus-5-5", context=[ADR])
    finally:
        await services.registry.aclose()

    assert result.status is DebateStatus.COMPLETE, result.error
    for exchange in standin.exchanges:
        system = exchange.body["system"]
        assert isinstance(system, list)
        assert system[-1]["cache_control"] == {"type": "ephemeral"}
    usages = [reported(e) for e in standin.exchanges]
    assert any(u.cache_write_input_tokens for u in usages)
    assert any(u.cached_input_tokens for u in usages)
    usage = result.usage
    assert usage.cached_input_tokens > 0
    price = CATALOG.require_price("anthropic", "claude-opus-5-5")
    assert price.cached_input_per_mtok == 0.2
    assert price.cache_write_per_mtok == 5.0
    uncached = usage.input_tokens - usage.cached_input_tokens - usage.cache_write_input_tokens
    assert result.cost_usd == pytest.approx(
        (
            uncached * 4.0
            + usage.cached_input_tokens * 0.2
            + usage.cache_write_input_tokens * 5.0
            + usage.output_tokens * 20.0
        )
        / 1e6
    )


async def test_the_stand_in_refuses_what_the_late_2026_api_refuses(
    standin: AnthropicStandIn,
) -> None:
    """The stand-in fails the way the documented API fails, seen through the real SDK."""
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=standin.url, max_retries=0)
    base: dict[str, Any] = {
        "model": "claude-opus-5-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Argue for it as JSON."}],
    }
    schema = {
        "type": "object",
        "properties": {"thesis": {"type": "string"}},
        "required": ["thesis"],
        "additionalProperties": False,
    }
    refusals: list[tuple[dict[str, Any], str]] = [
        (
            {
                "tools": [{"name": "answer", "input_schema": schema}],
                "tool_choice": {"type": "tool", "name": "answer"},
            },
            FORCED_TOOL,
        ),
        ({"thinking": {"type": "disabled"}}, THINKING_TYPE.format(kind="disabled")),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 512}},
            THINKING_TYPE.format(kind="enabled"),
        ),
        ({"extra_body": {"temperature": 0.2}}, SAMPLING.format(name="temperature")),
        (
            {
                "output_config": {
                    "format": {
                        "type": "json_schema",
                        "schema": {
                            **schema,
                            "properties": {"thesis": {"type": "string", "minLength": 5}},
                        },
                    }
                }
            },
            "minLength is not supported",
        ),
        (
            {
                "output_config": {
                    "format": {"type": "json_schema", "schema": {**schema, "minItems": 2}}
                }
            },
            "minItems values other than 0 or 1",
        ),
        (
            {
                "output_config": {
                    "format": {
                        "type": "json_schema",
                        "schema": {"type": "object", "properties": {}},
                    }
                }
            },
            "additionalProperties",
        ),
        (
            {"messages": [*base["messages"], {"role": "assistant", "content": "{"}]},
            "prefill",
        ),
    ]
    try:
        for extra, message in refusals:
            with pytest.raises(anthropic.BadRequestError) as refused:
                await client.messages.create(**{**base, **extra})
            assert refused.value.type == "invalid_request_error"
            assert message in str(refused.value.api_message)
            assert refused.value.request_id is not None
        with pytest.raises(anthropic.NotFoundError) as missing:
            await client.messages.create(**{**base, "model": "claude-opus-4-1"})
        assert missing.value.type == "not_found_error"
        assert missing.value.api_message == "model: claude-opus-4-1"

        reply = await client.messages.create(
            **base,
            thinking={"type": "adaptive"},
            output_config={"effort": "low", "format": {"type": "json_schema", "schema": schema}},
        )
    finally:
        await client.close()
    thinking, text = reply.content
    assert thinking.type == "thinking"
    assert thinking.thinking == ""
    assert text.type == "text"
    assert json.loads(text.text).keys() == {"thesis"}
    assert reply.usage.output_tokens_details is not None
    assert reply.usage.output_tokens_details.thinking_tokens == THINKING_TOKENS["low"]
    assert reply.usage.output_tokens > THINKING_TOKENS["low"]
