"""Calibration's store on SQLite and PostgreSQL: reviews and feedback become labels with the
verdict's confidence and components, eval results are imported once, a sampled verdict gets a
review request marked as a sample, weights versions are proposed, adopted and read back, and a
label outlives its debate's retention."""

from __future__ import annotations

import json
import random

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from bot.jobs.notifier import DebateNotifier
from bot.jobs.worker import DebateWorker, WorkerConfig
from bot.store import (
    channels,
    endings,
    labels,
    operations,
    outbox,
    overview,
    queue,
    reviews,
    thresholds,
)
from bot.store.db import session_scope
from bot.store.debate_tables import DebateSource, VerdictRecord
from bot.store.errors import WeightsNotFoundError
from bot.store.review_tables import EscalationState, FeedbackValue
from bot.store.tenancy import PENDING_WORKSPACE
from bot.store.weights import active_weights, adopt_weights, adoptions, propose_weights
from bot.store.weights import weights_versions as versions
from engine.calibration.labels import LabelKind
from engine.calibration.sampling import ReviewSampler
from engine.confidence import DEFAULT_WEIGHTS, Component
from engine.evaluation.scoring import ArmResult
from engine.models import DebateSpec, ModelSettings, ThresholdSource
from tests.helpers import DebateScript, reply_for, shipped_prompts

SPEC = DebateSpec(
    question="Should we adopt ADR-042?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
    task_type="security",
)
SURE = reply_for("moderator", confidence_level="HIGH", unresolved_points=[], decision="accept")


def queued(engine: Engine, key: str, source: DebateSource = DebateSource.COMMAND) -> int:
    with Session(engine) as session:
        slack = source is not DebateSource.CLI
        debate, _ = queue.add_debate(
            session,
            new=queue.NewDebate(
                trigger_key=key,
                spec=SPEC,
                source=source,
                channel_id="C1" if slack else None,
                reviewers_channel_id="C1" if slack else None,
                requested_by="UALICE" if slack else None,
            ),
        )
        session.commit()
        assert debate.id is not None
        return debate.id


def worker(engine: Engine, script: DebateScript, sample_rate: float = 0.0) -> DebateWorker:
    return DebateWorker(
        engine=engine,
        resolve_llm=lambda _m: script.llm(),
        prompts=shipped_prompts(),
        reporter=DebateNotifier(engine=engine),
        config=WorkerConfig(review_sample=ReviewSampler(sample_rate, rng=random.Random(1))),
    )


def decide(engine: Engine, debate_id: int, decision: EscalationState) -> None:
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        escalation = reviews.escalation_for(session, debate_id=debate_id)
        assert escalation is not None
        assert escalation.id is not None
        reviews.record_review(
            session, escalation_id=escalation.id, reviewer="UREV", decision=decision, note="n"
        )


async def test_a_sampled_verdict_gets_a_review_request_marked_as_a_sample(store: Engine) -> None:
    debate_id = queued(store, "sampled")
    cli_id = queued(store, "cli", DebateSource.CLI)
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id="C1", updated_by="UADMIN", values={"reviewers": ["UREV"]}
        )
    sampling = worker(store, DebateScript(moderator=[SURE, SURE]), sample_rate=1.0)
    assert await sampling.run_once()
    assert await sampling.run_once()
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        verdict = endings.verdict_for(session, debate_id=debate_id)
        escalation = reviews.escalation_for(session, debate_id=debate_id)
        request = outbox.row_for(session, debate_id=debate_id, key="review")
        stats = overview.protocol_stats(session)
        board = operations.dashboard(session)
        # A debate with no thread has nobody to review it: never sampled.
        assert reviews.escalation_for(session, debate_id=cli_id) is None
    assert verdict is not None
    assert not verdict.escalate
    assert escalation is not None
    assert escalation.sample
    assert escalation.reasons == [endings.SAMPLE_REASON]
    assert escalation.reviewers == ["UREV"]
    assert request is not None
    assert "Sample review" in request.text
    assert "drawn at random" in str(request.blocks)
    # A sample is not an escalation in the figures people read.
    assert [s.escalated for s in stats] == [0]
    assert board.escalation_rate == 0.0

    decide(store, debate_id, EscalationState.APPROVED)
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        [label] = labels.labels_of(session, debate_id=debate_id)
    assert (label.kind, label.correct, label.sampled) == (LabelKind.REVIEW, True, True)


