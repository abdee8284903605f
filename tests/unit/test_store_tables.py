"""The store's tables live in one module per subject (`bot/store/*_tables.py`); the places that
must know every one of them import each: the workspace guard (`bot.store.tenancy`, which lists a
workspace's tables from the subclasses of `WorkspaceOwned` imported by then) and alembic's
environment (`migrations/env.py`, whose metadata is what autogenerate and the schema test
compare). A table module left out of either would go unguarded or unmigrated only when nothing
else happened to import it first, so the imports are read from the source, not from a process
whose import order decides the answer."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

from sqlmodel import SQLModel

import bot.store
from bot.store.columns import WorkspaceOwned

ROOT = Path(__file__).resolve().parents[2]


def imported_store_modules(path: Path) -> set[str]:
    """The `bot.store` modules `path` imports at its top level (`import m`, `from m import x`)."""
    modules: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return {module for module in modules if module.startswith("bot.store.")}


def table_modules() -> dict[str, list[type[SQLModel]]]:
    """Each module of bot.store that defines tables, with its table classes, after importing
    every module of the package."""
    for info in pkgutil.iter_modules(bot.store.__path__):
        importlib.import_module(f"bot.store.{info.name}")
    modules: dict[str, list[type[SQLModel]]] = {}
    pending: list[type[SQLModel]] = [SQLModel]
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        if hasattr(model, "__table__"):
            modules.setdefault(model.__module__, []).append(model)
    return modules


def test_the_scanner_reads_both_import_forms() -> None:
    path = ROOT / "bot" / "store" / "tenancy.py"
    assert {"bot.store.columns", "bot.store.review_tables"} <= imported_store_modules(path)


def test_the_workspace_guard_imports_every_module_of_workspace_tables() -> None:
    owned = {
        module
        for module, models in table_modules().items()
        if any(issubclass(model, WorkspaceOwned) for model in models)
    }
    assert len(owned) > 1, "a workspace's tables are expected in several modules"
    missing = owned - imported_store_modules(ROOT / "bot" / "store" / "tenancy.py")
    assert not missing, f"bot/store/tenancy.py must import {sorted(missing)}"


def test_alembic_imports_every_table_module() -> None:
    modules = table_modules()
    assert len(modules) > 1, "the tables are expected in several modules"
    missing = set(modules) - imported_store_modules(ROOT / "migrations" / "env.py")
    assert not missing, f"migrations/env.py must import {sorted(missing)}"


def test_every_table_on_the_metadata_is_defined_in_the_store() -> None:
    """A table defined outside bot.store would be missed by the checks above."""
    tables = {
        str(model.__tablename__)
        for module, models in table_modules().items()
        if module.startswith("bot.store.")
        for model in models
    }
    assert set(SQLModel.metadata.tables) == tables
