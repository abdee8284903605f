"""Decision receipts on SQLite and PostgreSQL: a finished debate's receipt is written with its
ending, signed by the key in service, and verifies with its export; a review's decision joins it
with the digest of the review request as the outbox holds it; an export whose transcript,
context, verdict or reviews differ from the receipt is refused, naming what differs; every
change to a stored receipt is refused; rotating the keys keeps old receipts valid and refuses a
retired key's later signature; and the standalone verifier, in a virtual environment holding
only `cryptography`, says what `debatebot audit verify-export` says on the same files."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine
from sqlmodel import Session

from bot.cli import main
from bot.jobs.notifier import DebateNotifier
from bot.jobs.worker import DebateWorker, WorkerConfig
from bot.keyring import KeyRing, KeyRingError, Signer
from bot.receipt_verifier import digest, instant, verify
from bot.store import cancels, operations, outbox, queue, receipts, reviews
from bot.store.db import session_scope
from bot.store.debate_tables import CancelSource, DebateSource
from bot.store.export import export_record
from bot.store.receipts import ReceiptIssuer
from bot.store.review_tables import EscalationState
from bot.store.tenancy import EVERY_WORKSPACE, PENDING_WORKSPACE
from engine.models import ContextDocument, DebateSpec, ModelSettings, utcnow
from tests.helpers import DebateScript, shipped_prompts
from tests.receipt_mutations import mutations

ROOT = Path(__file__).resolve().parents[2]
SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    context=[
        ContextDocument(title="ADR-042", text="Move sessions to Postgres; drop Redis."),
        ContextDocument(title="load.md", text="Peak load is 1,200 requests a second."),
    ],
    default_model=ModelSettings(provider="fake", model="fake-model"),
)
PRICES = {"input_per_mtok": 1.25, "output_per_mtok": 10.0}


def issuer_of(ring: KeyRing) -> ReceiptIssuer:
    return ReceiptIssuer(
        signer=lambda: ring.signer(create=True), price_of=lambda _provider, _model: PRICES
    )


@pytest.fixture
def ring(tmp_path: Path) -> KeyRing:
    return KeyRing(tmp_path / "receipt-keys")


async def finished(store: Engine, issuer: ReceiptIssuer | None, trigger: str = "a") -> int:
    """A Slack debate run to its end (escalated: its review request is owed) with `issuer`."""
    with Session(store) as session:
        debate, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(
                trigger_key=trigger,
                spec=SPEC,
                source=DebateSource.COMMAND,
                channel_id="C1",
                reviewers_channel_id="C1",
                requested_by="U1",
            ),
        )
    worker = DebateWorker(
        engine=store,
        resolve_llm=lambda _m: DebateScript().llm(),
        prompts=shipped_prompts(),
        reporter=DebateNotifier(engine=store),
        config=WorkerConfig(receipts=issuer),
    )
    assert await worker.run_once()
    assert debate.id is not None
    return debate.id


def exported(store: Engine, debate_id: int) -> dict[str, Any]:
    """The export as `debatebot export --format json` writes it, read back."""
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        record = export_record(session, debate_id=debate_id)
    read: dict[str, Any] = json.loads(json.dumps(record, ensure_ascii=False))
    return read


def decide(store: Engine, debate_id: int, issuer: ReceiptIssuer | None) -> None:
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        escalation = reviews.escalation_for(session, debate_id=debate_id)
        assert escalation is not None
        assert escalation.id is not None
        _, made = reviews.record_review(
            session,
            escalation_id=escalation.id,
            reviewer="U9",
            decision=EscalationState.APPROVED,
            note="risk accepted",
            receipts=issuer,
        )
        assert made


def keys_of(ring: KeyRing) -> dict[str, Any]:
    document = ring.public_document()
    assert document is not None
    return document


async def test_a_finished_debate_has_a_signed_receipt_its_export_verifies_with(
    store: Engine, ring: KeyRing
) -> None:
    debate_id = await finished(store, issuer_of(ring))
    record = exported(store, debate_id)
    report = verify(record, keys_of(ring))
    assert report.ok, report.problems
    payload = record["receipt"]["receipt"]
    assert payload["question"] == SPEC.question
    assert [c["title"] for c in payload["context"]] == ["ADR-042", "load.md"]
    assert len(payload["turns"]) == len(record["turns"]) > 0
    assert payload["models"][0]["price_per_mtok"] == PRICES
    assert payload["seal"]["head"] == record["verdict_row"]["chain_head"]
    assert payload["review"] == {"requested": True}
    [key] = ring.entries()
    assert record["receipt"]["signature"]["key_id"] == key.key_id
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        verdict = outbox.row_for(session, debate_id=debate_id, key="verdict")
    assert verdict is not None
    assert f"Receipt signed with key `{key.key_id}`" in json.dumps(verdict.blocks)
    assert "debatebot export" in json.dumps(verdict.blocks)


async def test_a_decision_joins_the_receipt_with_the_review_request_it_was_made_on(
    store: Engine, ring: KeyRing
) -> None:
    issuer = issuer_of(ring)
    debate_id = await finished(store, issuer)
    decide(store, debate_id, issuer)
    record = exported(store, debate_id)
    report = verify(record, keys_of(ring))
    assert report.ok, report.problems
    [decision] = record["receipt"]["decisions"]
    statement = decision["statement"]
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        shown = outbox.row_for(session, debate_id=debate_id, key="review")
    assert shown is not None
    assert statement["shown_sha256"] == digest({"text": shown.text, "blocks": shown.blocks})
    assert (statement["by"], statement["decision"], statement["note"]) == (
        "U9",
        "approved",
        "risk accepted",
    )
    assert any("approved by U9" in fact for fact in report.facts)


def _first_problem(record: dict[str, Any], keys: dict[str, Any]) -> str:
    report = verify(record, keys)
    assert not report.ok
    return " | ".join(report.problems)


async def test_an_export_that_differs_from_its_receipt_is_refused_naming_what_differs(
    store: Engine, ring: KeyRing
) -> None:
    issuer = issuer_of(ring)
    debate_id = await finished(store, issuer)
    decide(store, debate_id, issuer)
    record, keys = exported(store, debate_id), keys_of(ring)
    changed = copy.deepcopy(record)
    changed["turns"][2]["raw_text"] += " (edited)"
    assert "turn 2 (round" in _first_problem(changed, keys)
    changed = copy.deepcopy(record)
    changed["spec"]["context"][1]["text"] = "Peak load is 12 requests a second."
    assert "context document 1 differs" in _first_problem(changed, keys)
    changed = copy.deepcopy(record)
    changed["result"]["verdict"]["decision"] = "approve"
    assert "the verdict differs" in _first_problem(changed, keys)
    changed = copy.deepcopy(record)
    changed["reviews"] = []
    assert "decision 0 is not among the export's reviews" in _first_problem(changed, keys)
    # Without its decision, the receipt reads as it did before the review: the export's review
    # is then a decision the receipt does not sign.
    changed = copy.deepcopy(record)
    changed["receipt"]["decisions"] = []
    assert "the review by U9 is not a signed decision" in _first_problem(changed, keys)


def _row_edits(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The export with one change to the store rows it carries beside what it shows (the rows
    `audit verify-export` checks against the seal), by the column changed."""
    edits: dict[str, dict[str, Any]] = {}
    for column, value in (
        ("parsed_json", '{"edited": true}'),
        ("raw_text", "edited"),
        ("input_tokens", 1),
    ):
        edits[f"turn row {column}"] = changed = copy.deepcopy(record)
        changed["turn_rows"][2][column] = value
    edits["turn rows reordered"] = changed = copy.deepcopy(record)
    changed["turn_rows"][1], changed["turn_rows"][2] = (
        record["turn_rows"][2],
        record["turn_rows"][1],
    )
    edits["turn row removed"] = changed = copy.deepcopy(record)
    del changed["turn_rows"][-1]
    edits["verdict row synthesis"] = changed = copy.deepcopy(record)
    changed["verdict_row"]["synthesis"] = "Adopt it at once."
    edits["verdict row result_json"] = changed = copy.deepcopy(record)
    document = json.loads(record["verdict_row"]["result_json"])
    document["verdict"]["decision"] = "approve"
    changed["verdict_row"]["result_json"] = json.dumps(document)
    return edits


