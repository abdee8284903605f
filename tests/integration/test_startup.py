"""Start-up stays light: the command line loads no provider SDK, Slack or web server until a
command that uses one runs (issue 14: `debatebot --help` took 3.4–5.2 s when it did)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.store.db import upgrade

HEAVY = ("anthropic", "openai", "slack_bolt", "slack_sdk", "uvicorn", "apscheduler", "llama_cpp")


def imported_by(statement: str) -> set[str]:
    """The modules `python -X importtime -c statement` imports, by name."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def top_level(modules: set[str]) -> set[str]:
    return {name.split(".", 1)[0] for name in modules}


def test_importing_the_cli_loads_no_sdk_slack_or_server() -> None:
    loaded = top_level(imported_by("import bot.cli"))
    assert "bot" in loaded
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_the_parser_alone_loads_no_database_layer() -> None:
    loaded = top_level(imported_by("import bot.cli; bot.cli.build_parser()"))
    assert loaded.isdisjoint({"sqlalchemy", "sqlmodel", "alembic"}), sorted(loaded)


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("from bot.providers import ProviderRegistry", set()),
        ("import bot.cli.run", set()),
        ("import bot.cli.processes", set()),
        ("import engine.providers.openai_chat", {"openai"}),
        ("import bot.slack.listeners", {"slack_bolt", "slack_sdk"}),
    ],
)
def test_sdks_load_only_with_the_module_that_uses_them(statement: str, expected: set[str]) -> None:
    heavy = top_level(imported_by(statement)) & set(HEAVY)
    assert heavy == expected


def test_a_sqlite_store_loads_no_postgresql_dialect(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bot.sqlite3'}"
    upgrade(url)  # alembic loads every dialect; a worker's store does not migrate
    statement = (
        "from bot.store import turns; from bot.store.db import make_engine, session_scope;"
        " from bot.store.tenancy import EVERY_WORKSPACE;"
        f" s = session_scope(make_engine({url!r}), workspace=EVERY_WORKSPACE).__enter__();"
        " turns.stored_runs(s, debate_ids=[1]); turns.append_turns(s, writes=[])"
    )
    loaded = imported_by(statement)
    assert "bot.store.turns" in loaded
    assert not {name for name in loaded if name.startswith("sqlalchemy.dialects.postgresql")}
