"""The loopback model server as the benchmarks and the eval use it: any protocol's output types
answered from their schemas, after a fixed latency, through the real openai SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.settings import Settings
from bot.wiring import build_services
from engine.models import DebateStatus
from engine.runner import run_debate
from tests.integration.llm_server import ModelServer

DELAY_S = 0.05


@pytest.fixture
async def slow_server() -> AsyncIterator[ModelServer]:
    server = ModelServer(delay_s=DELAY_S)
    await server.start()
    yield server
    await server.stop()


@pytest.mark.parametrize("protocol", ["adversarial", "stances", "consensus", "structured", "panel"])
async def test_every_protocol_runs_against_the_schema_filling_server(
    slow_server: ModelServer, protocol: str
) -> None:
    settings = Settings(
        provider="openai-compatible",
        openai_compatible_base_url=f"{slow_server.url}/v1",
        openai_compatible_model="loopback",
        # OpenAI's strict mode drops `minItems`, so a reply filled from that schema can be too
        # short; a server that enforces the whole schema (llama.cpp style) gets all of it.
        openai_compatible_structured_modes=["json_object_schema"],
    )
    services = build_services(settings)
    stances: dict[str, Any] = (
        {"stances_for": ["adopt"], "stances_against": ["wait"]} if protocol == "stances" else {}
    )
    spec = services.policy.spec("Adopt ADR-7?", protocol=protocol, rounds=1, **stances)

    result = await run_debate(spec, resolve_llm=services.resolve_llm, prompts=services.prompts)

    assert result.status is DebateStatus.COMPLETE, result.error
    assert len(slow_server.requests) == sum(1 + t.reasks for t in result.transcript)
    assert all(turn.latency_s >= DELAY_S for turn in result.transcript)
    assert {turn.provider for turn in result.transcript} == {"openai-compatible"}
