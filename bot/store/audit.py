"""The audit chain of a debate, and its seal.

Each turn's hash covers its content and the previous turn's hash, so changing, removing or
reordering a stored turn breaks every later link. When the debate finishes, the chain is sealed:
the verdict is hashed onto its last link (the *head*), and the head, the last turn's hash (the
*tail*) and the turn count are stored on the verdict and on the debate, and signed with the
server's key (`DEBATEBOT_AUDIT_KEY`, HMAC-SHA256). So deleting the last turns, or every turn, no
longer verifies; editing the verdict changes the head; and rewriting turns or the verdict and
recomputing every hash, which anyone can do, fails the signature, which only the key holder can
make. `audit` names which of these happened. It works on rows, so the same check runs on the
database and on an exported file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from bot.store.tables import Turn, VerdictRecord

GENESIS_HASH = "0" * 64


_TURN_FIELDS = tuple(Turn.model_fields)


def _values(row: object, fields: Sequence[str]) -> Mapping[str, Any]:
    """A stored row's `fields` by name, or the column values of a row about to be inserted."""
    if isinstance(row, Mapping):
        return row
    return {name: getattr(row, name) for name in fields}


def turn_digest(turn: Turn | Mapping[str, Any], prev_hash: str) -> str:
    """sha256 over the previous hash and a canonical JSON of every audited field of `turn` (a
    stored row, or the column values of one about to be inserted)."""
    values = _values(turn, _TURN_FIELDS)
    payload = {
        name: values[name]
        for name in (
            "debate_id",
            "seq",
            "round",
            "role",
            "attempt",
            "provider",
            "model",
            "prompt_sha256",
            "request_sha256",
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
            "reasks",
            "raw_text",
            "parsed_json",
        )
    }
    payload["cost_usd"] = repr(float(values["cost_usd"]))
    payload["latency_s"] = repr(float(values["latency_s"]))
    payload["created_at"] = values["created_at"].astimezone(UTC).isoformat(timespec="microseconds")
    # Added in schemas 0003, 0004 and 0007: hashed only when set, so older chains verify.
    for name in ("cache_write_input_tokens", "speaker", "phase"):
        if values.get(name):
            payload[name] = values[name]
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{prev_hash}\n{canonical}".encode()).hexdigest()


_VERDICT_FIELDS = (
    "debate_id",
    "status",
    "decision",
    "confidence",
    "level",
    "escalate",
    "synthesis",
    "result_json",
)


def verdict_digest(record: VerdictRecord | Mapping[str, Any]) -> str:
    """sha256 over a canonical JSON of every audited field of the verdict row (a stored row, or
    the column values of one about to be inserted)."""
    values = _values(record, _VERDICT_FIELDS)
    payload = {name: values[name] for name in _VERDICT_FIELDS}
    payload["confidence"] = repr(float(values["confidence"]))
    payload["escalate"] = bool(values["escalate"])
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def head_of(tail: str, record: VerdictRecord | Mapping[str, Any]) -> str:
    """The chain's head: the verdict hashed onto the last turn's hash."""
    return hashlib.sha256(f"{tail}\nverdict\n{verdict_digest(record)}".encode()).hexdigest()


def signature_of(key: bytes, *, debate_id: int, turns: int, tail: str, head: str) -> str:
    """HMAC-SHA256 of the seal with the server's key."""
    message = f"debatebot-audit-v1\n{debate_id}\n{turns}\n{tail}\n{head}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def seal(values: dict[str, Any], turns: int, tail: str, key: bytes | None) -> None:
    """Seal the chain onto the column values of a verdict about to be stored: tail (the last
    turn's hash), head, turn count, and the signature."""
    head = head_of(tail, values)
    values["chain_turns"] = turns
    values["chain_tail"] = tail
    values["chain_head"] = head
    values["chain_signature"] = (
        signature_of(key, debate_id=values["debate_id"], turns=turns, tail=tail, head=head)
        if key
        else None
    )


