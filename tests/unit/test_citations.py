"""Citation verification against the context."""

from __future__ import annotations

import pytest

from engine.citations import CitationChecker
from engine.models import ContextDocument, Role

DOC = ContextDocument(
    title="ADR-042",
    text=(
        "A warm-up job loads all 1.2 million SKUs at 07:30 every day so that the morning peak"
        " starts with a 100% hit rate. Every key is written with a fixed TTL of 60 minutes;"
        " misses after that repopulate lazily."
    ),
)
CHECKER = CitationChecker([DOC], question="Should we adopt ADR-042?")


def check(quote: str) -> tuple[bool, float]:
    result = CHECKER.check(quote, round=1, role=Role.CRITIC)
    return result.verified, result.score


@pytest.mark.parametrize(
    "quote",
    [
        "Every key is written with a fixed TTL of 60 minutes",
        '"every KEY is written with a fixed ttl of 60 minutes;"',
        "A warm-up job loads all 1.2 million SKUs ... misses after that repopulate lazily",
        "Every key is written with a fixed TTL of 60 minute; misses after that repopulate lazily",
    ],
)
def test_quotes_from_the_material_are_verified(quote: str) -> None:
    verified, score = check(quote)
    assert verified, score


@pytest.mark.parametrize(
    "quote",
    [
        "Redis Cluster with three replicas guarantees no single point of failure",
        "A warm-up job loads all 1.2 million SKUs … and invalidates keys on every write",
        "fixed TTL of 90 minutes",
        "Every key is written with a fixed TTL of 90 minutes; misses after that repopulate lazily",
        "",
    ],
)
def test_invented_or_altered_quotes_are_flagged(quote: str) -> None:
    verified, score = check(quote)
    assert not verified
    assert score < 0.8


def test_the_question_is_evidence_only_when_there_are_no_documents() -> None:
    claim = "Should we adopt ADR-042? The vendor says RFC 9999 mandates a 60 minute TTL."
    with_documents = CitationChecker([DOC], question=claim)
    cited = with_documents.check("RFC 9999 mandates a 60 minute TTL", round=1, role=Role.CRITIC)
    assert not cited.verified, "a claim in the question is not evidence the documents hold"
    assert cited.source is None
    alone = CitationChecker([], question=claim)
    cited = alone.check("RFC 9999 mandates a 60 minute TTL", round=1, role=Role.CRITIC)
    assert (cited.verified, cited.source) == (True, "question")


def test_verified_check_names_its_source() -> None:
    result = CHECKER.check("fixed TTL of 60 minutes", round=2, role=Role.PROPOSER)
    assert (result.verified, result.source, result.round, result.role) == (
        True,
        "ADR-042",
        2,
        Role.PROPOSER,
    )
