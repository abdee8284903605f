"""Seeded tampering of a JSON document, for the receipts' property tests: every node of the
document edited, deleted, reordered (lists) and substituted with another node's value."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

from bot.receipt_verifier import canonical

Path = tuple[str | int, ...]


def paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every path below `value` (object member names, list indexes), parents first."""
    found: list[Path] = []
    children: list[tuple[str | int, Any]] = (
        list(value.items())
        if isinstance(value, dict)
        else list(enumerate(value))
        if isinstance(value, list)
        else []
    )
    for name, child in children:
        found.append((*prefix, name))
        found += paths(child, (*prefix, name))
    return found


def _get(document: Any, path: Path) -> Any:
    for step in path:
        document = document[step]
    return document


def _edited(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 1.5 + 0.25
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return "x"
    if isinstance(value, dict):
        return {**value, "added": 1} if value else {"added": 1}
    return [*value, value[0]] if value else [1]


def mutations(
    document: Any, seed: int, *, skip: frozenset[Path] = frozenset()
) -> Iterator[tuple[str, Any]]:
    """(what was done, the changed copy) for each node: an edit, a deletion, a reordering of a
    list (when it changes it) and a substitution by another node's value (different from it),
    drawn with `seed`. Paths in `skip` are not deleted."""
    draw = random.Random(seed)
    every = paths(document)
    for path in every:
        *parent_path, name = path
        value = _get(document, path)

        def changed(new: Any, parent_path: list[str | int] = parent_path, name: Any = name) -> Any:
            copied = copy.deepcopy(document)
            _get(copied, tuple(parent_path))[name] = new
            return copied

        where = "/".join(map(str, path))
        yield f"edit {where}", changed(_edited(copy.deepcopy(value)))
        if path not in skip:
            copied = copy.deepcopy(document)
            del _get(copied, tuple(parent_path))[name]
            yield f"delete {where}", copied
        if isinstance(value, list) and len(value) > 1:
            rotated = value[1:] + value[:1]
            if canonical(rotated) != canonical(value):
                yield f"reorder {where}", changed(copy.deepcopy(rotated))
        others = [
            other
            for other in every
            if other != path and canonical(_get(document, other)) != canonical(value)
        ]
        if others:
            source = draw.choice(others)
            swapped = copy.deepcopy(_get(document, source))
            yield f"substitute {where} with {'/'.join(map(str, source))}", changed(swapped)
