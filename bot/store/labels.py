"""Labels for the verdicts' confidence: a reviewer's Approve or Reject, a reader's thumbs, an
eval run against its case's expected verdict; each written with the confidence the verdict had
and what it was made of."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from bot.store.calibration_tables import CalibrationLabel
from bot.store.debate_tables import Debate, TriageState, VerdictRecord
from bot.store.review_tables import Escalation, EscalationState, FeedbackValue
from engine.calibration.current import recorded
from engine.calibration.labels import Label, LabelKind
from engine.confidence import ConfidenceComponents
from engine.evaluation.scoring import ArmResult
from engine.models import utcnow
from engine.protocols import PROTOCOLS

UNSPECIFIED = "unspecified"
"""The task type of a debate that named none (as `debatebot stats` counts it)."""
REVIEW_VERDICTS = {EscalationState.APPROVED: True, EscalationState.REJECTED: False}
"""What a review decision says of the verdict: Approve, it stands; Reject, it does not.
*Another round* says neither."""


def _upsert(session: Session, *, key: str, values: dict[str, Any]) -> CalibrationLabel:
    """The label `key` with `values`, inserted or overwritten (not committed)."""
    row = session.exec(select(CalibrationLabel).where(CalibrationLabel.key == key)).one_or_none()
    if row is None:
        row = CalibrationLabel(key=key, **values)
    else:
        for name, value in values.items():
            setattr(row, name, value)
        row.updated_at = utcnow()
    session.add(row)
    return row


def _of_verdict(session: Session, debate_id: int) -> dict[str, Any] | None:
    """What a label copies from a debate's verdict: task type, protocol, confidence and what
    scored it. None when there is no verdict, or the answer came from triage (its confidence
    is the triage's estimate, not a debate's)."""
    debate = session.get(Debate, debate_id)
    verdict = session.exec(
        select(VerdictRecord).where(VerdictRecord.debate_id == debate_id)
    ).one_or_none()
    if debate is None or verdict is None or debate.triage == TriageState.ANSWERED:
        return None
    components, version = recorded(json.loads(verdict.result_json).get("verdict") or {})
    spec = json.loads(debate.spec_json)
    threshold = spec.get("escalation_threshold")
    return {
        "debate_id": debate_id,
        "task_type": spec.get("task_type") or UNSPECIFIED,
        "threshold": float(threshold) if isinstance(threshold, int | float) else None,
        "protocol": debate.protocol,
        "confidence": verdict.confidence,
        "components": _stored(components),
        "weights_version": version,
    }


def _stored(components: ConfidenceComponents | None) -> dict[str, float | None] | None:
    if components is None:
        return None
    return {str(name): value for name, value in components.values.items()}


def label_review(
    session: Session, *, escalation: Escalation, decision: EscalationState
) -> CalibrationLabel | None:
    """The label an Approve or a Reject of `escalation` makes (not committed); None for a
    decision that says nothing of the verdict."""
    correct = REVIEW_VERDICTS.get(decision)
    if correct is None:
        return None
    base = _of_verdict(session, escalation.debate_id)
    if base is None:
        return None
    values = {**base, "kind": LabelKind.REVIEW, "correct": correct, "sampled": escalation.sample}
    return _upsert(session, key=f"review:{escalation.id}", values=values)


def label_feedback(
    session: Session, *, debate_id: int, user_id: str, value: FeedbackValue
) -> CalibrationLabel | None:
    """The label one person's thumbs makes, overwritten when they change their mind (not
    committed)."""
    base = _of_verdict(session, debate_id)
    if base is None:
        return None
    values = {**base, "kind": LabelKind.FEEDBACK, "correct": value is FeedbackValue.POSITIVE}
    return _upsert(session, key=f"feedback:{debate_id}:{user_id}", values=values)


@dataclass
class EvalImport:
    """What importing eval results did: labels added, ones already there, and the results left
    out, by why."""

    added: int = 0
    present: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def import_eval(session: Session, *, results: Iterable[ArmResult]) -> EvalImport:
    """Every debate arm's result with an expected verdict, as a label (right when its decision
    is the expected one); committed. Single-model arms are left out: their confidence is the
    model's declared level, not a debate's."""
    outcome = EvalImport()
    for result in results:
        if result.arm not in PROTOCOLS:
            outcome.skip("not a debate protocol")
        elif not result.ok or result.decision is None or result.confidence is None:
            outcome.skip("failed")
        elif result.expected is None:
            outcome.skip("no expected verdict")
        else:
            key = f"eval:{result.run_id}:{result.case_id}:{result.arm}:{result.variant}"
            if session.exec(select(CalibrationLabel.id).where(CalibrationLabel.key == key)).first():
                outcome.present += 1
                continue
            session.add(
                CalibrationLabel(
                    key=key,
                    kind=LabelKind.EVAL,
                    task_type=result.task_type or UNSPECIFIED,
                    protocol=result.arm,
                    correct=result.decision == result.expected,
                    confidence=result.confidence,
                    components=result.components,
                    weights_version=result.weights_version,
                )
            )
            outcome.added += 1
    session.commit()
    return outcome


def labels(session: Session, *, kinds: Collection[LabelKind] | None = None) -> list[Label]:
    """Every label (of `kinds`), oldest first."""
    query = select(CalibrationLabel).order_by(col(CalibrationLabel.id))
    if kinds is not None:
        query = query.where(col(CalibrationLabel.kind).in_(list(kinds)))
    return [
        Label(
            kind=row.kind,
            task_type=row.task_type,
            correct=row.correct,
            confidence=min(1.0, max(0.0, row.confidence)),
            components=(
                ConfidenceComponents.model_validate({"values": row.components})
                if row.components is not None
                else None
            ),
            weights_version=row.weights_version,
            sampled=row.sampled,
            threshold=row.threshold,
        )
        for row in session.exec(query)
    ]


def labels_of(session: Session, *, debate_id: int) -> list[CalibrationLabel]:
    """The label rows of one debate, oldest first."""
    return list(
        session.exec(
            select(CalibrationLabel)
            .where(CalibrationLabel.debate_id == debate_id)
            .order_by(col(CalibrationLabel.id))
        )
    )


def sampled_count(session: Session, *, weights_version: str) -> int:
    """Sampled reviews of verdicts the weights `weights_version` scored."""
    return len(
        session.exec(
            select(CalibrationLabel.id).where(
                CalibrationLabel.kind == LabelKind.REVIEW,
                col(CalibrationLabel.sampled).is_(True),
                CalibrationLabel.weights_version == weights_version,
            )
        ).all()
    )
