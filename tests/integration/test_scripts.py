"""The repository's own scripts and files as a checkout uses them: `scripts/postgres` starts a
server of its own per run (a free port, a new data folder) and `stop` ends only one it started,
so runs from several checkouts at once never share or stop each other's; and git ignores what
the README's commands write into the checkout by default."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from bot.cli.parser import build_parser
from bot.receipting import DEFAULT_KEYS_DIR
from bot.settings import Settings
from bot.store.db import sqlite_file

ROOT = Path(__file__).resolve().parents[2]
POSTGRES = ROOT / "scripts" / "postgres"
MARKER = "debatebot-throwaway"


def test_git_ignores_what_the_documented_commands_write_by_default(tmp_path: Path) -> None:
    """`debatebot calibration` writes its chart, `debatebot eval` its results, and `debatebot
    run` its SQLite file with the receipt keys' folder beside it (a private signing key) into
    the current folder unless told otherwise: in a checkout, none shows up as a change, so no
    deployment's signing key is ever committed."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    parser = build_parser()
    chart = parser.parse_args(["calibration"]).png
    results = parser.parse_args(["eval", "--cases", "cases.jsonl"]).out
    default = sqlite_file(Settings.model_fields["database_url"].default)
    assert default is not None
    database = default.relative_to(Path.cwd())  # a file in the folder the command runs in
    keys = database.parent / DEFAULT_KEYS_DIR
    # A repository of its own with the checkout's .gitignore (CI's copy of the checkout is
    # no git repository).
    subprocess.run([git, "init", "-q", str(tmp_path)], check=True)
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    written = [
        Path(chart),
        Path(results) / "results.jsonl",
        Path(results) / "report.md",
        database,
        keys / "keys.json",
        keys / "private" / "20261201-35847ea178c7.pem",
    ]
    for name in [*written, Path("kept.txt")]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")

    status = subprocess.run(
        [git, "-C", str(tmp_path), "status", "--porcelain", "--untracked-files=all"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()

    assert sorted(status) == ["?? .gitignore", "?? kept.txt"]


def postgres_env(**settings: str) -> dict[str, str]:
    """The environment of a run that names no server (as CI's) but `settings`."""
    names = ("DEBATEBOT_PG_", "DEBATEBOT_TEST_POSTGRES_URL")
    env = {k: v for k, v in os.environ.items() if not k.startswith(names)}
    return env | settings


def start(**settings: str) -> tuple[str, str]:
    """`scripts/postgres` with `settings`: the URL it prints, and what it says on stderr."""
    done = subprocess.run(
        [str(POSTGRES)], env=postgres_env(**settings), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), done.stderr


def stop(data: str) -> None:
    subprocess.run([str(POSTGRES), "stop", data], env=postgres_env(), check=True, timeout=120)


def answers(url: str) -> bool:
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with psycopg.connect(plain, connect_timeout=5) as connection:
            return connection.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


@pytest.fixture
def data_folders() -> Iterator[list[str]]:
    """Data folders for the servers a test starts (under /tmp, which the postgres user can
    enter), each stopped and removed after it, whatever happened."""
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        pytest.skip("PostgreSQL's binaries (Debian's postgresql package) are not installed")
    made: list[str] = []

    def folder() -> str:
        made.append(tempfile.mkdtemp(prefix="debatebot-pg-test.", dir="/tmp"))
        return made[-1]

    folders = [folder(), folder()]
    yield folders
    for data in folders:
        if os.path.isdir(data):
            stop(data)


def test_each_run_gets_a_server_of_its_own_and_stop_ends_only_that_one(
    data_folders: list[str],
) -> None:
    first_data, reused_data = data_folders
    first, said = start(DEBATEBOT_PG_DATA=first_data)
    # No data folder given: a new one, named with the command that stops it.
    second, second_said = start()
    second_data = second_said.split("data in ", 1)[1].split(";", 1)[0]
    data_folders.append(second_data)

    assert f"stop it with: scripts/postgres stop {first_data}" in said
    assert second_data not in (first_data, reused_data)
    assert make_url(first).port != make_url(second).port
    assert answers(first)
    assert answers(second)
    assert (Path(first_data) / MARKER).exists()

    # A port the caller names, where a server answers: used as it is, and `stop` on the data
    # folder it was handed leaves that server alone.
    port = str(make_url(first).port)
    assert start(DEBATEBOT_PG_PORT=port, DEBATEBOT_PG_DATA=reused_data)[0] == first
    stop(reused_data)
    assert answers(first)
    assert not Path(reused_data).exists()

    # A folder it did not make is never touched.
    foreign = Path(tempfile.mkdtemp(prefix="debatebot-pg-test.", dir="/tmp"))
    (foreign / "PG_VERSION").write_text("16\n")
    try:
        stop(str(foreign))
        assert (foreign / "PG_VERSION").exists()
        refused = subprocess.run(
            [str(POSTGRES)],
            env=postgres_env(DEBATEBOT_PG_DATA=str(foreign)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode == 1
        assert "holds files it did not make; choose an empty folder" in refused.stderr
    finally:
        shutil.rmtree(foreign)

    stop(first_data)
    assert not answers(first)
    assert not Path(first_data).exists()
    assert answers(second), "the other run's server goes on"


def stubbed_checkout(folder: Path, pytest_exit: int) -> Path:
    """A checkout holding the real scripts/test and scripts/postgres, whose installs and tools
    are stand-ins: the "pytest" notes the server it was given (URL, then data folder) and
    exits with `pytest_exit`."""
    (folder / "scripts").mkdir(parents=True)
    (folder / ".venv" / "bin").mkdir(parents=True)
    for name in ("test", "postgres"):
        shutil.copy(ROOT / "scripts" / name, folder / "scripts" / name)
    stubs = {
        "scripts/setup": "exit 0",
        "scripts/litellm": "echo /nonexistent/litellm",
        "scripts/chromium": "echo /nonexistent/chromium",
        ".venv/bin/ruff": "exit 0",
        ".venv/bin/mypy": "exit 0",
        ".venv/bin/pytest": 'printf "%s\\n%s\\n" "$DEBATEBOT_TEST_POSTGRES_URL"'
        f' "${{DEBATEBOT_PG_DATA:-}}" > given.txt; exit {pytest_exit}',
    }
    for name, body in stubs.items():
        (folder / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (folder / name).chmod(0o755)
    return folder


def test_scripts_test_stops_the_server_it_started_and_keeps_the_tests_outcome(
    tmp_path: Path, data_folders: list[str]
) -> None:
    checkout = stubbed_checkout(tmp_path / "checkout", pytest_exit=3)
    done = subprocess.run(
        ["scripts/test"], cwd=checkout, env=postgres_env(), capture_output=True, timeout=300
    )
    url, data = (checkout / "given.txt").read_text().splitlines()
    data_folders.append(data)

    assert done.returncode == 3, done.stderr
    assert url.startswith("postgresql+psycopg://postgres@127.0.0.1:")
    assert data.startswith("/tmp/debatebot-pg.")
    assert not answers(url), "the run's server was stopped"
    assert not Path(data).exists()


def test_scripts_test_leaves_a_server_the_caller_points_at_running(
    tmp_path: Path, data_folders: list[str]
) -> None:
    callers, _said = start(DEBATEBOT_PG_DATA=data_folders[0])
    checkout = stubbed_checkout(tmp_path / "checkout", pytest_exit=0)
    done = subprocess.run(
        ["scripts/test"],
        cwd=checkout,
        env=postgres_env() | {"DEBATEBOT_TEST_POSTGRES_URL": callers},
        capture_output=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr
    assert (checkout / "given.txt").read_text().splitlines() == [callers, ""]
    assert answers(callers)
