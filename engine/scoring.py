"""A verdict's confidence from what the code can check, the same way for every protocol.

After a protocol's run, `scored` measures the components (`engine.confidence.Component`):
- agreement and position bias: the spec's independent judges (`engine.judging`), asked when the
  debate completed with a verdict;
- grounding: the share of the debate's citations found in the material (`engine.citations`);
- unanswered: what the protocol reports as left standing (`DebateProtocol.evidence`);
- output checks: the degenerate-output findings (`engine.quality`), as min(1, findings / 3);
- declared: the level the deciding model declared, a small input and never the base.
The weights (a versioned logistic model, `engine.confidence.DEFAULT_WEIGHTS` unless a team
adopted others) turn them into the confidence. The verdict keeps the components, each one's
contribution and the weights' version; `confidence_method` lists the contributions for people.
Every escalation reason that depends on the confidence is written here, from the final value,
once.

With no judge's answer (judges set to 0, the budget could not afford one, it failed) the
confidence is unverified: the result is flagged, and the verdict escalates unless its result is
clear and grounded: every citation found (at least one made), at most `CLEAR_UNANSWERED` of the
objections unanswered, no output-check finding, and a decision other than escalate.
"""

from __future__ import annotations

from engine import quality
from engine.confidence import Component, ConfidenceComponents, ConfidenceWeights, Contribution
from engine.evidence import Measure, ProtocolEvidence
from engine.judging import Agreement, judge_again, unverified
from engine.ledger import TurnLedger
from engine.models import (
    ConfidenceAdjustment,
    DebateFlag,
    DebateResult,
    DebateStatus,
    Decision,
)
from engine.prompts import PromptLibrary
from engine.protocols.base import DebateProtocol, level_for, threshold_reason

FULL_FINDINGS = 3
"""Output-check findings that make the component 1."""
CLEAR_UNANSWERED = 0.25
"""The most of the objections an unverified verdict may leave unanswered and still stand."""


def grounding(result: DebateResult) -> Measure:
    """The share of the debate's citations found in the material."""
    total = len(result.citations)
    if not total:
        return Measure(None)
    missing = sum(1 for check in result.citations if not check.verified)
    note = (
        f"{missing} of {total} citations not found" if missing else f"all {total} citations found"
    )
    return Measure((total - missing) / total, note)


def output_checks(findings: list[str]) -> Measure:
    if not findings:
        return Measure(0.0)
    count = len(findings)
    return Measure(
        min(1.0, count / FULL_FINDINGS), f"{count} output check{'s' * (count > 1)} failed"
    )


def components_of(
    agreement: Agreement, grounded: Measure, evidence: ProtocolEvidence, checks: Measure
) -> ConfidenceComponents:
    measures = {
        Component.AGREEMENT: agreement.agreement,
        Component.POSITION_BIAS: agreement.position_bias,
        Component.GROUNDING: grounded,
        Component.UNANSWERED: evidence.unanswered,
        Component.OUTPUT_CHECKS: checks,
        Component.DECLARED: Measure(evidence.declared, evidence.declared_note),
    }
    return ConfidenceComponents(
        values={c: m.value for c, m in measures.items()},
        notes={c: m.note for c, m in measures.items() if m.note},
    )


def method(
    weights: ConfidenceWeights, contributions: list[Contribution], components: ConfidenceComponents
) -> list[ConfidenceAdjustment]:
    """The contributions as people read them: the intercept, then each component's value (or
    the neutral value it counted at), what it was, its weight and its share of the logit."""
    steps = [
        ConfidenceAdjustment(
            reason=f"intercept (weights {weights.version})", delta=weights.intercept
        )
    ]
    for row in contributions:
        shown = (
            f"{row.value:.2f}" if row.value is not None else f"not measured, counted {row.used:.2f}"
        )
        note = components.notes.get(row.component, "")
        what = f" ({note})" if note else ""
        steps.append(
            ConfidenceAdjustment(
                reason=f"{row.component.value} {shown}{what} \u00d7 {row.weight:+.2f}",
                # + 0.0: a zero contribution of a negative weight reads +0.00, not -0.00.
                delta=row.logit + 0.0,
            )
        )
    return steps