async def test_the_rows_an_export_carries_beside_what_it_shows_are_checked_too(
    store: Engine, ring: KeyRing
) -> None:
    """An export holds each turn and the verdict twice: as shown (digested by the receipt) and
    as the store's rows. A row edited, reordered or removed is refused, naming the column,
    as `audit verify-export` refuses it."""
    issuer = issuer_of(ring)
    debate_id = await finished(store, issuer)
    record, keys = exported(store, debate_id), keys_of(ring)
    said = {what: _first_problem(changed, keys) for what, changed in _row_edits(record).items()}
    assert said == {
        "turn row parsed_json": "export: turn row 2 differs from its turn in parsed_json",
        "turn row raw_text": "export: turn row 2 differs from its turn in raw_text",
        "turn row input_tokens": "export: turn row 2 differs from its turn in input_tokens",
        "turn rows reordered": "export: turn row 1 is not in the receipt's order"
        " | export: turn row 2 is not in the receipt's order",
        "turn row removed": f"export: {len(record['turns']) - 1} turn rows where the receipt"
        f" lists {len(record['turns'])} | export: turn row {len(record['turns']) - 1} is not in"
        " the receipt's order",
        "verdict row synthesis": "export: the verdict row differs from the result in synthesis",
        "verdict row result_json": "export: the verdict row differs from the result in verdict",
    }


