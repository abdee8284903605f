"""The audit chain catches every change, on SQLite and PostgreSQL, and names it: a deleted tail,
every turn deleted, an edited turn (with or without the chain re-hashed), an edited verdict or
question, a deleted verdict or seal, and a rewrite re-hashed and re-sealed by someone without the
key (signature kept, dropped, or the seal downgraded). The export carries the seal, verifies
offline, and what people read in it must be what the sealed rows give. `audit verify` checks
every debate when given none; `audit sign` signs intact seals made before the key was set, and
older seals (v1, and debates finished before seals) verify by their own rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine, text
from sqlmodel import Session, select

from bot.cli import main
from bot.jobs.worker import DebateWorker, WorkerConfig
from bot.store import audit, endings, queue, turns, verify
from bot.store.audit import GENESIS_HASH, head_of, turn_digest
from bot.store.db import alembic_config, session_scope, upgrade
from bot.store.debate_tables import DebateSource, Turn, VerdictRecord
from bot.store.export import export_record, verify_export
from bot.store.tenancy import EVERY_WORKSPACE, Workspace, adopt_pending
from engine.models import ContextDocument, DebateSpec, Decision, ModelSettings
from tests.helpers import DebateScript, shipped_prompts

KEY = b"k" * 40
TURNS = 6
"""The canned debate's turns: the framing, one round of four, the independent judge."""
LAST = TURNS - 1
SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    context=[ContextDocument(title="ADR-042", text="Move sessions to Postgres; drop Redis.")],
    default_model=ModelSettings(provider="fake", model="fake-model"),
)


async def finished(store: Engine, key: bytes | None = KEY, trigger: str = "a") -> int:
    """A debate run to its end by a worker with `key`, asked in a Slack channel with a link,
    so every column its seal covers holds something."""
    with Session(store) as session:
        debate, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(
                trigger_key=trigger,
                spec=SPEC,
                source=DebateSource.COMMAND,
                channel_id="C1",
                thread_ts="1700000000.000100",
                requested_by="U1",
                review_channel_id="C2",
                link="https://github.com/acme/app/pull/42",
            ),
        )
    worker = DebateWorker(
        engine=store,
        resolve_llm=lambda _m: DebateScript().llm(),
        prompts=shipped_prompts(),
        config=WorkerConfig(audit_key=key),
    )
    assert await worker.run_once()
    assert debate.id is not None
    return debate.id


def verify_debate(store: Engine, debate_id: int, key: bytes | None = KEY) -> audit.ChainReport:
    """What `audit verify` reports, reading every workspace's rows (as the CLI does)."""
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        return verify.verify_chain(session, debate_id=debate_id, key=key)


def sealed_head(store: Engine, debate_id: int) -> str:
    """The head of a sealed debate's verified chain."""
    head = verify_debate(store, debate_id).head
    assert head is not None
    return head


def rehash(session: Session, debate_id: int) -> list[Turn]:
    """What a forger without the key can do: recompute every link of the chain."""
    prev = GENESIS_HASH
    rows = turns.turn_rows(session, debate_id=debate_id)
    for row in rows:
        row.prev_hash = prev
        row.hash = turn_digest(row, prev)
        prev = row.hash
        session.add(row)
    session.commit()
    return rows


async def test_a_finished_debate_is_sealed_signed_and_verified(store: Engine) -> None:
    debate_id = await finished(store)

    report = verify_debate(store, debate_id)

    assert report.ok
    assert (report.sealed, report.turns_checked, report.signature) == (True, TURNS, "valid")
    with Session(store) as session:
        debate = queue.get_debate(session, debate_id=debate_id)
        verdict = endings.verdict_for(session, debate_id=debate_id)
    assert verdict is not None
    assert (debate.chain_head, debate.chain_turns) == (verdict.chain_head, TURNS)
    assert verify_debate(store, debate_id, key=None).signature.startswith("not checked")
    assert verify_debate(store, debate_id, key=b"x" * 40).kind == "bad_signature"


