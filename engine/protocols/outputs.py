"""A protocol's output types, declared once, and the envelope schema every call of its debates
sends (`engine.envelope.Envelope` says why one schema for all).

Each protocol declares `Outputs`: for the name of every output type its calls ask for, the
static type whose schema the envelope holds for it. A type with nothing decided per debate is
its own static type. A type built per debate (the structured protocol's argument ids, a
consensus's vote set) maps to a superset that every debate's version fits in: the envelope must
not depend on what a debate learns, nor differ between debates of a protocol (the vendors keep
a compiled schema for a day, across debates). The call's own type still validates the answer,
exactly as without the envelope.

Adding an output type to a protocol: add its name and static type to the protocol's `Outputs`;
a call whose type is not declared fails at once, naming the declaration.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, create_model

from engine.envelope import Envelope, envelope_key
from engine.errors import EngineError
from engine.llm import referencing_schema


@dataclass(frozen=True)
class Outputs:
    """The output types of one protocol, keyed by the name of each call's output type."""

    protocol: str
    types: Mapping[str, type[BaseModel]]
    """A call's output type name → the static type the envelope holds for it."""

    @classmethod
    def of(cls, protocol: str, *types: type[BaseModel]) -> Outputs:
        """Outputs whose types are all static (each its own superset)."""
        return cls(protocol, {kind.__name__: kind for kind in types})

    @functools.cached_property
    def schema(self) -> dict[str, Any]:
        """The envelope's JSON schema: one required, nullable key per type, each type's schema
        written once in `$defs` (built once)."""
        fields: dict[str, Any] = {
            envelope_key(name): (kind | None, ...) for name, kind in self.types.items()
        }
        model: type[BaseModel] = create_model(f"{self.protocol}_envelope", **fields)
        return referencing_schema(model)

    @functools.cached_property
    def size_bytes(self) -> int:
        return len(json.dumps(self.schema).encode("utf-8"))

    def envelope(self, output_type: type[BaseModel]) -> Envelope:
        """The envelope of a call asking for `output_type`."""
        name = output_type.__name__
        if name not in self.types:
            raise EngineError(
                f"output type {name} is not declared in the {self.protocol} protocol's Outputs;"
                f" add it there with its static type (declared: {', '.join(self.types)})"
            )
        return Envelope(
            name=f"{self.protocol}_reply",
            json_schema=self.schema,
            key=envelope_key(name),
            size_bytes=self.size_bytes,
        )