async def test_approve_and_reject_become_labels_another_round_does_not(store: Engine) -> None:
    ids = [queued(store, f"k{n}") for n in range(3)]
    escalating = worker(store, DebateScript())
    for _ in ids:
        assert await escalating.run_once()
    decide(store, ids[0], EscalationState.APPROVED)
    decide(store, ids[1], EscalationState.REJECTED)
    decide(store, ids[2], EscalationState.ANOTHER_ROUND)
    decide(store, ids[1], EscalationState.APPROVED)  # a second click changes nothing

    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        verdict = endings.verdict_for(session, debate_id=ids[0])
        approved = labels.labels_of(session, debate_id=ids[0])
        rejected = labels.labels_of(session, debate_id=ids[1])
        assert labels.labels_of(session, debate_id=ids[2]) == []
        stored = labels.labels(session)
    assert verdict is not None
    [label] = approved
    assert label.key.startswith("review:")
    assert (label.kind, label.correct, label.sampled) == (LabelKind.REVIEW, True, False)
    assert (label.task_type, label.protocol) == ("security", "adversarial")
    assert label.confidence == verdict.confidence
    assert [row.correct for row in rejected] == [False]
    assert [(x.kind, x.correct) for x in stored] == [
        (LabelKind.REVIEW, True),
        (LabelKind.REVIEW, False),
    ]


async def test_a_label_copies_the_components_the_verdict_recorded(store: Engine) -> None:
    debate_id = queued(store, "scored")
    assert await worker(store, DebateScript()).run_once()
    # The verdict as the evidence-based scoring stores it: its components and weights version.
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        record = endings.verdict_for(session, debate_id=debate_id)
        assert record is not None
        document = json.loads(record.result_json)
        document["verdict"]["components"] = {"values": {"agreement": 0.25, "grounding": None}}
        document["verdict"]["weights_version"] = "default-1"
        row = session.get(VerdictRecord, record.id)
        assert row is not None
        row.result_json = json.dumps(document)
        session.add(row)
        session.commit()
    decide(store, debate_id, EscalationState.REJECTED)
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        [label] = labels.labels(session)
    assert label.components is not None
    assert label.components.value(Component.AGREEMENT) == 0.25
    assert label.components.value(Component.GROUNDING) is None
    assert label.weights_version == "default-1"


async def test_feedback_is_a_weaker_label_a_change_of_mind_overwrites(store: Engine) -> None:
    debate_id = queued(store, "fb")
    assert await worker(store, DebateScript(moderator=[SURE])).run_once()
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        reviews.record_feedback(
            session, debate_id=debate_id, user_id="UBOB", value=FeedbackValue.POSITIVE
        )
        reviews.record_feedback(
            session, debate_id=debate_id, user_id="UBOB", value=FeedbackValue.NEGATIVE
        )
        reviews.record_feedback(
            session, debate_id=debate_id, user_id="UCAROL", value=FeedbackValue.POSITIVE
        )
        rows = labels.labels_of(session, debate_id=debate_id)
        strong = labels.labels(session, kinds=[LabelKind.REVIEW, LabelKind.EVAL])
    assert [(r.key, r.kind, r.correct) for r in rows] == [
        (f"feedback:{debate_id}:UBOB", LabelKind.FEEDBACK, False),
        (f"feedback:{debate_id}:UCAROL", LabelKind.FEEDBACK, True),
    ]
    assert strong == []


def test_eval_results_with_expected_verdicts_are_imported_once(store: Engine) -> None:
    def result(arm: str, case: str, **changes: object) -> ArmResult:
        values: dict[str, object] = {
            "case_id": case,
            "task_type": "contract",
            "arm": arm,
            "run_id": "r1",
            "decision": "accept",
            "expected": "accept",
            "confidence": 0.8,
            **changes,
        }
        return ArmResult.model_validate(values)

    results = [
        result("adversarial", "c1"),
        result("panel", "c1", decision="reject", components={"agreement": 0.4}),
        result("single", "c1"),
        result("adversarial", "c2", expected=None),
        result("stances", "c2", ok=False, decision=None, confidence=None),
    ]
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        first = labels.import_eval(session, results=results)
        second = labels.import_eval(session, results=results)
        stored = labels.labels(session, kinds=[LabelKind.EVAL])
    assert (first.added, first.present) == (2, 0)
    assert first.skipped == {
        "not a debate protocol": 1,
        "no expected verdict": 1,
        "failed": 1,
    }
    assert (second.added, second.present) == (0, 2)
    assert [(x.task_type, x.correct) for x in stored] == [("contract", True), ("contract", False)]
    assert stored[1].components is not None
    assert stored[1].components.value(Component.AGREEMENT) == 0.4


