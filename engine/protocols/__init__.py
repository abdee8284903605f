"""Debate protocols, one module each, all returning the common `DebateResult`."""

from __future__ import annotations

from engine.errors import SpecError
from engine.protocols.adversarial import AdversarialProtocol
from engine.protocols.base import DebateProtocol
from engine.protocols.consensus import ConsensusProtocol
from engine.protocols.panel import PanelProtocol
from engine.protocols.stances import StancesProtocol
from engine.protocols.structured import StructuredProtocol

PROTOCOLS: dict[str, type[DebateProtocol]] = {
    "adversarial": AdversarialProtocol,
    "consensus": ConsensusProtocol,
    "stances": StancesProtocol,
    "structured": StructuredProtocol,
    "panel": PanelProtocol,
}
PROTOCOL_NAMES = tuple(PROTOCOLS)


def get_protocol(name: str) -> DebateProtocol:
    """The protocol called `name`; an unknown name lists the ones there are."""
    if name in PROTOCOLS:
        return PROTOCOLS[name]()
    raise SpecError(f"unknown protocol {name!r}; choose one of: {', '.join(PROTOCOL_NAMES)}")
