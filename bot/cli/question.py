"""Where `debatebot run` takes its question from: the argument, stdin (`-`) or a file
(`--question-file`), so a question longer than the 128 KiB a command-line argument may hold
can still be debated. Every read is capped at what a debate can read (`MAX_CONTEXT_CHARS`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from engine.models import MAX_CONTEXT_CHARS

STDIN = "-"


class QuestionError(Exception):
    """The question could not be read: the message says which source and what to do."""


def _capped(stream: TextIO, where: str) -> str:
    # One character past the cap tells a text at the cap from a longer one without reading all.
    text = stream.read(MAX_CONTEXT_CHARS + 1)
    if len(text) > MAX_CONTEXT_CHARS:
        raise QuestionError(
            f"the question in {where} is longer than the {MAX_CONTEXT_CHARS:,} characters a"
            " debate can read; pass the relevant part only"
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
                return _capped(source, path)
        except (OSError, UnicodeDecodeError) as error:
            raise QuestionError(f"cannot read the question file {path}: {error}") from None
    if asked != STDIN:
        return str(asked)
    if STDIN in args.context:
        raise QuestionError(
            "the question and --context - cannot both read stdin; put one of them in a file"
            " (--question-file FILE, or --context FILE)"
        )
    return _capped(stdin, "stdin")