async def test_without_a_key_the_seal_is_unsigned_and_still_catches_deletions(
    store: Engine,
) -> None:
    debate_id = await finished(store, key=None)
    assert verify_debate(store, debate_id, key=None).signature.startswith(
        "not checked: the seal is"
    )
    assert verify_debate(store, debate_id).kind == "unsigned_seal"
    with store.begin() as connection:
        connection.execute(
            text("DELETE FROM turn WHERE debate_id = :d AND seq = :s"), {"d": debate_id, "s": LAST}
        )

    report = verify_debate(store, debate_id, key=None)

    assert report.kind == "missing_tail"


async def test_deleting_the_tail_is_named(store: Engine) -> None:
    debate_id = await finished(store)
    with store.begin() as connection:
        connection.execute(
            text("DELETE FROM turn WHERE debate_id = :d AND seq >= 3"), {"d": debate_id}
        )

    report = verify_debate(store, debate_id)

    assert report.kind == "missing_tail"
    deleted = f"sealed with {TURNS} turns, 3 remain: the last {TURNS - 3} were deleted"
    assert deleted in (report.problem or "")


async def test_deleting_every_turn_is_named(store: Engine) -> None:
    debate_id = await finished(store)
    with store.begin() as connection:
        connection.execute(text("DELETE FROM turn WHERE debate_id = :d"), {"d": debate_id})

    report = verify_debate(store, debate_id)

    assert report.kind == "missing_tail"
    assert "every turn was deleted" in (report.problem or "")


async def test_an_edited_turn_is_named_whether_or_not_the_chain_was_rehashed(
    store: Engine,
) -> None:
    debate_id = await finished(store)
    with store.begin() as connection:
        connection.execute(
            text("UPDATE turn SET raw_text = 'rewritten' WHERE debate_id = :d AND seq = 2"),
            {"d": debate_id},
        )
    assert verify_debate(store, debate_id).kind == "edited_turn"
    assert verify_debate(store, debate_id).first_broken_seq == 2

    with Session(store) as session:
        rehash(session, debate_id)
    report = verify_debate(store, debate_id)

    assert report.kind == "edited_turn"
    assert "hashes recomputed" in (report.problem or "")


async def test_an_edited_verdict_is_named(store: Engine) -> None:
    debate_id = await finished(store)
    with store.begin() as connection:
        connection.execute(
            text("UPDATE verdict SET decision = 'accept', confidence = 0.95 WHERE debate_id = :d"),
            {"d": debate_id},
        )

    report = verify_debate(store, debate_id)

    assert report.kind == "edited_verdict"


@pytest.mark.parametrize(
    "edit",
    [
        "weights_version = 'fitted-9'",
        "weights_version = NULL",
        "components_json = NULL",
        # "\\:" keeps SQLAlchemy's text() from reading ":0" as a parameter.
        "components_json = REPLACE(components_json, '\"agreement\"\\:0.0', '\"agreement\"\\:1.0')",
    ],
)
async def test_the_confidence_components_and_weights_version_are_sealed(
    store: Engine, edit: str
) -> None:
    """What the review request and the export say the confidence is made of is sealed with
    the verdict: changing or removing it is an edited verdict."""
    debate_id = await finished(store)
    with Session(store) as session:
        verdict = endings.verdict_for(session, debate_id=debate_id)
    assert verdict is not None
    assert verdict.weights_version == "default-1"
    assert '"agreement":0.0' in (verdict.components_json or "")
    execute(store, f"UPDATE verdict SET {edit} WHERE debate_id = :d", debate_id)

    assert verify_debate(store, debate_id).kind == "edited_verdict"


async def test_an_export_whose_confidence_components_were_edited_fails(store: Engine) -> None:
    debate_id = await finished(store)
    with Session(store) as session:
        record = json.loads(json.dumps(export_record(session, debate_id=debate_id, key=KEY)))
    assert verify_export(record, key=KEY).ok
    components = record["result"]["verdict"]["components"]
    assert set(components["values"]) == {
        "agreement",
        "position_bias",
        "grounding",
        "unanswered",
        "output_checks",
        "declared",
    }
    components["values"]["agreement"] = 1.0

    report = verify_export(record, key=KEY)

    assert report.kind == "edited_export"
    assert "result.verdict.components.values.agreement differs" in (report.problem or "")


