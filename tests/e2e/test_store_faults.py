"""Storage faults as the people on both ends see them, on real storage: a disk that fills up, a
database file the kernel will not let the bot write, and a PostgreSQL that goes down (or stops
answering) while an ADR is posted. Each is named for what it is, to the operator (`/healthz`,
the log) and to the person who asked, with what to do; and what the person is told is what
then happens, also when the store stopped answering in the middle of queueing."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlmodel import select

from bot.store.db import READ_ONLY_HEALTH, make_engine, session_scope
from bot.store.debate_tables import Debate
from bot.store.tenancy import EVERY_WORKSPACE
from tests.e2e.conftest import CHANNEL, SIGNING_SECRET, Bot, BotFactory
from tests.e2e.driver import SlackDriver
from tests.e2e.slack_emulator import SlackEmulator
from tests.e2e.test_serve import DEBATEBOT, free_port, serve_env
from tests.e2e.test_triggers import ADR_TEXT, message_event, watch_adrs
from tests.integration.conftest import fresh_database_url
from tests.integration.stalling_proxy import StallingProxy
from tests.integration.test_storage_faults import READ_ONLY_KINDS, read_only, read_only_kind
from tests.migrated import upgrade

SMALL_DISK = "8m"
"""The tmpfs the full-disk test fills: room for the database, and for far more than the free
space /healthz asks for once the filler is gone."""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real filesystem of its own, small enough to fill: a tmpfs mounted for the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root (CI runs the tests as root)")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL_DISK}", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"this machine lets no test mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        # Lazily: the bot's engine may still hold the database open when this runs.
        subprocess.run(["umount", "--lazy", str(disk)], check=True)


def fill(disk: Path) -> Path:
    """Write a file on `disk` until the filesystem refuses another byte; returns it."""
    filler = disk / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            chunk = b"\0" * size
            try:
                while True:
                    os.write(descriptor, chunk)
            except OSError as refused:
                if refused.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(descriptor)
    assert os.statvfs(disk).f_bfree == 0
    return filler


async def answer_to_command(bot: Bot, question: str) -> str:
    """Ask `/debate question` and return the ephemeral answer it gets."""
    before = len(bot.emulator.responses)
    assert (await bot.driver.command(question)).status == 200
    answers = await bot.wait_for(
        lambda: bot.emulator.responses[before:], f"the answer to {question!r}"
    )
    return str(answers[0]["text"])


async def test_a_full_disk_is_named_to_the_operator_and_the_user_until_space_is_freed(
    small_disk: Path, start_bot: BotFactory
) -> None:
    bot = await start_bot(database_url=f"sqlite:///{small_disk / 'bot.sqlite3'}")
    assert await bot.driver.health() == (200, {"ok": True, "database": "ok", "concurrency": 1})

    filler = fill(small_disk)
    told = await answer_to_command(bot, "Should we adopt ADR-042?")
    assert "disk is full" in told
    assert "free space" in told
    assert "unavailable" not in told
    status, report = await bot.driver.health()
    assert status == 503
    assert report["database"].startswith("disk full: ")
    assert bot.debates() == []

    filler.unlink()
    # The next write that succeeds is the debate this asks for; with it, the disk is healthy.
    assert (await bot.driver.command("Should we adopt ADR-042 now?")).status == 200
    [debate] = await bot.finished()
    assert debate.question == "Should we adopt ADR-042 now?"
    assert await bot.driver.health() == (200, {"ok": True, "database": "ok", "concurrency": 1})


async def test_a_read_only_database_file_is_told_as_read_only_with_its_path(
    tmp_path: Path, start_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The bot (re)started on a database file it can read but not write (a backup restored as
    another user, an immutable file): it serves, and every write is refused."""
    path = tmp_path / "restored" / "bot.sqlite3"
    url = f"sqlite:///{path}"
    upgrade(url)
    with read_only(path, folder=False):
        bot = await start_bot(database_url=url)
        told = await answer_to_command(bot, "Should we adopt ADR-042?")
        status, report = await bot.driver.health()

    assert "read-only" in told
    assert str(path) in told
    assert "make it writable" in told
    assert "unavailable" not in told
    assert (status, report["database"]) == (503, READ_ONLY_HEALTH)
    [logged] = [r.getMessage() for r in caplog.records if r.name == "bot.slack.failures"]
    assert "is read-only (attempt to write a readonly database)" in logged
    assert str(path) in logged
    assert "write access" in logged
    assert bot.debates() == []


