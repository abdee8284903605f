"""The audit chain of a debate, and its seal.

Each turn's hash covers its content and the previous turn's hash, so changing, removing or
reordering a stored turn breaks every later link. When the debate finishes, the chain is sealed:
the verdict and the debate row's content people read are hashed onto its last link (the *head*),
and the head, the last turn's hash (the *tail*) and the turn count are stored on the verdict and
on the debate, and signed with the server's key (`DEBATEBOT_AUDIT_KEY`, HMAC-SHA256). So deleting
the last turns, or every turn, no longer verifies; editing the verdict or the question changes
the head; and rewriting anything and recomputing every hash, which anyone can do, fails the
signature, which only the key holder can make. `audit` names which of these happened. It works
on rows, so the same check runs on the database and on an exported file.

Seal versions (`verdict.chain_version`), named in the head and in the signed message, so changing
the version changes the head or breaks the signature:

- 3, written since schema 0021: version 2's rules, with the workspace the debate belongs to
  (`team_id`, and `enterprise_id` on Enterprise Grid) in `debate_digest`, so a record moved to
  another workspace, which would then be shown and counted there, no longer verifies. A
  single-workspace database's debates finished before the bot learnt its workspace's id (team
  `pending`) are sealed again as that workspace's when it adopts them
  (`verify.adopt_pending_records`), each only if it verified before.
- 2, written by schemas 0012 to 0020: the head covers the tail, the verdict (since schema 0019 with
  the confidence's weights version and components, hashed only when set, so older seals still
  verify) and `debate_digest`: what
  was asked (question, spec with its context documents, protocol, who asked, where, whose
  reviewers decide, link, when)
  and how it ended (state, outcome, decision, confidence, cost, error, triage, finished_at;
  since schema 0028, for a debate a person stopped, who stopped it, when and from where).
  None of these change once the debate has finished. The debate's columns that do change later
  (`thread_ts` once the parent message is delivered or re-created, `halt_reason`,
  `pr_comment_due`, `updated_at`, the lease columns) are left out. The digest is also stored
  (`chain_debate`), so a failure says whether the debate or the verdict changed. Such seals
  still verify; the report says the workspace is not covered, and `debatebot audit reseal`
  seals one whose signature is valid again as version 3, with the workspace it stands in (an
  unsigned one is not: anyone can write a v2 seal, e.g. over a moved v3 record).
- 1, written by schemas 0006 to 0011: the head covers the tail and the verdict only. Such seals
  still verify by their rules, and the report says that the question, the context documents and
  the rest of the debate row are not covered.
- 0: the debate finished before seals existed (schema 0006). Migration 0012 marks the verdicts
  that then had no seal column set. Until the key holder seals one (`debatebot audit sign`, which
  seals it as it stands, under version 0 rules that are otherwise version 2's, so not its
  workspace), only its turn chain can be verified.

Whatever the version, every turn and the verdict carry the workspace of their debate (the store
stamps them from it), so a row whose workspace differs from its debate's was moved
(`moved_workspace`).

A finished debate must have its verdict and its seal. Every ending has written its verdict with
the debate's final state in one transaction, and every ending since schema 0006 its seal too,
so a finished debate without a verdict, or a version 1 or 2 verdict without its whole seal, was
tampered with, whatever else its rows say. Version 0 is the one exception, and it is also the
one an intruder would forge: nothing in the rows can tell a debate that really finished before
0006 from a stripped one marked 0, since anyone who can null the seal can also set the version
and the timestamps. The signature is the only thing a writer without the key cannot make, so the
rule leans on it: with a key set, a version 0 debate that is not sealed and signed fails
(`unsealed_legacy`), just as a seal without its signature does (`unsigned_seal`); the operator
who sets a key on a store with older debates runs `debatebot audit sign` once, which signs only
what verifies. Without a key nothing can be checked against forgery at all, which the report
says.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.store.debate_tables import Debate, DebateState, Turn, VerdictRecord

GENESIS_HASH = "0" * 64
CHAIN_VERSION = 3
"""The seal version new endings write."""
WORKSPACE_VERSION = 3
"""The first seal version whose debate digest covers the workspace."""
PRE_SEAL_VERSION = 0
"""A debate that finished before schema 0006 added seals (see the module docstring)."""
SEAL_VERSIONS = (PRE_SEAL_VERSION, 1, 2, CHAIN_VERSION)

KEY_DEPENDENT_KINDS = frozenset({"bad_signature", "unsigned_seal", "unsealed_legacy"})
"""Failures that depend on the verifier's key: a copy verified with another key (or none) may
legitimately have reported one of these."""


_TURN_FIELDS = tuple(Turn.model_fields)
_DEBATE_FIELDS = tuple(Debate.model_fields)


def _values(row: object, fields: Sequence[str]) -> Mapping[str, Any]:
    """A stored row's `fields` by name, or the column values of a row about to be inserted."""
    if isinstance(row, Mapping):
        return row
    return {name: getattr(row, name) for name in fields}


