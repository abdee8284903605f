"""Reading a debate back to check its record: the turn chain, the verdict's seal and signature;
and sealing or signing what finished before seals or before the key.
"""

from __future__ import annotations

from sqlmodel import Session

from bot.store.audit import (
    GENESIS_HASH,
    PRE_SEAL_VERSION,
    ChainReport,
    audit,
    seal,
    signature_of,
)
from bot.store.endings import verdict_for
from bot.store.queue import get_debate
from bot.store.turns import turn_rows


def verify_chain(session: Session, *, debate_id: int, key: bytes | None = None) -> ChainReport:
    """Verify the debate's turn chain and, once finished, its verdict, seal and signature (with
    `key`); the report names the first problem (see `bot.store.audit.audit`)."""
    return audit(
        get_debate(session, debate_id=debate_id),
        turn_rows(session, debate_id=debate_id),
        verdict_for(session, debate_id=debate_id),
        key=key,
    )


def sign_seal(session: Session, *, debate_id: int, key: bytes) -> tuple[str | None, ChainReport]:
    """Sign the debate's seal with `key` when everything else about it verifies and only the
    signature is missing (it was sealed before the key was set), or seal and sign a debate that
    finished before seals existed (version 0), as it stands. Returns what was done (`signed`,
    `sealed`, or None: nothing to do, or the record does not verify) and the report on the
    record as it now is."""
    report = verify_chain(session, debate_id=debate_id, key=key)
    verdict = verdict_for(session, debate_id=debate_id)
    if verdict is None or report.kind not in ("unsigned_seal", "unsealed_legacy"):
        return None, report
    if report.kind == "unsigned_seal":
        verdict.chain_signature = signature_of(
            key,
            version=verdict.chain_version,
            debate_id=debate_id,
            turns=verdict.chain_turns or 0,
            tail=verdict.chain_tail or "",
            head=verdict.chain_head or "",
        )
        done = "signed"
    else:
        debate = get_debate(session, debate_id=debate_id)
        rows = turn_rows(session, debate_id=debate_id)
        values = verdict.model_dump()
        tail = rows[-1].hash if rows else GENESIS_HASH
        seal(values, len(rows), tail, key, debate=debate, version=PRE_SEAL_VERSION)
        for name in ("chain_debate", "chain_turns", "chain_tail", "chain_head", "chain_signature"):
            setattr(verdict, name, values[name])
        debate.chain_head, debate.chain_turns = verdict.chain_head, verdict.chain_turns
        session.add(debate)
        done = "sealed"
    session.add(verdict)
    session.commit()
    return done, verify_chain(session, debate_id=debate_id, key=key)
