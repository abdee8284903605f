"""Context files an agent may name over stdio: only under the directories the user allowed
when starting `debatebot mcp` (`--allow-dir`), never through `..` or a symlink that leads out,
and each read capped at what a debate can read."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.models import MAX_CONTEXT_CHARS, ContextDocument


class PathRefusedError(Exception):
    """A context path the server will not read; the message names the path and why."""


class AllowedDirs:
    """The directories context files may come from, resolved once when the server starts."""

    def __init__(self, dirs: Sequence[Path]) -> None:
        self.roots = tuple(d.resolve(strict=True) for d in dirs)

    def read(self, name: str) -> ContextDocument:
        """The document at `name` (absolute, or relative to the first allowed directory);
        PathRefusedError naming `name` when it is outside every allowed directory, goes
        through `..`, resolves (by a symlink) out of them, or cannot be read."""
        if not self.roots:
            raise PathRefusedError(
                f"context file {name!r} refused: this server reads no files (start it with"
                " `debatebot mcp --allow-dir DIR`), so pass the text as `context` instead"
            )
        given = Path(name)
        if ".." in given.parts:
            raise PathRefusedError(f"context file {name!r} refused: paths may not contain '..'")
        candidate = given if given.is_absolute() else self.roots[0] / given
        # resolve() follows every symlink, so a link inside an allowed directory that points
        # out of it lands outside and is refused like any other outside path.
        real = candidate.resolve()
        if not any(real == root or root in real.parents for root in self.roots):
            allowed = ", ".join(str(root) for root in self.roots)
            linked = " (it is a symlink that leads out)" if real != candidate.absolute() else ""
            raise PathRefusedError(
                f"context file {name!r} refused: it is outside the allowed directories"
                f"{linked}; allowed: {allowed}"
            )
        if not real.is_file():
            # A FIFO or device would block the read or never end: only regular files are read.
            raise PathRefusedError(f"context file {name!r} refused: it is not a regular file")
        try:
            with real.open(encoding="utf-8") as file:
                text = file.read(MAX_CONTEXT_CHARS + 1)
        except (OSError, UnicodeDecodeError) as error:
            raise PathRefusedError(f"cannot read context file {name!r}: {error}") from None
        if len(text) > MAX_CONTEXT_CHARS:
            raise PathRefusedError(
                f"context file {name!r} is longer than the {MAX_CONTEXT_CHARS:,} characters a"
                " debate can read; pass the relevant part as `context` text"
            )
        if not text.strip():
            raise PathRefusedError(f"context file {name!r} is empty")
        return ContextDocument(title=real.name, text=text)
