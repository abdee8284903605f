"""The calibration benchmark's synthetic world (benchmarks/calibration.py): the fake model and
its judges answer a case's expected verdict at the case's accuracy and otherwise mostly fall
into the case's trap, and the components carry what the docstring says they carry."""

from __future__ import annotations

import random

import pytest

from benchmarks.calibration import Case, answer, world
from engine.confidence import Component
from engine.models import Decision


def test_the_fake_model_answers_at_the_cases_accuracy_and_errs_into_its_trap() -> None:
    case = Case(expected=Decision.ACCEPT, trap=Decision.REVISE, accuracy=0.9)
    rng = random.Random(3)
    answers = [answer(case, rng) for _ in range(5000)]
    wrong = [a for a in answers if a is not Decision.ACCEPT]
    assert len(wrong) / len(answers) == pytest.approx(0.1, abs=0.02)
    assert sum(a is Decision.REVISE for a in wrong) / len(wrong) == pytest.approx(0.7, abs=0.06)
    assert Decision.ESCALATE not in answers


def test_the_world_is_as_accurate_as_its_cases_and_its_judges_follow() -> None:
    verdicts = world(3000, seed=1)
    # 60 % easy (0.85-0.98), 30 % middling (0.55-0.85), 10 % hard (0.20-0.55).
    expected = 0.6 * 0.915 + 0.3 * 0.70 + 0.1 * 0.375
    assert sum(v.correct for v in verdicts) / len(verdicts) == pytest.approx(expected, abs=0.03)

    def mean_agreement(right: bool) -> float:
        values = [
            v.components.value(Component.AGREEMENT) or 0.0 for v in verdicts if v.correct is right
        ]
        return sum(values) / len(values)

    assert mean_agreement(True) > 0.8 > 0.5 > mean_agreement(False)
    for verdict in verdicts:
        assert 0.0 <= verdict.today <= 1.0
        assert set(verdict.components.values) == set(Component)