@pytest.mark.parametrize("kind", list(READ_ONLY_KINDS))
async def test_serve_on_a_read_only_database_starts_answers_and_recovers(
    tmp_path: Path, kind: str
) -> None:
    """`debatebot serve` (re)started on a SQLite file it cannot write: it serves, `/healthz`
    names the cause and the fix, a person who asks is told their request cannot be stored,
    and once the file can be written the bot takes requests again, with no restart."""
    emulator = SlackEmulator()
    await emulator.start()
    path, url = read_only_kind(tmp_path, kind, queued=False)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with log.open("w") as stderr:
        process = await asyncio.create_subprocess_exec(
            DEBATEBOT, "serve", env=serve_env(emulator, url, port), stderr=stderr
        )
    try:
        async with aiohttp.ClientSession() as session:
            driver = SlackDriver(base, SIGNING_SECRET, f"{emulator.url}/response", session)
            with read_only(path, folder=READ_ONLY_KINDS[kind]):
                health = await health_of(session, base, process)
                told = await ephemeral_answer(emulator, driver, "Should we adopt ADR-042?")
                assert process.returncode is None, log.read_text()

            assert health == (503, {"ok": False, "database": READ_ONLY_HEALTH, "concurrency": 16})
            assert "The debate store is read-only" in told
            assert "so nothing was queued" in told
            assert "make it writable" in told

            # Writable again: the same process answers and runs the next debate.
            # Polling another process: nothing here to await.
            while (await health_of(session, base, process))[0] != 200:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
            assert (await driver.command("Should we adopt ADR-042 now?")).status == 200
            while not any(m["text"].startswith("Verdict") for m in emulator.posted(CHANNEL)):
                assert process.returncode is None, log.read_text()
                await asyncio.sleep(0.1)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)
        await emulator.stop()
    said = log.read_text()
    assert process.returncode == 0, said
    assert f"the SQLite file {path}, its folder, or the bot.sqlite3-wal and" in said
    assert "Serving anyway: /healthz answers 503" in said
    assert "can be written again: reopening it" in said
    engine = make_engine(url)
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        stored = [(d.question, d.state.value) for d in session.exec(select(Debate))]
    engine.dispose()
    assert stored == [("Should we adopt ADR-042 now?", "finished")]


async def health_of(
    session: aiohttp.ClientSession, base: str, process: asyncio.subprocess.Process
) -> tuple[int, object]:
    """`/healthz` of the serve process, waiting for it to listen (failing if it exits)."""
    while True:
        assert process.returncode is None, "serve exited"
        try:
            async with session.get(f"{base}/healthz") as response:
                return response.status, await response.json()
        except aiohttp.ClientConnectionError:
            await asyncio.sleep(0.1)


async def ephemeral_answer(emulator: SlackEmulator, driver: SlackDriver, question: str) -> str:
    """Ask `/debate question` and return the answer it gets (the ephemeral response)."""
    before = len(emulator.responses)
    assert (await driver.command(question)).status == 200
    while len(emulator.responses) == before:  # noqa: ASYNC110 (the emulator sets no event)
        await asyncio.sleep(0.05)
    return str(emulator.responses[before]["text"])


@pytest.fixture
def postgres_behind_a_proxy(tmp_path: Path) -> Iterator[tuple[str, StallingProxy]]:
    """A database of its own on the test PostgreSQL, reached through a proxy the test can take
    down (the shared server itself keeps running)."""
    databases = fresh_database_url("postgres", tmp_path)
    url = make_url(next(databases))
    proxy = StallingProxy(url.host or "127.0.0.1", url.port or 5432)
    try:
        yield url.set(port=proxy.port).render_as_string(hide_password=False), proxy
    finally:
        proxy.close()
        next(databases, None)


