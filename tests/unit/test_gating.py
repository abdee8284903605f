"""`should_debate`: the documented default policy and its validation."""

from __future__ import annotations

import pytest

from engine.gating import GatingPolicy, should_debate


@pytest.mark.parametrize(
    ("task_type", "confidence", "downside", "debate"),
    [
        ("architecture", 0.99, 0.9, True),
        ("security", 0.95, 0.5, True),
        ("security", 0.95, 0.1, False),
        ("contract", 0.5, 0.1, True),
        ("architecture", 0.6, 0.5, True),
        ("architecture", 0.9, 0.5, False),
        ("architecture", 0.6, 0.1, False),
        (None, 0.2, 0.2, False),
    ],
)
def test_default_policy(task_type: str | None, confidence: float, downside: float, debate: bool):
    decision = should_debate(task_type, confidence, downside)
    assert decision.debate is debate
    assert decision.reason


def test_policy_is_configurable() -> None:
    strict = GatingPolicy(skip_confidence=0.99, min_downside=0.0)
    assert should_debate("architecture", 0.9, 0.1, strict).debate


@pytest.mark.parametrize(("confidence", "downside"), [(1.5, 0.5), (0.5, -0.1)])
def test_out_of_range_inputs_are_rejected(confidence: float, downside: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        should_debate("security", confidence, downside)
