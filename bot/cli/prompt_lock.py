"""`debatebot prompts lock`: record the prompt files' hashes after an intended edit."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from engine.prompts import PromptLibrary, default_prompt_dir, write_lock

if TYPE_CHECKING:
    pass


def lock_prompts(args: argparse.Namespace) -> int:
    directory = Path(args.dir) if args.dir else default_prompt_dir()
    if args.action == "lock":
        lock = write_lock(directory)
        print(f"pinned {len(lock)} prompt files in {directory}")
        return 0
    PromptLibrary.load(directory)
    print(f"all prompt files in {directory} match the lock")
    return 0
