"""A signed receipt refuses every change: each field (and each field of the public keys file)
edited, deleted, reordered or substituted with another field's value, with and without a human
decision joined to it; a retired key's signature made after its retirement is refused, while
what it signed before keeps verifying next to its successor's receipts (a rotation)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bot.keyring import Signer
from bot.receipt_verifier import (
    ALGORITHM,
    DECISION_FORMAT,
    RECEIPT_FORMAT,
    digest,
    encode_bytes,
    instant,
    keys_body,
    text_digest,
    verify,
)
from tests.receipt_mutations import mutations

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
"""When key A was made; key B replaces it at T0 + 30 days."""
ROTATED = T0 + timedelta(days=30)
SEEDS = (1, 2, 3)


def _private(seed: int) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)


A, B = _private(1), _private(2)


def _public(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return encode_bytes(raw)


def keys_file(*, rotated: bool = True) -> dict[str, Any]:
    """Key A, retired at ROTATED when `rotated`, and B from then, signed by the key in service."""
    entries = [
        {
            "key_id": "key-a",
            "algorithm": ALGORITHM,
            "public_key": _public(A),
            "valid_from": instant(T0),
            "retired_at": instant(ROTATED) if rotated else None,
        }
    ]
    if rotated:
        entries.append(
            {
                "key_id": "key-b",
                "algorithm": ALGORITHM,
                "public_key": _public(B),
                "valid_from": instant(ROTATED),
                "retired_at": None,
            }
        )
    body = keys_body(entries)
    return {
        **body,
        "signature": Signer("key-b" if rotated else "key-a", B if rotated else A).sign(body),
    }


def receipt(key: Ed25519PrivateKey, key_id: str, at: datetime, *, decided: bool) -> dict[str, Any]:
    """A whole receipt of a three-turn debate with two context documents, signed at `at`, and
    with `decided` one reviewer's signed decision."""
    turns = [
        {"seq": n, "round": 1, "role": role, "speaker": "", "phase": "", "attempt": 1}
        for n, role in enumerate(("proposer", "critic", "moderator"))
    ]
    payload: dict[str, Any] = {
        "format": RECEIPT_FORMAT,
        "debate": 7,
        "key_id": key_id,
        "issued_at": instant(at),
        "workspace": {"team_id": "T1", "enterprise_id": None},
        "question": "Adopt ADR-042?",
        "context": [
            {"title": "adr-042.md", "sha256": text_digest("Move sessions to Postgres.")},
            {"title": "load.md", "sha256": text_digest("Peak 1,200 rps.")},
        ],
        "spec_sha256": digest({"question": "Adopt ADR-042?"}),
        "protocol": {"name": "adversarial", "max_rounds": 1, "budget_usd": 0.5, "options": {}},
        "models": [
            {
                "role": "proposer",
                "provider": "openai",
                "model": "gpt-x",
                "price_per_mtok": {"input_per_mtok": 1.25, "output_per_mtok": 10.0},
                "turns": 1,
                "cost_usd": 0.0123,
                "prompt_sha256": [digest("p1")],
            }
        ],
        "turns": [{**turn, "sha256": digest(turn)} for turn in turns],
        "verdict": {
            "status": "complete",
            "decision": "revise",
            "escalate": True,
            "sha256": digest("verdict"),
            "result_sha256": digest("result"),
        },
        "confidence": {
            "value": 0.41,
            "level": "LOW",
            "weights_version": "default-1",
            "components": {"values": {"agreement": 0.5, "grounding": None}},
        },
        "cost": {"usd": 0.0456, "input_tokens": 3674, "output_tokens": 351},
        "timestamps": {
            "requested_at": instant(at - timedelta(minutes=2)),
            "finished_at": instant(at),
        },
        "review": {"requested": True},
        "seal": {"version": 3, "head": "ab" * 32},
    }
    decisions = []
    if decided:
        statement = {
            "format": DECISION_FORMAT,
            "seq": 0,
            "receipt_sha256": digest(payload),
            "previous_sha256": digest(payload),
            "key_id": key_id,
            "issued_at": instant(at + timedelta(hours=1)),
            "kind": "review",
            "decision": "approved",
            "by": "U9",
            "decided_at": instant(at + timedelta(hours=1)),
            "note": "risk accepted",
            "shown_sha256": digest({"text": "review request", "blocks": []}),
        }
        decisions.append({"statement": statement, "signature": Signer(key_id, key).sign(statement)})
    return {
        "receipt": payload,
        "signature": Signer(key_id, key).sign(payload),
        "decisions": decisions,
    }


@pytest.mark.parametrize("decided", [False, True], ids=["no decision", "with a decision"])
@pytest.mark.parametrize("seed", SEEDS)
def test_every_change_to_a_receipt_is_refused(decided: bool, seed: int) -> None:
    document = receipt(A, "key-a", T0 + timedelta(days=1), decided=decided)
    keys = keys_file()
    assert verify(document, keys).ok, verify(document, keys).problems
    # Removing the last decision gives the receipt as it was signed before the decision: the
    # export's reviews show it (tests/integration/test_receipts.py); every other change fails.
    accepted = [
        what
        for what, changed in mutations(document, seed, skip=frozenset({("decisions", 0)}))
        if verify(changed, keys).ok
    ]
    assert accepted == []


@pytest.mark.parametrize("seed", SEEDS)
def test_every_change_to_the_keys_file_is_refused(seed: int) -> None:
    document = receipt(A, "key-a", T0 + timedelta(days=1), decided=True)
    keys = keys_file()
    accepted = [what for what, changed in mutations(keys, seed) if verify(document, changed).ok]
    assert accepted == []


def test_a_retired_keys_signature_made_after_its_retirement_is_refused() -> None:
    late = receipt(A, "key-a", ROTATED + timedelta(seconds=1), decided=False)
    report = verify(late, keys_file())
    assert not report.ok
    assert "a retired key's signature made after its retirement is refused" in report.problems[0]
    early_b = receipt(B, "key-b", ROTATED - timedelta(seconds=1), decided=False)
    assert "valid only from" in verify(early_b, keys_file()).problems[0]


def test_rotation_keeps_the_old_keys_receipts_valid_beside_the_new_keys() -> None:
    before = receipt(A, "key-a", ROTATED - timedelta(days=1), decided=True)
    assert verify(before, keys_file(rotated=False)).ok
    after = receipt(B, "key-b", ROTATED + timedelta(days=1), decided=True)
    keys = keys_file()
    assert verify(before, keys).ok
    assert verify(after, keys).ok
    refused = verify(after, keys_file(rotated=False))
    assert "which the keys file does not list" in refused.problems[0]


def test_an_unsigned_receipt_is_refused_as_unsigned() -> None:
    document = receipt(A, "key-a", T0 + timedelta(days=1), decided=False)
    unsigned = copy.deepcopy(document)
    unsigned["signature"] = None
    unsigned["receipt"]["key_id"] = None
    assert "UNSIGNED" in verify(unsigned, keys_file()).problems[0]
