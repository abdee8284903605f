"""Requests that cannot run, on SQLite and PostgreSQL: `debatebot run` refuses them in sentences
before anything is stored, and a worker ends a queued debate that cannot run (or that keeps
being claimed without progress) FAILED once, with the reason, instead of claiming it forever.
Also the terminal's question from stdin or a file, and `run --json` checked offline."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlmodel import Session, col, select

from bot.cli import main
from bot.jobs.unrunnable import MAX_FRUITLESS_CLAIMS
from bot.store import queue, verify
from bot.store.db import make_engine
from bot.store.debate_tables import Debate, DebateSource, DebateState, VerdictRecord
from engine.models import DebateSpec, DebateStatus, ModelSettings
from tests.migrated import upgrade

ROOT = Path(__file__).resolve().parents[2]
FAKE = ModelSettings(provider="fake", model="fake-model")


@pytest.fixture
def database(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    upgrade(database_url)
    return database_url


def stored_debates(url: str) -> list[Debate]:
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            return list(session.exec(select(Debate)).all())
    finally:
        engine.dispose()


PYDANTIC_WORDING = ("Input should", "Value error", "validation error", "max_rounds", "budget_usd")


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        (
            ["--rounds", "4"],
            "the adversarial protocol runs at most 3 rounds; 4 were asked for. Use --rounds 1 to 3",
        ),
        (
            ["--protocol", "stances"],
            "the stances protocol needs at least two debaters, each with a stance: give them with"
            " --for and --against",
        ),
        (
            ["--protocol", "structured", "--rounds", "2"],
            "the structured protocol runs exactly one round; 2 were asked for",
        ),
        (
            ["--protocol", "panel", "--option", "aggregation=bogus"],
            "the panel option aggregation must be one of 'majority', 'weighted' or 'judge';"
            " got 'bogus'",
        ),
        (
            ["--protocol", "consensus", "--option", "nokey=1"],
            "the consensus protocol has no option nokey; its options are votes, threshold,"
            " decisions",
        ),
        (["--option", "seed=7"], "the adversarial protocol takes no options; seed given"),
        (["--rounds", "0"], "--rounds must be at least 1; got 0"),
        (["--budget", "-1"], "--budget must be more than 0; got -1"),
        (
            ["--moderator", "anthropic:claude-sonnet-4"],
            "use claude-sonnet-5-5 instead: `--moderator anthropic:claude-sonnet-5-5`",
        ),
    ],
)
def test_a_request_that_cannot_run_is_refused_in_a_sentence_and_nothing_is_stored(
    database: str, asked: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "Should we adopt ADR-007?", "--provider", "fake", *asked])

    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("debatebot: cannot start this debate: ")
    assert said in err
    assert not [wording for wording in PYDANTIC_WORDING if wording in err], err
    assert "1 to 1" not in err
    assert "--model" not in err
    assert stored_debates(database) == [], "a refused request leaves no debate behind"


def queue_debate(url: str, key: str, spec: DebateSpec) -> int:
    """A debate queued straight into the store, as one queued before the intake checked it (or
    by hand) would be."""
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            debate, _ = queue.enqueue_debate(
                session,
                new=queue.NewDebate(trigger_key=key, spec=spec, source=DebateSource.COMMAND),
            )
        assert debate.id is not None
        return debate.id
    finally:
        engine.dispose()


def run_worker(url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env.update(DEBATEBOT_DATABASE_URL=url, DEBATEBOT_PROVIDER="fake")
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", "worker", "--exit-when-idle", "--name", "w"],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=300,
    )


def ended(url: str, debate_id: int) -> tuple[Debate, VerdictRecord | None, bool]:
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            debate = queue.get_debate(session, debate_id=debate_id)
            verdict = session.exec(
                select(VerdictRecord).where(VerdictRecord.debate_id == debate_id)
            ).one_or_none()
            report = verify.verify_chain(session, debate_id=debate_id)
            return debate, verdict, report.ok
    finally:
        engine.dispose()


def test_a_worker_ends_a_queued_debate_whose_spec_cannot_run_failed_once_with_the_reason(
    database: str,
) -> None:
    bad = queue_debate(
        database,
        "bad-spec",
        DebateSpec(question="Adopt it?", default_model=FAKE, max_rounds=4),
    )
    good = queue_debate(database, "good-spec", DebateSpec(question="Adopt it?", default_model=FAKE))

    worker = run_worker(database)

    assert worker.returncode == 0, worker.stderr
    assert "Task exception was never retrieved" not in worker.stderr
    debate, verdict, sealed = ended(database, bad)
    assert (debate.state, debate.outcome, debate.claims) == (
        DebateState.FINISHED,
        DebateStatus.FAILED,
        1,
    )
    reason = "its spec cannot run: the adversarial protocol runs at most 3 rounds; 4 were asked for"
    assert debate.error is not None
    assert reason in debate.error
    assert verdict is not None
    assert verdict.status is DebateStatus.FAILED
    assert reason in verdict.result_json, "the sealed result says why"
    assert sealed, "the ending is sealed as any other"
    assert ended(database, good)[0].outcome is DebateStatus.COMPLETE, "the others still run"
    # Nothing is left to claim: a second worker finds no work.
    assert run_worker(database).returncode == 0
    assert ended(database, bad)[0].claims == 1


def test_a_debate_claimed_again_and_again_without_progress_is_ended_with_a_record(
    database: str,
) -> None:
    """As if its earlier workers each crashed before storing a turn: this claim is the
    MAX_FRUITLESS_CLAIMS + 1st, so it is ended, not run."""
    debate_id = queue_debate(
        database, "crashing", DebateSpec(question="Adopt it?", default_model=FAKE)
    )
    engine = make_engine(database)
    with Session(engine) as session:
        session.execute(
            update(Debate).where(col(Debate.id) == debate_id).values(claims=MAX_FRUITLESS_CLAIMS)
        )
        session.commit()
    engine.dispose()

    worker = run_worker(database)

    assert worker.returncode == 0, worker.stderr
    debate, verdict, sealed = ended(database, debate_id)
    assert (debate.state, debate.outcome) == (DebateState.FINISHED, DebateStatus.FAILED)
    assert debate.error is not None
    assert (
        f"workers claimed this debate {MAX_FRUITLESS_CLAIMS + 1} times and it stored 0 turns,"
        f" so at least {MAX_FRUITLESS_CLAIMS} runs stopped without progress" in debate.error
    )
    assert "ended without running" in worker.stderr
    assert verdict is not None
    assert sealed


def test_a_worker_ends_a_debate_whose_stored_spec_cannot_be_read(database: str) -> None:
    debate_id = queue_debate(
        database, "unreadable", DebateSpec(question="Adopt it?", default_model=FAKE)
    )
    broken = json.dumps({"question": "Adopt it?", "max_rounds": 0})
    engine = make_engine(database)
    with Session(engine) as session:
        session.execute(update(Debate).where(col(Debate.id) == debate_id).values(spec_json=broken))
        session.commit()
    engine.dispose()

    worker = run_worker(database)

    assert worker.returncode == 0, worker.stderr
    assert "Task exception was never retrieved" not in worker.stderr
    debate, verdict, sealed = ended(database, debate_id)
    assert (debate.state, debate.outcome, debate.claims) == (
        DebateState.FINISHED,
        DebateStatus.FAILED,
        1,
    )
    assert debate.error == (
        "its stored spec cannot be read (max_rounds must be at least 1; got 0); the debate was"
        " not run"
    )
    assert debate.spec_json == broken, "the row keeps what was stored"
    assert verdict is not None
    assert sealed


LONG_QUESTION = "Should we adopt this? " + "and this " * 16_000 + "in full?"
"""About 144,000 characters: more than the 128 KiB one command-line argument may hold."""


@pytest.mark.parametrize("source", ["stdin", "file"])
def test_a_question_longer_than_a_command_line_comes_from_stdin_or_a_file(
    database: str,
    source: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert len(LONG_QUESTION.encode()) > 128 * 1024
    if source == "stdin":
        monkeypatch.setattr(sys, "stdin", io.StringIO(LONG_QUESTION))
        asked = ["-"]
    else:
        path = tmp_path / "question.txt"
        path.write_text(LONG_QUESTION, encoding="utf-8")
        asked = ["--question-file", str(path)]

    code = main(["run", *asked, "--provider", "fake", "--judges", "0"])

    assert code == 0, capsys.readouterr().err
    [debate] = stored_debates(database)
    assert debate.question == LONG_QUESTION, "stored whole"


def test_a_question_from_stdin_is_capped_and_read_once(
    database: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("x" * 200_001))
    assert main(["run", "-", "--provider", "fake"]) == 2
    assert (
        "the question in stdin is longer than the 200,000 characters a debate can read"
        in capsys.readouterr().err
    )
    assert main(["run", "-", "--context", "-", "--provider", "fake"]) == 2
    assert "cannot both read stdin" in capsys.readouterr().err
    assert main(["run", "--provider", "fake"]) == 2
    assert "there is no question" in capsys.readouterr().err
    assert stored_debates(database) == []


def test_the_json_record_of_a_run_verifies_offline(
    database: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A deployment's receipt keys (on SQLite they would sit beside the file by default; on
    # PostgreSQL there is no default folder, and an unsigned receipt does not verify).
    monkeypatch.setenv("DEBATEBOT_RECEIPT_KEYS_DIR", str(tmp_path / "keys"))
    out = tmp_path / "record.json"
    assert main(["run", "Should we adopt ADR-007?", "--provider", "fake", "--json", str(out)]) == 0
    assert "debatebot audit verify-export" in capsys.readouterr().out

    assert main(["audit", "verify-export", str(out)]) == 0
    assert "debate 1: verified (6 turns" in capsys.readouterr().out

    exported = tmp_path / "exported.json"
    assert main(["export", "1", "--out", str(exported)]) == 0
    ran, written = json.loads(out.read_text()), json.loads(exported.read_text())
    assert ran.keys() == written.keys(), "--json writes what `export` writes"
    assert ran["turn_rows"] == written["turn_rows"]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('{"result": {}}', "is not a debatebot export: it has no debate, spec, turn_rows,"),
        ("[1, 2]", "is not a debatebot export: it has no debate, spec"),
        ("not json", "is not JSON"),
    ],
)
def test_verify_export_says_in_a_sentence_why_a_file_is_not_an_export(
    database: str,
    content: str,
    said: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "other.json"
    path.write_text(content, encoding="utf-8")

    assert main(["audit", "verify-export", str(path)]) == 1

    err = capsys.readouterr().err
    assert said in err
    assert "`debatebot export ID --out FILE` and `debatebot run --json FILE` write one" in err
    assert "'debate'" not in err, "no bare KeyError"
