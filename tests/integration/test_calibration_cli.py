"""`debatebot calibration` from the terminal, on SQLite and PostgreSQL: eval results from the
fake provider (or that record no provider) are set aside unless forced, and the help says what
`adopt` needs, which is what it does."""

from __future__ import annotations

import re
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


def stored_labels(url: str, groups: list[tuple[str, int, int]], reviews: int = 0) -> None:
    """Eval labels of the synthetic world, `count` drawn with `seed` for each task type, and
    `reviews` reviews of escalated verdicts plus as many sampled ones (in the first group)."""
    engine = make_engine(url)
    try:
        with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
            for task_type, count, seed in groups:
                for index, verdict in enumerate(world(count, seed)):
                    confidence = DEFAULT_WEIGHTS.score(verdict.components)
                    review = index < 2 * reviews and task_type == groups[0][0]
                    session.add(
                        CalibrationLabel(
                            key=f"{'review' if review else 'eval'}:{task_type}:{index}",
                            kind=LabelKind.REVIEW if review else LabelKind.EVAL,
                            sampled=review and index % 2 == 0,
                            task_type=task_type,
                            protocol="adversarial",
                            correct=verdict.correct,
                            confidence=confidence,
                            components={str(c): v for c, v in verdict.components.values.items()},
                            weights_version=DEFAULT_WEIGHTS.version,
                            threshold=0.0 if review else None,
                        )
                    )
            session.commit()
    finally:
        engine.dispose()


def test_the_report_gives_each_groups_guaranteed_thresholds_for_both_readings(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 48 item 1 as the terminal prints it: for all labels and each task type, both
    readings' guaranteed thresholds with the share they escalate, the labels of each kind they
    rest on, and for a task type with too few labels the refusal with the labels it needs,
    never a threshold; --alpha and --delta change the terms."""
    stored_labels(database, [("adr", 400, 5), ("security", 30, 7)], reviews=10)
    png = str(tmp_path / "c.png")

    assert main(["calibration", "--png", png]) == 0
    out = capsys.readouterr().out
    assert "each holds with probability at least 90% over the labels" in out
    assert "DEBATEBOT_CALIBRATION_ALPHA 0.05, _DELTA 0.1" in out
    groups = re.findall(
        r"^(\w+): (\d+) label\(s\): (\d+) sampled review\(s\), (\d+) eval", out, re.M
    )
    assert groups == [
        ("all", "420", "10", "410"),
        ("adr", "390", "10", "380"),
        ("security", "30", "0", "30"),
    ]
    assert "all: 420 label(s): 10 sampled review(s), 410 eval label(s); 10 review(s) of" in out
    lines = {
        group: block
        for group, block in re.findall(r"^(\w+): \d+ label.*\n((?:  .*\n)+)", out, re.M)
    }
    for group in ("all", "adr"):
        kept, caught = lines[group].splitlines()
        assert re.fullmatch(
            r"  at most 5% of the verdicts not escalated are wrong: threshold 0\.\d{3}, escalates"
            r" \d+% of the labels \(upper bound on the risk [0-4]\.\d%: \d+ of \d+\)",
            kept,
        ), kept
        assert re.fullmatch(
            r"  at least 95% of the wrong verdicts are escalated: threshold 0\.\d{3}, escalates"
            r" \d+% of the labels \(upper bound on the risk [0-4]\.\d%: \d+ of \d+\)",
            caught,
        ), caught
    kept, caught = lines["security"].splitlines()
    assert "no guaranteed threshold: 30 labels cannot show" in kept
    assert re.search(r"about \d+ more labels would support one$", kept), kept
    assert "no guaranteed threshold: " in caught
    assert re.search(r"that takes at least 45 wrong ones; .* about \d+ more labels$", caught)
    assert "threshold 0." not in lines["security"]

    assert main(["calibration", "--png", png, "--alpha", "0.2", "--delta", "0.05"]) == 0
    looser = capsys.readouterr().out
    assert "at least 95% over the labels" in looser
    assert "at most 20% of the verdicts not escalated are wrong: threshold 0." in looser
    assert "at least 80% of the wrong verdicts are escalated" in looser