async def test_a_rewrite_rehashed_and_resealed_without_the_key_fails_the_signature(
    store: Engine,
) -> None:
    debate_id = await finished(store)
    with Session(store) as session:
        for row in turns.turn_rows(session, debate_id=debate_id):
            if row.seq == 3:
                row.raw_text = "the critic conceded everything"
                session.add(row)
        session.commit()
        rows = rehash(session, debate_id)
        verdict = session.exec(
            select(VerdictRecord).where(VerdictRecord.debate_id == debate_id)
        ).one()
        verdict.decision = Decision.ACCEPT
        verdict.chain_tail = rows[-1].hash
        verdict.chain_head = head_of(
            verdict.chain_version, verdict.chain_tail, verdict, verdict.chain_debate
        )
        debate = queue.get_debate(session, debate_id=debate_id)
        debate.chain_head = verdict.chain_head
        session.add(verdict)
        session.add(debate)
        session.commit()

    report = verify_debate(store, debate_id)

    assert report.kind == "bad_signature"
    assert "without the audit key" in (report.problem or "")


async def test_the_export_carries_the_seal_and_verifies_offline(
    store: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    debate_id = await finished(store)
    with Session(store) as session:
        record = export_record(session, debate_id=debate_id, key=KEY)
    assert record["audit"]["head"] == record["verdict_row"]["chain_head"]
    assert record["audit"]["signature"] == record["verdict_row"]["chain_signature"]
    assert len(record["turn_rows"]) == TURNS
    exported = json.loads(json.dumps(record))

    assert verify_export(exported, key=KEY).ok
    exported["verdict_row"]["synthesis"] = "all good, ship it"
    assert verify_export(exported, key=KEY).kind == "edited_verdict"

    path = tmp_path / "debate.json"
    path.write_text(json.dumps(exported), encoding="utf-8")
    monkeypatch.setenv("DEBATEBOT_AUDIT_KEY", KEY.decode())
    assert main(["audit", "verify-export", str(path)]) == 1
    path.write_text(json.dumps(record), encoding="utf-8")
    assert main(["audit", "verify-export", str(path)]) == 0


def test_verify_export_explains_a_file_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json", encoding="utf-8")

    assert main(["audit", "verify-export", str(tmp_path / "missing.json")]) == 1
    assert main(["audit", "verify-export", str(garbage)]) == 1
    assert main(["audit", "verify-export", str(tmp_path)]) == 1

    err = capsys.readouterr().err.splitlines()
    assert err[0].endswith("missing.json: No such file or directory")
    assert "garbage.json is not JSON" in err[1]
    assert "so not a debatebot export" in err[1]
    assert err[2].endswith(": Is a directory")
    assert all(line.startswith("debatebot: ") for line in err)


def reseal(
    store: Engine, debate_id: int, *, version: int = audit.CHAIN_VERSION, signature: str = "drop"
) -> None:
    """What a forger without the key can do once rows are changed: seal them again, every hash
    recomputed, and keep the old signature (`keep`) or drop it (`drop`)."""
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        rows = turns.turn_rows(session, debate_id=debate_id)
        debate = queue.get_debate(session, debate_id=debate_id)
        verdict = endings.verdict_for(session, debate_id=debate_id)
        assert verdict is not None
        values = verdict.model_dump()
        tail = rows[-1].hash if rows else GENESIS_HASH
        audit.seal(values, len(rows), tail, None, debate=debate, version=version)
        for name in ("chain_version", "chain_debate", "chain_turns", "chain_tail", "chain_head"):
            setattr(verdict, name, values[name])
        if signature == "drop":
            verdict.chain_signature = None
        debate.chain_head, debate.chain_turns = verdict.chain_head, verdict.chain_turns
        session.add_all([verdict, debate])
        session.commit()


def execute(store: Engine, sql: str, debate_id: int) -> None:
    with store.begin() as connection:
        connection.execute(text(sql), {"d": debate_id})


def drop_tail_and_reseal(store: Engine, debate_id: int) -> None:
    execute(store, f"DELETE FROM turn WHERE debate_id = :d AND seq = {LAST}", debate_id)
    reseal(store, debate_id)


def rehash_an_edited_turn_and_reseal(store: Engine, debate_id: int) -> None:
    execute(
        store, "UPDATE turn SET raw_text = 'conceded' WHERE debate_id = :d AND seq = 2", debate_id
    )
    with Session(store) as session:
        rehash(session, debate_id)
    reseal(store, debate_id)


def edit_the_verdict_and_reseal(store: Engine, debate_id: int) -> None:
    execute(store, "UPDATE verdict SET decision = 'accept' WHERE debate_id = :d", debate_id)
    reseal(store, debate_id)


SEAL_COLUMNS = "chain_turns = NULL, chain_tail = NULL, chain_head = NULL, chain_debate = NULL"


def delete_the_seal(store: Engine, debate_id: int) -> None:
    execute(
        store,
        f"UPDATE verdict SET {SEAL_COLUMNS}, chain_signature = NULL WHERE debate_id = :d",
        debate_id,
    )


def delete_the_seal_and_its_copy(store: Engine, debate_id: int) -> None:
    delete_the_seal(store, debate_id)
    execute(
        store, "UPDATE debate SET chain_head = NULL, chain_turns = NULL WHERE id = :d", debate_id
    )


def delete_the_verdict(store: Engine, debate_id: int) -> None:
    execute(store, "DELETE FROM verdict WHERE debate_id = :d", debate_id)


def edit_the_question(store: Engine, debate_id: int) -> None:
    execute(
        store, "UPDATE debate SET question = 'Should we drop ADR-042?' WHERE id = :d", debate_id
    )


def run_cli(
    argv: list[str],
    key: bytes | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, str]:
    """`debatebot ARGV` with DEBATEBOT_AUDIT_KEY set to `key` (unset for None): exit code,
    stdout, stderr."""
    if key is None:
        monkeypatch.delenv("DEBATEBOT_AUDIT_KEY", raising=False)
    else:
        monkeypatch.setenv("DEBATEBOT_AUDIT_KEY", key.decode())
    code = main(argv)
    printed = capsys.readouterr()
    return code, printed.out, printed.err


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        pytest.param(tamper, named, id=tamper.__name__)
        for tamper, named in [
            (drop_tail_and_reseal, "UNSIGNED_SEAL"),
            (rehash_an_edited_turn_and_reseal, "UNSIGNED_SEAL"),
            (edit_the_verdict_and_reseal, "UNSIGNED_SEAL"),
            (delete_the_seal, "MISSING_SEAL"),
            (delete_the_seal_and_its_copy, "MISSING_SEAL"),
            (delete_the_verdict, "MISSING_VERDICT"),
            (edit_the_question, "EDITED_DEBATE"),
        ]
    ],
)
async def test_audit_verify_fails_every_way_of_stripping_the_seal_the_issue_names(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tamper: Callable[[Engine, int], None],
    named: str,
) -> None:
    debate_id = await finished(store)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    tamper(store, debate_id)

    code, _, err = run_cli(["audit", "verify", str(debate_id)], KEY, monkeypatch, capsys)

    assert code == 1
    assert f"debate {debate_id}: {named}: " in err


