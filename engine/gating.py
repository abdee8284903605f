"""Whether a request deserves a debate at all: debates cost time and money, most need none.

Default policy (`GatingPolicy()`), with `estimated_downside` in [0, 1] as the severity of a wrong
decision (0 trivial, 1 severe):
1. downside >= 0.7: always debate, however confident the first answer is;
2. task types where mistakes are costly and hard to reverse (security, compliance, contract):
   debate unless the first answer's confidence is at least 0.85 and the downside below 0.3;
3. anything else: debate when confidence is below 0.85 and the downside is at least 0.3.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class GatingPolicy(BaseModel):
    always_debate_downside: float = Field(default=0.7, ge=0.0, le=1.0)
    high_stakes_task_types: frozenset[str] = frozenset({"security", "compliance", "contract"})
    skip_confidence: float = Field(default=0.85, ge=0.0, le=1.0)
    min_downside: float = Field(default=0.3, ge=0.0, le=1.0)


class GateDecision(BaseModel):
    debate: bool
    reason: str


def should_debate(
    task_type: str | None,
    confidence: float,
    estimated_downside: float,
    policy: GatingPolicy | None = None,
) -> GateDecision:
    """Decide whether to debate, with the reason; inputs outside [0, 1] are a caller error."""
    policy = policy or GatingPolicy()
    for name, value in (("confidence", confidence), ("estimated_downside", estimated_downside)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be between 0 and 1, got {value}")
    if estimated_downside >= policy.always_debate_downside:
        return GateDecision(
            debate=True,
            reason=f"downside {estimated_downside:.2f} >= {policy.always_debate_downside:.2f}",
        )
    confident = confidence >= policy.skip_confidence
    low_stakes = estimated_downside < policy.min_downside
    if task_type in policy.high_stakes_task_types:
        if confident and low_stakes:
            return GateDecision(
                debate=False, reason=f"confident ({confidence:.2f}) and low downside {task_type}"
            )
        return GateDecision(debate=True, reason=f"{task_type} is a high-stakes task type")
    if not confident and not low_stakes:
        return GateDecision(
            debate=True,
            reason=f"confidence {confidence:.2f} < {policy.skip_confidence:.2f} with downside"
            f" {estimated_downside:.2f}",
        )
    return GateDecision(
        debate=False,
        reason="confident enough" if confident else "downside too small to be worth a debate",
    )
