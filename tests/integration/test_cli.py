"""`debatebot run` and `debatebot prompts` in-process, on the fake provider."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select

from bot.cli import main
from bot.store import endings, turns
from bot.store.db import check_schema, make_engine
from bot.store.debate_tables import Debate
from engine.confidence import Component
from engine.models import DebateFlag, DebateResult, DebateStatus


@pytest.fixture(autouse=True)
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", url)
    assert main(["db", "upgrade"]) == 0
    return url


ADR = "ADR-007: move sessions to Postgres.\nDecision: drop Redis.\nConsequences: one less system."


def test_run_prints_turns_and_verdict_and_writes_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    context = tmp_path / "adr.md"
    context.write_text(ADR)
    out = tmp_path / "record.json"

    code = main(
        [
            "run",
            "Should we adopt ADR-007?",
            "--provider",
            "fake",
            "--context",
            str(context),
            "--json",
            str(out),
        ]
    )

    printed = capsys.readouterr()
    assert code == 0
    for role in ("framing", "proposer", "critic", "rebuttal", "moderator"):
        assert f"] {role} ·" in printed.out
    assert "challenge strength: 7/10" in printed.out
    # The fake's independent judge reaches the canned moderator's `revise`.
    assert "CONFIDENCE  0.75 (HIGH)" in printed.out
    assert "MADE OF     judges agree 1 of 1 \u00b7 0 of 1 objections unanswered" in printed.out
    assert "+3.00  agreement 1.00 (judges agree 1 of 1) \u00d7 +3.00" in printed.out
    assert "JUDGE       judge-1 on fake:fake-model: revise (agrees)" in printed.out
    assert "ESCALATE" not in printed.out
    assert "generating on fake:fake-model" in printed.err
    record = json.loads(out.read_text())
    result = DebateResult.model_validate(record["result"])
    assert result.status is DebateStatus.COMPLETE
    assert result.spec.context[0].title == "adr.md"
    assert len(result.transcript) == 6
    assert record["result"]["usage"]["input_tokens"] > 0
    assert "recorded as debate 1" in printed.out


def test_run_with_no_judges_says_the_confidence_is_unverified_and_escalates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "Should we adopt ADR-007?", "--provider", "fake", "--judges", "0"]) == 0

    printed = capsys.readouterr()
    assert "] independent_judge" not in printed.out
    # -3.2 + 3.0 x 0.5 (no judge: neutral) + 1.1 (nothing cited) + 0.2 (MODERATE) = -0.4
    assert "CONFIDENCE  0.40 (LOW)" in printed.out
    assert "MADE OF     confidence unverified: judges are set to 0" in printed.out
    escalation = next(line for line in printed.out.splitlines() if line.startswith("ESCALATE"))
    assert "the confidence is unverified" in escalation
    assert "not clear and grounded: nothing cited to check" in escalation
    assert "confidence 0.40 is below the escalation threshold 0.60" in escalation, (
        "the escalation reason states the printed confidence"
    )
    assert "FLAGS       confidence_unverified" in printed.out
    with pytest.raises(SystemExit):
        main(["run", "Adopt it?", "--provider", "fake", "--judges", "6"])
    assert "must be 0 to 5, got 6" in capsys.readouterr().err


def test_audit_and_export_of_a_recorded_debate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "Should we adopt ADR-007?", "--provider", "fake"]) == 0
    capsys.readouterr()

    assert main(["audit", "verify", "1"]) == 0
    assert (
        "verified (6 turns, the verdict, and the debate's question, spec, ending and workspace;"
        " v3 seal" in capsys.readouterr().out
    )

    exported = tmp_path / "debate.json"
    assert main(["export", "1", "--format", "json", "--out", str(exported)]) == 0
    capsys.readouterr()
    record = json.loads(exported.read_text())
    result = DebateResult.model_validate(record["result"])
    assert len(result.transcript) == 6
    assert result.verdict.decision.value == "revise"
    assert result.verdict.components is not None
    assert set(result.verdict.components.values) == set(Component)
    assert [row.component for row in result.verdict.contributions] == list(Component)
    # Here the fake's independent judge says `accept` against the canned `revise`.
    assert [(j.decision, j.agrees) for j in result.judgments] == [("accept", False)]
    assert DebateFlag.POSITION_BIAS in result.flags
    assert record["verdict_row"]["weights_version"] == "default-1"
    assert json.loads(record["verdict_row"]["components_json"]) == json.loads(
        result.verdict.components.model_dump_json()
    )
    assert record["audit"]["chain_ok"] is True

    assert main(["export", "1", "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("# Debate 1: Should we adopt ADR-007?")
    assert "## Verdict" in markdown
    assert "| 4 | 1 | moderator | 1 |" in markdown
    assert (
        "Confidence made of: judges agree 0 of 1 \u00b7 swapping the sides flipped a judge's"
        " decision \u00b7 0 of 1 objections unanswered" in markdown
    )
    assert "| agreement | 0.00 | 0.00 | +3.00 | +0.00 | judges agree 0 of 1 |" in markdown
    assert "| grounding | not measured | 0.50 | +2.20 | +1.10 |  |" in markdown
    assert (
        "- Independent judge judge-1 on fake:fake-model (sides swapped: yes): accept, disagrees"
        in markdown
    )


def test_an_unknown_debate_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "verify", "42"]) == 1
    assert "no debate with id 42" in capsys.readouterr().err


def test_the_embedded_sqlite_database_migrates_itself_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a folder that exists (one that does not is refused: test_storage_faults.py)."""
    path = tmp_path / "new" / "debatebot.sqlite3"
    path.parent.mkdir()
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", f"sqlite:///{path}")
    assert main(["run", "Ship it?", "--provider", "fake"]) == 0
    assert "recorded as debate 1 in" in capsys.readouterr().out
    engine = make_engine(f"sqlite:///{path}")
    check_schema(engine)
    engine.dispose()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "   "], "the question is empty"),
        (["run", "Ship it?", "--rounds", "5"], "at most 3 rounds"),
        (["run", "Ship it?", "--context", "/nonexistent/adr.md"], "cannot read context file"),
        (["run", "Ship it?", "--budget", "-1"], "--budget must be more than 0; got -1"),
    ],
)
def test_bad_input_gets_an_actionable_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main([*argv, "--provider", "fake"])
    except SystemExit as exit_:
        code, err = 1, str(exit_.code)
    else:
        err = capsys.readouterr().err
    assert code == 1
    assert message in err