def _canonical(payload: Any) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat(timespec="microseconds")


def _number(value: float | None) -> str | None:
    return None if value is None else repr(float(value))


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
    payload["cost_usd"] = _number(values["cost_usd"])
    payload["latency_s"] = _number(values["latency_s"])
    payload["created_at"] = _instant(values["created_at"])
    # Added in schemas 0003, 0004, 0007 and 0013: hashed only when set, so older chains verify.
    for name in ("cache_write_input_tokens", "speaker", "phase", "reasoning_tokens"):
        if values.get(name):
            payload[name] = values[name]
    return hashlib.sha256(f"{prev_hash}\n{_canonical(payload)}".encode()).hexdigest()


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


_VERDICT_ADDED = ("weights_version", "components_json")
"""Verdict columns added since seals exist (schema 0019): hashed only when set, so a verdict
sealed before them verifies as it was sealed."""


def verdict_digest(record: VerdictRecord | Mapping[str, Any]) -> str:
    """sha256 over a canonical JSON of every audited field of the verdict row (a stored row, or
    the column values of one about to be inserted)."""
    values = _values(record, (*_VERDICT_FIELDS, *_VERDICT_ADDED))
    payload = {name: values[name] for name in _VERDICT_FIELDS}
    payload["confidence"] = _number(values["confidence"])
    payload["escalate"] = bool(values["escalate"])
    for name in _VERDICT_ADDED:
        if values.get(name) is not None:
            payload[name] = values[name]
    return hashlib.sha256(_canonical(payload).encode()).hexdigest()


SEALED_AS_QUEUED = (
    "trigger_key",
    "source",
    "channel_id",
    "requested_by",
    "parent_debate_id",
    "review_channel_id",
    "reviewers_channel_id",
    "link",
    "question",
    "protocol",
)
"""The text columns of a debate's seal that its row has from when it was queued (an ending reads
them back to seal the debate, bot.store.endings)."""

_DEBATE_TEXT = (
    "id",
    *SEALED_AS_QUEUED,
    "state",
    "outcome",
    "decision",
    "error",
    "triage",
    "triage_reason",
)