def other_decision(record: dict[str, Any]) -> None:
    verdict = record["result"]["verdict"]
    verdict["decision"] = "reject" if verdict["decision"] == "accept" else "accept"


def strip_the_signature(record: dict[str, Any]) -> None:
    record["verdict_row"]["chain_signature"] = None
    record["audit"]["signature"] = None


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        pytest.param(
            other_decision,
            "EDITED_EXPORT: result.verdict.decision differs from the sealed verdict",
            id="verdict",
        ),
        pytest.param(
            lambda record: record["turns"][2].update(raw_text="the critic conceded"),
            "EDITED_EXPORT: turns[2].raw_text differs from the sealed turn rows",
            id="transcript",
        ),
        pytest.param(
            lambda record: record["debate"].update(question="Drop ADR-042?"),
            "EDITED_DEBATE",
            id="question",
        ),
        pytest.param(
            lambda record: record["spec"]["context"][0].update(text="Keep Redis."),
            "EDITED_DEBATE",
            id="context document",
        ),
        pytest.param(
            lambda record: record.update(verdict_row=None), "MISSING_VERDICT", id="verdict row"
        ),
        pytest.param(strip_the_signature, "UNSIGNED_SEAL", id="signature"),
    ],
)
async def test_audit_verify_export_fails_every_edit_the_issue_names(
    store: Engine,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tamper: Callable[[dict[str, Any]], None],
    named: str,
) -> None:
    debate_id = await finished(store)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    path = tmp_path / "debate.json"
    assert run_cli(["export", str(debate_id), "--out", str(path)], KEY, monkeypatch, capsys)[0] == 0
    assert run_cli(["audit", "verify-export", str(path)], KEY, monkeypatch, capsys)[0] == 0
    record = json.loads(path.read_text(encoding="utf-8"))
    tamper(record)
    path.write_text(json.dumps(record), encoding="utf-8")

    code, _, err = run_cli(["audit", "verify-export", str(path)], KEY, monkeypatch, capsys)

    assert code == 1
    assert f"debate {debate_id}: {named}" in err