OUTAGES = {
    # PostgreSQL stops: connections close, new ones are refused.
    "down": (StallingProxy.cut, StallingProxy.restore),
    # PostgreSQL (or the network to it) stops answering without closing anything.
    "hung": (StallingProxy.stall, StallingProxy.resume),
}


@pytest.mark.parametrize("outage", list(OUTAGES))
async def test_an_adr_posted_during_a_postgresql_outage_is_told_what_really_happens(
    postgres_behind_a_proxy: tuple[str, StallingProxy], start_bot: BotFactory, outage: str
) -> None:
    """PostgreSQL fails, an ADR is posted, then PostgreSQL is back before Slack would send the
    post again (a minute later). The thread is told nothing was queued and nothing will be,
    and that is what happens: the post was acknowledged in time, so Slack does not send it
    again, and it is never debated, while the bot serves new requests again."""
    url, proxy = postgres_behind_a_proxy
    # A store call is given up after 3 s: longer than the redelivery check may hold the ack.
    bot = await start_bot(database_url=url, database_timeout_s=1.0)
    watch_adrs(bot)
    ts = bot.emulator.seed_message(CHANNEL, ADR_TEXT)
    fail, recover = OUTAGES[outage]
    fail(proxy)

    async def postgresql_is_back(_resend: int) -> None:
        recover(proxy)

    replies = await bot.driver.deliver(message_event(ts, ADR_TEXT), between=postgresql_is_back)
    [notice] = await bot.wait_for(lambda: bot.emulator.in_thread(CHANNEL, ts), "the notice")
    recover(proxy)
    told = notice["text"]
    assert "unavailable" in told
    assert "nothing was queued, and nothing will be: post it again" in told
    assert [r.status for r in replies] == [200], "acknowledged in time: Slack sends it once"

    # The store answers again: a new request is served, and the ADR stays undebated.
    await bot.driver.command("Should we adopt ADR-043?")
    [debate] = await bot.finished()
    assert debate.source == "command"
    assert [m["ts"] for m in bot.emulator.in_thread(CHANNEL, ts)] == [notice["ts"]]


async def test_a_resend_the_store_cannot_check_says_an_earlier_delivery_may_have_started_it(
    postgres_behind_a_proxy: tuple[str, StallingProxy], start_bot: BotFactory
) -> None:
    """Slack sends a post again (the bot did not answer it: it was restarting) while
    PostgreSQL is down: whether the first delivery queued a debate cannot be known, so the
    thread is told both possibilities, not that nothing was queued."""
    url, proxy = postgres_behind_a_proxy
    bot = await start_bot(database_url=url)
    watch_adrs(bot)
    ts = bot.emulator.seed_message(CHANNEL, ADR_TEXT)
    proxy.cut()

    reply = await bot.driver.event(message_event(ts, ADR_TEXT), retry_num=1)
    [notice] = await bot.wait_for(lambda: bot.emulator.in_thread(CHANNEL, ts), "the notice")
    proxy.restore()
    assert reply.status == 200
    told = notice["text"]
    assert "If an earlier delivery of this already started a debate, it goes on" in told
    assert "if not, nothing was queued: post it again" in told
    assert "nothing will be" not in told


async def test_a_debate_the_store_stopped_answering_about_is_not_said_to_be_unqueued(
    start_bot: BotFactory,
) -> None:
    """The database stops answering while the debate's row is being written, past the
    store's deadline, then answers: the row is stored after all. The person was told that
    whether it was queued is unknown, and the debate then runs, as they were told it might."""
    bot = await start_bot(database_timeout_s=0.2)
    released = threading.Event()

    def stuck(_conn: object, _cursor: object, sql: str, *_args: object) -> None:
        if sql.startswith("INSERT INTO debate (") and not released.is_set():
            released.wait(30)

    # Left in place (idle once released): removing it while the stuck statement is inside it
    # would fail that statement.
    event.listen(bot.engine, "before_cursor_execute", stuck)
    try:
        told = await answer_to_command(bot, "Should we adopt ADR-042?")
    finally:
        released.set()

    assert "cannot tell whether it was" in told
    assert "the debate starts in this channel once the store answers" in told
    assert "nothing was queued" not in told
    [debate] = await bot.finished()
    assert debate.question == "Should we adopt ADR-042?"
