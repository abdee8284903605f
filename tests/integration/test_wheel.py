"""The built wheel carries what a plain install needs: migrations, prompts and prices.

The wheel is built offline from a copy of the sources and installed, without its dependencies,
into a fresh virtual environment; the dependencies come from the test's own environment, added
after the fresh one's site-packages, so `bot` and `engine` can only be the wheel's copies.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the sources (the repository stays untouched; CI's copy
    of it is no git checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("bot", "engine", "prompts", "migrations"):
        shutil.copytree(REPO / folder, source / folder, ignore=skip)
    dist = root / "dist"
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "--wheel-dir",
        dist,
        source,
        cwd=root,
    )
    (built,) = dist.glob("debatebot-*.whl")
    return built


def test_a_wheel_install_migrates_a_sqlite_file(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--quiet",
        "--no-deps",
        "--no-index",
        wheel,
        cwd=tmp_path,
    )
    purelib = Path(
        run(
            python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp_path
        ).strip()
    )
    (purelib / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env.pop("PYTHONPATH", None)
    database = work / "data" / "debatebot.sqlite3"
    env["DEBATEBOT_DATABASE_URL"] = f"sqlite:///{database}"

    where = run(python, "-c", "import bot; print(bot.__file__)", cwd=work, env=env)
    assert Path(where.strip()).is_relative_to(purelib)

    out = run(venv / "bin" / "debatebot", "db", "upgrade", cwd=work, env=env)
    head = sorted((REPO / "migrations" / "versions").glob("0*.py"))[-1].name[:4]
    assert head in out
    with sqlite3.connect(database) as connection:
        (version,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
    assert version == head
    assert {"debate", "turn", "escalation"} <= tables