async def test_audit_verify_without_an_id_checks_every_debate_and_names_each_failure(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good, unverdicted, unsealed = [await finished(store, trigger=t) for t in ("a", "b", "c")]
    with Session(store) as session:
        queued, _ = queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key="d", spec=SPEC, source=DebateSource.CLI)
        )
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    assert run_cli(["audit", "verify"], KEY, monkeypatch, capsys)[:2] == (
        0,
        "".join(
            f"debate {d}: verified ({TURNS} turns, the verdict, and the debate's question, spec,"
            f" ending and workspace; v3 seal, head {sealed_head(store, d)[:12]}); signature valid\n"
            for d in (good, unverdicted, unsealed)
        )
        + f"debate {queued.id}: turn chain verified (0 turns); not sealed yet\nevery debate"
        " verified (4)\n",
    )
    delete_the_verdict(store, unverdicted)
    delete_the_seal(store, unsealed)

    code, out, err = run_cli(["audit", "verify"], KEY, monkeypatch, capsys)

    assert code == 1
    assert f"debate {good}: verified" in out
    assert f"debate {unverdicted}: MISSING_VERDICT: the debate finished but has no verdict" in err
    assert f"debate {unsealed}: MISSING_SEAL: the debate finished but verdict.chain_turns" in err
    assert err.endswith(
        f"2 of 4 debates failed: debate {unverdicted} (missing_verdict), debate {unsealed}"
        " (missing_seal)\n"
    )


