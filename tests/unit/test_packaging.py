"""The wheel's package list (pyproject.toml lists it, since `migrations/` ships as
`bot.migrations`) names every package of the source tree and every folder of data it ships
(prompts, migration versions), and nothing else."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed_and_migrations_ship_inside_bot() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = setuptools["package-dir"]
    assert mapped == {"bot.migrations": "migrations"}
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("bot", "engine", "prompts")
        for init in (ROOT / top).rglob("__init__.py")
    }
    found |= set(mapped) if (ROOT / "migrations" / "__init__.py").exists() else set()
    # Folders of data only are namespace packages to setuptools; unlisted, it warns and may
    # leave their files out.
    found |= {
        ".".join(folder.relative_to(ROOT).parts)
        for folder in (ROOT / "prompts").iterdir()
        if folder.is_dir() and any(folder.glob("*.md"))
    }
    found |= {"bot.migrations.versions"} if (ROOT / "migrations" / "versions").is_dir() else set()
    assert set(setuptools["packages"]) == found
    assert (ROOT / "migrations" / "env.py").exists()
    assert not (ROOT / "bot" / "migrations").exists(), "one copy of the migrations"