@pytest.mark.parametrize("decided", [False, True], ids=["no decision", "with a decision"])
async def test_every_change_to_a_stored_receipt_is_refused(
    store: Engine, ring: KeyRing, decided: bool
) -> None:
    issuer = issuer_of(ring)
    debate_id = await finished(store, issuer)
    if decided:
        decide(store, debate_id, issuer)
    record, keys = exported(store, debate_id), keys_of(ring)
    assert verify(record["receipt"], keys).ok
    accepted = [
        what
        for what, changed in mutations(
            record["receipt"], seed=46, skip=frozenset({("decisions", 0)})
        )
        if verify({**record, "receipt": changed}, keys).ok
    ]
    assert accepted == []


async def test_rotation_keeps_old_receipts_valid_and_a_retired_keys_later_signature_fails(
    store: Engine, ring: KeyRing
) -> None:
    issuer = issuer_of(ring)
    first = await finished(store, issuer, trigger="first")
    [old] = ring.entries()
    leaked = _private_key(ring, old.key_id)
    made, retired = ring.rotate()
    assert [(entry.key_id, entry.retired_at) for entry in retired] == [
        (old.key_id, made.valid_from)
    ]
    assert not (ring.directory / "private" / f"{old.key_id}.pem").exists()
    second = await finished(store, issuer, trigger="second")
    keys = keys_of(ring)
    one, two = exported(store, first), exported(store, second)
    assert (one["receipt"]["signature"]["key_id"], two["receipt"]["signature"]["key_id"]) == (
        old.key_id,
        made.key_id,
    )
    assert verify(one, keys).ok
    assert verify(two, keys).ok
    # The old key, leaked, signs the second debate's receipt as of now: refused.
    forged = copy.deepcopy(two)
    payload = forged["receipt"]["receipt"]
    payload["key_id"], payload["issued_at"] = old.key_id, instant(utcnow())
    forged["receipt"]["signature"] = Signer(old.key_id, leaked).sign(payload)
    problem = _first_problem(forged, keys)
    assert "a retired key's signature made after its retirement is refused" in problem


def _private_key(ring: KeyRing, key_id: str) -> Ed25519PrivateKey:
    data = (ring.directory / "private" / f"{key_id}.pem").read_bytes()
    loaded = serialization.load_pem_private_key(data, password=None)
    assert isinstance(loaded, Ed25519PrivateKey)
    return loaded


def test_the_key_folder_refuses_what_would_break_receipts(ring: KeyRing) -> None:
    made = ring.new()
    with pytest.raises(KeyRingError, match="only key in service"):
        ring.retire(made.key_id)
    second = ring.new()
    retired = ring.retire(made.key_id)
    assert retired.retired_at is not None
    signer = ring.signer()
    assert signer is not None
    assert signer.key_id == second.key_id
    private = ring.directory / "private" / f"{second.key_id}.pem"
    private.chmod(0o644)
    with pytest.raises(KeyRingError, match="chmod 600"):
        ring.signer()
    private.chmod(0o600)
    edited = keys_of(ring)
    edited["keys"][0]["retired_at"] = None
    ring.public_file.write_text(json.dumps(edited), encoding="utf-8")
    with pytest.raises(KeyRingError, match="edited outside"):
        ring.entries()


async def test_without_a_key_the_receipt_is_written_unsigned_and_refused_as_such(
    store: Engine, ring: KeyRing
) -> None:
    debate_id = await finished(store, ReceiptIssuer(signer=lambda: None, price_of=lambda *_: None))
    record = exported(store, debate_id)
    ring.new()
    assert record["receipt"]["signature"] is None
    assert "UNSIGNED" in _first_problem(record, keys_of(ring))


