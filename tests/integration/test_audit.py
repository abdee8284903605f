"""The audit chain catches every change, on SQLite and PostgreSQL, and names it: a deleted tail,
every turn deleted, an edited turn (with or without the chain re-hashed), an edited verdict, and
a rewrite re-hashed and re-sealed by someone without the key. The export carries the seal and
verifies offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlmodel import Session, select

from bot.cli import main
from bot.jobs.worker import DebateWorker, WorkerConfig
from bot.store import repository
from bot.store.audit import GENESIS_HASH, head_of, turn_digest
from bot.store.export import export_record, verify_export
from bot.store.tables import Turn, VerdictRecord
from engine.models import DebateSpec, ModelSettings
from tests.helpers import DebateScript, shipped_prompts

KEY = b"k" * 40
SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
)


async def finished(store: Engine, key: bytes | None = KEY) -> int:
    with Session(store) as session:
        debate, _ = repository.enqueue_debate(session, trigger_key="a", spec=SPEC, source="cli")
    worker = DebateWorker(
        engine=store,
        resolve_llm=lambda _m: DebateScript().llm(),
        prompts=shipped_prompts(),
        config=WorkerConfig(audit_key=key),
    )
    assert await worker.run_once()
    assert debate.id is not None
    return debate.id


def verify(store: Engine, debate_id: int, key: bytes | None = KEY) -> repository.ChainReport:
    with Session(store) as session:
        return repository.verify_chain(session, debate_id=debate_id, key=key)


def rehash(session: Session, debate_id: int) -> list[Turn]:
    """What a forger without the key can do: recompute every link of the chain."""
    prev = GENESIS_HASH
    rows = repository.turn_rows(session, debate_id=debate_id)
    for row in rows:
        row.prev_hash = prev
        row.hash = turn_digest(row, prev)
        prev = row.hash
        session.add(row)
    session.commit()
    return rows


async def test_a_finished_debate_is_sealed_signed_and_verified(store: Engine) -> None:
    debate_id = await finished(store)

    report = verify(store, debate_id)

    assert report.ok
    assert (report.sealed, report.turns_checked, report.signature) == (True, 5, "valid")
    with Session(store) as session:
        debate = repository.get_debate(session, debate_id=debate_id)
        verdict = repository.verdict_for(session, debate_id=debate_id)
    assert (debate.chain_head, debate.chain_turns) == (verdict.chain_head, 5)
    assert verify(store, debate_id, key=None).signature.startswith("not checked")
    assert verify(store, debate_id, key=b"x" * 40).kind == "bad_signature"


async def test_without_a_key_the_seal_is_unsigned_and_still_catches_deletions(
    store: Engine,
) -> None:
    debate_id = await finished(store, key=None)
    assert verify(store, debate_id).signature.startswith("unsigned")
    with store.begin() as connection:
        connection.execute(
            text("DELETE FROM turn WHERE debate_id = :d AND seq = 4"), {"d": debate_id}
        )

    report = verify(store, debate_id)

    assert report.kind == "missing_tail"


async def test_deleting_the_tail_is_named(store: Engine) -> None:
    debate_id = await finished(store)
    with store.begin() as connection:
        connection.execute(
            text("DELETE FROM turn WHERE debate_id = :d AND seq >= 3"), {"d": debate_id}
        )

    report = verify(store, debate_id)

    assert report.kind == "missing_tail"
    assert "sealed with 5 turns, 3 remain: the last 2 were deleted" in (report.problem or "")


async def test_deleting_every_turn_is_named(store: Engine) -> None:
    debate_id = await finished(store)
    with store.begin() as connection:
        connection.execute(text("DELETE FROM turn WHERE debate_id = :d"), {"d": debate_id})

    report = verify(store, debate_id)

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
    assert verify(store, debate_id).kind == "edited_turn"
    assert verify(store, debate_id).first_broken_seq == 2

    with Session(store) as session:
        rehash(session, debate_id)
    report = verify(store, debate_id)

    assert report.kind == "edited_turn"
    assert "hashes recomputed" in (report.problem or "")


async def test_an_edited_verdict_is_named(store: Engine) -> None:
    debate_id = await finished(store)
    with store.begin() as connection:
        connection.execute(
            text("UPDATE verdict SET decision = 'accept', confidence = 0.95 WHERE debate_id = :d"),
            {"d": debate_id},
        )

    report = verify(store, debate_id)

    assert report.kind == "edited_verdict"


async def test_a_rewrite_rehashed_and_resealed_without_the_key_fails_the_signature(
    store: Engine,
) -> None:
    debate_id = await finished(store)
    with Session(store) as session:
        for row in repository.turn_rows(session, debate_id=debate_id):
            if row.seq == 3:
                row.raw_text = "the critic conceded everything"
                session.add(row)
        session.commit()
        rows = rehash(session, debate_id)
        verdict = session.exec(
            select(VerdictRecord).where(VerdictRecord.debate_id == debate_id)
        ).one()
        verdict.decision = "accept"
        verdict.chain_tail = rows[-1].hash
        verdict.chain_head = head_of(verdict.chain_tail, verdict)
        debate = repository.get_debate(session, debate_id=debate_id)
        debate.chain_head = verdict.chain_head
        session.add(verdict)
        session.add(debate)
        session.commit()

    report = verify(store, debate_id)

    assert report.kind == "bad_signature"
    assert "without the audit key" in (report.problem or "")


async def test_the_export_carries_the_seal_and_verifies_offline(
    store: Engine, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    debate_id = await finished(store)
    with Session(store) as session:
        record = export_record(session, debate_id=debate_id, key=KEY)
    assert record["audit"]["head"] == record["verdict_row"]["chain_head"]
    assert record["audit"]["signature"] == record["verdict_row"]["chain_signature"]
    assert len(record["turn_rows"]) == 5
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

    err = capsys.readouterr().err
    assert err.count("cannot read") == 3
    assert "as an export" in err
