"""Random tampering with a sealed debate, seeded and bounded, on SQLite and PostgreSQL, judged by
the real commands (`debatebot audit verify`, `audit verify-export`) and their exit codes.

Each case is drawn from a category in turn (so every category is drawn) with random details: an
edit, a deletion or a NULL over the turn, verdict, seal and debate rows, or over one field of an
export, and a forger's re-seal without the key. With DEBATEBOT_AUDIT_KEY set, every case fails
and names its problem. Without it, every case fails too except those only the key can tell (a
re-seal, a stripped signature), which pass saying that the signature was not checked. After
each case the rows are put back and verify again, so every case starts from a sealed debate.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Boolean, DateTime, Engine, Float, Integer, delete, insert, select, update
from sqlalchemy import Enum as SqlEnum
from sqlmodel import Session

from bot.store import audit, turns
from bot.store.debate_tables import Debate, Turn, VerdictRecord
from tests.integration.test_audit import (
    KEY,
    delete_the_verdict,
    execute,
    finished,
    reseal,
    run_cli,
    verify_debate,
)

SEED = 30
CASES = 40
"""Cases per database and per test: four of each category."""

DEBATES = Debate.__table__  # type: ignore[attr-defined]
TURNS = Turn.__table__  # type: ignore[attr-defined]
VERDICTS = VerdictRecord.__table__  # type: ignore[attr-defined]

TURN_AUDITED = [c.name for c in TURNS.c if c.name not in ("id", "debate_id")]
"""A turn's audited columns, and its workspace, which must be its debate's (seal v3)."""
VERDICT_AUDITED = [c.name for c in VERDICTS.c if c.name not in ("id", "debate_id", "created_at")]
DEBATE_SEALED = [
    "trigger_key",
    "source",
    "channel_id",
    "requested_by",
    "parent_debate_id",
    "review_channel_id",
    "link",
    "question",
    "protocol",
    "spec_json",
    "created_at",
    "state",
    "outcome",
    "decision",
    "confidence",
    "cost_usd",
    "error",
    "triage",
    "triage_reason",
    "finished_at",
    "team_id",
    "enterprise_id",
    "chain_head",
    "chain_turns",
]
"""The debate's columns the seal covers, and its copy of the seal."""
DEBATE_UPDATED_LATER = {
    "thread_ts": "1700000999.000200",
    "halt_reason": "the thread was deleted",
    "pr_comment_due": None,
    "updated_at": datetime(2030, 1, 1, tzinfo=UTC),
    "lease_owner": "w9",
    "claims": 7,
}
"""Columns the bot itself updates after a debate finished: changing them breaks nothing."""
SEAL = [
    ("verdict", "chain_turns"),
    ("verdict", "chain_tail"),
    ("verdict", "chain_head"),
    ("verdict", "chain_debate"),
    ("verdict", "chain_signature"),
    ("debate", "chain_head"),
    ("debate", "chain_turns"),
]
KINDS = re.compile(
    r"debate \d+: (REMOVED_TURN|EDITED_TURN|MISSING_TAIL|ADDED_TURN|EDITED_VERDICT|EDITED_DEBATE"
    r"|EDITED_SEAL|MISSING_VERDICT|MISSING_SEAL|MOVED_WORKSPACE|UNSEALED_LEGACY|UNSIGNED_SEAL|BAD_SIGNATURE"
    r"|EDITED_EXPORT): "
)


