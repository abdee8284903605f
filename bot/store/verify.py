"""Reading a debate back to check its record: the turn chain, the verdict's seal and signature;
and sealing or signing what finished before seals, before the key, or before seals covered the
workspace.
"""

from __future__ import annotations

from sqlmodel import Session

from bot.store.audit import (
    CHAIN_VERSION,
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
    signature is missing (it was sealed before the key was set), seal and sign a debate that
    finished before seals existed (version 0) as it stands, or re-seal an intact version 2 seal
    as version 3, with the workspace it stands in (version 2 did not cover it). Returns what was
    done (`signed`, `sealed`, `resealed`, or None: nothing to do, or the record does not verify)
    and the report on the record as it now is."""
    report = verify_chain(session, debate_id=debate_id, key=key)
    verdict = verdict_for(session, debate_id=debate_id)
    if verdict is None:
        return None, report
    if report.kind == "unsealed_legacy":
        done, version = "sealed", PRE_SEAL_VERSION
    elif verdict.chain_version == 2 and (report.ok or report.kind == "unsigned_seal"):
        done, version = "resealed", CHAIN_VERSION
    elif report.kind == "unsigned_seal":
        done, version = "signed", verdict.chain_version
    else:
        return None, report
    if done == "signed":
        verdict.chain_signature = signature_of(
            key,
            version=version,
            debate_id=debate_id,
            turns=verdict.chain_turns or 0,
            tail=verdict.chain_tail or "",
            head=verdict.chain_head or "",
        )
    else:
        debate = get_debate(session, debate_id=debate_id)
        rows = turn_rows(session, debate_id=debate_id)
        values = verdict.model_dump()
        tail = rows[-1].hash if rows else GENESIS_HASH
        seal(values, len(rows), tail, key, debate=debate, version=version)
        for name in SEAL_COLUMNS:
            setattr(verdict, name, values[name])
        debate.chain_head, debate.chain_turns = verdict.chain_head, verdict.chain_turns
        session.add(debate)
    session.add(verdict)
    session.commit()
    return done, verify_chain(session, debate_id=debate_id, key=key)


SEAL_COLUMNS = (
    "chain_version",
    "chain_debate",
    "chain_turns",
    "chain_tail",
    "chain_head",
    "chain_signature",
)
"""The verdict's columns a seal writes."""
