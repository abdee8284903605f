"""Pydantic's validation errors as sentences a person can act on: each names the field as the
person wrote it (a flag, an option, a setting) and says what it must be, never pydantic's own
wording (`Input should be greater than or equal to 1`, `Value error, …`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

Namer = Callable[[str], str]
"""The name a person used for a field, from its dotted location (`max_rounds`, `options.seed`)."""


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _shown(value: Any) -> str:
    text = _number(value) if isinstance(value, float) else repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


_RULES: dict[str, Callable[[str, dict[str, Any], Any], str]] = {
    "missing": lambda name, ctx, got: f"{name} is required",
    "extra_forbidden": lambda name, ctx, got: f"there is no {name}",
    "greater_than_equal": lambda name, ctx, got: f"{name} must be at least {_number(ctx['ge'])}",
    "greater_than": lambda name, ctx, got: f"{name} must be more than {_number(ctx['gt'])}",
    "less_than_equal": lambda name, ctx, got: f"{name} must be at most {_number(ctx['le'])}",
    "less_than": lambda name, ctx, got: f"{name} must be less than {_number(ctx['lt'])}",
    "literal_error": lambda name, ctx, got: f"{name} must be one of {ctx['expected']}",
    "enum": lambda name, ctx, got: f"{name} must be one of {ctx['expected']}",
    "int_parsing": lambda name, ctx, got: f"{name} must be a whole number",
    "int_type": lambda name, ctx, got: f"{name} must be a whole number",
    "int_from_float": lambda name, ctx, got: f"{name} must be a whole number",
    "float_parsing": lambda name, ctx, got: f"{name} must be a number",
    "float_type": lambda name, ctx, got: f"{name} must be a number",
    "bool_parsing": lambda name, ctx, got: f"{name} must be true or false",
    "bool_type": lambda name, ctx, got: f"{name} must be true or false",
    "string_type": lambda name, ctx, got: f"{name} must be text",
    "list_type": lambda name, ctx, got: f"{name} must be a list",
    "dict_type": lambda name, ctx, got: f"{name} must be a mapping of names to values",
    "too_short": lambda name, ctx, got: (
        f"{name} must have at least {ctx['min_length']} item{'s' * (ctx['min_length'] != 1)}"
    ),
    "too_long": lambda name, ctx, got: (
        f"{name} must have at most {ctx['max_length']} item{'s' * (ctx['max_length'] != 1)}"
    ),
    "string_too_short": lambda name, ctx, got: (
        f"{name} must be at least {ctx['min_length']} character{'s' * (ctx['min_length'] != 1)}"
    ),
    "string_too_long": lambda name, ctx, got: (
        f"{name} must be at most {ctx['max_length']} character{'s' * (ctx['max_length'] != 1)}"
    ),
}
"""What each of pydantic's error types (its documented `type` codes) asks of the value."""

_NO_VALUE_SHOWN = frozenset({"missing", "extra_forbidden"})


def _sentence(error: ErrorDetails, name_of: Namer) -> str:
    where = ".".join(str(part) for part in error["loc"])
    name = name_of(where)
    ctx = dict(error.get("ctx") or {})
    kind = error["type"]
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        # Our own validators raise sentences already; pydantic only prefixes them.
        return str(ctx["error"])
    rule = _RULES.get(kind)
    got = error.get("input")
    if rule is None:
        message = error["msg"]
        said = f"{name} is not valid ({message[:1].lower()}{message[1:]})"
    else:
        said = rule(name, ctx, got)
    if kind in _NO_VALUE_SHOWN or isinstance(got, Mapping):
        return said
    return f"{said}; got {_shown(got)}"


def readable(error: ValidationError, names: Mapping[str, str] | Namer | None = None) -> str:
    """`error`'s problems as sentences joined by "; ". `names` maps a field's dotted location
    to the name the person used for it (`{"max_rounds": "--rounds"}`), or is a function that
    does; a field it does not name is called by its location, and a model-wide problem (no
    location) is said as its validator said it."""
    if names is None:
        name_of: Namer = lambda where: where  # noqa: E731
    elif isinstance(names, Mapping):
        mapping = names
        name_of = lambda where: mapping.get(where, where)  # noqa: E731
    else:
        name_of = names
    sentences = list(dict.fromkeys(_sentence(problem, name_of) for problem in error.errors()))
    return "; ".join(sentences)