def test_a_budget_that_cannot_pay_the_first_call_ends_the_run_before_any_call_saying_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fake model priced like no real one ($300 per million tokens): its first call could
    cost more than the default $1 budget, so nothing is asked, and the user learns what the
    call could cost and how to raise the budget; with that budget it runs."""
    price = {"input_per_mtok": 300.0, "output_per_mtok": 300.0}
    monkeypatch.setenv("DEBATEBOT_PRICES", json.dumps({"fake:fake-model": price}))

    code = main(["run", "Should we adopt ADR-007?", "--provider", "fake"])

    out = capsys.readouterr().out
    assert code == 3
    assert "STATUS      TRUNCATED_BUDGET" in out
    assert "nothing was spent: the framing call to fake:fake-model could cost up to $" in out
    assert "more than the whole $1.00 budget" in out
    asked = re.search(r"Raise the budget to at least \$([0-9.]+) \(--budget \1;", out)
    assert asked, out
    assert "DEBATEBOT_BUDGET_USD sets the default of every debate" in out
    assert "COST        $0.0000 · 0 in / 0 out tokens · 0 turns" in out

    code = main(["run", "Should we adopt ADR-007?", "--provider", "fake", "--budget", asked[1]])

    out = capsys.readouterr().out
    assert "] framing ·" in out
    spent = re.search(r"COST        \$([0-9.]+)", out)
    assert spent, out
    assert 0 < float(spent[1]) <= float(asked[1])


def test_prompts_verify_passes_on_the_shipped_prompts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompts", "verify"]) == 0
    assert "match the lock" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("protocol", "extra"),
    [
        ("stances", ["--for", "adopt it now", "--against", "wait a quarter"]),
        ("consensus", []),
        ("structured", []),
        ("panel", ["--route"]),
    ],
)
def test_the_fake_provider_runs_every_protocol_and_stats_counts_them(
    protocol: str, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["run", "Should we adopt ADR-007?", "--provider", "fake", "--protocol", protocol, *extra]
    )
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["stats", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["protocols"]
    assert (row["protocol"], row["debates"], row["finished"]) == (protocol, 1, 1)


def test_stats_prints_the_dashboard_over_a_period_and_a_channel(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for _ in range(2):
        # With no judge the canned debate's confidence is unverified (LOW) and escalates.
        assert main(["run", "Should we adopt ADR-007?", "--provider", "fake", "--judges", "0"]) == 0
    capsys.readouterr()

    assert main(["stats", "--since", "30d"]) == 0
    out = capsys.readouterr().out
    assert "debatebot stats, since " in out
    assert "adversarial         2         2          2" in out
    assert "LOW confidence 100% \u00b7 escalation rate 100%" in out
    assert "critic challenge strength (1-10: count):" in out
    assert "fake:fake-model" in out
    assert "reviews: 0 decided (median n/a), 2 open, 0 expired" in out

    assert main(["stats", "--json", "--since", "1d"]) == 0
    board = json.loads(capsys.readouterr().out)
    assert board["by_role"]["critic"]["turns"] == 2
    assert sum(board["critic_strength"].values()) == 2
    assert board["cost_by_task_type"]["unspecified"]["debates"] == 2
    assert board["latency_by_model"]["fake:fake-model"]["turns"] == 10

    assert main(["stats", "--json", "--channel", "CNONE"]) == 0
    assert json.loads(capsys.readouterr().out)["protocols"] == []
    with pytest.raises(SystemExit) as bad:
        main(["stats", "--since", "soon"])
    assert bad.value.code == 2
    assert "30d, 12h, 45m" in capsys.readouterr().err


def test_route_needs_the_panel(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "Adopt it?", "--provider", "fake", "--route"]) == 2
    assert "--protocol panel" in capsys.readouterr().err


def test_a_long_question_is_debated_and_stored_whole(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same rule as in Slack (`DebateSpec`): nothing is cut or moved."""
    question = "Should we adopt this? " + "word " * 7_999 + "word"
    out = tmp_path / "record.json"
    assert main(["run", question, "--provider", "fake", "--json", str(out)]) == 0
    spec = DebateResult.model_validate(json.loads(out.read_text())["result"]).spec
    assert spec.question == question
    assert spec.context == []
    with Session(make_engine(database)) as session:
        [stored] = session.exec(select(Debate)).all()
    assert stored.question == question
    capsys.readouterr()