def changed(value: Any, rng: random.Random, *, length: int | None = None) -> Any:
    """`value` changed a little, keeping its type (and within `length` characters): a JSON text
    has one of its leaves changed."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, 100])
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, datetime):
        return value + timedelta(seconds=rng.choice([1, 3600]))
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict | list) and leaves(parsed):
            path = rng.choice(leaves(parsed))
            return json.dumps(set_leaf(parsed, path, changed(get_leaf(parsed, path), rng)))
        if re.fullmatch("[0-9a-f]{64}", value):
            return value[:-1] + ("0" if value[-1] != "0" else "1")
        instant = _instant(value)
        if instant is not None:
            return (instant + timedelta(seconds=1)).isoformat()
        if length is not None and len(value) + 9 > length:
            return value[:-1] + ("0" if value[-1:] != "0" else "1")
        return value + " (edited)"
    if isinstance(value, list | dict):
        return [*value, "added"] if isinstance(value, list) else {**value, "added": 1}
    return "added"


def _instant(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if "T" in value and ":" in value else None
    except ValueError:
        return None


Path_ = tuple[str | int, ...]


def leaves(value: Any, path: Path_ = ()) -> list[Path_]:
    """The paths to every scalar (and empty container) inside a JSON value, in an order that
    does not depend on how its dicts were built (so a seed draws the same cases)."""
    if isinstance(value, dict) and value:
        return [p for name in sorted(value) for p in leaves(value[name], (*path, name))]
    if isinstance(value, list) and value:
        return [p for index, item in enumerate(value) for p in leaves(item, (*path, index))]
    return [path]


def get_leaf(value: Any, path: Path_) -> Any:
    for step in path:
        value = value[step]
    return value


def set_leaf(value: Any, path: Path_, new: Any) -> Any:
    if not path:
        return new
    get_leaf(value, path[:-1])[path[-1]] = new
    return value


@dataclass(frozen=True)
class Case:
    """One way of tampering; `needs_key`: only the signature can tell it."""

    what: str
    needs_key: bool = False


@dataclass
class Rows:
    """A debate's rows as stored, to put back after each case."""

    debate: dict[str, Any]
    turns: list[dict[str, Any]]
    verdict: dict[str, Any]

    @staticmethod
    def read(store: Engine, debate_id: int) -> Rows:
        with store.connect() as connection:
            debate = connection.execute(select(DEBATES).where(DEBATES.c.id == debate_id)).one()
            turns = connection.execute(
                select(TURNS).where(TURNS.c.debate_id == debate_id).order_by(TURNS.c.seq)
            ).all()
            verdict = connection.execute(
                select(VERDICTS).where(VERDICTS.c.debate_id == debate_id)
            ).one()
        return Rows(
            dict(debate._mapping), [dict(t._mapping) for t in turns], dict(verdict._mapping)
        )

    def restore(self, store: Engine) -> None:
        debate_id = self.debate["id"]
        with store.begin() as connection:
            connection.execute(delete(TURNS).where(TURNS.c.debate_id == debate_id))
            connection.execute(delete(VERDICTS).where(VERDICTS.c.debate_id == debate_id))
            values = {k: v for k, v in self.debate.items() if k != "id"}
            connection.execute(update(DEBATES).where(DEBATES.c.id == debate_id).values(values))
            connection.execute(insert(TURNS), self.turns)
            connection.execute(insert(VERDICTS), [self.verdict])


def set_column(store: Engine, table: Any, row_id: int, name: str, value: Any) -> None:
    with store.begin() as connection:
        connection.execute(update(table).where(table.c.id == row_id).values({name: value}))


def _length(table: Any, name: str) -> int | None:
    return getattr(table.c[name].type, "length", None)


def edited(table: Any, name: str, value: Any, rng: random.Random) -> Any:
    """`value` changed: for a column the database holds to an enum's values (CHECK), another of
    them, since that is the only edit it lets through; else `changed`."""
    kind = table.c[name].type
    if isinstance(kind, SqlEnum):
        return rng.choice([v for v in kind.enums if v != value])
    return changed(value, rng, length=_length(table, name))


def edit_turn(store: Engine, rows: Rows, rng: random.Random) -> Case:
    turn = rng.choice(rows.turns)
    name = rng.choice(TURN_AUDITED)
    value = changed(turn[name], rng, length=_length(TURNS, name))
    if name in ("seq", "round", "attempt"):
        value = turn[name] + 100  # clear of the unique keys
    set_column(store, TURNS, turn["id"], name, value)
    return Case(f"turn {turn['seq']}: {name} edited")


def delete_turn(store: Engine, rows: Rows, rng: random.Random) -> Case:
    turn = rng.choice(rows.turns)
    with store.begin() as connection:
        connection.execute(delete(TURNS).where(TURNS.c.id == turn["id"]))
    return Case(f"turn {turn['seq']} deleted")


def append_turn(store: Engine, rows: Rows, rng: random.Random) -> Case:
    last = rows.turns[-1]
    added = {k: v for k, v in last.items() if k != "id"}
    added.update(seq=last["seq"] + 1, round=last["round"] + 100, prev_hash=last["hash"])
    added["hash"] = audit.turn_digest(added, last["hash"])
    with store.begin() as connection:
        connection.execute(insert(TURNS), [added])
    return Case("a turn appended, chained to the last")


