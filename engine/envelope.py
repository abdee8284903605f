"""The envelope: the one output schema every call of a protocol's debate sends, carried on
each request with the key the call fills, and how a reply to it is read."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

_WORD_START = re.compile(r"(?<!^)(?=[A-Z])")


def envelope_key(type_name: str) -> str:
    """The envelope key of an output type: its name in snake case (`ProposerTurn` →
    `proposer_turn`)."""
    return _WORD_START.sub("_", type_name).lower()


ENVELOPE_ASKS = "Your reply is one JSON object with a key for each kind of answer in this debate:"
"""How the envelope's instruction begins (`Envelope.instruction`)."""


class Envelope(BaseModel):
    """The one output schema every call of a protocol's debate sends, and this call's key in it.

    The vendors' prompt caches put the output schema before the messages (OpenAI: "The
    structured output schema serves as a prefix to the system message"; Anthropic caches
    `tools`, `system`, `messages` in that order, and "changing `output_config.format`
    invalidates the prompt cache"), so a schema per role would make every role's prompt differ
    from its first byte. The envelope has one key per output type of the protocol, every key
    required and each `anyOf [that type's schema, null]` (OpenAI's strict mode wants every
    property required; nullable is how it takes an optional one). A call fills its own key;
    `unwrap` takes its answer out, which the caller validates with the call's own type.
    Built by `engine.protocols.outputs.Outputs`, once per protocol.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    """The protocol's name for it (a `json_schema` name, a tool name): the same on every call."""
    json_schema: dict[str, Any]
    """Shared by every call and request: never changed (providers derive copies)."""
    key: str
    size_bytes: int = Field(ge=0)
    """The schema's size as JSON, for the input bound."""

    @property
    def keys(self) -> list[str]:
        return list(self.json_schema["properties"])

    def instruction(self, *, others_left_out: bool = False) -> str:
        """What the call is told about the envelope, after its own instructions: which key to
        fill, and that the others are null (or left out, where the schema makes them
        optional)."""
        others = "give no other key" if others_left_out else "set every other key to null"
        return (
            f'{ENVELOPE_ASKS} put the JSON object described above under "{self.key}" and {others}.'
        )

    def with_optional_keys(self, schema: dict[str, Any]) -> dict[str, Any]:
        """`schema` (this envelope's, adapted by a provider) with its keys optional instead of
        nullable: Anthropic does not need every property required, and refuses a schema with
        more than 16 union-typed parameters, each nullable key being one."""
        properties = {name: _not_null(sub) for name, sub in schema.get("properties", {}).items()}
        return {**schema, "properties": properties, "required": []}

    def unwrap(self, reply: Any, own_schema: dict[str, Any]) -> Any:
        """The answer under this call's key in `reply` (parsed JSON); ValueError (re-asked like
        any invalid reply) when the reply fills another key, several, or none. Null members
        that the call's own schema (`own_schema`) does not have are dropped: the envelope's
        static supersets give a key to every id a debate may have, and the call's type has only
        this debate's."""
        if not isinstance(reply, dict):
            raise ValueError(
                f'the reply must be one JSON object with your answer under "{self.key}"'
            )
        filled = [name for name, value in reply.items() if value is not None]
        if filled != [self.key]:
            found = ", ".join(f'"{name}"' for name in filled) or "nothing"
            raise ValueError(
                f'put your answer under "{self.key}" and nothing under any other key; the reply'
                f" filled {found}"
            )
        return _without_padding(reply[self.key], own_schema)


def _not_null(node: Any) -> Any:
    """`node` without its null alternative: `anyOf [X, null]` becomes X."""
    if isinstance(node, dict) and isinstance(node.get("anyOf"), list):
        options = [o for o in node["anyOf"] if o != {"type": "null"}]
        if len(options) == 1:
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            return {**rest, **options[0]}
    return node


def _properties(schema: Any) -> dict[str, Any] | None:
    """The properties of an object schema (the object alternative of an `anyOf`)."""
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("properties"), dict):
        return dict(schema["properties"])
    for option in schema.get("anyOf", []):
        found = _properties(option)
        if found is not None:
            return found
    return None


def _items(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("items"), dict):
        return schema["items"]
    return next((o["items"] for o in schema.get("anyOf", []) if "items" in o), None)


def _without_padding(value: Any, schema: Any) -> Any:
    """`value` without the null members `schema`'s objects do not have."""
    if isinstance(value, dict):
        properties = _properties(schema)
        if properties is None:
            return value
        return {
            name: _without_padding(member, properties.get(name))
            for name, member in value.items()
            if name in properties or member is not None
        }
    if isinstance(value, list):
        items = _items(schema)
        return [_without_padding(item, items) for item in value]
    return value