def _not_clear(
    components: ConfidenceComponents, findings: list[str], decision: Decision
) -> list[str]:
    """What keeps an unverified result from being clear and grounded (nothing: it is)."""
    problems = []
    found = components.value(Component.GROUNDING)
    if found is None:
        problems.append("nothing cited to check")
    elif found < 1.0:
        problems.append(components.notes[Component.GROUNDING])
    left = components.value(Component.UNANSWERED)
    if left is None or left > CLEAR_UNANSWERED:
        problems.append(components.notes.get(Component.UNANSWERED) or "nothing measured answered")
    if findings:
        problems.append("the output checks found problems")
    if decision is Decision.ESCALATE:
        problems.append("the decision is to escalate")
    return problems


async def scored(
    result: DebateResult,
    *,
    protocol: DebateProtocol,
    ledger: TurnLedger,
    prompts: PromptLibrary,
    weights: ConfidenceWeights,
) -> DebateResult:
    """`result` with its confidence measured and scored, its judges' turns in the transcript,
    and every escalation reason and flag that follows from them."""
    spec, verdict = result.spec, result.verdict
    # Judges started beside the deciding call end first, whatever the run came to: what they
    # were asked is paid for and recorded.
    heard = await ledger.judging if ledger.judging is not None else None
    findings = quality.output_checks(result, prompts)
    evidence = protocol.evidence(result)
    reasons = list(verdict.escalation_reasons)
    flags = list(result.flags)
    update: dict[str, object] = {}
    judgments = []
    if evidence.reached:
        if result.status is not DebateStatus.COMPLETE:
            agreement = unverified("the debate did not complete, so nothing was judged again")
        elif spec.judges == 0:
            agreement = unverified("judges are set to 0: --judges or DEBATEBOT_JUDGES")
        elif evidence.view is None:
            agreement = unverified(f"the {spec.protocol} protocol gives no record to judge")
        else:
            agreement = await judge_again(
                spec, evidence.view, ledger=ledger, prompts=prompts, heard=heard
            )
        judgments = agreement.checks
        components = components_of(agreement, grounding(result), evidence, output_checks(findings))
        contributions = weights.contributions(components)
        confidence = float(f"{weights.score(components):.4f}")
        update |= {
            "components": components,
            "contributions": contributions,
            "weights_version": weights.version,
            "confidence_method": method(weights, contributions, components),
        }
        if agreement.unverified is not None:
            flags.append(DebateFlag.CONFIDENCE_UNVERIFIED)
            problems = _not_clear(components, findings, verdict.decision)
            if problems and result.status is DebateStatus.COMPLETE:
                reasons.append(
                    f"the confidence is unverified ({agreement.unverified}) and the result is not"
                    f" clear and grounded: {'; '.join(problems)}"
                )
        if components.value(Component.POSITION_BIAS) == 1.0:
            flags.append(DebateFlag.POSITION_BIAS)
    else:
        confidence = 0.0
    if confidence < spec.escalation_threshold:
        reasons.append(threshold_reason(confidence, spec.escalation_threshold))
    if findings:
        flags.append(DebateFlag.DEGENERATE_OUTPUT)
        reasons.append("the model's output looks degenerate: " + "; ".join(findings))
    update |= {
        "confidence": confidence,
        "threshold": spec.escalation_threshold,
        "threshold_source": spec.threshold_source,
        "level": level_for(confidence),
        "escalate": bool(reasons),
        "escalation_reasons": reasons,
    }
    return result.model_copy(
        update={
            "verdict": verdict.model_copy(update=update),
            "flags": flags,
            "judgments": judgments,
            "transcript": list(ledger.transcript),
        }
    )
