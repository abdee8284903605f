"""Calibration end to end: reviewers' Approve and Reject become labels that `debatebot
calibration` reports (with its PNG), a verdict that did not escalate is sampled for review and
says so, and weights fitted on imported eval labels are proposed, refused to a non-admin on
App Home, and adopted by an admin there or with the command."""

from __future__ import annotations

import copy
import random
import re
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

from bot.cli import main
from bot.messages import action_ids
from bot.store import labels, weights
from bot.store.db import session_scope
from bot.store.debate_tables import VerdictRecord
from engine.calibration.labels import LabelKind
from engine.confidence import DEFAULT_WEIGHTS, Component, ConfidenceComponents, ConfidenceWeights
from engine.evaluation.scoring import ArmResult
from tests.e2e.conftest import ADMIN, CHANNEL, REVIEWER, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.helpers import DebateScript, reply_for

NOTE = {"note": {"type": "plain_text_input", "value": "Checked with the owners."}}
SURE = reply_for("moderator", confidence_level="HIGH", unresolved_points=[], decision="accept")
KNOWN = ConfidenceWeights(
    version="known",
    intercept=-1.0,
    weights={Component.AGREEMENT: 3.0, Component.GROUNDING: 1.5, Component.UNANSWERED: -2.0},
)


async def with_reviewer(bot: Bot) -> None:
    await bot.driver.command(f"config set reviewers <@{REVIEWER}|rev>", user=ADMIN)
    await bot.wait_for(lambda: bot.emulator.responses, "the settings confirmation")


async def review_requests(bot: Bot, count: int, title: str) -> list[dict[str, Any]]:
    """The first `count` review requests posted, as the reviewer's client first saw them."""
    found = await bot.wait_for(
        lambda: (
            [m for m in bot.emulator.posted(CHANNEL) if m["text"].startswith(title)]
            if len([m for m in bot.emulator.posted(CHANNEL) if m["text"].startswith(title)])
            >= count
            else None
        ),
        f"{count} review request(s)",
    )
    return [copy.deepcopy(m) for m in found[:count]]


async def decide(bot: Bot, request: dict[str, Any], action_id: str) -> None:
    """The reviewer clicks `action_id` and submits the note form it opens."""
    opened = len(bot.emulator.views)
    await bot.driver.click(request, action_id, user=REVIEWER)
    view = await bot.wait_for(
        lambda: len(bot.emulator.views) > opened and bot.emulator.views[-1], "the note form"
    )
    assert (await bot.driver.submit(view, NOTE, user=REVIEWER)).status == 200


def stored_labels(bot: Bot) -> list[Any]:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        return labels.labels(session)


