"""The table of decision receipts: each finished debate's signed receipt and the signed
statements of the human decisions that join it (`bot.store.receipts` writes and reads them)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field

from bot.store.columns import WorkspaceOwned, enum_column
from engine.models import utcnow


class ReceiptKind(StrEnum):
    RECEIPT = "receipt"
    """The receipt itself (part 0), made when the debate finished."""
    DECISION = "decision"
    """A person's decision on the verdict's review (parts 1, 2, …)."""


class ReceiptPart(WorkspaceOwned, table=True):
    """One signed part of a debate's receipt: its canonical JSON (RFC 8785) exactly as signed,
    the key id and the Ed25519 signature (both None when the deployment had no receipt key).
    Rows are only added: a part is never changed once written."""

    __tablename__ = "receipt_part"
    __table_args__ = (UniqueConstraint("debate_id", "part", name="uq_receipt_part"),)

    id: int | None = Field(default=None, primary_key=True)
    debate_id: int = Field(foreign_key="debate.id", index=True)
    part: int = Field(ge=0)
    kind: ReceiptKind = Field(
        sa_column=enum_column(ReceiptKind, name="ck_receipt_part_kind", length=20)
    )
    body: str = Field(sa_column=Column(Text, nullable=False))
    key_id: str | None = Field(default=None, max_length=80)
    signature: str | None = Field(default=None, max_length=120)
    created_at: datetime = Field(default_factory=utcnow)
