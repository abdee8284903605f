"""The readable part of a reply still being written (`engine.llm.StreamingLLM` streams it).

What is shown while a turn is written is `readable_so_far`: the free-text fields of the partial
JSON, parsed with pydantic's partial parser, so an escape cut in half or a key not yet closed
never reaches a reader. Only the complete, validated turn is stored.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json

from engine.events import EventSink, TurnStarted, TurnStreaming


def _free_text(node: dict[str, Any]) -> bool:
    """Whether a schema node is prose people read (not an id, a choice or a pattern)."""
    return node.get("type") == "string" and not ({"enum", "const", "pattern"} & node.keys())


def _options(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in node.get("anyOf", []) if isinstance(o, dict)] or [node]


def _readable(value: Any, node: dict[str, Any], out: list[str]) -> None:
    """Appends to `out` the free-text strings of `value` that `node` describes, in order."""
    for option in _options(node):
        if isinstance(value, str) and _free_text(option):
            out.append(value)
            return
        if isinstance(value, list) and option.get("type") == "array":
            for item in value:
                _readable(item, option.get("items", {}), out)
            return
        if isinstance(value, dict) and option.get("type") == "object":
            properties = option.get("properties", {})
            for name, member in value.items():
                if name in properties:
                    _readable(member, properties[name], out)
            return


def _whole_characters(text: str) -> str:
    """`text` without the half of a surrogate pair a cut can leave (`\\ud83d` alone), which no
    encoder takes."""
    return "".join(c for c in text if not "\ud800" <= c <= "\udfff")


def readable_so_far(raw: str, schema: dict[str, Any], *, envelope_key: str | None = None) -> str:
    """The prose of a reply still being written: each free-text field of `schema` found in the
    partial JSON `raw`, one a line, the last one as far as it has come. Text before the object
    (a code fence, a preamble) is skipped; a reply to an envelope is read under `envelope_key`.
    Empty until a field's text has begun."""
    start = raw.find("{")
    if start == -1:
        return ""
    try:
        value = from_json(raw[start:], allow_partial="trailing-strings")
    except ValueError:
        # Not JSON as far as it goes (prose after the object, a repair to come): nothing is
        # shown rather than a guess; the validated turn follows.
        return ""
    if envelope_key is not None and isinstance(value, dict) and envelope_key in value:
        # The provider sent the envelope (not every provider does): its answer is under the key.
        value = value[envelope_key]
    out: list[str] = []
    _readable(value, schema, out)
    return _whole_characters("\n".join(part for part in out if part.strip()))


class TurnWatch:
    """Follows one turn's structured call as it streams and emits what people may read of it:
    a `TurnStreaming` each time the readable text grows, and one marked `reasked` when a reply
    that was shown fails validation (so nothing shows it standing as if it counted)."""

    def __init__(
        self, sink: EventSink, started: TurnStarted, schema: dict[str, Any], envelope_key: str
    ) -> None:
        self.sink = sink
        self.started = started
        self.schema = schema
        self.envelope_key = envelope_key or None
        self.shown = ""

    def _event(self, text: str, *, reasked: bool) -> TurnStreaming:
        s = self.started
        return TurnStreaming(
            round=s.round,
            role=s.role,
            speaker=s.speaker,
            phase=s.phase,
            attempt=s.attempt,
            text=text,
            reasked=reasked,
        )

    async def text(self, raw: str) -> None:
        readable = readable_so_far(raw, self.schema, envelope_key=self.envelope_key)
        if readable and readable != self.shown:
            self.shown = readable
            await self.sink(self._event(readable, reasked=False))

    async def reasked(self, problem: str) -> None:
        # `problem` is for the model's next prompt; readers are told only that it is asked again.
        if self.shown:
            self.shown = ""
            await self.sink(self._event("", reasked=True))
