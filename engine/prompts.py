"""Prompt templates as files, pinned by sha256 in a lock file.

A prompt is part of the decision procedure: an unnoticed edit changes every later verdict and
breaks the audit trail. So loading checks every file against `prompts.lock` and refuses to run on
any difference, naming the file and the deliberate way to re-pin (`debatebot prompts lock`).
Templates use `string.Template` (`$name`), which leaves JSON braces in prompts alone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template

from engine.errors import PromptIntegrityError

LOCK_FILE_NAME = "prompts.lock"
REPIN_HINT = (
    "If the change is deliberate, re-pin with `debatebot prompts lock` and commit"
    f" {LOCK_FILE_NAME} together with the prompt"
)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    text: str
    sha256: str
    _parts: tuple[tuple[str, str | None], ...] = field(init=False, repr=False, compare=False)
    """The text split once into (literal, placeholder name or None) pairs: `Template.substitute`
    scans the whole text with a regular expression and a Python callback on every call, which
    at 200 debates was the largest single cost of building a turn's prompt."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_parts", _split(self.name, self.text))

    def render(self, **values: str) -> str:
        """Fill the template (`string.Template` syntax); a missing value is a programming error
        and says which."""
        pieces: list[str] = []
        for literal, name in self._parts:
            pieces.append(literal)
            if name is not None:
                try:
                    pieces.append(values[name])
                except KeyError:
                    raise PromptIntegrityError(
                        f"prompt {self.name} needs a value for ${name}"
                    ) from None
        return "".join(pieces)


def _split(name: str, text: str) -> tuple[tuple[str, str | None], ...]:
    """`text` as (literal, placeholder) pairs under `string.Template`'s rules ($name, ${name},
    $$ for a dollar sign); a malformed placeholder is refused at load, naming the template."""
    parts: list[tuple[str, str | None]] = []
    literal: list[str] = []
    end = 0
    for match in Template.pattern.finditer(text):
        literal.append(text[end : match.start()])
        end = match.end()
        if match.group("escaped") is not None:
            literal.append("$")
        elif match.group("invalid") is not None:
            raise PromptIntegrityError(
                f"prompt {name} has a stray $ at character {match.start()}; write $$ for a"
                " dollar sign"
            )
        else:
            parts.append(("".join(literal), match.group("named") or match.group("braced")))
            literal = []
    literal.append(text[end:])
    parts.append(("".join(literal), None))
    return tuple(parts)


def default_prompt_dir() -> Path:
    """The `prompts/` directory shipped with the distribution."""
    return Path(str(resources.files("prompts")))


def _template_files(directory: Path) -> dict[str, Path]:
    return {
        path.relative_to(directory).as_posix(): path
        for path in sorted(directory.rglob("*.md"))
        if path.is_file()
    }


def compute_lock(directory: Path) -> dict[str, str]:
    """The sha256 of every template under `directory`, keyed by its relative path."""
    return {
        name: sha256_text(path.read_text(encoding="utf-8"))
        for name, path in _template_files(directory).items()
    }


def write_lock(directory: Path) -> dict[str, str]:
    """Pin the current templates deliberately; returns what was written."""
    lock = compute_lock(directory)
    (directory / LOCK_FILE_NAME).write_text(
        json.dumps(lock, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return lock


class PromptLibrary:
    """The verified templates of one prompt directory."""

    def __init__(self, templates: dict[str, PromptTemplate]) -> None:
        self._templates = templates

    @classmethod
    def load(cls, directory: Path | None = None) -> PromptLibrary:
        """Load and verify every template against the lock file; raise on any difference."""
        directory = directory or default_prompt_dir()
        lock_path = directory / LOCK_FILE_NAME
        if not lock_path.is_file():
            raise PromptIntegrityError(
                f"no {LOCK_FILE_NAME} in {directory}: prompts are unpinned. {REPIN_HINT}"
            )
        try:
            pinned: dict[str, str] = json.loads(lock_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise PromptIntegrityError(
                f"{lock_path} is not valid JSON ({error}). {REPIN_HINT}"
            ) from None
        files = _template_files(directory)
        problems: list[str] = []
        for name in sorted(set(pinned) - set(files)):
            problems.append(f"{name} is pinned but missing")
        for name in sorted(set(files) - set(pinned)):
            problems.append(f"{name} is not pinned")
        templates: dict[str, PromptTemplate] = {}
        for name in sorted(set(files) & set(pinned)):
            text = files[name].read_text(encoding="utf-8")
            digest = sha256_text(text)
            if digest != pinned[name]:
                problems.append(
                    f"{name} has changed since it was pinned (lock sha256 {pinned[name][:12]}…,"
                    f" file sha256 {digest[:12]}…)"
                )
            templates[name] = PromptTemplate(name=name, text=text, sha256=digest)
        if problems:
            raise PromptIntegrityError(
                f"prompt files in {directory} do not match {LOCK_FILE_NAME}: "
                + "; ".join(problems)
                + f". {REPIN_HINT}."
            )
        return cls(templates)

    def by_sha(self, sha256: str) -> PromptTemplate | None:
        """The template a turn record names by its hash (None if this library has none)."""
        return next((t for t in self._templates.values() if t.sha256 == sha256), None)

    def get(self, name: str) -> PromptTemplate:
        try:
            return self._templates[name]
        except KeyError:
            raise PromptIntegrityError(
                f"no prompt named {name}; known: {', '.join(sorted(self._templates))}"
            ) from None
