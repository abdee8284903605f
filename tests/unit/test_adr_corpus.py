"""ADR recognition measured on a labelled corpus: precision and recall per template."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.adr import TitlePatternError, adr_format, adr_title, compile_title_pattern
from tests.helpers import REPO_ROOT

CORPUS = REPO_ROOT / "tests" / "data" / "adr_corpus"
CHANNEL_PATTERN = r"(?:RFC-\d+|Tech Decision #\d+)"
TEMPLATES = ("madr", "nygard", "nygard-inline", "y-statement", "title")
FLOOR = 0.9


def samples(label: str) -> list[Path]:
    return sorted((CORPUS / label).glob("*.md"))


def test_the_corpus_is_big_enough() -> None:
    assert sum(len(samples(t)) for t in TEMPLATES) >= 25
    assert len(samples("not-adr")) >= 25


def test_precision_and_recall_per_template(capsys: pytest.CaptureFixture[str]) -> None:
    predicted = {
        (label, path.name): adr_format(path.read_text())
        for label in (*TEMPLATES, "not-adr")
        for path in samples(label)
    }
    lines = []
    for template in TEMPLATES:
        truly = [k for k in predicted if k[0] == template]
        called = [k for k, got in predicted.items() if got == template]
        hits = [k for k in called if k[0] == template]
        recall = len([k for k in truly if predicted[k] is not None]) / len(truly)
        precision = len(hits) / len(called) if called else 1.0
        lines.append(
            f"{template:<14} recall {recall:.2f} precision {precision:.2f} (n={len(truly)})"
        )
    positives = [k for k in predicted if k[0] != "not-adr"]
    found = [k for k in positives if predicted[k] is not None]
    alarms = [k for k in predicted if k[0] == "not-adr" and predicted[k] is not None]
    recall = len(found) / len(positives)
    precision = len(found) / (len(found) + len(alarms))
    lines.append(f"{'all':<14} recall {recall:.2f} precision {precision:.2f} (goal 0.95)")
    with capsys.disabled():
        sys.stdout.write("\nADR corpus\n" + "\n".join(lines) + "\n")
    missed = sorted(k for k in positives if predicted[k] is None)
    assert recall >= FLOOR, f"missed: {missed}"
    assert precision >= FLOOR, f"false alarms: {sorted(alarms)}"
    wrong = sorted(k for k in found if predicted[k] != k[0])
    assert not wrong, f"recognised under another template: {[(k, predicted[k]) for k in wrong]}"


def test_a_channel_title_pattern_recognises_its_own_posts_only() -> None:
    for path in samples("channel-pattern"):
        text = path.read_text()
        assert adr_format(text) is None
        assert adr_format(text, CHANNEL_PATTERN) == "channel"
    for path in samples("not-adr"):
        assert adr_format(path.read_text(), CHANNEL_PATTERN) is None


@pytest.mark.parametrize("pattern", ["", "(unclosed", "x" * 201])
def test_a_bad_title_pattern_is_refused(pattern: str) -> None:
    with pytest.raises(TitlePatternError):
        compile_title_pattern(pattern)


def test_the_title_skips_front_matter_and_decoration() -> None:
    text = (CORPUS / "madr" / "madr4-front-matter-db.md").read_text()
    assert adr_title(text) == "Move analytics off the OLTP primary"
    assert adr_title("\n## ADR-3: Use Kafka  \nbody") == "ADR-3: Use Kafka"