@contextlib.contextmanager
def database_fails_at(statement: str) -> Iterator[None]:
    """The database fails the first statement starting with `statement`, as a disk I/O error
    or a dropped server would, wherever the engine comes from."""
    failed: list[str] = []

    def fail(_conn: object, _cursor: object, sql: str, *_args: object) -> None:
        if sql.startswith(statement) and not failed:
            failed.append(sql)
            raise OperationalError(sql, {}, Exception("disk I/O error"))

    event.listen(Engine, "before_cursor_execute", fail)
    try:
        yield
    finally:
        event.remove(Engine, "before_cursor_execute", fail)
    assert failed, f"no statement started with {statement!r}"


@pytest.mark.parametrize(
    ("statement", "stored", "state"),
    [
        ("UPDATE debate SET state", 0, "queued"),
        # Claimed, then its (empty) turns unreadable: a worker resumes it once the lease ends.
        ("SELECT turn.", 0, "running"),
        # Every turn stored: the framing, one round of four, the independent judge.
        ("INSERT INTO verdict", 6, "running"),
    ],
    ids=["at-the-claim", "at-the-stored-turns-read", "at-the-ending"],
)
def test_run_says_the_database_failed_and_keeps_what_it_stored(
    database: str, capsys: pytest.CaptureFixture[str], statement: str, stored: int, state: str
) -> None:
    """The claim, the read of its stored turns and the ending are the calls `run` makes to the
    store around its debate: any failing ends the command with the database's reason and advice,
    and what was stored stays (the queued or claimed debate, or every paid-for turn for a worker
    to finish)."""
    with database_fails_at(statement):
        code = main(["run", "Should we adopt ADR-007?", "--provider", "fake"])

    printed = capsys.readouterr()
    assert code == 1
    assert "debatebot: database sqlite:///" in printed.err
    assert "unavailable (disk I/O error): reading or writing the SQLite file" in printed.err
    assert "failed on the disk" in printed.err
    assert "the server" not in printed.err
    engine = make_engine(database)
    with Session(engine) as session:
        [debate] = session.exec(select(Debate)).all()
        assert debate.state == state
        assert len(turns.turn_rows(session, debate_id=debate.id or 0)) == stored
        assert endings.verdict_for(session, debate_id=debate.id or 0) is None
    engine.dispose()
