"""What `list_protocols` tells an agent of one protocol: what it is for, its rounds, the calls a
debate makes, the models it runs on here, and what a debate of it has typically cost here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.models import ModelSettings
from engine.protocols import DEFAULT_PROTOCOL
from engine.protocols.definition import ProtocolDefinition


def protocol_entry(
    definition: ProtocolDefinition,
    models: Mapping[str, ModelSettings],
    cost: tuple[float, int] | None,
) -> dict[str, Any]:
    """One protocol as `list_protocols` answers it; `models` are the configured role slots'
    models and `cost` the median cost of its last finished debates here and how many (None
    when none has finished: no figure is made up)."""

    def named(slot: str) -> str:
        return f"{models[slot].provider}:{models[slot].model}"

    return {
        "name": definition.name,
        "description": definition.labels.description,
        "advice": definition.labels.advice,
        "default_rounds": definition.default_rounds,
        "max_rounds": definition.max_rounds,
        "default": definition.name == DEFAULT_PROTOCOL,
        "calls_per_debate": definition.calls_per_run,
        "models": {"debaters": named("debaters"), "deciding": named(definition.deciding_slot)},
        "typical_cost_usd": round(cost[0], 6) if cost else None,
        "cost_from_debates": cost[1] if cost else 0,
    }