def debate_digest(debate: Debate | Mapping[str, Any], *, version: int = CHAIN_VERSION) -> str:
    """sha256 over a canonical JSON of the debate row's sealed content under seal `version`
    (see the module docstring): a stored row, or the columns of one being finished. The spec is
    hashed parsed, so an export, which carries it as JSON, hashes the same."""
    values = _values(debate, _DEBATE_FIELDS)
    payload: dict[str, Any] = {name: values[name] for name in _DEBATE_TEXT}
    if version >= WORKSPACE_VERSION:
        payload["team_id"] = values["team_id"]
        payload["enterprise_id"] = values["enterprise_id"]
    payload["spec"] = json.loads(values["spec_json"])
    payload["confidence"] = _number(values["confidence"])
    payload["cost_usd"] = _number(values["cost_usd"])
    payload["created_at"] = _instant(values["created_at"])
    payload["finished_at"] = _instant(values["finished_at"])
    # Who stopped a cancelled debate, when and from where (schema 0028): hashed only when set,
    # so every debate sealed before (and every one nobody stopped) hashes as it was sealed.
    if values.get("cancel_requested_at") is not None:
        payload["cancel_requested_at"] = _instant(values["cancel_requested_at"])
        payload["cancelled_by"] = values.get("cancelled_by")
        payload["cancelled_from"] = values.get("cancelled_from")
    return hashlib.sha256(_canonical(payload).encode()).hexdigest()


def head_of(
    version: int, tail: str, record: VerdictRecord | Mapping[str, Any], debate: str | None
) -> str:
    """The chain's head: the verdict (and from version 2, or 0 sealed late, the debate's
    digest `debate`) hashed onto the last turn's hash."""
    verdict = verdict_digest(record)
    if version == 1:
        return hashlib.sha256(f"{tail}\nverdict\n{verdict}".encode()).hexdigest()
    message = f"debatebot-chain-v{version}\n{tail}\nverdict\n{verdict}\ndebate\n{debate}"
    return hashlib.sha256(message.encode()).hexdigest()


def signature_of(
    key: bytes, *, version: int, debate_id: int, turns: int, tail: str, head: str
) -> str:
    """HMAC-SHA256 of the seal with the server's key; the message names the seal's version."""
    message = f"debatebot-audit-v{version}\n{debate_id}\n{turns}\n{tail}\n{head}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def record_signature(key: bytes, record: VerdictRecord, *, debate_id: int) -> str:
    """`signature_of` the seal a verdict record holds."""
    return signature_of(
        key,
        version=record.chain_version,
        debate_id=debate_id,
        turns=record.chain_turns or 0,
        tail=record.chain_tail or "",
        head=record.chain_head or "",
    )


def seal(
    values: dict[str, Any],
    turns: int,
    tail: str,
    key: bytes | None,
    *,
    debate: Debate | Mapping[str, Any],
    version: int = CHAIN_VERSION,
) -> None:
    """Seal the chain onto the column values of a verdict (about to be stored, or stored
    unsealed): version, the debate's digest, tail (the last turn's hash), head, turn count, and
    the signature. `debate` is the debate row as it is once finished."""
    digest = debate_digest(debate, version=version)
    head = head_of(version, tail, values, digest)
    values["chain_version"] = version
    values["chain_debate"] = digest
    values["chain_turns"] = turns
    values["chain_tail"] = tail
    values["chain_head"] = head
    values["chain_signature"] = (
        signature_of(
            key, version=version, debate_id=values["debate_id"], turns=turns, tail=tail, head=head
        )
        if key
        else None
    )


@dataclass(frozen=True)
class ChainReport:
    """What verifying a debate found: `kind` names the first problem (`removed_turn`,
    `edited_turn`, `missing_tail`, `added_turn`, `edited_verdict`, `edited_debate`,
    `edited_seal`, `missing_verdict`, `missing_seal`, `moved_workspace`, `unsealed_legacy`,
    `unsigned_seal`,
    `bad_signature`, and for an export `edited_export`); `signature` says how the seal stands
    (`valid`, `not checked: …`); `note` what the seal does not cover, when that matters."""

    debate_id: int
    turns_checked: int
    first_broken_seq: int | None
    problem: str | None
    kind: str | None = None
    sealed: bool = False
    signature: str = "no seal"
    head: str | None = None
    version: int | None = None
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.kind is None