def use_bots_database(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the command line at the running bot's database."""
    url = bot.engine.url.render_as_string(hide_password=False)
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", url)


async def test_approve_and_reject_become_labels_the_command_reports(
    start_bot: BotFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bot = await start_bot()
    await with_reviewer(bot)
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.driver.command("Should we adopt ADR-043?")
    first, second = await bot.finished(count=2)
    approve, reject = await review_requests(bot, 2, "Review needed")

    await decide(bot, approve, action_ids.ACTION_APPROVE)
    await decide(bot, reject, action_ids.ACTION_REJECT)
    stored = await bot.wait_for(lambda: len(stored_labels(bot)) == 2 and stored_labels(bot), "2")

    assert [(x.kind, x.correct, x.sampled) for x in stored] == [
        (LabelKind.REVIEW, True, False),
        (LabelKind.REVIEW, False, False),
    ]
    assert [x.confidence for x in stored] == [first.confidence, second.confidence]

    use_bots_database(bot, monkeypatch)
    png = tmp_path / "reliability.png"
    assert main(["calibration", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    right, wrong = stored[0].confidence, stored[1].confidence
    expected_brier = ((1 - right) ** 2 + wrong**2) / 2
    assert "2 label(s): 2 from reviews, 0 from evals, 0 from feedback" in out
    overall = next(line for line in out.splitlines() if line.startswith("all "))
    assert overall.split()[1:4] == ["2", "1", "0"]  # labels, wrong, sampled
    assert f"{expected_brier:.3f}" in overall
    assert "1/1 (100%)" in overall  # the one wrong verdict is escalated at the threshold
    assert f"weights in use: {DEFAULT_WEIGHTS.version}" in out
    assert "no fit yet: a fit needs 50 labels" in out
    assert f"reliability diagram: {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_a_verdict_that_did_not_escalate_is_sampled_for_review(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(DebateScript(moderator=[SURE]), review_sample_rate=1.0)
    await with_reviewer(bot)
    await bot.driver.command("Should we adopt ADR-042?")
    [debate] = await bot.finished()
    assert debate.confidence is not None
    assert debate.confidence >= 0.6
    [request] = await review_requests(bot, 1, "Sample review")

    heading = request["blocks"][0]["text"]["text"]
    assert "*Sample review* for debate #1" in heading
    assert "did not need a review" in heading
    assert "Review needed" not in str(request["blocks"])
    assert request["thread_ts"] == debate.thread_ts

    await decide(bot, request, action_ids.ACTION_APPROVE)
    [label] = await bot.wait_for(lambda: stored_labels(bot), "the sampled review's label")
    assert (label.kind, label.correct, label.sampled) == (LabelKind.REVIEW, True, True)
    assert label.confidence == debate.confidence
    decided = await bot.wait_for(
        lambda: next(
            (
                m
                for m in bot.emulator.posted(CHANNEL)
                if m["ts"] == request["ts"] and m.get("edited")
            ),
            None,
        ),
        "the decided sample",
    )
    assert "Why it was reviewed" in str(decided["blocks"])


def eval_results(path: Path, n: int, seed: int) -> Path:
    """An eval's results.jsonl whose debates recorded components, their correctness drawn
    from KNOWN (as a run of the evidence-based scoring would leave them)."""
    rng = random.Random(seed)
    lines = []
    for index in range(n):
        values: dict[Component, float | None] = {
            Component.AGREEMENT: rng.random(),
            Component.GROUNDING: rng.random(),
            Component.UNANSWERED: rng.random(),
        }
        components = ConfidenceComponents(values=values)
        right = rng.random() < KNOWN.score(components)
        result = ArmResult(
            case_id=f"case-{index}",
            task_type="security",
            arm="adversarial",
            run_id="run1",
            decision="accept" if right else "reject",
            expected="accept",
            confidence=DEFAULT_WEIGHTS.score(components),
            components={str(c): v for c, v in values.items()},
            weights_version=DEFAULT_WEIGHTS.version,
            providers=["anthropic"],
        )
        lines.append(result.model_dump_json())
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def published_for(bot: Bot, user: str) -> list[dict[str, Any]]:
    return [p["view"] for p in bot.emulator.published if p["user_id"] == user]


async def test_weights_fitted_on_eval_labels_are_adopted_by_an_admin_only(
    start_bot: BotFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bot = await start_bot(review_sample_max=0.2)  # the raise App Home reports below
    use_bots_database(bot, monkeypatch)
    results = eval_results(tmp_path / "results.jsonl", 300, seed=3)

    assert main(["calibration", "import-eval", str(results)]) == 0
    assert "imported 300 eval label(s)" in capsys.readouterr().out
    assert main(["calibration", "--png", str(tmp_path / "c.png")]) == 0
    out = capsys.readouterr().out
    match = re.search(r"proposed weights (fit-[0-9a-f]{10})", out)
    assert match, out
    version = match.group(1)
    assert f"`debatebot calibration adopt {version}`" in out
    assert "on those labels, catching 95% of the wrong verdicts escalates" in out

    # App Home: a person who is not an admin sees no calibration; an admin sees the proposal.
    await bot.driver.event({"type": "app_home_opened", "user": "UALICE", "tab": "home"})
    [alice_home] = await bot.wait_for(lambda: published_for(bot, "UALICE"), "alice's home")
    assert "Confidence calibration" not in str(alice_home["blocks"])
    await bot.driver.event({"type": "app_home_opened", "user": ADMIN, "tab": "home"})
    [admin_home] = await bot.wait_for(lambda: published_for(bot, ADMIN), "the admin's home")
    shown = str(admin_home["blocks"])
    assert "Confidence calibration (admins)" in shown
    assert "*security*: 300 label(s)" in shown
    assert f"Weights in use: `{DEFAULT_WEIGHTS.version}`" in shown
    assert f"Adopt {version}" in shown
    assert "catching 95% of the wrong verdicts escalates" in shown
    # No sampled review yet (evals are not samples): the worker samples at
    # DEBATEBOT_REVIEW_SAMPLE_MAX (20 %) instead of the rate set here (0), and says so (issue 48).
    assert (
        "Sampling raised: 20% of the verdicts that do not escalate are sent for review"
        " (DEBATEBOT_REVIEW_SAMPLE_MAX), not 0%, while this workspace has 0 of the 50 sampled"
        " reviews" in shown
    )

    # The button lifted from the admin's home and clicked by someone else changes nothing.
    await bot.driver.home_click(admin_home, action_ids.ACTION_ADOPT_WEIGHTS, user="UALICE")
    refused = await bot.wait_for(
        lambda: len(published_for(bot, "UALICE")) == 2 and published_for(bot, "UALICE")[-1],
        "alice's refusal",
    )
    assert "Only workspace admins can adopt" in str(refused["blocks"])
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        assert weights.active_weights(session).version == DEFAULT_WEIGHTS.version

    await bot.driver.home_click(admin_home, action_ids.ACTION_ADOPT_WEIGHTS, user=ADMIN)
    adopted = await bot.wait_for(
        lambda: len(published_for(bot, ADMIN)) == 2 and published_for(bot, ADMIN)[-1],
        "the admin's home after adopting",
    )
    assert f"Adopted confidence weights {version}" in str(adopted["blocks"])
    assert f"Weights in use: `{version}`" in str(adopted["blocks"])
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        active = weights.active_weights(session)
        [adoption] = weights.adoptions(session)
    assert active.version == version
    assert (adoption.version, adoption.adopted_by) == (version, ADMIN)

    # The command goes back to the defaults; both adoptions stay on record.
    assert main(["calibration", "adopt", DEFAULT_WEIGHTS.version]) == 0
    assert f"adopted confidence weights {DEFAULT_WEIGHTS.version}" in capsys.readouterr().out
    assert main(["calibration", "adopt", "fit-unknown"]) == 1
    assert "no confidence weights version 'fit-unknown'" in capsys.readouterr().err
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        assert [a.version for a in weights.adoptions(session)] == [
            version,
            DEFAULT_WEIGHTS.version,
        ]
        assert weights.active_weights(session).version == DEFAULT_WEIGHTS.version


async def test_an_adopt_click_naming_no_version_is_refused_before_anything_runs(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    forged = {
        "type": "home",
        "blocks": [
            {
                "type": "actions",
                "block_id": "calibration",
                "elements": [
                    {
                        "type": "button",
                        "action_id": action_ids.ACTION_ADOPT_WEIGHTS,
                        "value": "fit-1; DROP TABLE debate",
                    }
                ],
            }
        ],
    }
    reply = await bot.driver.home_click(forged, action_ids.ACTION_ADOPT_WEIGHTS, user=ADMIN)
    assert reply.status == 400
    assert "not a confidence weights version" in reply.body
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        assert weights.adoptions(session) == []


async def test_adopted_weights_score_the_next_verdict_and_it_records_their_version(
    start_bot: BotFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same debate scored before and after an adoption: the confidence moves as the new
    weights say, and each verdict names the version that scored it."""
    bot = await start_bot()
    use_bots_database(bot, monkeypatch)
    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished(1)
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        weights.propose_weights(session, weights=KNOWN, evidence={"test": True})
    assert main(["calibration", "adopt", KNOWN.version]) == 0
    assert f"adopted confidence weights {KNOWN.version}" in capsys.readouterr().out

    await bot.driver.command("Should we adopt ADR-042?")
    await bot.finished(2)
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        before, after = session.exec(select(VerdictRecord).order_by(col(VerdictRecord.id))).all()
    assert (before.weights_version, after.weights_version) == (DEFAULT_WEIGHTS.version, "known")
    assert before.components_json is not None
    assert after.components_json is not None
    components = ConfidenceComponents.model_validate_json(after.components_json)
    assert components == ConfidenceComponents.model_validate_json(before.components_json)
    assert before.confidence == pytest.approx(DEFAULT_WEIGHTS.score(components), abs=1e-4)
    assert after.confidence == pytest.approx(KNOWN.score(components), abs=1e-4)
    assert abs(after.confidence - before.confidence) > 0.01