@dataclass(frozen=True)
class ChainReport:
    """What verifying a debate found: `kind` names the first problem (`removed_turn`,
    `edited_turn`, `missing_tail`, `added_turn`, `edited_verdict`, `bad_signature`), and
    `signature` says how the seal stands (`valid`, `unsigned`, `not checked: …`)."""

    debate_id: int
    turns_checked: int
    first_broken_seq: int | None
    problem: str | None
    kind: str | None = None
    sealed: bool = False
    signature: str = "no seal"
    head: str | None = None

    @property
    def ok(self) -> bool:
        return self.kind is None


def audit(
    debate_id: int,
    rows: Sequence[Turn],
    record: VerdictRecord | None,
    *,
    key: bytes | None,
    debate_seal: tuple[str | None, int | None] | None = None,
) -> ChainReport:
    """Verify the turn chain and, for a finished debate, its seal and signature.

    `debate_seal` is the (head, turn count) copy kept on the debate row; it must match the
    verdict's.
    """
    expected_prev = GENESIS_HASH
    for index, row in enumerate(rows):
        problem = kind = None
        if row.seq != index:
            kind, problem = (
                "removed_turn",
                f"seq {row.seq} where {index} was expected: a turn was removed",
            )
        elif row.prev_hash != expected_prev:
            kind, problem = "edited_turn", "its prev_hash does not match the previous turn's hash"
        elif turn_digest(row, row.prev_hash) != row.hash:
            kind, problem = (
                "edited_turn",
                "its content no longer matches its hash (the row was altered)",
            )
        if kind is not None:
            return ChainReport(debate_id, index + 1, row.seq, f"turn {row.seq}: {problem}", kind)
        expected_prev = row.hash
    count = len(rows)
    if record is None or record.chain_head is None or record.chain_turns is None:
        return ChainReport(debate_id, count, None, None)
    sealed = record.chain_turns
    found: tuple[str, str] | None = None
    if count < sealed:
        lost = "every turn was deleted" if count == 0 else f"the last {sealed - count} were deleted"
        found = ("missing_tail", f"sealed with {sealed} turns, {count} remain: {lost}")
    elif count > sealed:
        found = ("added_turn", f"sealed with {sealed} turns, {count} found: turns were added")
    elif (rows[-1].hash if rows else GENESIS_HASH) != record.chain_tail:
        found = (
            "edited_turn",
            "the turns were changed and their hashes recomputed: the last hash no longer matches"
            " the one sealed at finish",
        )
    elif head_of(record.chain_tail or "", record) != record.chain_head:
        found = ("edited_verdict", "the verdict was changed after it was sealed")
    elif debate_seal is not None and debate_seal != (record.chain_head, record.chain_turns):
        found = ("edited_verdict", "the debate's copy of the seal differs from the verdict's")
    signature, bad = _signature(debate_id, record, key)
    if found is None and bad:
        found = (
            "bad_signature",
            "the seal's signature does not match: the debate was rewritten and re-hashed by"
            " someone without the audit key",
        )
    kind, problem = found if found else (None, None)
    return ChainReport(debate_id, count, None, problem, kind, True, signature, record.chain_head)


def _signature(debate_id: int, record: VerdictRecord, key: bytes | None) -> tuple[str, bool]:
    """(how the signature stands, whether it is wrong)."""
    if record.chain_signature is None:
        return "unsigned (sealed without DEBATEBOT_AUDIT_KEY)", False
    if key is None:
        return "not checked: DEBATEBOT_AUDIT_KEY is not set here", False
    expected = signature_of(
        key,
        debate_id=debate_id,
        turns=record.chain_turns or 0,
        tail=record.chain_tail or "",
        head=record.chain_head or "",
    )
    if hmac.compare_digest(expected, record.chain_signature):
        return "valid", False
    return "INVALID", True