def test_weights_are_proposed_adopted_and_read_back(store: Engine) -> None:
    fitted = DEFAULT_WEIGHTS.model_copy(
        update={"version": "fit-0123456789", "intercept": 1.25, "source": "a fit"}
    )
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        assert active_weights(session) == DEFAULT_WEIGHTS
        propose_weights(session, weights=fitted, evidence={"brier_fit": 0.1})
        propose_weights(session, weights=fitted, evidence={"brier_fit": 0.2})  # kept as was
        with pytest.raises(WeightsNotFoundError, match="fit-0123456789") as refused:
            adopt_weights(session, version="fit-nope", by="UADMIN")
        assert "`debatebot calibration` proposes one" in str(refused.value)
        assert active_weights(session) == DEFAULT_WEIGHTS

        adoption = adopt_weights(session, version="fit-0123456789", by="UADMIN")
        assert (adoption.version, adoption.adopted_by) == ("fit-0123456789", "UADMIN")
        assert active_weights(session).intercept == 1.25
        [row] = versions(session)
        assert (row.version, row.active, row.adopted_by) == ("fit-0123456789", True, "UADMIN")
        assert row.evidence == {"brier_fit": 0.1}

        # Going back to the defaults is an adoption too, so the trail shows both.
        adopt_weights(session, version=DEFAULT_WEIGHTS.version, by="cli:ops")
        assert active_weights(session) == DEFAULT_WEIGHTS
        assert [a.version for a in adoptions(session)] == [
            "fit-0123456789",
            DEFAULT_WEIGHTS.version,
        ]


async def test_a_label_outlives_its_debates_retention(store: Engine) -> None:
    debate_id = queued(store, "old")
    assert await worker(store, DebateScript()).run_once()
    decide(store, debate_id, EscalationState.APPROVED)
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        operations.remove_debate(session, debate_id=debate_id)
        [label] = labels.labels(session)
        assert labels.labels_of(session, debate_id=debate_id) == []
    assert (label.kind, label.correct, label.task_type) == (LabelKind.REVIEW, True, "security")


async def test_a_label_keeps_the_threshold_its_verdict_was_held_to(store: Engine) -> None:
    debate_id = queued(store, "held")
    assert await worker(store, DebateScript()).run_once()
    decide(store, debate_id, EscalationState.REJECTED)
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        [label] = labels.labels(session)
        stored = json.loads(
            session.exec(select(VerdictRecord).where(VerdictRecord.debate_id == debate_id))
            .one()
            .result_json
        )["verdict"]
    assert label.threshold == SPEC.escalation_threshold
    assert (stored["threshold"], stored["threshold_source"]) == (
        SPEC.escalation_threshold,
        ThresholdSource.FIXED.value,
    )


def test_a_workspaces_adopted_threshold_is_its_newest_choice(store: Engine) -> None:
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        assert thresholds.adopted_threshold(session) is None
        thresholds.adopt_threshold(
            session, source=ThresholdSource.GUARANTEED, threshold=0.71, version="v", by="U1"
        )
        assert thresholds.adopted_threshold(session) == (0.71, ThresholdSource.GUARANTEED)
        thresholds.adopt_threshold(
            session, source=ThresholdSource.FIXED, threshold=None, version="v", by="U1"
        )
        assert thresholds.adopted_threshold(session) is None


async def test_the_sampled_share_is_raised_while_a_workspace_has_too_few_samples(
    store: Engine,
) -> None:
    """A base share of 0 draws nothing; raised to 1 while fewer than 2 sampled reviews exist
    under the weights in use, the first verdicts are sampled until there are 2, then none."""
    ids = [queued(store, f"s{n}") for n in range(4)]
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        channels.save_channel_settings(
            session, channel_id="C1", updated_by="UADMIN", values={"reviewers": ["UREV"]}
        )
    sampler = ReviewSampler(0.0, rng=random.Random(1), raised=1.0, goal=2)
    sampling = DebateWorker(
        engine=store,
        resolve_llm=lambda _m: DebateScript(moderator=[SURE] * 8).llm(),
        prompts=shipped_prompts(),
        reporter=DebateNotifier(engine=store),
        config=WorkerConfig(review_sample=sampler),
    )
    sampled = []
    for debate_id in ids:
        assert await sampling.run_once()
        with session_scope(store, workspace=PENDING_WORKSPACE) as session:
            escalation = reviews.escalation_for(session, debate_id=debate_id)
        sampled.append(escalation is not None and escalation.sample)
        if escalation is not None:
            decide(store, debate_id, EscalationState.APPROVED)  # the sample becomes a label
    assert sampled == [True, True, False, False]
