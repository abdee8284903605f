"""Decision receipts: what leaves the deployment when a debate finishes, signed so that anyone
holding the public keys file can check it (`bot.receipt_verifier`, `tools/verify_receipt.py`).

The receipt is written in the ending's transaction, beside the verdict and its HMAC seal (which
stays as it is: it guards the store; the receipt is what an auditor is given). It holds digests
of what the export shows (each turn as the export writes it, the verdict, the result, the spec,
each context document's text), so an export can be checked against it offline. A human decision
on the verdict's review is a second signed statement, written with the review: who, when, the
decision and note, and the digest of the review request as the outbox holds it (what was posted
to the reviewer).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert
from sqlmodel import Session, SQLModel, col, select

from bot.keyring import Signer
from bot.receipt_verifier import (
    DECISION_FORMAT,
    RECEIPT_FORMAT,
    canonical,
    digest,
    instant,
    text_digest,
)
from bot.store.debate_tables import Debate, Turn
from bot.store.outbox import REVIEW
from bot.store.outbox_tables import Outbox
from bot.store.receipt_tables import ReceiptKind, ReceiptPart
from bot.store.results import StoredResult
from bot.store.review_tables import EscalationState, Review
from bot.store.sql import among
from bot.store.turns import turn_record
from engine.models import utcnow

RECEIPT_PARTS = SQLModel.metadata.tables["receipt_part"]

PriceOf = Callable[[str, str], Mapping[str, float] | None]
"""A model's prices (USD per million tokens, by kind), or None when the deployment lists none."""


@dataclass(frozen=True)
class ReceiptIssuer:
    """What signs receipts: the current key (asked each time, so a rotation takes effect
    without a restart; None: receipts are written unsigned) and the models' prices."""

    signer: Callable[[], Signer | None]
    price_of: PriceOf


@dataclass(frozen=True)
class Issue:
    """One finished debate to issue a receipt for: its columns and its verdict's as the ending
    stores them, and whether it asked for a human review."""

    debate: Mapping[str, Any]
    verdict: Mapping[str, Any]
    review_requested: bool


def shown_turns(rows: Sequence[Turn]) -> list[dict[str, Any]]:
    """The turns as an export writes them (`turns`), from their rows."""
    return [turn_record(row).model_dump(mode="json") for row in rows]


def issue_receipts(
    session: Session, issuer: ReceiptIssuer, issues: Sequence[Issue]
) -> dict[int, str | None]:
    """Write the receipts of `issues` in the caller's transaction (no commit), one statement for
    the batch; {debate id: the key id that signed it, None when unsigned}."""
    if not issues:
        return {}
    signer = issuer.signer()
    ids = [issue.debate["id"] for issue in issues]
    rows: dict[int, list[Turn]] = {debate_id: [] for debate_id in ids}
    query = select(Turn).where(among(session, col(Turn.debate_id), ids))
    for row in session.exec(query.order_by(col(Turn.debate_id), col(Turn.seq))):
        rows[row.debate_id].append(row)
    now = utcnow()
    written, signed = [], {}
    for issue in issues:
        debate_id = issue.debate["id"]
        payload = receipt_payload(issue, rows[debate_id], issuer.price_of, signer, now)
        signature = signer.sign(payload) if signer is not None else None
        written.append(_part(issue.debate, 0, ReceiptKind.RECEIPT, payload, signature, now))
        signed[debate_id] = signature["key_id"] if signature else None
    session.connection().execute(insert(RECEIPT_PARTS), written)
    return signed


