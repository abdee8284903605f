"""Each provider's streaming against its loopback stand-in, through the real vendor SDK: the
reply's text grows as it comes and the completion (text, usage) is the one a whole call gives;
a stream cut off mid-way is asked again; a server that refuses to stream is asked whole, and
not asked to stream again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from pydantic import SecretStr

from bot.settings import Settings
from bot.wiring import build_services
from engine.errors import StreamRefusedError
from engine.llm import LLM, LLMRequest, Message, StreamingLLM, ask, output_schema
from engine.models import CriticTurn, ModelSettings
from engine.pricing import Pricing
from tests.integration.anthropic_standin import PROFILES, AnthropicStandIn
from tests.integration.openai_standin import OpenAIStandIn

KEY = "sk-test-openai-standin-0123456789"
CRITIC = output_schema(CriticTurn)


def critic_request(model: str) -> LLMRequest:
    return LLMRequest(
        model=model,
        max_tokens=1024,
        messages=[
            Message(role="system", content="You are the critic of a debate."),
            Message(role="user", content="Criticise the proposal to adopt a queue. Reply in json."),
        ],
        output_schema=CRITIC,
        schema_name="CriticTurn",
    )


class Texts:
    """What `on_text` was told, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, text: str) -> None:
        self.seen.append(text)


@pytest.fixture
async def openai_server() -> AsyncIterator[OpenAIStandIn]:
    server = OpenAIStandIn()
    await server.start()
    yield server
    await server.stop()


def openai_llm(server: OpenAIStandIn, provider: str = "openai") -> LLM:
    if provider == "openai":
        settings = Settings(
            provider="openai",
            openai_api_key=SecretStr(KEY),
            openai_base_url=f"{server.url}/v1",
            llm_max_attempts=2,
            llm_backoff_base_s=0.01,
        )
    else:
        settings = Settings(
            provider="openai-compatible",
            openai_compatible_base_url=f"{server.url}/v1",
            openai_compatible_model="gpt-4.1",
            openai_compatible_api_key=SecretStr(KEY),
            llm_max_attempts=2,
            llm_backoff_base_s=0.01,
        )
    services = build_services(settings)
    return services.resolve_llm(ModelSettings(provider=provider, model="gpt-4.1"))


@pytest.mark.parametrize("provider", ["openai", "openai-compatible"])
async def test_openai_streams_the_reply_with_its_usage(
    openai_server: OpenAIStandIn, provider: str
) -> None:
    llm = openai_llm(openai_server, provider)
    assert isinstance(llm, StreamingLLM)
    texts = Texts()
    streamed = await ask(llm, critic_request("gpt-4.1"), texts)

    [exchange] = openai_server.exchanges
    assert exchange.body["stream"] is True
    assert exchange.body["stream_options"] == {"include_usage": True}
    assert len(texts.seen) > 3
    assert all(b.startswith(a) for a, b in zip(texts.seen, texts.seen[1:], strict=False))
    assert texts.seen[-1] == streamed.text
    CriticTurn.model_validate_json(streamed.text)
    assert streamed.usage.input_tokens == exchange.usage["prompt_tokens"]
    assert streamed.usage.output_tokens == exchange.usage["completion_tokens"]
    assert streamed.finish_reason == "stop"
    assert streamed.cost_usd > 0 or provider == "openai-compatible"


async def test_an_openai_stream_cut_mid_way_is_asked_again(openai_server: OpenAIStandIn) -> None:
    openai_server.cut_streams = 1
    llm = openai_llm(openai_server)
    texts = Texts()
    streamed = await ask(llm, critic_request("gpt-4.1"), texts)

    assert [e.status for e in openai_server.exchanges] == [200, 200]
    CriticTurn.model_validate_json(streamed.text)
    # The second try's text starts again: a reader never sees the cut reply continued.
    pairs = enumerate(zip(texts.seen, texts.seen[1:], strict=False))
    restart = next(i for i, (a, b) in pairs if not b.startswith(a))
    assert 0 < restart < len(texts.seen) - 1
    assert texts.seen[-1] == streamed.text
    assert streamed.usage.output_tokens == openai_server.exchanges[1].usage["completion_tokens"]


async def test_a_server_refusing_streams_is_asked_whole_from_then_on(
    openai_server: OpenAIStandIn,
) -> None:
    openai_server.refuse_streams = True
    llm = openai_llm(openai_server, "openai-compatible")
    assert isinstance(llm, StreamingLLM)
    texts = Texts()
    with pytest.raises(StreamRefusedError, match="refused a streamed request"):
        await llm.stream(critic_request("gpt-4.1"), texts)
    assert not llm.streams(critic_request("gpt-4.1"))

    answered = await ask(llm, critic_request("gpt-4.1"), texts)
    assert texts.seen == []
    CriticTurn.model_validate_json(answered.text)
    assert [e.status for e in openai_server.exchanges] == [400, 200]
    assert "stream" not in openai_server.exchanges[1].body


