"""API keys never reach logs or stored rows: debates on hosted providers run through the real
worker and store (SQLite and PostgreSQL), with every logger at DEBUG, and then every table and
every log line is scanned for the keys."""

from __future__ import annotations

import logging

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine, MetaData, select

from bot.settings import Settings
from bot.store import queue
from bot.store.db import session_scope
from bot.store.debate_tables import DebateSource
from bot.store.tenancy import PENDING_WORKSPACE
from bot.wiring import build_services, build_worker
from engine.models import DebateStatus
from tests.integration.llm_server import ModelServer, Step

OPENAI_KEY = "sk-proj-SECRETopenai0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-api03-SECRETanthropic0123456789"


def every_stored_value(engine: Engine) -> str:
    metadata = MetaData()
    metadata.reflect(engine)
    chunks = []
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            for row in connection.execute(select(table)):
                chunks.append(repr(tuple(row)))
    return "\n".join(chunks)


async def run_debate_on(store: Engine, database_url: str, settings: Settings) -> DebateStatus:
    services = build_services(settings)
    spec = services.policy.spec("Should we adopt ADR-42 (event sourcing for billing)?")
    worker = build_worker(services, store, worker_id="secrets-test")
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        queued, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(trigger_key="secrets", spec=spec, source=DebateSource.COMMAND),
        )
    assert queued.id is not None
    claimed = await worker.claim(debate_id=queued.id)
    assert claimed is not None
    result = await worker.execute(claimed)
    assert result is not None
    return result.status


def settings_for(server: ModelServer, database_url: str) -> Settings:
    return Settings(
        provider="openai",
        openai_api_key=SecretStr(OPENAI_KEY),
        openai_base_url=f"{server.url}/v1",
        anthropic_api_key=SecretStr(ANTHROPIC_KEY),
        anthropic_base_url=server.url,
        database_url=database_url,
        llm_max_attempts=2,
        llm_backoff_base_s=0.01,
    )


async def test_no_key_in_logs_or_rows_after_a_debate_across_two_families(
    store: Engine,
    database_url: str,
    server: ModelServer,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    server.script("openai", Step(status=500))
    status = await run_debate_on(store, database_url, settings_for(server, database_url))
    assert status is DebateStatus.COMPLETE
    apis = {r.api for r in server.requests}
    assert apis == {"openai", "anthropic"}, "the moderator should be on the other family"
    for request in server.requests:
        key = OPENAI_KEY if request.api == "openai" else ANTHROPIC_KEY
        assert key in str(request.headers.values()), "the keys were sent, so they were live"
    assert caplog.records, "nothing was logged at DEBUG, so the scan would prove nothing"
    out, err = capfd.readouterr()
    for text in (every_stored_value(store), caplog.text, out, err):
        assert OPENAI_KEY not in text
        assert ANTHROPIC_KEY not in text


async def test_a_provider_error_echoing_the_key_is_redacted_before_it_is_stored(
    store: Engine,
    database_url: str,
    server: ModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server.script("openai", Step(status=401, error=f"Incorrect API key provided: {OPENAI_KEY}"))
    status = await run_debate_on(store, database_url, settings_for(server, database_url))
    assert status is DebateStatus.FAILED
    stored = every_stored_value(store)
    assert "DEBATEBOT_OPENAI_API_KEY" in stored, "the failure should say which variable to fix"
    assert OPENAI_KEY not in stored
    assert OPENAI_KEY not in caplog.text
