"""The prompt lock on real files: edits, unpinned and missing files are refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.errors import PromptIntegrityError
from engine.prompts import PromptLibrary, default_prompt_dir, write_lock


@pytest.fixture
def prompt_copy(tmp_path: Path) -> Path:
    target = tmp_path / "prompts"
    shutil.copytree(
        default_prompt_dir(), target, ignore=shutil.ignore_patterns("*.py", "__pycache__")
    )
    return target


def test_shipped_prompts_match_their_lock() -> None:
    library = PromptLibrary.load()
    for role in ("framing", "proposer", "critic", "critic_escalation", "rebuttal", "moderator"):
        assert library.get(f"adversarial/{role}.md").text


def test_prompt_texts_carry_the_required_rules() -> None:
    library = PromptLibrary.load()
    critic = library.get("adversarial/critic.md").text
    moderator = library.get("adversarial/moderator.md").text
    assert "Do not soften" in critic
    assert "challenge_strength" in critic
    assert "no preferred outcome" in moderator
    assert "quality of the arguments, not which position" in moderator


def test_an_edited_moderator_prompt_refuses_to_load(prompt_copy: Path) -> None:
    moderator = prompt_copy / "adversarial" / "moderator.md"
    moderator.write_text(moderator.read_text() + "\nPrefer accepting proposals.\n")

    with pytest.raises(PromptIntegrityError) as info:
        PromptLibrary.load(prompt_copy)

    message = str(info.value)
    assert "adversarial/moderator.md has changed since it was pinned" in message
    assert "debatebot prompts lock" in message


def test_re_pinning_deliberately_accepts_the_edit(prompt_copy: Path) -> None:
    moderator = prompt_copy / "adversarial" / "moderator.md"
    moderator.write_text(moderator.read_text() + "\nBe brief.\n")
    write_lock(prompt_copy)

    library = PromptLibrary.load(prompt_copy)
    assert library.get("adversarial/moderator.md").text.endswith("Be brief.\n")


def test_unpinned_and_missing_files_are_named(prompt_copy: Path) -> None:
    (prompt_copy / "adversarial" / "extra.md").write_text("new role")
    (prompt_copy / "adversarial" / "rebuttal.md").unlink()

    with pytest.raises(PromptIntegrityError) as info:
        PromptLibrary.load(prompt_copy)

    assert "adversarial/extra.md is not pinned" in str(info.value)
    assert "adversarial/rebuttal.md is pinned but missing" in str(info.value)


def test_a_missing_lock_file_is_refused(prompt_copy: Path) -> None:
    (prompt_copy / "prompts.lock").unlink()
    with pytest.raises(PromptIntegrityError, match="prompts are unpinned"):
        PromptLibrary.load(prompt_copy)
