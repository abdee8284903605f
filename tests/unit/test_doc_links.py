"""The README and docs/ point only at what exists: every relative link names a file (and, with
`#`, a heading of it), and every module path written as `bot/….py` or `engine/….py` (or a
package folder `bot/…/`) and every `tests/`, `tools/`, `benchmarks/` or `scripts/` file named
is in the tree. Modules move when files are split; a page that still names the old path sends a
newcomer to nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# `[text](target)`, the text possibly wrapped over lines; images too (`![alt](target)`).
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A path of the product's code, not the tail of a URL or of a longer path.
MODULE = re.compile(
    r"(?<![\w./-])((?:bot|engine)/(?:\w+/)*(?:\w+\.py|\w+/)?"
    r"|(?:tests|tools|benchmarks|scripts)/(?:\w+/)*\w+\.py)"
)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^(```|~~~)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces become hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    """Every heading anchor of a page, with GitHub's -1, -2 … for repeated headings."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match is None:
            continue
        slug = _slug(match.group(1))
        seen = counts.get(slug, 0)
        counts[slug] = seen + 1
        found.add(slug if seen == 0 else f"{slug}-{seen}")
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of a page whose file or anchor does not exist."""
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:|^//", target, re.IGNORECASE):
            continue
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in _anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.name}")
    return broken


def missing_modules(page: Path) -> list[str]:
    """The module paths (`bot/….py`, `engine/….py`, `bot/…/`) a page names that are not there."""
    text = page.read_text(encoding="utf-8")
    return sorted({path for path in MODULE.findall(text) if not (ROOT / path).exists()})


def test_there_are_pages_to_check() -> None:
    assert (ROOT / "README.md") in PAGES
    assert len(PAGES) > 5


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_something(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_path_exists(page: Path) -> None:
    assert missing_modules(page) == []


def test_the_checks_find_what_is_broken(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading, with `code`\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-heading-with-code) [again](there.md#twice-1) [web](https://x.y/z)\n"
        "[gone](nowhere.md) [no anchor](there.md#missing) [wrapped\ntext](also-gone.md)\n"
        "`bot/store/db.py`, `bot/jobs/delivery/`, bot/nowhere/gone.py and /slack/bot/x.py\n"
    )
    assert broken_links(page) == [
        "nowhere.md: no such file",
        "there.md#missing: no heading #missing in there.md",
        "also-gone.md: no such file",
    ]
    assert missing_modules(page) == ["bot/nowhere/gone.py"]
