"""A model's place in its life, seen by the people who run debates: a deprecated model runs
with one warning naming its retirement date and replacement, a retired one is refused before
any request (the loopback model server counts them: zero), and a model the vendor answers 404
for is reported as "model not available: retired or misspelt", from the CLI and in Slack."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.cli import main
from bot.settings import Settings, SettingsError
from bot.wiring import build_services, check_configured_models
from engine.pricing import FREE
from engine.providers.openai_chat import OpenAIChatLLM
from engine.providers.retry import RetryPolicy
from engine.providers.schemas import StructuredMode
from tests.e2e.conftest import BotFactory, start_bot  # noqa: F401 (the fixture, reused)
from tests.integration.llm_server import ModelServer, Step

KEY = "sk-test-lifecycle-key-0123456789abcdef"
NOT_FOUND = "The model `gpt-9-typo` does not exist or you do not have access to it."


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ModelServer]:
    """The model server on an event loop of its own in a thread, so the synchronous CLI (which
    runs its own loop) can call it, and the CLI's settings pointed at it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = ModelServer()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", f"sqlite:///{tmp_path / 'lifecycle.sqlite3'}")
    monkeypatch.setenv("DEBATEBOT_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("DEBATEBOT_OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("DEBATEBOT_LLM_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("DEBATEBOT_LLM_BACKOFF_BASE_S", "0.01")
    assert main(["db", "upgrade"]) == 0
    yield server
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def run(*args: str) -> int:
    return main(["run", "Should we adopt ADR-042?", "--provider", "openai", *args])


def test_a_deprecated_model_runs_with_one_warning_naming_its_date_and_replacement(
    openai_server: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run("--model", "gpt-4.1")

    printed = capsys.readouterr()
    assert code == 0, printed.err
    warnings = [line for line in printed.err.splitlines() if "openai:gpt-4.1 " in line]
    assert len(warnings) == 1, printed.err
    assert "retires on 2027-01-14" in warnings[0]
    assert "gpt-6-luna" in warnings[0]
    assert openai_server.requests, "the debate ran"


def test_a_retired_model_is_refused_before_any_request(
    openai_server: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run("--model", "gpt-4.1-nano")

    said = capsys.readouterr().err
    assert code == 1
    assert "openai:gpt-4.1-nano was retired on 2026-10-23" in said
    assert "use gpt-6-luna instead" in said
    assert "Nothing was sent to the model" in said
    assert openai_server.requests == []


def test_a_model_the_vendor_does_not_know_is_reported_as_not_available(
    openai_server: ModelServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model the catalogue does not know is allowed (priced by the team); the vendor's 404
    says it is not there, and the person learns that in one sentence, asked once."""
    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    monkeypatch.setenv("DEBATEBOT_PRICES", json.dumps({"openai:gpt-9-typo": price}))
    openai_server.script("openai", Step(status=404, error=NOT_FOUND))

    code = run("--model", "gpt-9-typo")

    out = capsys.readouterr().out
    assert code == 1
    assert "STATUS      FAILED" in out
    assert (
        "model not available: openai:gpt-9-typo is retired or misspelt; `debatebot models`"
        " lists current ones"
    ) in out
    assert len(openai_server.requests) == 1, "a 404 is not retried"


async def test_slack_says_model_not_available_to_the_requester(
    start_bot: BotFactory,  # noqa: F811
) -> None:
    server = ModelServer()
    await server.start()
    try:
        server.script("openai", Step(status=404, error=NOT_FOUND))
        llm = OpenAIChatLLM(
            provider="openai",
            api_key=KEY,
            base_url=f"{server.url}/v1",
            modes=[StructuredMode.JSON_SCHEMA],
            price_of=lambda _model: FREE,
            facts_of=lambda _model: None,
            timeout_s=5,
            retry=RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.01),
            key_variable="DEBATEBOT_OPENAI_API_KEY",
        )
        bot = await start_bot(llm=llm)
        reply = await bot.driver.command("Should we adopt ADR-042?")
        assert reply.status == 200
        [debate] = await bot.finished()
        verdict = await bot.in_thread(debate.thread_ts or "", "Verdict", "the verdict")
        assert "model not available" in str(verdict["blocks"])
        assert "retired or misspelt" in str(verdict["blocks"])
        assert "`debatebot models` lists current ones" in str(verdict["blocks"])
        await llm.aclose()
    finally:
        await server.stop()


async def test_slack_refuses_a_debate_on_a_retired_model_before_anything_is_queued(
    start_bot: BotFactory,  # noqa: F811
) -> None:
    bot = await start_bot(provider="openai", model="gpt-4.1-nano", openai_api_key=KEY)

    reply = await bot.driver.command("Should we adopt ADR-042?")

    assert reply.status == 200
    answer = await bot.wait_for(lambda: bot.emulator.responses, "the refusal")
    assert "openai:gpt-4.1-nano was retired on 2026-10-23" in answer[-1]["text"]
    assert "gpt-6-luna" in answer[-1]["text"]
    assert bot.debates() == []
    assert bot.llm.calls == []


def test_serve_and_worker_start_up_warn_of_a_deprecated_model_and_refuse_a_retired_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What `serve` and `worker` check before they take work (`check_configured_models`)."""
    deprecated = build_services(
        Settings(provider="openai", model="gpt-4.1", openai_api_key=SecretStr(KEY))
    )
    check_configured_models(deprecated)
    check_configured_models(deprecated)
    logged = [r.getMessage() for r in caplog.records if "deprecated model" in r.getMessage()]
    assert len(logged) == 1, "once per model and process"
    assert "openai:gpt-4.1 retires on 2027-01-14" in logged[0]
    assert "gpt-6-luna" in logged[0]

    retired = build_services(Settings(provider="openai", model="o1", openai_api_key=SecretStr(KEY)))
    with pytest.raises(SettingsError, match=r"openai:o1 was retired on 2026-10-23.*gpt-6\.1-sol"):
        check_configured_models(retired)


def test_models_shows_each_roles_status_and_warns_once_per_deprecated_model(
    openai_server: ModelServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEBATEBOT_ROLES__MODERATOR__MODEL", "gpt-4.1")
    assert main(["models", "--provider", "openai"]) == 0
    out = capsys.readouterr().out
    assert "openai:gpt-6-luna" in out
    assert "deprecated until 2027-01-14" in out
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1
    assert "used by: moderator, judge" in warnings[0]
    assert "current openai models" in out
    assert "gpt-6.2-sol" in out

    monkeypatch.setenv("DEBATEBOT_ROLES__MODERATOR__MODEL", "o1")
    assert main(["models", "--provider", "openai"]) == 1
    assert "RETIRED: openai:o1 was retired on 2026-10-23" in capsys.readouterr().out
    assert openai_server.requests == []