V1_NOTE = (
    "a v1 seal (written before schema 0012) covers the turns and the verdict, not the question,"
    " the context documents or the rest of the debate row"
)
PRE_SEAL_NOTE = (
    "finished before audit seals (schema 0006): only its turn chain can be verified; with"
    " DEBATEBOT_AUDIT_KEY set, `debatebot audit sign` seals it as it stands"
)
V2_NOTE = (
    "a v2 seal (written before schema 0021) does not cover the workspace the record belongs to;"
    " with DEBATEBOT_AUDIT_KEY set, `debatebot audit reseal` re-seals it as v3 as it stands"
)
LATE_SEAL_NOTE = (
    "finished before audit seals (schema 0006) and sealed later by `debatebot audit sign`: the"
    " seal covers the record as it stood then"
)
"""Exports carry the note they were made with and must verify as they are, so this text stays
as it was; a late seal does not cover the workspace either (module docstring)."""


def audit(
    debate: Debate,
    rows: Sequence[Turn],
    record: VerdictRecord | None,
    *,
    key: bytes | None,
) -> ChainReport:
    """Verify the turn chain and, for a finished debate, its verdict, seal and signature."""
    debate_id = debate.id or 0
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
    moved = _moved(debate, rows, record)
    if moved is not None:
        seq, problem = moved
        return ChainReport(debate_id, count, seq, problem, "moved_workspace")
    if record is None:
        if debate.state == DebateState.FINISHED:
            gone = "the debate finished but has no verdict row: the verdict was deleted"
        elif debate.finished_at is not None:
            gone = f"the debate has a finish time but no verdict row (and is {debate.state}):"
            gone += " the verdict was deleted"
        elif debate.chain_head is not None or debate.chain_turns is not None:
            gone = "the debate carries a copy of a seal but has no verdict row: it was deleted"
        else:
            return ChainReport(debate_id, count, None, None)
        return ChainReport(debate_id, count, None, gone, "missing_verdict")
    return _sealed(debate, rows, record, key)


def _moved(
    debate: Debate, rows: Sequence[Turn], record: VerdictRecord | None
) -> tuple[int | None, str] | None:
    """(turn seq or None for the verdict, problem) for the first row whose workspace is not its
    debate's: the store stamps every turn and the verdict from their debate, so it was moved."""
    home = (debate.team_id, debate.enterprise_id)
    for row in rows:
        if (row.team_id, row.enterprise_id) != home:
            return row.seq, (
                f"turn {row.seq} belongs to workspace {row.team_id} but its debate to"
                f" {debate.team_id}: rows were moved between workspaces"
            )
    if record is not None and (record.team_id, record.enterprise_id) != home:
        return None, (
            f"the verdict belongs to workspace {record.team_id} but its debate to"
            f" {debate.team_id}: rows were moved between workspaces"
        )
    return None


_VERDICT_SEAL = ("chain_turns", "chain_tail", "chain_head", "chain_debate")
_DEBATE_SEAL = ("chain_head", "chain_turns")


