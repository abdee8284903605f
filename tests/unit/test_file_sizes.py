"""Each product file holds one thing, in at most 600 lines: a file that grows past that is split
by what it does before it lands (the house rule; docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 600
PRODUCT = sorted(
    path
    for package in ("bot", "engine")
    for path in (ROOT / package).rglob("*.py")
    if "migrations" not in path.parts
)


def test_there_is_product_code_to_check() -> None:
    assert len(PRODUCT) > 100


@pytest.mark.parametrize("path", PRODUCT, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_product_file_is_at_most_600_lines(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= LIMIT, (
        f"{path.relative_to(ROOT)} has {lines} lines: split it by what it does (at most {LIMIT})"
    )
