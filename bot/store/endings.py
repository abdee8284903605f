"""A finished run recorded: its verdict sealed over the turn chain, the debate closed, and an
escalation raised when the verdict asks for one; in batches, in one transaction each.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Select, bindparam, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, col, select

from bot.store.audit import SEALED_AS_QUEUED, seal
from bot.store.debate_tables import Debate, DebateState, TriageState, VerdictRecord
from bot.store.errors import (
    LeaseLostError,
    StoreRefusedError,
)
from bot.store.outbox_tables import Outbox
from bot.store.receipts import Issue, ReceiptIssuer, add_cancel, issue_receipts, receipts_of
from bot.store.results import StoredResult
from bot.store.review_tables import Escalation, EscalationState
from bot.store.sql import CHANNELS, DEBATES, ESCALATIONS, VERDICTS, among, as_stored
from bot.store.turns import ChainHead, chain_tail
from engine.models import DebateResult, utcnow

M = TypeVar("M", bound=SQLModel)


_FINISH_DEBATE = update(DEBATES).where(DEBATES.c.id == bindparam("finished_id"))


_SEALED_AT_ENQUEUE = (
    *SEALED_AS_QUEUED,
    "spec_json",
    "created_at",
    "triage",
    "triage_reason",
    "cancel_requested_at",
    "cancelled_by",
    "cancelled_from",
)
"""The debate's columns an ending reads besides its lease: what its seal covers from the debate
as queued (`bot.store.audit.debate_digest`), and the triage it keeps unless the run decided it."""


@functools.cache
def _closing_read(escalating: bool) -> Select[Any]:
    """The columns of a batch of debates that their endings need; when one escalates, joined to
    the escalation a debate may already have and to the channel whose reviewers decide it (the
    server's choice at enqueue, `reviewers_channel_id`; not where the request is posted). One
    statement, compiled once per process: three made a cold `debatebot run` compile three."""
    c = DEBATES.c
    query: Select[Any] = DEBATES.select().with_only_columns(
        c.id,
        c.lease_owner,
        c.state,
        c.pr_comment_due,
        c.team_id,
        c.enterprise_id,
        *(getattr(c, name) for name in _SEALED_AT_ENQUEUE),
    )
    if not escalating:
        return query
    escalations, channels = ESCALATIONS.c, CHANNELS.c
    joined = DEBATES.outerjoin(ESCALATIONS, escalations.debate_id == c.id).outerjoin(
        CHANNELS,
        (channels.channel_id == c.reviewers_channel_id) & (channels.team_id == c.team_id),
    )
    return query.add_columns(
        escalations.id.label("escalation_id"), channels.reviewers.label("reviewers")
    ).select_from(joined)


@dataclass(frozen=True)
class Finish:
    """A finished run to record: its result, the key that signs its seal, its chain head when
    the run knows it (else it is read), and whether its ending owes messages (then the rows
    they are rendered from are read back)."""

    debate_id: int
    worker_id: str
    result: DebateResult
    audit_key: bytes | None = None
    head: ChainHead | None = None
    owes_messages: bool = False
    sampled: bool = False
    """The verdict does not escalate but was drawn for review as a sample (calibration)."""
    receipts: ReceiptIssuer | None = None
    """Issues the debate's signed receipt with its ending (None: no receipt)."""

    @property
    def reviewed(self) -> bool:
        """Whether the ending raises a review request: the verdict escalates, or is a sample."""
        return self.result.verdict.escalate or self.sampled


@dataclass(frozen=True)
class Sealed:
    """What recording an ending stored: the verdict's seal over the debate's turn chain."""

    debate_id: int
    turns: int
    tail: str
    head: str


@dataclass(frozen=True)
class Receipted:
    """The receipt an ending issued: the id of the key that signed it (None: unsigned) and,
    for an ending that owes messages, the receipt as handed out (with a cancel's statement)."""

    key_id: str | None
    document: dict[str, Any] | None = None


@dataclass(frozen=True)
class Closed:
    """An ending recorded in the caller's open transaction. For a finish that owes messages:
    the debate and escalation rows as now stored (the seal, the escalation's id), and the
    debate's outbox by key when it was read with the batch (None: read it afresh)."""

    sealed: Sealed
    debate: Debate | None = None
    escalation: Escalation | None = None
    outbox: dict[str, Outbox] | None = None
    receipt: Receipted | None = None


SAMPLE_REASON = (
    "drawn at random for review: this verdict did not escalate, and a small share of those is"
    " reviewed too, so its confidence can be checked against people's decisions"
)

Recorded = Closed | LeaseLostError | StoreRefusedError
"""Per ending, in the open transaction: what was recorded, or why it was not."""


def record_endings(session: Session, *, finishes: Sequence[Finish]) -> list[Recorded]:
    """Record the verdicts and close the debates in the caller's transaction (not committed),
    so the caller stages the messages the endings owe and commits them together: an escalating
    verdict never exists without its escalation row and its review request. Only each
    debate's lease holder may finish it.

    For each, the verdict and, with the channel's reviewers at this moment, the escalation when
    the verdict asks for one or the finish was drawn for review as a sample (`Finish.sampled`;
    the row is marked `sample`) are written; the verdict seals the turn chain (signed with the
    finish's `audit_key` when there is one). The rows are written with a few statements for the
    whole batch (Core, not one ORM object per row: at 200 endings landing together, the unit of
    work cost more than the database). When the database refuses the batch (a verdict already
    stored), it is rolled back to a savepoint and each ending is written again in a savepoint of
    its own, so only the refused one fails. An ending whose run lost its lease is returned as
    LeaseLostError and writes nothing.
    """
    known = _Closing.load(
        session,
        [finish.debate_id for finish in finishes],
        escalating=any(finish.reviewed for finish in finishes),
        outboxes=any(finish.owes_messages for finish in finishes),
    )
    try:
        with session.begin_nested():
            return _record_endings(session, finishes, known)
    except IntegrityError:
        pass
    outcomes: list[Recorded] = []
    for finish in finishes:
        try:
            with session.begin_nested():
                outcomes += _record_endings(session, [finish], known, reread_outbox=True)
        except IntegrityError as error:
            outcomes.append(
                StoreRefusedError(
                    f"debate {finish.debate_id} already has a verdict; it was not stored twice"
                    f" ({error.orig})"
                )
            )
    return outcomes


@dataclass(frozen=True)
class _Closing:
    """What a batch of endings reads, in one or two queries rather than a few per ending: each
    debate's lease and the columns an ending keeps, with (when one of them escalates) the id of
    an escalation it already has and its reviewers' channel's reviewers; and, when messages are
    owed, the outbox rows."""

    debates: dict[int, Any]
    outboxes: dict[int, dict[str, Outbox]]

    @staticmethod
    def load(
        session: Session, debate_ids: list[int], *, escalating: bool, outboxes: bool
    ) -> _Closing:
        """Read what the endings need; the escalations and reviewers only when one of them
        escalates, the outbox rows only when one owes messages."""
        query = _closing_read(escalating).where(among(session, DEBATES.c.id, debate_ids))
        by_id = {row.id: row for row in session.connection().execute(query)}
        owed: dict[int, dict[str, Outbox]] = {}
        if outboxes:
            where_owed = among(session, col(Outbox.debate_id), debate_ids)
            for row in session.exec(select(Outbox).where(where_owed)):
                assert row.debate_id is not None  # selected by debate
                owed.setdefault(row.debate_id, {})[row.key] = row
        return _Closing(debates=by_id, outboxes=owed)


@dataclass
class _Ending:
    finish: Finish
    sealed: Sealed
    verdict: dict[str, Any]
    debate: dict[str, Any]
    escalation: dict[str, Any] | None
    issue: Issue


def _record_endings(
    session: Session, finishes: Sequence[Finish], known: _Closing, *, reread_outbox: bool = False
) -> list[Recorded]:
    """Write the endings of `finishes` in the caller's transaction (no commit): the verdicts,
    the debates' final state and new escalations; then read back the rows of those that owe
    messages. `reread_outbox` leaves each debate's outbox to be read afresh (after a
    rollback)."""
    outcomes: list[_Ending | LeaseLostError] = []
    for finish in finishes:
        row = known.debates.get(finish.debate_id)
        if row is None or row.lease_owner != finish.worker_id or row.state != DebateState.RUNNING:
            lost = f"worker {finish.worker_id} no longer holds debate {finish.debate_id}"
            outcomes.append(LeaseLostError(lost))
        else:
            outcomes.append(_ending(session, finish, row, known))
    endings = [o for o in outcomes if isinstance(o, _Ending)]
    if endings:
        connection = session.connection()
        connection.execute(insert(VERDICTS), [ending.verdict for ending in endings])
        connection.execute(_FINISH_DEBATE, [ending.debate for ending in endings])
        raised = [ending.escalation for ending in endings if ending.escalation is not None]
        if raised:
            connection.execute(insert(ESCALATIONS), raised)
    receipts: dict[int, Receipted] = {}
    for issuer in {ending.finish.receipts for ending in endings} - {None}:
        assert issuer is not None
        issues = [ending.issue for ending in endings if ending.finish.receipts is issuer]
        for debate_id, key_id in issue_receipts(session, issuer, issues).items():
            receipts[debate_id] = Receipted(key_id)
        for issue in issues:  # who stopped a cancelled debate, signed like a decision
            add_cancel(session, issuer, debate=issue.debate)
    ids = [ending.finish.debate_id for ending in endings if ending.finish.owes_messages]
    documents = receipts_of(session, debate_ids=[i for i in ids if i in receipts])
    for debate_id, document in documents.items():
        receipts[debate_id] = Receipted(receipts[debate_id].key_id, document)
    debates = _as_stored(session, Debate, col(Debate.id), ids) if ids else {}
    escalations = _as_stored(session, Escalation, col(Escalation.debate_id), ids) if ids else {}

    def closed(ending: _Ending) -> Closed:
        finish = ending.finish
        debate_id = finish.debate_id
        if not finish.owes_messages:
            return Closed(ending.sealed, receipt=receipts.get(debate_id))
        return Closed(
            ending.sealed,
            debate=debates[debate_id],
            escalation=escalations.get(debate_id) if finish.reviewed else None,
            outbox=None if reread_outbox else known.outboxes.get(debate_id, {}),
            receipt=receipts.get(debate_id),
        )

    return [closed(o) if isinstance(o, _Ending) else o for o in outcomes]


def _ending(session: Session, finish: Finish, row: Any, known: _Closing) -> _Ending:
    """The rows that record `finish`: the sealed verdict, the debate's final columns, and a new
    escalation when the verdict asks for one (or the finish is a sample) and the debate has
    none yet."""
    debate_id, result = finish.debate_id, finish.result
    verdict = result.verdict
    now = utcnow()
    values: dict[str, Any] = {
        "debate_id": debate_id,
        "status": verdict.status.value,
        "decision": verdict.decision.value,
        "confidence": verdict.confidence,
        "level": verdict.level.value,
        "escalate": verdict.escalate,
        "synthesis": verdict.synthesis,
        "result_json": StoredResult.document(result),
        "weights_version": verdict.weights_version,
        "components_json": (
            verdict.components.model_dump_json() if verdict.components is not None else None
        ),
        "created_at": now,
        **_workspace(row),
    }
    if finish.head is not None:
        turns, tail = finish.head.seq + 1, finish.head.hash
    else:
        turns, tail = chain_tail(session, debate_id=debate_id)
    triage, triage_reason = row.triage, row.triage_reason
    triaged = (result.report or {}).get("triage")
    if isinstance(triaged, dict):
        triage = TriageState.DEBATE if triaged.get("debated") else TriageState.ANSWERED
        triage_reason = str(triaged.get("reason") or "")
    debate: dict[str, Any] = {
        "finished_id": debate_id,
        "state": DebateState.FINISHED.value,
        "outcome": verdict.status.value,
        "decision": verdict.decision.value,
        "confidence": verdict.confidence,
        "cost_usd": result.cost_usd,
        "error": result.error,
        "triage": triage,
        "triage_reason": triage_reason,
        "lease_owner": None,
        "lease_expires_at": None,
        "finished_at": now,
        "updated_at": now,
        "pr_comment_due": now if row.link else row.pr_comment_due,
    }
    finished = {name: getattr(row, name) for name in _SEALED_AT_ENQUEUE}
    sealed_debate = {**finished, **debate, **_workspace(row), "id": debate_id}
    seal(values, turns, tail, finish.audit_key, debate=sealed_debate)
    debate["chain_head"], debate["chain_turns"] = values["chain_head"], turns
    escalation = None
    if finish.reviewed and row.escalation_id is None:
        reasons = verdict.escalation_reasons or ["the verdict asks for a human decision"]
        escalation = {
            "debate_id": debate_id,
            "reasons": reasons if verdict.escalate else [SAMPLE_REASON],
            "reviewers": list(row.reviewers or []),
            "message_ts": None,
            "state": EscalationState.OPEN.value,
            "sample": not verdict.escalate,
            "created_at": now,
            **_workspace(row),
        }
    sealed = Sealed(debate_id=debate_id, turns=turns, tail=tail, head=values["chain_head"])
    issue = Issue(debate=sealed_debate, verdict=values, review_requested=finish.reviewed)
    return _Ending(finish, sealed, values, debate, escalation, issue)


def _workspace(row: Any) -> dict[str, Any]:
    """The workspace columns a debate's verdict and escalation copy from it."""
    return {"team_id": row.team_id, "enterprise_id": row.enterprise_id}


def _as_stored(session: Session, table: type[M], key: Any, ids: list[int]) -> dict[int, M]:
    """The rows of `table` whose `key` column is among `ids`, keyed by it, as the database now
    holds them (objects the session already has are refreshed)."""
    return {
        getattr(row, key.key): row for row in as_stored(session, table, among(session, key, ids))
    }


def verdict_for(session: Session, *, debate_id: int) -> VerdictRecord | None:
    return session.exec(
        select(VerdictRecord).where(VerdictRecord.debate_id == debate_id)
    ).one_or_none()
