"""The grammar that constrains the local model's JSON, and the longest reply it allows.

llama.cpp (through llama-cpp-python) turns an output schema into a grammar that generation must
follow. `grammar_schema` rewrites a schema into what that converter enforces: integer ranges
become enums (it ignores `minimum`/`maximum`), strings get a `maxLength` and lists a `maxItems`
(a 135M model otherwise fills one string until `max_tokens`; llama.cpp refuses repetitions past
2,000). `fitted_schema` chooses those caps for a call's `max_tokens`, so the longest reply the
grammar allows is never cut off:

- **A token is at least one byte.** llama.cpp's grammar sampler masks every token whose text is
  empty, and the end of generation until the grammar is complete; so a reply of n bytes took at
  most n tokens (the end token is not counted by llama-cpp-python).
- **Free text is printable ASCII without escapes** (`plain_text`), so a string of n characters is
  n bytes. The converter's own string rule allows any character and JSON escapes, up to six
  bytes (`\\u00e9`) for one character of `maxLength`: a bound six times looser.
- **The rest is counted as the converter builds it** (`worst_case_bytes`): keys and enum values
  as `json.dumps` writes them, at most one space after each value and separator (its
  `SPACE_RULE`), an unbounded integer as 16 digits and a sign.

The caps then fit `max_tokens` less `GRAMMAR_MARGIN` of it, which keeps the bound honest should a
converter version add a byte this count does not know of.
"""

from __future__ import annotations

import json
import math
from typing import Any

from engine.errors import SchemaTooLargeError

MAX_ENUM_RANGE = 32
GRAMMAR_MAX_STRING = 200
GRAMMAR_MAX_ITEMS = 3
GRAMMAR_MARGIN = 0.05
"""The share of `max_tokens` a fitted grammar's worst case leaves free."""
FIT_MIN_STRING = 80
"""Lists give up items before free text falls below this many characters (a sentence)."""
TEXT_CLASS = r"[ !#-\[\]-~]"
"""Printable ASCII except `"` and `\\`: one byte a character, no escapes, no control characters."""

SPACE = 1
"""llama-cpp-python's `SPACE_RULE` (`" "?`): at most one space after a value or separator."""
INTEGER_BYTES = 1 + 16
"""The converter's integer: an optional sign and at most 16 digits."""
NUMBER_BYTES = INTEGER_BYTES + 1 + 16 + 2 + 16
"""Its number: an integer part, a fraction of at most 16 digits, an exponent with a sign."""
UTF8_MAX = 4
ESCAPED_CHAR_BYTES = 6
"""The longest one character of the converter's string rule can be: `\\uXXXX`."""


def grammar_schema(
    schema: Any, *, max_string: int = GRAMMAR_MAX_STRING, max_items: int = GRAMMAR_MAX_ITEMS
) -> Any:
    """`schema` rewritten into the subset llama.cpp's grammar converter enforces, every string
    capped at `max_string` characters and every list at `max_items` items (never below the
    schema's own minimum, which must stay satisfiable)."""
    if isinstance(schema, list):
        return [grammar_schema(item, max_string=max_string, max_items=max_items) for item in schema]
    if not isinstance(schema, dict):
        return schema
    node = {
        k: grammar_schema(v, max_string=max_string, max_items=max_items) for k, v in schema.items()
    }
    kind = node.get("type")
    if kind == "integer" and "minimum" in node and "maximum" in node:
        low, high = int(node["minimum"]), int(node["maximum"])
        if high - low < MAX_ENUM_RANGE:
            return {"enum": list(range(low, high + 1))}
    if kind == "string":
        cap = max(max_string, node.get("minLength", 0))
        node["maxLength"] = min(node.get("maxLength", cap), cap)
    if kind == "array":
        cap = max(max_items, node.get("minItems", 0))
        node["maxItems"] = min(node.get("maxItems", cap), cap)
    return node


