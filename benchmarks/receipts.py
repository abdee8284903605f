"""A decision receipt's size, and the time to issue (build and sign) and to verify one, for a
3-round adversarial debate with 20 context documents, on the fake model.

Runs the debate through a worker on a migrated SQLite store with a fresh receipt key, then, from
the stored rows: builds and signs the receipt `--runs` times (what the ending adds to its
transaction, beside the seal) and verifies the export against it `--runs` times with the
offline verifier (signature, keys file, and every digest against the export's transcript,
context, verdict and reviews).

    .venv/bin/python -m benchmarks.receipts --runs 50 --out receipt.json

`--out FILE` writes the measured receipt as the export holds it, and the public keys file that
verifies it beside it (FILE's name with `-keys`), to be read in full or checked with
`python tools/verify_receipt.py FILE --keys FILE-keys.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from sqlmodel import Session

from bot.jobs.worker import DebateWorker, WorkerConfig
from bot.keyring import KeyRing
from bot.receipt_verifier import canonical, verify
from bot.store import queue, turns
from bot.store.db import make_engine, session_scope, upgrade
from bot.store.debate_tables import DebateSource
from bot.store.endings import verdict_for
from bot.store.export import export_record
from bot.store.receipts import Issue, ReceiptIssuer, receipt_payload
from bot.store.tenancy import EVERY_WORKSPACE
from engine.models import ContextDocument, DebateSpec, ModelSettings, utcnow
from tests.helpers import DebateScript, shipped_prompts

GOAL_BYTES = 64 * 1024
"""A receipt small enough to attach to a ticket or an email: digests, not the documents."""
GOAL_ISSUE_MS = 20.0
"""Issuing is inside the ending's transaction: it must stay a small share of a turn's write."""
GOAL_VERIFY_MS = 100.0
"""An auditor's check of an export: interactive."""


def spec() -> DebateSpec:
    documents = [
        ContextDocument(title=f"doc-{n:02}.md", text=f"Document {n}. " + "Evidence line. " * 400)
        for n in range(20)
    ]
    return DebateSpec(
        question="Should we replace our nightly cron jobs with a workflow engine?",
        context=documents,
        max_rounds=3,
        min_rounds=3,
        default_model=ModelSettings(provider="fake", model="fake-model"),
    )


async def main(runs: int, out: Path | None) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="debatebot-receipts-"))
    url = f"sqlite:///{workdir / 'bench.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    ring = KeyRing(workdir / "keys")
    issuer = ReceiptIssuer(
        signer=lambda: ring.signer(create=True),
        price_of=lambda _provider, _model: {"input_per_mtok": 1.25, "output_per_mtok": 10.0},
    )
    with Session(engine) as session:
        debate, _ = queue.enqueue_debate(
            session,
            new=queue.NewDebate(trigger_key="bench", spec=spec(), source=DebateSource.CLI),
        )
    worker = DebateWorker(
        engine=engine,
        resolve_llm=lambda _m: DebateScript().llm(),
        prompts=shipped_prompts(),
        config=WorkerConfig(receipts=issuer),
    )
    assert await worker.run_once()
    assert debate.id is not None
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        record = json.loads(json.dumps(export_record(session, debate_id=debate.id)))
        rows = turns.turn_rows(session, debate_id=debate.id)
        stored = queue.get_debate(session, debate_id=debate.id)
        verdict = verdict_for(session, debate_id=debate.id)
    assert verdict is not None
    keys = ring.public_document()
    signer = ring.signer()
    assert keys is not None
    assert signer is not None
    issue = Issue(debate=stored.model_dump(), verdict=verdict.model_dump(), review_requested=False)
    issuing = []
    for _ in range(runs):
        started = time.perf_counter()
        payload = receipt_payload(issue, rows, issuer.price_of, signer, utcnow())
        signer.sign(payload)
        canonical(payload)
        issuing.append((time.perf_counter() - started) * 1000)
    verifying = []
    for _ in range(runs):
        started = time.perf_counter()
        report = verify(record, keys)
        verifying.append((time.perf_counter() - started) * 1000)
        assert report.ok, report.problems
    receipt = record["receipt"]
    size = len(json.dumps(receipt, ensure_ascii=False).encode())
    body = len(canonical(receipt["receipt"]))
    print(
        f"debate: {len(rows)} turns over 3 rounds, {len(stored.spec_json) // 1024} KiB of spec"
        f" with 20 context documents; export {len(json.dumps(record)) // 1024} KiB"
    )
    print(
        f"receipt size: {size:,} bytes as exported ({body:,} bytes canonical, signed);"
        f" goal <= {GOAL_BYTES:,}"
    )
    print(
        f"issue (build + sign): median {statistics.median(issuing):.2f} ms,"
        f" max {max(issuing):.2f} ms over {runs}; goal <= {GOAL_ISSUE_MS:.0f} ms"
    )
    print(
        f"verify export against receipt: median {statistics.median(verifying):.2f} ms,"
        f" max {max(verifying):.2f} ms over {runs}; goal <= {GOAL_VERIFY_MS:.0f} ms"
    )
    if out is not None:
        await asyncio.to_thread(write_receipt, out, receipt, keys)
    engine.dispose()


def write_receipt(out: Path, receipt: object, keys: object) -> None:
    """The receipt as the export holds it, and beside it the public keys file verifying it."""
    keys_file = out.with_name(f"{out.stem}-keys{out.suffix}")
    out.write_text(json.dumps(receipt, indent=2, ensure_ascii=False) + "\n")
    keys_file.write_text(json.dumps(keys, indent=2) + "\n")
    print(f"receipt written to {out}, its keys file to {keys_file}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--out", type=Path, help="write the receipt here (its keys file beside)")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.runs, arguments.out))
