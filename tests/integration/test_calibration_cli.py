"""`debatebot calibration` from the terminal, on SQLite and PostgreSQL: eval results from the
fake provider (or that record no provider) are set aside unless forced, and the help says what
`adopt` needs, which is what it does."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, select

from benchmarks.calibration import world
from bot.cli import main
from bot.store import thresholds
from bot.store.calibration_tables import CalibrationLabel
from bot.store.db import make_engine, session_scope
from bot.store.tenancy import PENDING_WORKSPACE
from engine.calibration.labels import LabelKind
from engine.confidence import DEFAULT_WEIGHTS
from engine.evaluation.scoring import ArmResult
from engine.models import ThresholdSource
from tests.migrated import upgrade


@pytest.fixture
def database(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    upgrade(database_url)
    return database_url


def labels_stored(url: str) -> int:
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            return len(session.exec(select(CalibrationLabel)).all())
    finally:
        engine.dispose()


def results_file(path: Path, providers: list[list[str]]) -> Path:
    path.write_text(
        "".join(
            ArmResult(
                case_id=f"case-{n}",
                task_type="security",
                arm="adversarial",
                run_id="run1",
                decision="accept",
                expected="accept",
                confidence=0.8,
                providers=used,
            ).model_dump_json()
            + "\n"
            for n, used in enumerate(providers)
        ),
        encoding="utf-8",
    )
    return path


def test_import_eval_sets_aside_fake_provider_labels_unless_forced(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = results_file(tmp_path / "results.jsonl", [["fake"], ["fake"], [], ["anthropic"]])

    assert main(["calibration", "import-eval", str(results)]) == 1

    printed = capsys.readouterr()
    assert "imported 1 eval label(s)" in printed.out
    assert (
        "set aside 2 result(s) that came from the fake provider: the fake provider's verdicts"
        " are canned and would teach the calibration nothing true. Run the eval on a real"
        " model, or pass --force to import them anyway" in printed.err
    )
    assert "set aside 1 result(s) that record no provider" in printed.err
    assert labels_stored(database) == 1

    assert main(["calibration", "import-eval", str(results), "--force"]) == 0
    assert "imported 3 eval label(s)" in capsys.readouterr().out
    assert labels_stored(database) == 4


def test_calibration_help_says_what_adopt_needs_and_adopt_does_it(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["calibration", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "adopt needs it" not in shown
    assert "adopt: a version `calibration` proposed (fit-…) or the defaults' (default-1)" in shown
    assert (
        "adopt and import-eval: the workspace the adoption or the labels belong to, when left"
        " out the deployment's own" in shown
    )
    assert "--force" in shown

    # What the help says: adopt takes a version, and no --team.
    assert main(["calibration", "adopt", "default-1"]) == 0
    assert "adopted confidence weights default-1" in capsys.readouterr().out


def test_adopt_with_the_guaranteed_threshold_refuses_without_labels_then_holds_debates_to_it(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibration", "adopt", "default-1", "--threshold", "guaranteed"]) == 1
    assert "nothing was adopted: no guaranteed threshold for default-1" in capsys.readouterr().err

    engine = make_engine(database)
    try:
        with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
            for index, verdict in enumerate(world(400, 5)):
                session.add(
                    CalibrationLabel(
                        key=f"eval:r:{index}:adversarial:a",
                        kind=LabelKind.EVAL,
                        task_type="adr",
                        protocol="adversarial",
                        correct=verdict.correct,
                        confidence=DEFAULT_WEIGHTS.score(verdict.components),
                        components={str(c): v for c, v in verdict.components.values.items()},
                        weights_version=DEFAULT_WEIGHTS.version,
                    )
                )
            session.commit()
        assert main(["calibration", "adopt", "default-1", "--threshold", "guaranteed"]) == 0
        out = capsys.readouterr().out
        assert "escalation threshold: the guaranteed threshold 0." in out
        with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
            adopted = thresholds.adopted_threshold(session)
    finally:
        engine.dispose()
    assert adopted is not None
    threshold, source = adopted
    assert source is ThresholdSource.GUARANTEED
    assert f"guaranteed threshold {threshold:.3f}" in out
