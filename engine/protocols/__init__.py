"""Debate protocols, one module each, all returning the common `DebateResult`."""

from __future__ import annotations

from engine.errors import SpecError
from engine.models import DebateSpec
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


def checked_protocol(spec: DebateSpec) -> DebateProtocol:
    """The spec's protocol, after checking that the spec can run under it: its round cap, then
    the protocol's own rules. Raises SpecError saying what to change."""
    protocol = get_protocol(spec.protocol)
    if spec.max_rounds > protocol.max_rounds:
        raise SpecError(
            f"the {protocol.name} protocol runs at most {protocol.max_rounds} round"
            f"{'s' if protocol.max_rounds > 1 else ''}; {spec.max_rounds} were asked for."
            f" Use --rounds 1 to {protocol.max_rounds}"
        )
    protocol.validate(spec)
    return protocol


MAX_ROUNDS = {name: protocol.max_rounds for name, protocol in PROTOCOLS.items()}


def get_protocol(name: str) -> DebateProtocol:
    """The protocol called `name`; an unknown name lists the ones there are."""
    if name in PROTOCOLS:
        return PROTOCOLS[name]()
    raise SpecError(f"unknown protocol {name!r}; choose one of: {', '.join(PROTOCOL_NAMES)}")
