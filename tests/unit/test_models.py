"""DebateSpec validation gives actionable errors for bad requests."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine.models import MAX_CONTEXT_CHARS, ContextDocument, DebateSpec, Participant, Role, Usage


@pytest.mark.parametrize("question", ["", "   \n\t"])
def test_empty_question_is_refused(question: str) -> None:
    with pytest.raises(ValidationError, match="the question is empty"):
        DebateSpec(question=question)


def test_a_forty_thousand_character_question_is_kept_whole() -> None:
    question = "Should we adopt this? " + "x" * 40_000
    assert DebateSpec(question=question).question == question


def test_a_question_counts_with_the_documents_against_the_limit() -> None:
    doc = ContextDocument(title="dump", text="y" * (MAX_CONTEXT_CHARS - 100))
    assert DebateSpec(question="q" * 100, context=[doc]).question == "q" * 100
    with pytest.raises(ValidationError, match="the question and documents are 200,001"):
        DebateSpec(question="q" * 101, context=[doc])


def test_oversized_context_is_refused_with_advice() -> None:
    doc = ContextDocument(title="dump", text="y" * 250_000)
    with pytest.raises(ValidationError, match="Pass the relevant sections only"):
        DebateSpec(question="Ship it?", context=[doc])


def test_participant_for_falls_back_to_the_default_model() -> None:
    spec = DebateSpec(question="Ship it?")
    assert spec.participant_for(Role.CRITIC).model == spec.default_model
    custom = Participant(role=Role.MODERATOR, name="judge")
    spec = DebateSpec(question="Ship it?", participants=[custom])
    assert spec.participant_for(Role.MODERATOR) is custom


def test_usage_adds_up() -> None:
    total = Usage(input_tokens=10, output_tokens=2, cached_input_tokens=4) + Usage(
        input_tokens=5, output_tokens=1
    )
    assert (total.input_tokens, total.output_tokens, total.cached_input_tokens) == (15, 3, 4)
    assert total.total_tokens == 18
