"""The result document a verdict row keeps: the debate's result without its transcript (the turn
rows hold every turn), with the totals the transcript gave, so a result read back reports what
the debate cost and used, as every message made from it shows."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, computed_field

from engine.models import DebateResult, TurnRecord, Usage

_COMPUTED = {"usage", "cost_usd", "cost_by_role"}


class StoredResult(DebateResult):
    """A `DebateResult` as stored: its transcript is empty once read back, its totals are not."""

    turn_count: int = Field(default=0, ge=0)
    total_usage: Usage = Field(default_factory=Usage)
    total_cost_usd: float = Field(default=0.0, ge=0.0)
    total_cost_by_role: dict[str, float] = Field(default_factory=dict)

    @classmethod
    def document(cls, result: DebateResult) -> str:
        """The JSON the verdict row keeps for `result`."""
        data = result.model_dump(exclude={"transcript", *_COMPUTED})
        kept = cls(
            **data,
            turn_count=len(result.transcript),
            total_usage=result.usage,
            total_cost_usd=result.cost_usd,
            total_cost_by_role=result.cost_by_role,
        )
        return kept.model_dump_json(exclude={"transcript", *_COMPUTED})

    @classmethod
    def read(cls, text: str) -> StoredResult:
        """A verdict row's document. One written before this type kept the totals under the
        names its computed fields were dumped with (`usage`, `cost_usd`, `cost_by_role`)."""
        data: dict[str, Any] = json.loads(text)
        data.setdefault("total_usage", data.get("usage") or {})
        data.setdefault("total_cost_usd", data.get("cost_usd") or 0.0)
        data.setdefault("total_cost_by_role", data.get("cost_by_role") or {})
        for name in _COMPUTED:
            data.pop(name, None)
        return cls.model_validate(data)

    @classmethod
    def shown(cls, text: str, transcript: list[TurnRecord]) -> dict[str, Any]:
        """The result as exports show it (and receipts digest it): the verdict row's document
        `text` with the transcript of the turn rows, as JSON values."""
        parsed = cls.read(text)
        parsed.transcript = transcript
        return parsed.model_dump(
            mode="json",
            exclude={"turn_count", "total_usage", "total_cost_usd", "total_cost_by_role"},
        )

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects decorated properties: mypy#1362
    @property
    def usage(self) -> Usage:
        return super().usage if self.transcript else self.total_usage

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects decorated properties: mypy#1362
    @property
    def cost_usd(self) -> float:
        return super().cost_usd if self.transcript else self.total_cost_usd

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects decorated properties: mypy#1362
    @property
    def cost_by_role(self) -> dict[str, float]:
        return super().cost_by_role if self.transcript else self.total_cost_by_role

    @property
    def turns(self) -> int:
        return len(self.transcript) or self.turn_count