# --- the standalone verifier, in a virtual environment holding only cryptography ---------------


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment (no pip, no debatebot) into which only `cryptography` and
    what it requires are linked from this environment: offline, as CI runs it."""
    root = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    here = Path(sysconfig.get_paths()["purelib"])
    wanted, linked = ["cryptography"], set()
    while wanted:
        name = wanted.pop()
        if name in linked:
            continue
        linked.add(name)
        distribution = metadata.distribution(name)
        for top in {Path(str(f)).parts[0] for f in distribution.files or []}:
            source = here / top
            if source.exists() and not top.endswith(".pth") and top != "..":
                target = Path(purelib) / top
                if not target.exists():
                    target.symlink_to(source)
        wanted += [
            requirement.split(";")[0].split(">")[0].split("<")[0].split("=")[0].split("[")[0]
            for requirement in distribution.requires or []
            if "extra ==" not in requirement
        ]
    return python


def _standalone(python: Path, target: Path, keys: Path) -> tuple[int, list[str]]:
    done = subprocess.run(
        [str(python), str(ROOT / "tools" / "verify_receipt.py"), str(target), "--keys", str(keys)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(target.parent)},
        cwd=target.parent,
        timeout=60,
    )
    return done.returncode, (done.stdout + done.stderr).splitlines()


async def test_the_standalone_verifier_agrees_with_audit_verify_export(
    store: Engine,
    ring: KeyRing,
    bare_python: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    isolated = await asyncio.to_thread(
        subprocess.run,
        [str(bare_python), "-c", "import bot"],
        capture_output=True,
        env={"PATH": os.environ.get("PATH", "")},
        cwd=tmp_path,
    )
    assert isolated.returncode != 0, "the bare environment must not see debatebot"
    issuer = issuer_of(ring)
    debate_id = await finished(store, issuer)
    decide(store, debate_id, issuer)
    record, keys = exported(store, debate_id), keys_of(ring)
    edited_turn = copy.deepcopy(record)
    edited_turn["turns"][1]["parsed"] = {"edited": True}
    edited_receipt = copy.deepcopy(record)
    edited_receipt["receipt"]["receipt"]["question"] = "Should we adopt ADR-043?"
    edited_keys = copy.deepcopy(keys)
    edited_keys["keys"][0]["valid_from"] = "2020-01-01T00:00:00.000000Z"
    cases = {
        "valid": (record, keys, 0),
        "edited turn": (edited_turn, keys, 1),
        "edited receipt": (edited_receipt, keys, 1),
        "edited keys file": (record, edited_keys, 1),
        **{what: (changed, keys, 1) for what, changed in _row_edits(record).items()},
    }
    for name, (document, keys_document, expected) in cases.items():
        target, keys_path = tmp_path / f"{name}.json", tmp_path / f"{name}-keys.json"
        target.write_text(json.dumps(document), encoding="utf-8")
        keys_path.write_text(json.dumps(keys_document), encoding="utf-8")
        code, said = await asyncio.to_thread(_standalone, bare_python, target, keys_path)
        capsys.readouterr()
        ours = main(["audit", "verify-export", str(target), "--keys", str(keys_path)])
        out = capsys.readouterr()
        shown = (out.out + out.err).splitlines()
        assert (name, code, ours) == (name, expected, expected), (said, shown)
        assert all(line in shown for line in said), (name, said, shown)


async def test_retention_removes_a_debate_with_its_receipt(store: Engine, ring: KeyRing) -> None:
    issuer = issuer_of(ring)
    debate_id = await finished(store, issuer)
    decide(store, debate_id, issuer)
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        operations.remove_debate(session, debate_id=debate_id)
        assert receipts.receipt_of(session, debate_id=debate_id) is None


def test_a_key_folder_the_bot_cannot_write_is_a_warning_not_a_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only store's folder leaves receipts unsigned until it can be written, with the
    fix; it does not stop `serve` (a forged or unreadable key still does)."""
    from bot.receipting import check_receipt_keys
    from bot.settings import Settings

    def refused(self: KeyRing, *, create: bool = False) -> Signer:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(KeyRing, "signer", refused)
    warning = check_receipt_keys(
        Settings(database_url="sqlite:///x.sqlite3", receipt_keys_dir=tmp_path / "keys")
    )
    assert warning is not None
    assert "cannot be written (Operation not permitted)" in warning
    assert "UNSIGNED" in warning
    assert "make that folder writable" in warning


async def test_a_cancelled_debate_s_receipt_carries_who_stopped_it_signed_like_a_decision(
    store: Engine, ring: KeyRing
) -> None:
    with Session(store) as session:
        debate, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(
                trigger_key="stopped", spec=SPEC, source=DebateSource.COMMAND, channel_id="C1"
            ),
        )
        assert debate.id is not None
        debate_id = debate.id
        cancels.request_cancel(session, debate_id=debate_id, by="U7", source=CancelSource.COMMAND)
    worker = DebateWorker(
        engine=store,
        resolve_llm=lambda _m: DebateScript().llm(),
        prompts=shipped_prompts(),
        config=WorkerConfig(receipts=issuer_of(ring)),
    )
    assert await worker.run_once()
    record = exported(store, debate_id)
    report = verify(record, keys_of(ring))
    assert report.ok, report.problems
    [stop] = record["receipt"]["decisions"]
    statement = stop["statement"]
    assert (statement["kind"], statement["decision"], statement["by"]) == (
        "cancel",
        "cancelled",
        "U7",
    )
    assert statement["note"] == "stopped from command"
    assert any("cancelled by U7" in fact for fact in report.facts)