async def test_a_server_streaming_without_usage_is_asked_whole_and_billed_by_its_usage(
    openai_server: OpenAIStandIn,
) -> None:
    """Some OpenAI-compatible servers (llama.cpp's among them) stream a whole reply but ignore
    `stream_options.include_usage`: the call is asked again whole, whose reply carries the
    usage, and the model is not streamed again (never recorded as costing nothing)."""
    openai_server.streams_without_usage = True
    llm = openai_llm(openai_server, "openai-compatible")
    assert isinstance(llm, StreamingLLM)
    texts = Texts()

    answered = await ask(llm, critic_request("gpt-4.1"), texts)

    assert [e.body.get("stream", False) for e in openai_server.exchanges] == [True, False]
    assert answered.usage.output_tokens == openai_server.exchanges[1].usage["completion_tokens"]
    CriticTurn.model_validate_json(answered.text)
    assert not llm.streams(critic_request("gpt-4.1"))


TOOL_ONLY = "claude-tool-only"


@pytest.fixture
async def anthropic_server() -> AsyncIterator[AnthropicStandIn]:
    tool_only = replace(PROFILES["claude-haiku-4-5"], structured=frozenset({"tool"}))
    server = AnthropicStandIn(profiles={**PROFILES, TOOL_ONLY: tool_only})
    await server.start()
    yield server
    await server.stop()


def anthropic_llm(server: AnthropicStandIn, model: str) -> LLM:
    settings = Settings(
        provider="anthropic",
        anthropic_api_key=SecretStr(KEY),
        anthropic_base_url=server.url,
        prices={f"anthropic:{TOOL_ONLY}": Pricing(input_per_mtok=1.0, output_per_mtok=5.0)},
        llm_max_attempts=2,
        llm_backoff_base_s=0.01,
    )
    return build_services(settings).resolve_llm(ModelSettings(provider="anthropic", model=model))


@pytest.mark.parametrize("model", ["claude-opus-5-5", TOOL_ONLY])
async def test_anthropic_streams_the_reply_with_its_usage(
    anthropic_server: AnthropicStandIn, model: str
) -> None:
    """Structured outputs (a thinking block, then the JSON as text) and a forced tool (the JSON
    as the tool's input, in `input_json_delta` pieces) stream alike."""
    llm = anthropic_llm(anthropic_server, model)
    texts = Texts()
    streamed = await ask(llm, critic_request(model), texts)

    answered = [e for e in anthropic_server.exchanges if not e.refused]
    assert len(answered) == 1
    assert answered[0].body["stream"] is True
    assert len(texts.seen) > 3
    assert all(b.startswith(a) for a, b in zip(texts.seen, texts.seen[1:], strict=False))
    CriticTurn.model_validate_json(texts.seen[-1])
    CriticTurn.model_validate_json(streamed.text)
    usage = answered[0].answer["usage"]
    assert streamed.usage.output_tokens == usage["output_tokens"]
    assert streamed.usage.input_tokens == (
        usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"]
    )
    assert streamed.cost_usd > 0


async def test_an_anthropic_stream_cut_mid_way_is_asked_again(
    anthropic_server: AnthropicStandIn,
) -> None:
    anthropic_server.cut_streams = 1
    llm = anthropic_llm(anthropic_server, "claude-opus-5-5")
    texts = Texts()
    streamed = await ask(llm, critic_request("claude-opus-5-5"), texts)

    assert len(anthropic_server.exchanges) == 2
    CriticTurn.model_validate_json(streamed.text)
    pairs = enumerate(zip(texts.seen, texts.seen[1:], strict=False))
    restart = next(i for i, (a, b) in pairs if not b.startswith(a))
    assert 0 < restart < len(texts.seen) - 1
    assert texts.seen[-1] == streamed.text


async def test_a_messages_server_refusing_streams_is_asked_whole_from_then_on(
    anthropic_server: AnthropicStandIn,
) -> None:
    anthropic_server.refuse_streams = True
    llm = anthropic_llm(anthropic_server, "claude-opus-5-5")
    assert isinstance(llm, StreamingLLM)
    texts = Texts()
    with pytest.raises(StreamRefusedError, match="refused a streamed request"):
        await llm.stream(critic_request("claude-opus-5-5"), texts)
    assert not llm.streams(critic_request("claude-opus-5-5"))

    answered = await ask(llm, critic_request("claude-opus-5-5"), texts)
    assert texts.seen == []
    CriticTurn.model_validate_json(answered.text)
    assert [e.status for e in anthropic_server.exchanges] == [400, 200]
    assert "stream" not in anthropic_server.exchanges[1].body
