"""`debatebot run`'s documents are read like its question: capped at what a debate can read,
an empty one refused, each failure said as a sentence."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.cli.question import QuestionError, read_context
from engine.models import MAX_CONTEXT_CHARS


def test_a_context_document_from_stdin_is_capped_without_reading_it_all() -> None:
    reads: list[int] = []

    class Endless(io.StringIO):
        def read(self, size: int | None = -1) -> str:
            reads.append(-1 if size is None else size)
            return "x" * (MAX_CONTEXT_CHARS + 1 if size is None or size < 0 else size)

    with pytest.raises(QuestionError, match="context document in stdin is longer than"):
        read_context(["-"], stdin=Endless())
    assert reads == [MAX_CONTEXT_CHARS + 1]


def test_a_context_file_over_the_cap_is_refused_naming_it(tmp_path: Path) -> None:
    big = tmp_path / "adr.md"
    big.write_text("y" * (MAX_CONTEXT_CHARS + 1), encoding="utf-8")
    with pytest.raises(QuestionError, match=r"context file .*adr\.md is longer than"):
        read_context([str(big)])


def test_documents_are_read_whole_under_the_cap(tmp_path: Path) -> None:
    doc = tmp_path / "adr-7.md"
    doc.write_text("# ADR 7\nWe decided.", encoding="utf-8")
    [from_file, from_stdin] = read_context([str(doc), "-"], stdin=io.StringIO("pasted"))
    assert (from_file.title, from_file.text) == ("adr-7.md", "# ADR 7\nWe decided.")
    assert (from_stdin.title, from_stdin.text) == ("stdin", "pasted")


@pytest.mark.parametrize(("text", "message"), [("  \n", "is empty"), (None, "cannot read")])
def test_an_empty_or_missing_document_is_refused(
    tmp_path: Path, text: str | None, message: str
) -> None:
    doc = tmp_path / "doc.md"
    if text is not None:
        doc.write_text(text, encoding="utf-8")
    with pytest.raises(QuestionError, match=message):
        read_context([str(doc)])