def edit_verdict(store: Engine, rows: Rows, rng: random.Random) -> Case:
    name = rng.choice(VERDICT_AUDITED)
    value = rows.verdict[name]
    new = (
        rng.choice([0, 1, 2, 4]) if name == "chain_version" else edited(VERDICTS, name, value, rng)
    )
    set_column(store, VERDICTS, rows.verdict["id"], name, new)
    return Case(f"verdict: {name} edited")


def null_verdict(store: Engine, rows: Rows, rng: random.Random) -> Case:
    nullable = [
        n for n in VERDICT_AUDITED if VERDICTS.c[n].nullable and rows.verdict[n] is not None
    ]
    name = rng.choice(nullable)
    set_column(store, VERDICTS, rows.verdict["id"], name, None)
    return Case(f"verdict: {name} nulled", needs_key=name == "chain_signature")


def delete_verdict(store: Engine, rows: Rows, rng: random.Random) -> Case:
    delete_the_verdict(store, rows.debate["id"])
    return Case("verdict row deleted")


def edit_debate(store: Engine, rows: Rows, rng: random.Random) -> Case:
    name = rng.choice(DEBATE_SEALED)
    value = rows.debate[name]
    if name == "state":
        new: Any = rng.choice(["queued", "running"])
    elif name == "parent_debate_id":
        new = rows.debate["id"] if value is None else None
    elif value is None:
        new = {"error": "the model failed", "triage": "answered"}.get(name, "added")
        if isinstance(DEBATES.c[name].type, SqlEnum):
            new = rng.choice(DEBATES.c[name].type.enums)
    else:
        new = edited(DEBATES, name, value, rng)
    set_column(store, DEBATES, rows.debate["id"], name, new)
    return Case(f"debate: {name} edited")


def null_debate(store: Engine, rows: Rows, rng: random.Random) -> Case:
    nullable = [n for n in DEBATE_SEALED if DEBATES.c[n].nullable and rows.debate[n] is not None]
    name = rng.choice(nullable)
    set_column(store, DEBATES, rows.debate["id"], name, None)
    return Case(f"debate: {name} nulled")


def strip_seal(store: Engine, rows: Rows, rng: random.Random) -> Case:
    """NULL a random part of the seal, maybe claiming an older version too."""
    stripped = rng.sample(SEAL, rng.randint(1, len(SEAL)))
    version = rng.choice([3, 3, 2, 1, 0])
    for table, name in stripped:
        row = rows.verdict if table == "verdict" else rows.debate
        set_column(store, VERDICTS if table == "verdict" else DEBATES, row["id"], name, None)
    set_column(store, VERDICTS, rows.verdict["id"], "chain_version", version)
    empty = set(stripped) | {
        (table, name)
        for table, name in SEAL
        if (rows.verdict if table == "verdict" else rows.debate)[name] is None
    }
    needs_key = (version == 3 and empty <= {("verdict", "chain_signature")}) or (
        version == 0 and empty == set(SEAL)
    )
    return Case(f"seal: {sorted(stripped)} nulled, version {version}", needs_key)


def forge(store: Engine, rows: Rows, rng: random.Random) -> Case:
    """Change the record and seal it again, as anyone without the key can."""
    debate_id = rows.debate["id"]
    change = rng.choice(["drop the tail", "edit a turn", "edit the verdict", "edit the question"])
    if change == "drop the tail":
        last = rows.turns[-1]["seq"]
        execute(store, f"DELETE FROM turn WHERE debate_id = :d AND seq = {last}", debate_id)
    elif change == "edit a turn":
        turn = rng.choice(rows.turns)
        set_column(store, TURNS, turn["id"], "raw_text", "the critic conceded everything")
        with Session(store) as session:
            prev = audit.GENESIS_HASH
            for row in turns.turn_rows(session, debate_id=debate_id):
                row.prev_hash, row.hash = prev, audit.turn_digest(row, prev)
                prev = row.hash
                session.add(row)
            session.commit()
    elif change == "edit the verdict":
        set_column(store, VERDICTS, rows.verdict["id"], "synthesis", "Ship it, no risk.")
    else:
        set_column(store, DEBATES, debate_id, "question", "Should we drop ADR-042?")
    version, signature = rng.choice([3, 2, 1]), rng.choice(["keep", "drop"])
    reseal(store, debate_id, version=version, signature=signature)
    if rng.random() < 0.25:
        stripped = ", ".join(f"{name} = NULL" for _, name in SEAL[:5])
        execute(
            store,
            f"UPDATE verdict SET {stripped}, chain_version = 0 WHERE debate_id = :d",
            debate_id,
        )
        execute(
            store,
            "UPDATE debate SET chain_head = NULL, chain_turns = NULL WHERE id = :d",
            debate_id,
        )
        return Case(f"{change}, then every seal column nulled as if it predated seals", True)
    return Case(f"{change}, re-sealed as v{version}, signature {signature}", True)


