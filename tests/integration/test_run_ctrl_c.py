"""Ctrl-C in `debatebot run` (issue 44): the first stops the debate (CANCELLED, from the
terminal, its partial record printed); a second exits at once. A real subprocess on the fake
model, each call slow enough (DEBATEBOT_FAKE_DELAY_S) to be interrupted mid-call."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session, select

from bot.store.db import make_engine
from bot.store.debate_tables import CancelSource, Debate, DebateState
from engine.models import DebateStatus
from tests.migrated import upgrade

ROOT = Path(__file__).resolve().parents[2]


def start_run(url: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DEBATEBOT_DATABASE_URL": url,
        "DEBATEBOT_PROVIDER": "fake",
        "DEBATEBOT_FAKE_DELAY_S": "600",
        "DEBATEBOT_REVIEW_SAMPLE_RATE": "0",
        "DEBATEBOT_REVIEW_SAMPLE_MAX": "0",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "run", "Should we move sessions to Redis?"],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def running(engine: Engine, process: subprocess.Popen[str]) -> Debate:
    """The debate once it runs (its first call under way)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        with Session(engine) as session:
            debate = session.exec(select(Debate)).first()
        if debate is not None and debate.state == DebateState.RUNNING:
            return debate
        time.sleep(0.1)
    raise AssertionError("the debate never started")


def test_the_first_ctrl_c_cancels_and_prints_the_partial_record(database_url: str) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    process = start_run(database_url)
    debate = running(engine, process)

    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)

    assert process.returncode == 130, err
    assert f"stopping debate {debate.id}; Ctrl-C again exits at once" in err
    assert "STATUS      CANCELLED" in out
    assert "with Ctrl-C in the terminal" in out  # who stopped it, and how, in its record
    assert f"recorded as debate {debate.id}" in out
    with Session(engine) as session:
        ended = session.exec(select(Debate)).one()
    assert ended.state == DebateState.FINISHED
    assert ended.outcome == DebateStatus.CANCELLED
    assert ended.cancelled_from == CancelSource.TERMINAL
    engine.dispose()


def test_a_second_ctrl_c_exits_at_once_and_the_cancel_stands(database_url: str) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    process = start_run(database_url)
    running(engine, process)

    process.send_signal(signal.SIGINT)
    assert process.stderr is not None
    said = ""
    while "Ctrl-C again exits at once" not in said:  # the first press is handled: press again
        line = process.stderr.readline()
        assert line, "run ended before the second Ctrl-C"
        said += line
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)

    assert process.returncode == 130, err
    assert "exiting now" in err
    assert "STATUS" not in out
    with Session(engine) as session:
        debate = session.exec(select(Debate)).one()
    # Gone without an ending: the next claim finds the debate (and its cancel request, once
    # stored) and ends it.
    assert debate.state == DebateState.RUNNING
    engine.dispose()
