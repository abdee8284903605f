"""Issue 32, item 2, measured at the vendors' stand-ins through the real SDKs: when the shared
prefix (the protocol's envelope schema, the rules and a long case) passes the vendor's minimum
cacheable length, every call of a debate after the first on its model reads it from the cache,
on OpenAI (automatic prefix caching, 1,024 tokens) and on Anthropic (`cache_control` marks,
512 tokens on Claude Sonnet 5.5); on Anthropic the turns of a round also read the debate so far
the turn before them wrote."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from bot.settings import RoleModel, Settings
from bot.wiring import build_services
from engine.models import ContextDocument, DebateResult, DebateStatus, Role
from engine.runner import run_debate
from tests.integration.anthropic_standin import AnthropicStandIn
from tests.integration.openai_standin import OpenAIStandIn

PROTOCOLS = ["adversarial", "stances", "consensus", "structured", "panel"]
STANCES: dict[str, dict[str, Any]] = {
    "stances": {"stances_for": ["adopt it now"], "stances_against": ["wait a quarter"]}
}
QUESTION = "Should we move our nightly batch jobs from cron to Kubernetes CronJobs?"
CASE = ContextDocument(
    title="ADR-7: nightly batch jobs on Kubernetes CronJobs",
    text=" ".join(
        f"Job {n} exports the billing ledger for region {n % 5}, retries twice on failure,"
        " must finish before 06:00 UTC, and pages the on-call engineer when it does not."
        for n in range(1, 60)
    ),
)
"""A case long enough that the preamble alone passes 1,024 tokens."""


@pytest.fixture
async def openai_standin() -> AsyncIterator[OpenAIStandIn]:
    server = OpenAIStandIn()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def anthropic_standin() -> AsyncIterator[AnthropicStandIn]:
    server = AnthropicStandIn()
    await server.start()
    yield server
    await server.stop()


async def debate(settings: Settings, protocol: str, rounds: int = 1) -> DebateResult:
    services = build_services(settings)
    spec = services.policy.spec(
        QUESTION, protocol=protocol, rounds=rounds, context=[CASE], **STANCES.get(protocol, {})
    )
    # Every round runs, whatever the moderator recommends.
    spec = spec.model_copy(update={"min_rounds": rounds})
    try:
        return await run_debate(spec, resolve_llm=services.resolve_llm, prompts=services.prompts)
    finally:
        await services.registry.aclose()


def tokens(text: str) -> int:
    """The stand-ins' tokenizer: UTF-8 bytes / 4, rounded up."""
    return math.ceil(len(text.encode("utf-8")) / 4)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_on_openai_every_call_after_the_first_on_its_model_reads_the_shared_prefix(
    openai_standin: OpenAIStandIn, protocol: str
) -> None:
    roles = {
        "debaters": RoleModel(model="gpt-6-luna", effort="low"),
        "moderator": RoleModel(model="gpt-6.2-sol", effort="high"),
    }
    settings = Settings(
        provider="openai",
        openai_api_key=SecretStr("sk-test-openai-standin-0123456789"),
        openai_base_url=f"{openai_standin.url}/v1",
        cross_family_moderator=False,
        roles=roles,
        llm_max_attempts=2,
    )
    result = await debate(settings, protocol)

    assert result.status is DebateStatus.COMPLETE, result.error
    exchanges = openai_standin.exchanges
    assert all(e.status == 200 for e in exchanges)
    seen: set[str] = set()
    keys = {e.body["prompt_cache_key"] for e in exchanges}
    assert len(keys) == 1, "one prompt_cache_key for every call of the debate"
    for exchange in exchanges:
        body = exchange.body
        system = body["messages"][0]["content"]
        # The stand-in's prompt: the response format, then each message (OpenAI's order).
        shared = tokens(json.dumps(body["response_format"]) + f"\nsystem: {system}") // 128 * 128
        cached = exchange.usage["prompt_tokens_details"]["cached_tokens"]
        if exchange.model in seen:
            assert cached >= shared >= 1_024, (exchange.model, cached, shared)
        else:
            assert cached == 0
        seen.add(exchange.model)


