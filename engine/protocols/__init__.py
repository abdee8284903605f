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


TAKES_OPTIONS = frozenset({"consensus", "stances", "panel"})
"""The protocols with options of their own (each checks them against its options model)."""


def checked_protocol(spec: DebateSpec) -> DebateProtocol:
    """The spec's protocol, after checking that the spec can run under it: its round cap, its
    options, then the protocol's own rules. Raises SpecError saying what to change."""
    protocol = get_protocol(spec.protocol)
    cap = protocol.max_rounds
    if spec.max_rounds > cap:
        if cap == 1:
            raise SpecError(
                f"the {protocol.name} protocol runs exactly one round; {spec.max_rounds} were"
                " asked for. Leave out --rounds (or give --rounds 1)"
            )
        raise SpecError(
            f"the {protocol.name} protocol runs at most {cap} rounds; {spec.max_rounds} were"
            f" asked for. Use --rounds 1 to {cap}"
        )
    if spec.options and protocol.name not in TAKES_OPTIONS:
        raise SpecError(
            f"the {protocol.name} protocol takes no options; {', '.join(spec.options)} given."
            f" Options belong to the {', '.join(sorted(TAKES_OPTIONS))} protocols"
        )
    protocol.validate(spec)
    return protocol


MAX_ROUNDS = {name: protocol.max_rounds for name, protocol in PROTOCOLS.items()}


def get_protocol(name: str) -> DebateProtocol:
    """The protocol called `name`; an unknown name lists the ones there are."""
    if name in PROTOCOLS:
        return PROTOCOLS[name]()
    raise SpecError(f"unknown protocol {name!r}; choose one of: {', '.join(PROTOCOL_NAMES)}")