DATABASE_CATEGORIES: list[Callable[[Engine, Rows, random.Random], Case]] = [
    edit_turn,
    delete_turn,
    append_turn,
    edit_verdict,
    null_verdict,
    delete_verdict,
    edit_debate,
    null_debate,
    strip_seal,
    forge,
]


def judged(code: int, out: str, err: str, case: Case, key: bytes | None) -> str | None:
    """What is wrong with how the command judged `case`, if anything."""
    if key is None and case.needs_key:
        if code != 0 or "not checked" not in out:
            return f"exit {code} ({out}{err}) where a pass saying 'not checked' was expected"
        return None
    if code != 1 or not KINDS.search(err):
        return f"exit {code} ({out}{err}) where a failure naming its problem was expected"
    return None


@pytest.mark.parametrize("key", [KEY, None], ids=["key", "no key"])
async def test_random_tampering_with_the_rows_fails_audit_verify(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: bytes | None,
) -> None:
    debate_id = await finished(store, key=key)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    with store.begin() as connection:
        connection.execute(
            update(DEBATES).where(DEBATES.c.id == debate_id).values(DEBATE_UPDATED_LATER)
        )
    code, out, _ = run_cli(["audit", "verify", str(debate_id)], key, monkeypatch, capsys)
    assert code == 0, "a column the bot updates after the end broke the seal"
    assert ("signature valid" if key else "signature not checked") in out
    rows = Rows.read(store, debate_id)
    rng = random.Random(SEED)
    wrong = []
    for index in range(CASES):
        case = DATABASE_CATEGORIES[index % len(DATABASE_CATEGORIES)](store, rows, rng)
        if key is None and case.what.startswith("verdict: chain_signature"):
            case = Case(case.what, needs_key=True)  # unsigned from the start: nothing to see
        code, out, err = run_cli(["audit", "verify", str(debate_id)], key, monkeypatch, capsys)
        problem = judged(code, out, err, case, key)
        if problem is not None:
            wrong.append(f"{case.what}: {problem}")
        rows.restore(store)
        assert verify_debate(store, debate_id, key=key).ok, case.what

    assert not wrong, "\n".join(wrong)


SECTIONS_SEALED = {
    "debate": [*DEBATE_SEALED, "id"],
    "turn_rows": [c.name for c in TURNS.c if c.name != "id"],
    "verdict_row": [c.name for c in VERDICTS.c if c.name not in ("id", "created_at")],
    "audit": [
        "turns_checked",
        "first_broken_seq",
        "head",
        "version",
        "note",
        "signature",
        "chain_ok",
    ],
}
"""The fields of an export whose change must be caught (all of `spec`, `result` and `turns`)."""


def export_paths(record: dict[str, Any], section: str) -> list[Path_]:
    paths = leaves(record[section], (section,))
    sealed = SECTIONS_SEALED.get(section)
    if sealed is None:
        return paths
    if section == "turn_rows":
        return [p for p in paths if p[2] in sealed]
    return [p for p in paths if p[1] in sealed]


TABLES = {"debate": DEBATES, "turn_rows": TURNS, "verdict_row": VERDICTS}


def filler(column: Any) -> Any:
    """A value of `column`'s type, for a field that was empty."""
    kind = getattr(column.type, "impl", column.type)
    if isinstance(kind, Boolean):
        return True
    if isinstance(kind, Integer):
        return 1
    if isinstance(kind, Float):
        return 0.5
    if isinstance(kind, DateTime):
        return "2030-01-01T00:00:00+00:00"
    return "added"


def edit_export_field(record: dict[str, Any], rng: random.Random) -> Case:
    section = rng.choice(["debate", "spec", "result", "turns", "turn_rows", "verdict_row", "audit"])
    path = rng.choice(export_paths(record, section))
    value = get_leaf(record, path)
    if path[-1] == "chain_ok":
        new: Any = not value
    elif path[-1] == "state":
        new = "running"
    elif value is None and section in TABLES:
        new = filler(TABLES[section].c[str(path[-1])])
    else:
        new = changed(value, rng)
    set_leaf(record, path, new)
    return Case(f"{'.'.join(map(str, path))} edited")


