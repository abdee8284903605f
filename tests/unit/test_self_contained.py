"""A clone of this repository stands alone: no file reaches for a folder beside it.

A user's clone has nothing next to it, so a test, benchmark, script or doc that reads (or sends
readers to) a path outside the repository breaks for them. `.ci/` is exempt: CI itself may know
where it runs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

import pytest

from tests.helpers import REPO_ROOT

# Built from parts so that this file does not match its own patterns.
SIBLING = "shar" + "ed"
WORKSPACE = "/" + "work/"
HERE = "Path(__file" + "__)"
SKIP_DIRS = {
    ".git",
    ".ci",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "build",
    "dist",
    "debates",
    "node_modules",
}

UP = re.compile(r"(?:\.\.[/\\])+")
NAMED_SIBLING = re.compile(
    r"\.\.[/\\]" + SIBLING + r"\b|\b" + SIBLING + r"[/\\](?:data|DESIGN|hooks)\b"
    r"|[\"']" + SIBLING + r"[\"']\s*/\s*[\"']data[\"']"
)
PARENTS_INDEX = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")
PARENT_CHAIN = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?((?:\.parent)+)\b")
ABOVE_ROOT = re.compile(r"\b(?:REPO_)?ROOT\.parent\b")


def is_text(path: Path) -> bool:
    try:
        path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return False
    return True


def repository_files(root: Path) -> list[Path]:
    """Every text file of the repository as a clone has it (ignored build output skipped);
    a binary file names no path a reader would follow."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [
            d
            for d in dirs
            if d not in SKIP_DIRS and not d.startswith(".venv") and not d.endswith(".egg-info")
        ]
        found += [Path(folder) / name for name in files]
    return sorted(path for path in found if is_text(path))


def outside_references(relative: PurePosixPath, text: str) -> list[str]:
    """What in `text` (the file at `relative`) points outside the repository, one line each."""
    depth = len(relative.parts) - 1
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{relative}:{number}"
        if NAMED_SIBLING.search(line):
            problems.append(f"{where}: names the folder beside the repository: {line.strip()}")
        for match in UP.finditer(line):
            if match.group().count("..") > depth:
                problems.append(f"{where}: a relative path climbs out of the repository")
        for match in PARENTS_INDEX.finditer(line):
            if int(match.group(1)) > depth:
                problems.append(f"{where}: Path(__file__).parents[{match.group(1)}] is outside")
        for match in PARENT_CHAIN.finditer(line):
            if match.group(1).count(".parent") > depth + 1:
                problems.append(f"{where}: a .parent chain climbs out of the repository")
        if ABOVE_ROOT.search(line):
            problems.append(f"{where}: the repository root's parent is outside the repository")
        if WORKSPACE in line:
            problems.append(f"{where}: an absolute path into the developer's workspace")
    return problems


def test_the_scanner_catches_each_way_out() -> None:
    up = ".." + "/"
    at_top = PurePosixPath("README.md")
    nested = PurePosixPath("tests/integration/test_x.py")
    assert outside_references(at_top, f"see {up}{SIBLING}/DESIGN.md")
    assert outside_references(at_top, f"open {up}elsewhere/notes.txt")
    assert outside_references(nested, f"p = '{up}{up}{up}x'")
    assert not outside_references(nested, f"p = '{up}{up}examples/x.jsonl'")
    assert outside_references(nested, f'C = {HERE}.resolve().parents[3] / "x"')
    assert not outside_references(nested, f'C = {HERE}.resolve().parents[2] / "x"')
    assert outside_references(nested, f"C = {HERE}.parent.parent.parent.parent")
    assert outside_references(nested, "C = ROOT" + '.parent / "x"')
    assert outside_references(nested, f'C = ROOT / "{SIBLING}" / "data"')
    assert outside_references(at_top, f"cat {WORKSPACE}main/x")
    assert not outside_references(at_top, "the shared preamble of every prompt")


def test_the_repository_has_files_to_scan() -> None:
    names = {p.relative_to(REPO_ROOT).as_posix() for p in repository_files(REPO_ROOT)}
    assert {"README.md", "examples/review_cases.jsonl", "docs/architecture.md"} <= names


@pytest.mark.parametrize(
    "path", repository_files(REPO_ROOT), ids=lambda p: p.relative_to(REPO_ROOT).as_posix()
)
def test_no_file_references_a_path_outside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    relative = PurePosixPath(path.relative_to(REPO_ROOT).as_posix())
    assert outside_references(relative, text) == []
