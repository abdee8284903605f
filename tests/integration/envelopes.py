"""How the stand-in servers answer a request that carries a protocol's envelope (one schema with
a key per output type, `engine.llm.Envelope`): as a model reading its prompt would, they find
the key the instructions name, answer the call's own output type under it (the type whose field
list the prompt carries, with every limit the prompt states) and leave the other keys null or
out, as the schema allows."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

import engine.protocols  # noqa: F401  (defines every protocol's output types)
from engine.envelope import ENVELOPE_ASKS
from engine.llm import describe_output, output_schema

_ASKED = re.compile(
    re.escape(ENVELOPE_ASKS) + r' put the JSON object described above under "(\w+)"'
)


def engine_types() -> list[type[BaseModel]]:
    """Every engine output type alive, in the order they were made (per-debate types last)."""
    found: list[type[BaseModel]] = []

    def walk(kind: type[BaseModel]) -> None:
        for sub in kind.__subclasses__():
            found.append(sub)
            walk(sub)

    walk(BaseModel)
    return [kind for kind in found if kind.__module__.startswith("engine.")]


def asked_key(prompt: str) -> str | None:
    """The envelope key the prompt's instructions ask to fill, if any."""
    found = _ASKED.findall(prompt)
    return found[-1] if found else None


def type_name(key: str) -> str:
    """The output type an envelope key stands for (`proposer_turn` → `ProposerTurn`)."""
    return "".join(part.title() for part in key.split("_"))


def own_schema(name: str, prompt: str) -> dict[str, Any] | None:
    """The full schema of the call's own output type named `name`: of the engine types so
    named, the one whose field list the prompt carries (the longest when several do: a
    per-debate type's list names its ids, votes or peers); of equals, the one whose id
    patterns the role's instructions name (`PRO-1, PRO-2, …`: a type made for one list of names
    is shared by every debate with it, so the newest is not always the call's); then the
    newest."""
    best: type[BaseModel] | None = None
    most = (-1, -1)
    instructions = prompt.rpartition("ROLE:")[2]
    for kind in engine_types():
        if kind.__name__ != name:
            continue
        try:
            described = describe_output(kind)
        except (KeyError, TypeError, ValueError):
            continue
        size = len(described) if described and described in prompt else 0
        named = sum(
            1 for literal in _pattern_literals(output_schema(kind)) if literal in instructions
        )
        if (size, named) >= most:
            best, most = kind, (size, named)
    return output_schema(best) if best is not None else None


def _pattern_literals(schema: Any) -> list[str]:
    """The literal start of every string pattern in `schema` (`^PRO-[1-5]$` → `PRO-`)."""
    if isinstance(schema, list):
        return [found for item in schema for found in _pattern_literals(item)]
    if not isinstance(schema, dict):
        return []
    found = [found for value in schema.values() for found in _pattern_literals(value)]
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        literal = re.split(r"[\\[(.*+?{|$]", pattern.removeprefix("^"), maxsplit=1)[0]
        found += [literal] if literal else []
    return found


def envelope_answer(
    schema: dict[str, Any], prompt: str, fill: Callable[[str, dict[str, Any] | None], Any]
) -> dict[str, Any] | None:
    """The reply to an envelope `schema` asked by `prompt`, the call's answer made by
    `fill(type name, its schema)`; None when `schema` is not an envelope the prompt names a key
    of."""
    properties = schema.get("properties", {})
    key = asked_key(prompt)
    if key is None or key not in properties:
        return None
    name = type_name(key)
    reply: dict[str, Any] = {other: None for other in schema.get("required", [])}
    reply[key] = fill(name, own_schema(name, prompt))
    return reply