def plain_text(schema: Any) -> Any:
    """`schema` with every free string (no enum, pattern or format) written as `TEXT_CLASS`
    characters between its length bounds, as a pattern the converter turns into the grammar."""
    if isinstance(schema, list):
        return [plain_text(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    node = {k: plain_text(v) for k, v in schema.items()}
    free = not ({"enum", "const", "pattern", "format"} & node.keys())
    if node.get("type") == "string" and free and "maxLength" in node:
        low = node.pop("minLength", 0)
        high = node.pop("maxLength")
        node["pattern"] = f"^{TEXT_CLASS}{{{low},{high}}}$"
    return node


def worst_case_bytes(schema: Any, path: str = "") -> int:
    """The most bytes a reply can take under the grammar llama-cpp-python builds from `schema`
    (an upper bound on its tokens). Raises SchemaTooLargeError for a part without a bound."""
    where = path or "the reply"
    if not isinstance(schema, dict):
        raise SchemaTooLargeError(f"{where} has no schema the grammar can bound")
    if "const" in schema:
        return len(json.dumps(schema["const"]))
    if "enum" in schema:
        return max(len(json.dumps(value)) for value in schema["enum"])
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return max(worst_case_bytes(option, path) for option in options)
    kind = schema.get("type")
    if isinstance(kind, list):
        return max(worst_case_bytes({**schema, "type": k}, path) for k in kind)
    if kind == "object" and schema.get("additionalProperties") is False:
        members = [
            len(json.dumps(key)) + SPACE + 1 + SPACE + worst_case_bytes(sub, f"{path}.{key}")
            for key, sub in schema.get("properties", {}).items()
        ]
        return _enclosed(members)
    if kind == "array" and isinstance(schema.get("items"), dict) and "maxItems" in schema:
        item = worst_case_bytes(schema["items"], f"{path}[]")
        return _enclosed([item] * int(schema["maxItems"]))
    if kind == "string" and "pattern" in schema:
        return 2 + pattern_bytes(schema["pattern"], where) + SPACE
    if kind == "string" and "maxLength" in schema and "format" not in schema:
        return 2 + ESCAPED_CHAR_BYTES * int(schema["maxLength"]) + SPACE
    fixed = {"integer": INTEGER_BYTES, "number": NUMBER_BYTES, "boolean": 5, "null": 4}
    if isinstance(kind, str) and kind in fixed:
        return fixed[kind] + SPACE
    raise SchemaTooLargeError(
        f"{where} ({json.dumps(schema)[:80]}) has no bound the grammar can enforce: give it an"
        " enum, a maxLength, a maxItems or fixed properties"
    )


def _enclosed(members: list[int]) -> int:
    """An object's or a list's bytes: its brackets, members and separators, each spaced."""
    separators = (1 + SPACE) * max(0, len(members) - 1)
    return 1 + SPACE + sum(members) + separators + 1 + SPACE


def pattern_bytes(pattern: str, where: str = "a pattern") -> int:
    """The most bytes a string matching `pattern` can take, for the regular-expression subset
    used here: literals, escapes, classes, `.`, and the bounded quantifiers `?`, `{n}`, `{m,n}`."""
    body = pattern.removeprefix("^").removesuffix("$")
    total, position, last = 0, 0, 0
    while position < len(body):
        char = body[position]
        if char in "?{":
            close = body.find("}", position) if char == "{" else position
            bounds = body[position + 1 : close].split(",") if char == "{" else ["1"]
            if close == -1 or not bounds[-1].strip().isdigit():
                raise SchemaTooLargeError(f"{where} repeats without an upper bound ({pattern})")
            total += last * (int(bounds[-1]) - 1)
            position = close + 1
            continue
        if char in "*+()|":
            raise SchemaTooLargeError(f"{where} has a pattern this bound cannot read ({pattern})")
        if char == "[":
            close = _class_end(body, position)
            last = _class_bytes(body[position + 1 : close])
            position = close + 1
        elif char == "\\":
            escaped = body[position + 1 : position + 2]
            last = 1 if escaped in "dwsDWS" else len(escaped.encode("utf-8"))
            position += 2
        else:
            last = UTF8_MAX if char == "." else len(char.encode("utf-8"))
            position += 1
        total += last
    return total


def _class_end(body: str, start: int) -> int:
    position = start + 1
    while position < len(body) and body[position] != "]":
        position += 2 if body[position] == "\\" else 1
    return position


def _class_bytes(members: str) -> int:
    """The widest character a class `[members]` matches, in UTF-8 bytes."""
    if members.startswith("^"):
        return UTF8_MAX
    widest = max((ord(c) for c in members if c != "\\"), default=0)
    return len(chr(widest).encode("utf-8"))


def fitted_schema(schema: dict[str, Any], max_tokens: int, name: str = "the reply") -> Any:
    """The grammar schema of `schema` whose longest reply fits `max_tokens` less the margin.

    Caps come down in this order: free text from `GRAMMAR_MAX_STRING` characters, then lists
    from `GRAMMAR_MAX_ITEMS` items to their minimum whenever text would fall below
    `FIT_MIN_STRING`. Raises SchemaTooLargeError when even one character and the fewest items
    cannot fit: that schema needs splitting into smaller calls, or a larger `max_tokens`.
    """
    budget = math.floor(max_tokens * (1 - GRAMMAR_MARGIN))
    shortest: Any = None
    for items in range(GRAMMAR_MAX_ITEMS, -1, -1):
        fitted = _longest_text(schema, items, budget)
        if fitted is None:
            continue
        chars, shortest = fitted
        if chars >= FIT_MIN_STRING:
            return shortest
    if shortest is not None:
        return shortest
    smallest = worst_case_bytes(plain_text(grammar_schema(schema, max_string=1, max_items=0)))
    needed = math.ceil(smallest / (1 - GRAMMAR_MARGIN))
    raise SchemaTooLargeError(
        f"{name}'s shortest complete reply under the local model's grammar takes up to"
        f" {smallest:,} tokens, more than max_tokens {max_tokens:,} has room for: set"
        f" DEBATEBOT_MAX_TOKENS (or the role's max_tokens) to at least {needed:,}"
    )


def _longest_text(schema: dict[str, Any], items: int, budget: int) -> tuple[int, Any] | None:
    """The longest text cap, with lists capped at `items`, whose worst case fits `budget`, and
    the schema it gives; None when not even one character fits."""

    def built(chars: int) -> Any:
        return plain_text(grammar_schema(schema, max_string=chars, max_items=items))

    low, high = 1, GRAMMAR_MAX_STRING
    if worst_case_bytes(built(low)) > budget:
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if worst_case_bytes(built(middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    return low, built(low)