async def test_audit_sign_signs_intact_seals_made_before_the_key_and_refuses_broken_ones(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    intact = await finished(store, key=None, trigger="a")
    broken = await finished(store, key=None, trigger="b")
    execute(store, "UPDATE turn SET raw_text = 'x' WHERE debate_id = :d AND seq = 1", broken)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    assert run_cli(["audit", "verify", str(intact)], None, monkeypatch, capsys)[:2] == (
        0,
        f"debate {intact}: verified ({TURNS} turns, the verdict, and the debate's question,"
        f" spec, ending and workspace; v3 seal, head {sealed_head(store, intact)[:12]});"
        " signature not checked: the seal is unsigned and DEBATEBOT_AUDIT_KEY is not set here\n",
    )
    code, _, err = run_cli(["audit", "verify", str(intact)], KEY, monkeypatch, capsys)
    assert (code, err.split(": ")[1]) == (1, "UNSIGNED_SEAL")
    code, _, err = run_cli(["audit", "sign"], None, monkeypatch, capsys)
    assert (code, err) == (
        2,
        "debatebot: audit sign needs DEBATEBOT_AUDIT_KEY, the key the bot signs seals with\n",
    )

    code, out, err = run_cli(["audit", "sign"], KEY, monkeypatch, capsys)

    assert code == 1
    assert out.startswith(f"debate {intact}: signed its v3 seal (head ")
    assert f"debate {broken}: not signed: EDITED_TURN: turn 1:" in err
    assert run_cli(["audit", "verify", str(intact)], KEY, monkeypatch, capsys)[0] == 0
    assert verify_debate(store, intact).signature == "valid"
    assert run_cli(["audit", "sign", str(intact)], KEY, monkeypatch, capsys)[:2] == (0, "")


async def test_older_seals_verify_by_their_rules_and_say_what_they_do_not_cover(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A v1 seal (schemas 0006 to 0011) and a debate finished before seals (before 0006), as
    migration 0012 finds them: the v1 seal verifies and says the question is not covered; the
    unsealed one verifies only without a key until `audit sign` seals it."""
    v1, old = await finished(store, trigger="a"), await finished(store, trigger="b")
    store.dispose()
    command.downgrade(alembic_config(database_url), "0010")
    with store.begin() as connection:
        verdict = (
            connection.execute(text("SELECT * FROM verdict WHERE debate_id = :d"), {"d": v1})
            .one()
            ._asdict()
        )
        head = audit.head_of(1, verdict["chain_tail"], verdict, None)
        signature = audit.signature_of(
            KEY, version=1, debate_id=v1, turns=TURNS, tail=verdict["chain_tail"], head=head
        )
        connection.execute(
            text("UPDATE verdict SET chain_head = :h, chain_signature = :s WHERE debate_id = :d"),
            {"h": head, "s": signature, "d": v1},
        )
        connection.execute(
            text("UPDATE debate SET chain_head = :h WHERE id = :d"), {"h": head, "d": v1}
        )
        connection.execute(
            text(
                "UPDATE verdict SET chain_turns = NULL, chain_tail = NULL, chain_head = NULL,"
                " chain_signature = NULL WHERE debate_id = :d"
            ),
            {"d": old},
        )
        connection.execute(
            text("UPDATE debate SET chain_head = NULL, chain_turns = NULL WHERE id = :d"),
            {"d": old},
        )
    upgrade(database_url)
    with store.begin() as connection:
        versions: dict[int, int] = dict(
            connection.execute(text("SELECT debate_id, chain_version FROM verdict")).all()
        )
    assert versions == {v1: 1, old: 0}
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)

    code, out, _ = run_cli(["audit", "verify", str(v1)], KEY, monkeypatch, capsys)
    assert code == 0
    assert (
        f"debate {v1}: verified ({TURNS} turns and the verdict; v1 seal, head {head[:12]});" in out
    )
    assert (
        "signature valid. Note: a v1 seal (written before schema 0012) covers the turns and" in out
    )
    assert "not the question, the context documents or the rest of the debate row" in out

    code, out, _ = run_cli(["audit", "verify", str(old)], None, monkeypatch, capsys)
    assert code == 0
    assert f"debate {old}: turn chain verified ({TURNS} turns); signature not checked" in out
    assert "Note: finished before audit seals (schema 0006): only its turn chain" in out
    code, _, err = run_cli(["audit", "verify", str(old)], KEY, monkeypatch, capsys)
    assert (code, err.split(": ")[1]) == (1, "UNSEALED_LEGACY")
    assert "`debatebot audit sign`" in err

    code, out, _ = run_cli(["audit", "sign"], KEY, monkeypatch, capsys)
    assert (code, out) == (
        0,
        f"debate {old}: finished before audit seals; sealed and signed as it stands\n",
    )
    code, out, _ = run_cli(["audit", "verify", str(old)], KEY, monkeypatch, capsys)
    assert code == 0
    assert "v0 seal" in out
    assert (
        "signature valid. Note: finished before audit seals (schema 0006) and sealed later" in out
    )
    edit_the_question(store, old)
    code, _, err = run_cli(["audit", "verify", str(old)], KEY, monkeypatch, capsys)
    assert (code, err.split(": ")[1]) == (1, "EDITED_DEBATE")


async def test_a_downgrade_of_the_seal_by_someone_without_the_key_fails(store: Engine) -> None:
    debate_id = await finished(store)
    reseal(store, debate_id, version=1, signature="keep")
    assert verify_debate(store, debate_id).kind == "bad_signature"
    reseal(store, debate_id, version=1, signature="drop")
    assert verify_debate(store, debate_id).kind == "unsigned_seal"
    assert verify_debate(store, debate_id, key=None).ok


async def test_an_export_made_before_schema_0012_still_verifies(store: Engine) -> None:
    """An archive written before seal v2: a v1 seal, and no version or note in the file; and
    one of a debate that finished before seals. Both verify by their rules, and an edit to
    either is still caught."""
    debate_id = await finished(store)
    with Session(store) as session:
        record = json.loads(json.dumps(export_record(session, debate_id=debate_id, key=KEY)))
    verdict = record["verdict_row"]
    for name in ("chain_version", "chain_debate"):
        del verdict[name]
    for name in ("version", "note"):
        del record["audit"][name]
    verdict["chain_head"] = audit.head_of(1, verdict["chain_tail"], verdict, None)
    verdict["chain_signature"] = audit.signature_of(
        KEY,
        version=1,
        debate_id=debate_id,
        turns=TURNS,
        tail=verdict["chain_tail"],
        head=verdict["chain_head"],
    )
    record["debate"]["chain_head"] = record["audit"]["head"] = verdict["chain_head"]
    record["audit"]["signature"] = verdict["chain_signature"]
    unsealed = json.loads(json.dumps(record))

    report = verify_export(record, key=KEY)

    assert (report.ok, report.version, report.signature) == (True, 1, "valid")
    record["result"]["verdict"]["synthesis"] = "Ship it."
    assert verify_export(record, key=KEY).kind == "edited_export"
    for name in ("chain_turns", "chain_tail", "chain_head", "chain_signature"):
        unsealed["verdict_row"][name] = None
    unsealed["debate"]["chain_head"] = unsealed["debate"]["chain_turns"] = None
    unsealed["audit"].update(head=None, signature=None)
    assert verify_export(unsealed, key=None).note == audit.PRE_SEAL_NOTE
    assert verify_export(unsealed, key=KEY).kind == "unsealed_legacy"
    unsealed["turn_rows"][1]["raw_text"] = "rewritten"
    assert verify_export(unsealed, key=None).kind == "edited_turn"


TABLES_OF_A_DEBATE = {"debate": "id", "turn": "debate_id", "verdict": "debate_id"}


def move(store: Engine, debate_id: int, tables: tuple[str, ...], team: str = "T0OTHER") -> None:
    """What an intruder with database access does to show a record in another workspace."""
    for table in tables:
        execute(
            store,
            f"UPDATE {table} SET team_id = '{team}' WHERE {TABLES_OF_A_DEBATE[table]} = :d",
            debate_id,
        )


@pytest.mark.parametrize(
    ("tables", "kind"),
    [
        (("debate", "turn", "verdict"), "edited_debate"),
        (("turn",), "moved_workspace"),
        (("verdict",), "moved_workspace"),
        (("debate",), "moved_workspace"),
    ],
)
async def test_a_record_moved_to_another_workspace_fails(
    store: Engine, tables: tuple[str, ...], kind: str
) -> None:
    """The seal covers the workspace a debate belongs to: moving the whole record (where it
    would be shown and counted) changes the sealed debate, and moving part of it leaves rows
    whose workspace is not their debate's; with or without the key, and re-sealing without the
    key fails the signature."""
    debate_id = await finished(store)

    move(store, debate_id, tables)

    report = verify_debate(store, debate_id)
    assert report.kind == kind
    assert verify_debate(store, debate_id, key=None).kind == kind
    if kind == "edited_debate":
        assert "workspace" in (report.problem or "")
        reseal(store, debate_id, signature="keep")
        assert verify_debate(store, debate_id).kind == "bad_signature"
    else:
        assert "moved between workspaces" in (report.problem or "")


async def test_a_moved_export_fails_offline(store: Engine) -> None:
    debate_id = await finished(store)
    with Session(store) as session:
        record = json.loads(json.dumps(export_record(session, debate_id=debate_id, key=KEY)))
    assert verify_export(record, key=KEY).ok
    moved = json.loads(json.dumps(record))
    for row in (moved["debate"], moved["verdict_row"], *moved["turn_rows"]):
        row["team_id"] = "T0OTHER"
    assert verify_export(moved, key=KEY).kind == "edited_debate"
    record["turn_rows"][0]["team_id"] = "T0OTHER"
    assert verify_export(record, key=KEY).kind == "moved_workspace"


async def test_a_v2_seal_verifies_says_the_workspace_is_not_covered_and_is_resealed_as_v3(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A seal written before schema 0021 (v2, signed by the key holder then) verifies by its
    rules and says the workspace is not covered, so moving the whole record is not caught;
    `audit sign` re-seals it as v3, after which a move is caught. An export of it made then,
    with no note, still verifies."""
    debate_id = await finished(store)
    with Session(store) as session:
        verdict = endings.verdict_for(session, debate_id=debate_id)
        assert verdict is not None
        debate = queue.get_debate(session, debate_id=debate_id)
        values = verdict.model_dump()
        audit.seal(values, TURNS, values["chain_tail"], KEY, debate=debate, version=2)
        for name in verify.SEAL_COLUMNS:
            setattr(verdict, name, values[name])
        debate.chain_head = verdict.chain_head
        session.add_all([verdict, debate])
        session.commit()
        record = json.loads(json.dumps(export_record(session, debate_id=debate_id, key=KEY)))
    report = verify_debate(store, debate_id)
    assert (report.ok, report.version, report.note) == (True, 2, audit.V2_NOTE)
    record["audit"]["note"] = None
    assert verify_export(record, key=KEY).ok
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)

    code, out, _ = run_cli(["audit", "reseal"], KEY, monkeypatch, capsys)

    assert (code, out) == (
        0,
        f"debate {debate_id}: re-sealed its v2 seal as v3, which covers the workspace it"
        f" belongs to (head {sealed_head(store, debate_id)})\n",
    )
    report = verify_debate(store, debate_id)
    assert (report.ok, report.version, report.note, report.signature) == (True, 3, None, "valid")
    assert run_cli(["audit", "reseal"], KEY, monkeypatch, capsys)[:2] == (0, "")
    move(store, debate_id, ("debate", "turn", "verdict"))
    assert verify_debate(store, debate_id).kind == "edited_debate"
    assert run_cli(["audit", "reseal"], KEY, monkeypatch, capsys)[:2] == (0, "")
    assert verify_debate(store, debate_id).kind == "edited_debate"


async def test_a_moved_record_rewritten_as_an_unsigned_v2_seal_is_not_resealed(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What someone without the key can do to a v3 record: move it to another workspace and
    write a v2 seal over it, which does not cover the workspace, without a signature. With the
    key it fails as unsigned, and `audit reseal` refuses to bless it as v3."""
    debate_id = await finished(store)
    move(store, debate_id, ("debate", "turn", "verdict"))
    reseal(store, debate_id, version=2, signature="drop")
    assert verify_debate(store, debate_id).kind == "unsigned_seal"
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)

    code, out, err = run_cli(["audit", "reseal"], KEY, monkeypatch, capsys)

    assert (code, out) == (1, "")
    assert f"debate {debate_id}: not re-sealed: its v2 seal does not verify with the key" in err
    assert "UNSIGNED_SEAL" in err
    assert verify_debate(store, debate_id).kind == "unsigned_seal"


async def test_adopting_pending_rows_seals_their_debates_again_as_the_workspaces(
    store: Engine,
) -> None:
    """A single-workspace database's debates finished before the bot knew its workspace's id
    are sealed as team `pending`: moved as they are, they would fail (the workspace is sealed);
    adopting them re-seals each that verified as the workspace's, so it still verifies, and one
    that did not verify is moved as it is and still fails."""
    plain = await finished(store, trigger="plain")
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        adopt_pending(session, workspace=Workspace(team_id="T0"))
    assert verify_debate(store, plain).kind == "edited_debate"
    intact, broken = [await finished(store, trigger=t) for t in ("a", "b")]
    execute(store, "UPDATE turn SET raw_text = 'x' WHERE debate_id = :d AND seq = 1", broken)

    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        verify.adopt_pending_records(session, workspace=Workspace(team_id="T1"), key=KEY)

    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        teams = {queue.get_debate(session, debate_id=d).team_id for d in (intact, broken)}
    assert teams == {"T1"}
    report = verify_debate(store, intact)
    assert (report.ok, report.version, report.signature) == (True, 3, "valid")
    assert verify_debate(store, broken).kind == "edited_turn"
