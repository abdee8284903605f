"""Reading a debate back to check its record: the turn chain, the verdict's seal and signature;
and sealing or signing what finished before seals, before the key, or before seals covered the
workspace.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from bot.store.audit import (
    CHAIN_VERSION,
    GENESIS_HASH,
    PRE_SEAL_VERSION,
    WORKSPACE_VERSION,
    ChainReport,
    audit,
    record_signature,
    seal,
)
from bot.store.debate_tables import Debate, DebateState, VerdictRecord
from bot.store.endings import verdict_for
from bot.store.queue import get_debate
from bot.store.tenancy import PENDING_TEAM, Workspace, adopt_pending
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


SEAL_COLUMNS = (
    "chain_version",
    "chain_debate",
    "chain_turns",
    "chain_tail",
    "chain_head",
    "chain_signature",
)
"""The verdict's columns a seal writes."""


def sign_seal(session: Session, *, debate_id: int, key: bytes) -> tuple[str | None, ChainReport]:
    """Sign the debate's seal with `key` when everything else about it verifies and only the
    signature is missing (it was sealed before the key was set), or seal and sign a debate that
    finished before seals existed (version 0) as it stands. Returns what was done (`signed`,
    `sealed`, or None: nothing to do, or the record does not verify) and the report on the
    record as it now is."""
    report = verify_chain(session, debate_id=debate_id, key=key)
    verdict = verdict_for(session, debate_id=debate_id)
    if verdict is None or report.kind not in ("unsigned_seal", "unsealed_legacy"):
        return None, report
    if report.kind == "unsigned_seal":
        verdict.chain_signature = record_signature(key, verdict, debate_id=debate_id)
        session.add(verdict)
        done = "signed"
    else:
        _reseal(session, debate_id=debate_id, key=key, version=PRE_SEAL_VERSION)
        done = "sealed"
    session.commit()
    return done, verify_chain(session, debate_id=debate_id, key=key)


def upgrade_seal(session: Session, *, debate_id: int, key: bytes) -> ChainReport | None:
    """Re-seal a version 2 seal as version 3, which covers the workspace the debate stands in,
    only when it verifies whole with `key`, its signature included: an unsigned v2 seal could
    be one a forger wrote after moving a v3 record (anyone can recompute a v2 seal), so it is
    left to `sign_seal`'s once-only blessing. The report on the record as it now is, or None
    when it is not an intact signed v2 seal."""
    verdict = verdict_for(session, debate_id=debate_id)
    if verdict is None or verdict.chain_version != 2:
        return None
    report = verify_chain(session, debate_id=debate_id, key=key)
    if not report.ok or report.signature != "valid":
        return None
    _reseal(session, debate_id=debate_id, key=key, version=CHAIN_VERSION)
    session.commit()
    return verify_chain(session, debate_id=debate_id, key=key)


def _reseal(
    session: Session,
    *,
    debate_id: int,
    key: bytes | None,
    version: int,
    workspace: Workspace | None = None,
) -> None:
    """Seal the finished debate again under `version` as its rows stand, with `key` (unsigned
    without), as if it stood in `workspace` (default: where it stands). Not committed."""
    debate = get_debate(session, debate_id=debate_id)
    verdict = verdict_for(session, debate_id=debate_id)
    assert verdict is not None
    rows = turn_rows(session, debate_id=debate_id)
    values = verdict.model_dump()
    tail = rows[-1].hash if rows else GENESIS_HASH
    sealed: dict[str, object] = debate.model_dump()
    if workspace is not None:
        sealed |= {"team_id": workspace.team_id, "enterprise_id": workspace.enterprise_id}
    seal(values, len(rows), tail, key, debate=sealed, version=version)
    for name in SEAL_COLUMNS:
        setattr(verdict, name, values[name])
    debate.chain_head, debate.chain_turns = verdict.chain_head, verdict.chain_turns
    session.add_all([debate, verdict])


def adopt_pending_records(session: Session, *, workspace: Workspace, key: bytes | None) -> int:
    """`tenancy.adopt_pending` (the rows from before the workspace's id was known become its
    rows), keeping the seals that cover the workspace true: each finished pending debate with a
    v3 seal that verifies (with `key`) is sealed again as standing in `workspace`, in the same
    transaction as the move; one that does not verify is moved as it is and still fails. How
    many rows moved. Committed."""
    pending = session.exec(
        select(Debate.id)
        .join(VerdictRecord, col(VerdictRecord.debate_id) == col(Debate.id))
        .where(
            col(Debate.team_id) == PENDING_TEAM,
            col(Debate.state) == DebateState.FINISHED,
            col(VerdictRecord.chain_version) >= WORKSPACE_VERSION,
        )
    ).all()
    for debate_id in pending:
        assert debate_id is not None
        if verify_chain(session, debate_id=debate_id, key=key).ok:
            _reseal(
                session, debate_id=debate_id, key=key, version=CHAIN_VERSION, workspace=workspace
            )
    session.flush()
    return adopt_pending(session, workspace=workspace)
