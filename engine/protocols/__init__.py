"""Debate protocols, one module each, all returning the common `DebateResult`; and the registry
of their definitions (`PROTOCOLS`), the one place the application learns which protocols there
are and what each one is (`engine.protocols.definition`).

Adding a protocol: its engine class in `engine/protocols/<name>.py`, its `DEFINITION` in
`engine/protocols/<name>_view.py`, one line here. Nothing in `bot/` names a protocol.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.errors import SpecError
from engine.models import DEFAULT_PROTOCOL, DebateSpec
from engine.protocols import (
    adversarial_view,
    consensus_view,
    panel_view,
    stances_view,
    structured_view,
)
from engine.protocols.base import DebateProtocol
from engine.protocols.definition import Flags, ProtocolDefinition

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "checked_protocol",
    "definition_for",
    "flagged",
    "protocol_names",
]

PROTOCOLS: dict[str, ProtocolDefinition] = {
    d.name: d
    for d in (
        adversarial_view.DEFINITION,
        consensus_view.DEFINITION,
        stances_view.DEFINITION,
        structured_view.DEFINITION,
        panel_view.DEFINITION,
    )
}
"""Every protocol's definition by name, in the order help texts and choices list them."""


def protocol_names() -> tuple[str, ...]:
    """The registered protocols' names (read when asked, so a registered one is included)."""
    return tuple(PROTOCOLS)


def flagged(wanted: Callable[[Flags], bool]) -> tuple[str, ...]:
    """The names of the registered protocols whose flags `wanted` accepts (the protocols that
    take `--route`, say), for a text that names them."""
    return tuple(d.name for d in PROTOCOLS.values() if wanted(d.flags))


def definition_for(name: str) -> ProtocolDefinition:
    """The definition of the protocol called `name`; an unknown name lists the ones there
    are."""
    if name in PROTOCOLS:
        return PROTOCOLS[name]
    raise SpecError(f"unknown protocol {name!r}; choose one of: {', '.join(PROTOCOLS)}")


def get_protocol(name: str) -> DebateProtocol:
    """The engine of the protocol called `name`."""
    return definition_for(name).engine()


def checked_protocol(spec: DebateSpec) -> DebateProtocol:
    """The spec's protocol, after checking that the spec can run under it: its round cap, its
    options, then the protocol's own rules. Raises SpecError saying what to change."""
    found = definition_for(spec.protocol)
    cap = found.max_rounds
    if spec.max_rounds > cap:
        if cap == 1:
            raise SpecError(
                f"the {found.name} protocol runs exactly one round; {spec.max_rounds} were"
                " asked for. Leave out --rounds (or give --rounds 1)"
            )
        raise SpecError(
            f"the {found.name} protocol runs at most {cap} rounds; {spec.max_rounds} were"
            f" asked for. Use --rounds 1 to {cap}"
        )
    if spec.options and found.options is None:
        takes = sorted(d.name for d in PROTOCOLS.values() if d.options is not None)
        raise SpecError(
            f"the {found.name} protocol takes no options; {', '.join(spec.options)} given."
            f" Options belong to the {', '.join(takes)} protocols"
        )
    protocol = found.engine()
    protocol.validate(spec)
    return protocol
