"""The SDK paths against real servers on 127.0.0.1, no fakes in between.

- The `openai` SDK (provider `openai-compatible`) against llama-cpp-python's own OpenAI-compatible
  server running the SmolLM2 GGUF: a one-round debate end to end over HTTP, with the server's
  refusal of `json_schema` detected and structured output falling back to `json_object`+schema.
- The `anthropic` SDK against LiteLLM's proxy, which speaks the Messages API and forwards to the
  same llama.cpp server; structured output comes back as a forced tool call (the alias's
  catalogue entry says so).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.settings import Settings
from bot.wiring import build_services
from engine.errors import LLMError
from engine.llm import LLMRequest, Message, complete_structured
from engine.models import DebateStatus, ProposerTurn, Role
from engine.providers.local import smollm2_path
from engine.providers.openai_chat import OpenAIChatLLM
from engine.providers.schemas import StructuredMode
from engine.runner import run_debate
from tests.helpers import LLAMA_GROUP, local_threads

# The llama.cpp server and the LiteLLM proxy in front of it run SmolLM2: with the other llama tests.
pytestmark = pytest.mark.xdist_group(LLAMA_GROUP)

ROOT = Path(__file__).resolve().parents[2]
MODEL = "smollm2"
LITELLM_KEY = "sk-litellm-loopback-master-key"
CLAUDE_ALIAS = "claude-loopback"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not come up in {timeout_s}s: {log.read_text()[-3000:]}")


def status_of(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:
        return int(response.status)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with SmolLM2, as `/v1` base URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(smollm2_path()),
                "--model_alias",
                MODEL,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "8192",
                "--seed",
                "7",
                "--n_threads",
                str(local_threads()),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/v1/models", process, log, timeout_s=120)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(process)


def litellm_command() -> str:
    command = os.environ.get("DEBATEBOT_TEST_LITELLM") or str(ROOT / ".venv-litellm/bin/litellm")
    if not Path(command).is_file():
        pytest.fail(
            "LiteLLM's proxy is not installed: run the tests through scripts/test, or run"
            " scripts/litellm and export DEBATEBOT_TEST_LITELLM with the path it prints"
        )
    return command


@pytest.fixture(scope="module")
def litellm_proxy(llama_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """LiteLLM's proxy serving the Messages API in front of the llama.cpp server."""
    folder = tmp_path_factory.mktemp("litellm")
    config = folder / "config.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {CLAUDE_ALIAS}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODEL}\n"
        f"      api_base: {llama_server}\n"
        "      api_key: no-key-needed\n"
        "general_settings:\n"
        f"  master_key: {LITELLM_KEY}\n"
    )
    port = free_port()
    log = folder / "proxy.log"
    environment = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                litellm_command(),
                "--config",
                str(config),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/health/liveliness", process, log, timeout_s=120)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


async def test_openai_sdk_runs_a_real_debate_against_llama_cpp_server(
    llama_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="debatebot.providers")
    settings = Settings(
        provider="openai-compatible",
        openai_compatible_base_url=llama_server,
        openai_compatible_model=MODEL,
    )
    services = build_services(settings)
    spec = services.policy.spec(
        "Should we move our nightly batch jobs from cron to Kubernetes CronJobs?", rounds=1
    )
    result = await run_debate(spec, resolve_llm=services.resolve_llm, prompts=services.prompts)

    assert result.status is DebateStatus.COMPLETE, result.error
    roles = [turn.role for turn in result.transcript]
    assert roles[:2] == [Role.FRAMING, Role.PROPOSER]
    assert set(roles[2:-3]) == {Role.CRITIC}, "the critic speaks once, or twice when re-asked"
    assert roles[-3:] == [Role.REBUTTAL, Role.MODERATOR, Role.INDEPENDENT_JUDGE]
    assert {turn.provider for turn in result.transcript} == {"openai-compatible"}
    assert all(turn.usage.input_tokens > 0 for turn in result.transcript)
    adapter = services.resolve_llm(spec.default_model)
    assert isinstance(adapter, OpenAIChatLLM)
    assert adapter.limits is not None
    assert adapter.limits.of(MODEL).start == 4, "openai-compatible calls start at 4 in flight"
    assert adapter.mode_for(MODEL) is StructuredMode.JSON_OBJECT_SCHEMA
    assert "refused structured output mode json_schema" in caplog.text


async def test_llama_cpp_server_refusing_json_schema_is_detected_not_retried(
    llama_server: str,
) -> None:
    settings = Settings(
        provider="openai-compatible",
        openai_compatible_base_url=llama_server,
        openai_compatible_model=MODEL,
        openai_compatible_structured_modes=["json_schema"],
    )
    services = build_services(settings)
    llm = services.resolve_llm(services.policy.spec("q?").default_model)
    request = LLMRequest(
        model=MODEL,
        messages=[Message(role="user", content="Argue for cron. Reply in JSON.")],
        output_schema={"type": "object", "properties": {"a": {"type": "string"}}},
        schema_name="Answer",
    )
    started = time.monotonic()
    with pytest.raises(LLMError, match="refused response format json_schema"):
        await llm.complete(request)
    assert time.monotonic() - started < 5, "a refused mode must not go through the retry loop"
    assert await asyncio.to_thread(status_of, f"{llama_server}/models") == 200, "server died"


async def test_anthropic_sdk_through_litellm_messages_api(
    litellm_proxy: str, tmp_path: Path
) -> None:
    # LiteLLM passes `output_config` on to llama.cpp's server, which ignores it without an
    # error, so no fallback can notice: the alias gets a catalogue entry saying it takes
    # forced tools, as a deployment behind such a gateway would give it.
    catalogue = tmp_path / "models.json"
    catalogue.write_text(
        json.dumps(
            {
                "models": [
                    {
                        "provider": "anthropic",
                        "id": CLAUDE_ALIAS,
                        "prices": {"input_per_mtok": 1.0, "output_per_mtok": 5.0},
                        "structured": ["tool", "prompt"],
                        "temperature": True,
                        "thinking": "none",
                        "source": "LiteLLM proxy in front of llama.cpp (test)",
                        "checked": "2026-11-25",
                    }
                ]
            }
        )
    )
    settings = Settings(
        provider="anthropic",
        model=CLAUDE_ALIAS,
        anthropic_api_key=SecretStr(LITELLM_KEY),
        anthropic_base_url=litellm_proxy,
        # LiteLLM hands content blocks to llama.cpp's server, which takes plain strings only.
        anthropic_prompt_caching=False,
        models_file=catalogue,
        llm_max_attempts=2,
    )
    services = build_services(settings)
    model = services.policy.spec("q?", provider="anthropic", model=CLAUDE_ALIAS).default_model
    llm = services.resolve_llm(model)
    assert llm.provider == "anthropic"
    request = LLMRequest(
        model=CLAUDE_ALIAS,
        max_tokens=300,
        messages=[
            Message(role="system", content="You argue for engineering decisions, briefly."),
            Message(role="user", content="Argue for moving cron jobs to Kubernetes CronJobs."),
        ],
    )
    result = await complete_structured(llm, request, ProposerTurn)
    assert result.value.thesis.strip()
    assert result.value.supporting_arguments
    usage = result.usage
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0
    assert result.cost_usd == pytest.approx(
        (usage.input_tokens * 1.0 + usage.output_tokens * 5.0) / 1e6
    )
    assert all(c.finish_reason == "tool_use" for c in result.completions)
