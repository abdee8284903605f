"""Where `debatebot run` takes its question and documents from: the argument, stdin (`-`) or
files (`--question-file`, `--context`), so a question longer than the 128 KiB a command-line
argument may hold can still be debated. Every read is capped at what a debate can read
(`MAX_CONTEXT_CHARS`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from engine.models import MAX_CONTEXT_CHARS, ContextDocument

STDIN = "-"


class QuestionError(Exception):
    """The question could not be read: the message says which source and what to do."""


def _capped(stream: TextIO, what: str) -> str:
    # One character past the cap tells a text at the cap from a longer one without reading all.
    text = stream.read(MAX_CONTEXT_CHARS + 1)
    if len(text) > MAX_CONTEXT_CHARS:
        raise QuestionError(
            f"{what} is longer than the {MAX_CONTEXT_CHARS:,} characters a debate can read;"
            " pass the relevant part only"
        )
    return text


def read_question(args: argparse.Namespace, stdin: TextIO | None = None) -> str:
    """The question as given: the positional argument, stdin when it is `-`, or the file of
    `--question-file`. Exactly one of them; stdin only once (`--context -` reads it too)."""
    stdin = stdin if stdin is not None else sys.stdin
    asked, path = args.question, args.question_file
    if asked is not None and path is not None:
        raise QuestionError("give the question or --question-file, not both")
    if asked is None and path is None:
        raise QuestionError(
            "there is no question: give it as an argument, '-' to read it from stdin, or"
            " --question-file FILE"
        )
    if path is not None:
        try:
            with Path(path).open(encoding="utf-8") as source:
                return _capped(source, f"the question in {path}")
        except (OSError, UnicodeDecodeError) as error:
            raise QuestionError(f"cannot read the question file {path}: {error}") from None
    if asked != STDIN:
        return str(asked)
    if STDIN in args.context:
        raise QuestionError(
            "the question and --context - cannot both read stdin; put one of them in a file"
            " (--question-file FILE, or --context FILE)"
        )
    return _capped(stdin, "the question in stdin")


def read_context(paths: Sequence[str], stdin: TextIO | None = None) -> list[ContextDocument]:
    """`--context` documents: files, or stdin for `-`; each capped like the question, and an
    empty one refused (it would be debated as if it said something)."""
    documents = []
    for name in paths:
        if name == STDIN:
            source = stdin if stdin is not None else sys.stdin
            text = _capped(source, "the context document in stdin")
            title = "stdin"
        else:
            try:
                with Path(name).open(encoding="utf-8") as file:
                    text = _capped(file, f"the context file {name}")
            except (OSError, UnicodeDecodeError) as error:
                raise QuestionError(f"cannot read context file {name}: {error}") from None
            title = Path(name).name
        if not text.strip():
            raise QuestionError(f"the context document {name} is empty")
        documents.append(ContextDocument(title=title, text=text))
    return documents