def _sealed(
    debate: Debate, rows: Sequence[Turn], record: VerdictRecord, key: bytes | None
) -> ChainReport:
    """The verdict, the seal and its signature, once the turn chain verified."""
    debate_id, count, version = debate.id or 0, len(rows), record.chain_version

    def failed(kind: str, problem: str) -> ChainReport:
        return ChainReport(
            debate_id, count, None, problem, kind, True, "not checked", record.chain_head, version
        )

    if debate.state != DebateState.FINISHED:
        return failed(
            "edited_debate",
            f"the debate is {debate.state} but has a verdict: its state was changed",
        )
    if version not in SEAL_VERSIONS:
        return failed("edited_seal", f"unknown seal version {version}: the version was changed")
    wanted = _VERDICT_SEAL[:3] if version == 1 else _VERDICT_SEAL
    missing = [f"verdict.{name}" for name in wanted if getattr(record, name) is None]
    missing += [f"debate.{name}" for name in _DEBATE_SEAL if getattr(debate, name) is None]
    if version == PRE_SEAL_VERSION and len(missing) == len(wanted) + len(_DEBATE_SEAL):
        if record.chain_signature is not None:
            return failed("edited_seal", "a signature without a seal: the seal was removed")
        if key is not None:
            return ChainReport(
                debate_id,
                count,
                None,
                "it finished before audit seals (schema 0006) and was never sealed, so nothing"
                " shows it was not stripped: run `debatebot audit sign` to seal it if you trust"
                " the record as it stands",
                "unsealed_legacy",
                version=version,
                note=PRE_SEAL_NOTE,
            )
        return ChainReport(
            debate_id,
            count,
            None,
            None,
            signature="not checked: no seal and DEBATEBOT_AUDIT_KEY is not set here",
            version=version,
            note=PRE_SEAL_NOTE,
        )
    if missing:
        return failed(
            "missing_seal",
            f"the debate finished but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'}"
            " empty: the seal was removed",
        )
    found = _seal_problem(debate, rows, record, version)
    if found is not None:
        return failed(*found)
    signature, failure = _signature(debate_id, record, key)
    note = {1: V1_NOTE, 2: V2_NOTE, PRE_SEAL_VERSION: LATE_SEAL_NOTE}.get(version)
    kind, problem = failure if failure is not None else (None, None)
    return ChainReport(
        debate_id, count, None, problem, kind, True, signature, record.chain_head, version, note
    )


def _seal_problem(
    debate: Debate, rows: Sequence[Turn], record: VerdictRecord, version: int
) -> tuple[str, str] | None:
    """(kind, problem) when the rows no longer match the seal: turns lost or added, turns or
    verdict or debate changed, the debate's copy of the seal changed."""
    count, sealed = len(rows), record.chain_turns or 0
    if count < sealed:
        lost = (
            "every turn was deleted"
            if count == 0
            else "the last one was deleted"
            if sealed - count == 1
            else f"the last {sealed - count} were deleted"
        )
        return "missing_tail", f"sealed with {sealed} turns, {count} remain: {lost}"
    if count > sealed:
        return "added_turn", f"sealed with {sealed} turns, {count} found: turns were added"
    if (rows[-1].hash if rows else GENESIS_HASH) != record.chain_tail:
        return (
            "edited_turn",
            "the turns were changed and their hashes recomputed: the last hash no longer matches"
            " the one sealed at finish",
        )
    if version != 1 and debate_digest(debate, version=version) != record.chain_debate:
        workspace = ", workspace" if version >= WORKSPACE_VERSION else ""
        return (
            "edited_debate",
            "the debate's question, spec (context documents), requester, channel, link"
            f"{workspace} or ending was changed after it was sealed",
        )
    if head_of(version, record.chain_tail or "", record, record.chain_debate) != record.chain_head:
        return "edited_verdict", "the verdict was changed after it was sealed"
    if (debate.chain_head, debate.chain_turns) != (record.chain_head, record.chain_turns):
        return "edited_seal", "the debate's copy of the seal differs from the verdict's"
    return None


def _signature(
    debate_id: int, record: VerdictRecord, key: bytes | None
) -> tuple[str, tuple[str, str] | None]:
    """(how the signature stands, (kind, problem) when it fails)."""
    if key is None:
        if record.chain_signature is None:
            return "not checked: the seal is unsigned and DEBATEBOT_AUDIT_KEY is not set here", None
        return "not checked: DEBATEBOT_AUDIT_KEY is not set here", None
    if record.chain_signature is None:
        return "missing", (
            "unsigned_seal",
            "the seal has no signature although DEBATEBOT_AUDIT_KEY is set: it was removed, or"
            " the debate was sealed before the key was set (then run `debatebot audit sign`)",
        )
    expected = record_signature(key, record, debate_id=debate_id)
    if hmac.compare_digest(expected, record.chain_signature):
        return "valid", None
    return "INVALID", (
        "bad_signature",
        "the seal's signature does not match: the debate was rewritten and re-hashed by someone"
        " without the audit key",
    )
