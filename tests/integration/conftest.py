"""Database fixtures: every store test runs on SQLite and on a real PostgreSQL server.

PostgreSQL comes from DEBATEBOT_TEST_POSTGRES_URL, which `scripts/test` sets after starting a
throwaway server with `scripts/postgres`; each test gets a database of its own.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from bot.store.db import make_engine
from tests.helpers import LLAMA_GROUP
from tests.integration.llm_server import ModelServer
from tests.migrated import upgrade

# Sampled reviews are drawn at random (DEBATEBOT_REVIEW_SAMPLE_RATE, 5 % by default, and
# DEBATEBOT_REVIEW_SAMPLE_MAX, 20 %, while a workspace has few sampled reviews): a test that
# wants one asks for it, so no other test meets a review request it did not cause.
os.environ.setdefault("DEBATEBOT_REVIEW_SAMPLE_RATE", "0")
os.environ.setdefault("DEBATEBOT_REVIEW_SAMPLE_MAX", "0")

BACKENDS = ["sqlite", "postgres"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every SmolLM2 test goes to one xdist worker, so two never share the two cores, and that
    group runs first: it is the run's longest chain of tests, so it starts while the rest are
    shared out among the other workers instead of after them."""
    for item in items:
        if item.get_closest_marker("local_model"):
            item.add_marker(pytest.mark.xdist_group(LLAMA_GROUP))

    def llama(item: pytest.Item) -> bool:
        return any(m.args == (LLAMA_GROUP,) for m in item.iter_markers("xdist_group"))

    items.sort(key=lambda item: not llama(item))  # stable: each side keeps its order


def postgres_base_url() -> str:
    url = os.environ.get("DEBATEBOT_TEST_POSTGRES_URL")
    if not url:
        pytest.fail(
            "DEBATEBOT_TEST_POSTGRES_URL is not set: run the tests through scripts/test, which"
            " starts PostgreSQL, or export the URL printed by scripts/postgres"
        )
    return url


def fresh_database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'debatebot.sqlite3'}"
        return
    base = postgres_base_url()
    name = f"debatebot_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from fresh_database_url(request.param, tmp_path)


@pytest.fixture
def postgres_url(tmp_path: Path) -> Iterator[str]:
    yield from fresh_database_url("postgres", tmp_path)


@pytest.fixture
def store(database_url: str) -> Iterator[Engine]:
    """A migrated database of each backend."""
    upgrade(database_url)
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
async def server() -> AsyncIterator[ModelServer]:
    """The scriptable OpenAI / Anthropic model server on 127.0.0.1 (see llm_server.py)."""
    model_server = ModelServer()
    await model_server.start()
    yield model_server
    await model_server.stop()