def receipt_payload(
    issue: Issue,
    rows: Sequence[Turn],
    price_of: PriceOf,
    signer: Signer | None,
    now: Any,
) -> dict[str, Any]:
    """The receipt's content (see `bot.receipt_verifier.RECEIPT_FIELDS`)."""
    debate, verdict = issue.debate, issue.verdict
    spec = json.loads(debate["spec_json"])
    turns = shown_turns(rows)
    result = StoredResult.shown(verdict["result_json"], [turn_record(row) for row in rows])
    rest = {name: value for name, value in result.items() if name != "transcript"}
    components = verdict.get("components_json")
    return {
        "format": RECEIPT_FORMAT,
        "debate": debate["id"],
        "key_id": signer.key_id if signer is not None else None,
        "issued_at": instant(now),
        "workspace": {"team_id": debate["team_id"], "enterprise_id": debate["enterprise_id"]},
        "question": debate["question"],
        "context": [
            {"title": document["title"], "sha256": text_digest(document["text"])}
            for document in spec.get("context") or []
        ],
        "spec_sha256": digest(spec),
        "protocol": {
            "name": debate["protocol"],
            **{
                name: spec.get(name)
                for name in (
                    "max_rounds",
                    "min_rounds",
                    "budget_usd",
                    "escalation_threshold",
                    "judges",
                    "task_type",
                    "options",
                )
            },
        },
        "models": _models(turns, price_of),
        "turns": [
            {
                "seq": row.seq,
                "round": turn["round"],
                "role": turn["role"],
                "speaker": turn["speaker"],
                "phase": turn["phase"],
                "attempt": turn["attempt"],
                "sha256": digest(turn),
            }
            for row, turn in zip(rows, turns, strict=True)
        ],
        "verdict": {
            "status": verdict["status"],
            "decision": verdict["decision"],
            "escalate": bool(verdict["escalate"]),
            "sha256": digest(result["verdict"]),
            "result_sha256": digest(rest),
        },
        "confidence": {
            "value": verdict["confidence"],
            "level": verdict["level"],
            "weights_version": verdict.get("weights_version"),
            "components": json.loads(components) if components else None,
        },
        "cost": {
            "usd": debate["cost_usd"],
            "input_tokens": sum(turn["usage"]["input_tokens"] for turn in turns),
            "output_tokens": sum(turn["usage"]["output_tokens"] for turn in turns),
        },
        "timestamps": {
            "requested_at": instant(debate["created_at"]),
            "finished_at": instant(debate["finished_at"]),
        },
        "review": {"requested": issue.review_requested},
        "seal": {"version": verdict["chain_version"], "head": verdict["chain_head"]},
    }


def _models(turns: Sequence[dict[str, Any]], price_of: PriceOf) -> list[dict[str, Any]]:
    """Each model that spoke, per role and speaker, in order of first turn: its price, turns,
    cost and the hashes of the prompts it was sent."""
    seen: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for turn in turns:
        key = (turn["role"], turn["speaker"], turn["provider"], turn["model"])
        entry = seen.get(key)
        if entry is None:
            price = price_of(turn["provider"], turn["model"])
            entry = seen[key] = {
                "role": turn["role"],
                "speaker": turn["speaker"],
                "provider": turn["provider"],
                "model": turn["model"],
                "price_per_mtok": dict(price) if price is not None else None,
                "turns": 0,
                "cost_usd": 0.0,
                "prompt_sha256": [],
            }
        entry["turns"] += 1
        entry["cost_usd"] += turn["cost_usd"]
        if turn["prompt_sha256"] not in entry["prompt_sha256"]:
            entry["prompt_sha256"].append(turn["prompt_sha256"])
    return list(seen.values())


def add_decision(
    session: Session, issuer: ReceiptIssuer, *, debate: Debate, review: Review
) -> str | None:
    """Join the signed statement of `review` to its debate's receipt, in the caller's
    transaction (no commit); the key id that signed it. Nothing when the debate has no receipt
    (it finished before receipts)."""
    parts = receipt_parts(session, debate_id=review.debate_id)
    if not parts:
        return None
    previous = json.loads(parts[-1].body)
    shown = session.exec(
        select(Outbox).where(Outbox.debate_id == review.debate_id, Outbox.key == REVIEW)
    ).one_or_none()
    signer = issuer.signer()
    now = utcnow()
    statement = {
        "format": DECISION_FORMAT,
        "seq": len(parts) - 1,
        "receipt_sha256": digest(json.loads(parts[0].body)),
        "previous_sha256": digest(previous),
        "key_id": signer.key_id if signer is not None else None,
        "issued_at": instant(now),
        "kind": "review",
        "decision": EscalationState(review.decision).value,
        "by": review.reviewer,
        "decided_at": instant(review.created_at),
        "note": review.note,
        "shown_sha256": (
            digest({"text": shown.text, "blocks": shown.blocks}) if shown is not None else None
        ),
    }
    signature = signer.sign(statement) if signer is not None else None
    values = _part(
        {"id": review.debate_id, "team_id": debate.team_id, "enterprise_id": debate.enterprise_id},
        len(parts),
        ReceiptKind.DECISION,
        statement,
        signature,
        now,
    )
    session.add(ReceiptPart(**values))
    return signature["key_id"] if signature else None