def anthropic_settings(standin: AnthropicStandIn) -> Settings:
    return Settings(
        provider="anthropic",
        model="claude-sonnet-5-5",
        anthropic_api_key=SecretStr("sk-ant-api03-standin-0123456789"),
        anthropic_base_url=standin.url,
        llm_max_attempts=2,
    )


def read_and_written(exchange: Any) -> tuple[int, int]:
    usage = exchange.answer["usage"]
    return usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_on_anthropic_every_call_after_the_first_reads_the_shared_prefix(
    anthropic_standin: AnthropicStandIn, protocol: str
) -> None:
    result = await debate(anthropic_settings(anthropic_standin), protocol)

    assert result.status is DebateStatus.COMPLETE, result.error
    first, *later = anthropic_standin.exchanges
    assert later
    preamble = tokens(first.body["system"][-1]["text"])
    assert preamble >= 1_024
    assert read_and_written(first) == (0, read_and_written(first)[1])
    assert read_and_written(first)[1] >= preamble
    for exchange in later:
        read, _ = read_and_written(exchange)
        assert read >= preamble, (read, preamble)


async def test_on_anthropic_each_turn_of_a_round_reads_the_debate_so_far_the_turn_before_wrote(
    anthropic_standin: AnthropicStandIn,
) -> None:
    result = await debate(anthropic_settings(anthropic_standin), "adversarial", rounds=2)

    assert result.status is DebateStatus.COMPLETE, result.error
    assert {turn.round for turn in result.transcript} == {0, 1, 2}
    exchanges = anthropic_standin.exchanges
    assert len(exchanges) == len(result.transcript)
    reads = [read_and_written(e)[0] for e in exchanges]
    for previous, turn, read, exchange in zip(
        result.transcript, result.transcript[1:], reads[1:], exchanges[1:], strict=False
    ):
        if turn.role is Role.INDEPENDENT_JUDGE:
            # It reads the record anonymized and reordered, not the debate so far: only the
            # material, which every turn before it wrote.
            assert read >= tokens(exchange.body["system"][-1]["text"]), turn.role
            continue
        if turn.role in (Role.FRAMING, Role.PROPOSER) or previous.round != turn.round:
            continue
        # The turn before this one in the round wrote its prompt up to the end of its debate
        # so far: this turn reads all of it, beyond the preamble.
        blocks = exchange.body["messages"][0]["content"]
        mark = next(i for i, b in enumerate(blocks) if "cache_control" in b)
        so_far_before = sum(tokens(b["text"]) for b in blocks[:mark])
        assert read >= tokens(exchange.body["system"][-1]["text"]) + so_far_before, turn.role


async def test_on_anthropic_the_structured_judges_later_calls_read_the_debate_the_first_wrote(
    anthropic_standin: AnthropicStandIn,
) -> None:
    """The judge's three calls (PRO side, CON side, ruling) share the whole debate ahead of
    their own instructions: the first writes it, the second and third read all of it."""
    result = await debate(anthropic_settings(anthropic_standin), "structured")

    assert result.status is DebateStatus.COMPLETE, result.error
    exchanges = anthropic_standin.exchanges
    assert len(exchanges) == len(result.transcript)
    judged = [
        (turn.phase, exchange)
        for turn, exchange in zip(result.transcript, exchanges, strict=True)
        if turn.role is Role.JUDGE
    ]
    assert [phase for phase, _ in judged] == ["PRO", "CON", "ruling"]
    (_, first), *later = judged
    blocks = first.body["messages"][0]["content"]
    marks = [i for i, b in enumerate(blocks) if isinstance(b, dict) and "cache_control" in b]
    assert marks, "the end of the debate so far carries cache_control"
    so_far = sum(tokens(b["text"]) for b in blocks[: marks[-1] + 1])
    preamble = tokens(first.body["system"][-1]["text"])
    assert read_and_written(first)[1] >= so_far
    for phase, exchange in later:
        read, _ = read_and_written(exchange)
        assert read >= preamble + so_far, phase