def null_export_field(record: dict[str, Any], rng: random.Random) -> Case:
    section = rng.choice(["debate", "spec", "result", "turns", "verdict_row", "audit"])
    paths = [
        p
        for p in export_paths(record, section)
        if get_leaf(record, p) is not None
        and (section not in TABLES or TABLES[section].c[str(p[-1])].nullable)
    ]
    path = rng.choice(paths)
    set_leaf(record, path, None)
    return Case(f"{'.'.join(map(str, path))} nulled")


def delete_export_part(record: dict[str, Any], rng: random.Random) -> Case:
    part = rng.choice(["result", "turns", "turn_rows", "verdict_row", "spec", "a turn", "a row"])
    if part == "a turn":
        del record["turns"][rng.randrange(len(record["turns"]))]
    elif part == "a row":
        del record["turn_rows"][rng.randrange(len(record["turn_rows"]))]
    else:
        record[part] = [] if part in ("turns", "turn_rows") else None
    return Case(f"{part} deleted")


def forge_export(record: dict[str, Any], rng: random.Random) -> Case:
    """Edit the verdict everywhere it shows, then seal the rows again without the key."""
    verdict = record["verdict_row"]
    change = rng.choice(["decision", "synthesis", "strip", "legacy"])
    if change in ("decision", "synthesis"):
        new = "accept" if verdict["decision"] != "accept" else "reject"
        if change == "synthesis":
            new = "Ship it, no risk."
        verdict[change] = new
        result = json.loads(verdict["result_json"])
        result["verdict"][change] = new
        verdict["result_json"] = json.dumps(result)
        record["result"]["verdict"][change] = new
        debate = Debate.model_validate(
            {**record["debate"], "spec_json": json.dumps(record["spec"])}
        )
        verdict["chain_head"] = audit.head_of(
            verdict["chain_version"],
            verdict["chain_tail"],
            VerdictRecord.model_validate(verdict),
            audit.debate_digest(debate),
        )
        record["debate"]["chain_head"] = record["audit"]["head"] = verdict["chain_head"]
        if rng.random() < 0.5:
            verdict["chain_signature"] = record["audit"]["signature"] = None
        return Case(f"verdict {change} edited everywhere and re-sealed", True)
    verdict["chain_signature"] = record["audit"]["signature"] = None
    if change == "legacy":
        for name in ("chain_turns", "chain_tail", "chain_head", "chain_debate"):
            verdict[name] = None
        verdict["chain_version"] = 0
        record["debate"]["chain_head"] = record["debate"]["chain_turns"] = None
        record["audit"].update(head=None, version=0, note=audit.PRE_SEAL_NOTE)
        return Case("every seal field nulled as if it predated seals", True)
    return Case("signature stripped from the row and the summary", True)


EXPORT_CATEGORIES: list[Callable[[dict[str, Any], random.Random], Case]] = [
    edit_export_field,
    edit_export_field,
    edit_export_field,
    null_export_field,
    delete_export_part,
    forge_export,
]


@pytest.mark.parametrize("key", [KEY, None], ids=["key", "no key"])
async def test_random_tampering_with_an_export_fails_audit_verify_export(
    store: Engine,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: bytes | None,
) -> None:
    debate_id = await finished(store)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    path = tmp_path / "debate.json"
    assert run_cli(["export", str(debate_id), "--out", str(path)], KEY, monkeypatch, capsys)[0] == 0
    exported = path.read_text(encoding="utf-8")
    assert run_cli(["audit", "verify-export", str(path)], key, monkeypatch, capsys)[0] == 0
    rng = random.Random(SEED)
    wrong = []
    for index in range(CASES):
        record = json.loads(exported)
        case = EXPORT_CATEGORIES[index % len(EXPORT_CATEGORIES)](record, rng)
        path.write_text(json.dumps(record), encoding="utf-8")
        code, out, err = run_cli(["audit", "verify-export", str(path)], key, monkeypatch, capsys)
        problem = judged(code, out, err, case, key)
        if problem is not None:
            wrong.append(f"{case.what}: {problem}")

    assert not wrong, "\n".join(wrong)