def add_cancel(session: Session, issuer: ReceiptIssuer, *, debate: Mapping[str, Any]) -> None:
    """Join the signed statement of who stopped a cancelled debate (issue 44), when and from
    where, to its receipt just issued, in the caller's transaction: like a reviewer's decision
    (`add_decision`), with `kind` "cancel" and no review request shown."""
    parts = receipt_parts(session, debate_id=debate["id"])
    if not parts or debate.get("cancel_requested_at") is None:
        return
    signer = issuer.signer()
    now = utcnow()
    source = debate.get("cancelled_from")
    statement = {
        "format": DECISION_FORMAT,
        "seq": len(parts) - 1,
        "receipt_sha256": digest(json.loads(parts[0].body)),
        "previous_sha256": digest(json.loads(parts[-1].body)),
        "key_id": signer.key_id if signer is not None else None,
        "issued_at": instant(now),
        "kind": "cancel",
        "decision": "cancelled",
        "by": debate.get("cancelled_by"),
        "decided_at": instant(debate["cancel_requested_at"]),
        "note": f"stopped from {getattr(source, 'value', source)}" if source else None,
        "shown_sha256": None,
    }
    signature = signer.sign(statement) if signer is not None else None
    session.add(
        ReceiptPart(**_part(debate, len(parts), ReceiptKind.DECISION, statement, signature, now))
    )


def _part(
    debate: Mapping[str, Any],
    part: int,
    kind: ReceiptKind,
    body: dict[str, Any],
    signature: dict[str, str] | None,
    now: Any,
) -> dict[str, Any]:
    return {
        "debate_id": debate["id"],
        "part": part,
        "kind": kind,
        "body": canonical(body).decode("utf-8"),
        "key_id": signature["key_id"] if signature else None,
        "signature": signature["value"] if signature else None,
        "created_at": now,
        "team_id": debate["team_id"],
        "enterprise_id": debate["enterprise_id"],
    }


def receipt_parts(session: Session, *, debate_id: int) -> list[ReceiptPart]:
    return list(
        session.exec(
            select(ReceiptPart)
            .where(ReceiptPart.debate_id == debate_id)
            .order_by(col(ReceiptPart.part))
        )
    )


def receipt_of(session: Session, *, debate_id: int) -> dict[str, Any] | None:
    """The debate's receipt as it is handed out (its payload, signature and decisions), or None
    when it has none (not finished, or finished before receipts)."""
    parts = receipt_parts(session, debate_id=debate_id)
    return _handed_out(parts) if parts else None


def receipts_of(session: Session, *, debate_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The receipts of `debate_ids` that have one, as `receipt_of` hands each out, in one
    query (a batch of endings uploads theirs)."""
    if not debate_ids:
        return {}
    query = select(ReceiptPart).where(among(session, col(ReceiptPart.debate_id), debate_ids))
    grouped: dict[int, list[ReceiptPart]] = {}
    for part in session.exec(query.order_by(col(ReceiptPart.debate_id), col(ReceiptPart.part))):
        grouped.setdefault(part.debate_id, []).append(part)
    return {debate_id: _handed_out(parts) for debate_id, parts in grouped.items()}


def _handed_out(parts: Sequence[ReceiptPart]) -> dict[str, Any]:
    """A receipt's parts (in order, at least the receipt itself) as the document handed out."""

    def signed(part: ReceiptPart) -> dict[str, str] | None:
        if part.key_id is None or part.signature is None:
            return None
        return {"algorithm": "Ed25519", "key_id": part.key_id, "value": part.signature}

    head, *decisions = parts
    return {
        "receipt": json.loads(head.body),
        "signature": signed(head),
        "decisions": [
            {"statement": json.loads(part.body), "signature": signed(part)} for part in decisions
        ],
    }
