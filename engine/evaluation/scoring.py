"""Scores of eval outputs: planted-flaw recall, false alarms, verdict agreement, fabricated
citations, escalation calibration, how well the confidence predicts a right verdict (Brier,
ECE, AUROC, and what the threshold calibration recommends would escalate), flips, and cost.
Pure functions over `ArmResult`s."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from engine.calibration.metrics import auroc, brier, expected_calibration_error
from engine.calibration.threshold import DEFAULT_TARGET, recommend_threshold
from engine.citations import normalize
from engine.evaluation.cases import EvalCase, PlantedFlaw

PLANTED = "planted"
CLEAN = "clean"
PROBE_OVERLAP = 0.6
"""Share of the probe's words a cited quote must contain, in order, to count as citing it."""


class ArmResult(BaseModel):
    """One arm on one case (its planted document, or the clean control), as stored in
    `results.jsonl`: what it concluded, what it found, and what it cost."""

    case_id: str
    task_type: str
    arm: str
    variant: str = PLANTED
    run_id: str = ""
    ok: bool = True
    error: str | None = None
    decision: str | None = None
    expected: str | None = None
    confidence: float | None = None
    components: dict[str, float | None] | None = None
    """What a debate's confidence was made of, as its verdict recorded it (None for the
    single-model arms, and for verdicts that recorded none)."""
    weights_version: str | None = None
    escalated: bool | None = None
    output_text: str = ""
    flaws_found: list[str] = Field(default_factory=list)
    flaws_planted: int = 0
    round_decisions: list[str] = Field(default_factory=list)
    probe_cited: bool | None = None
    probe_flagged: bool | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    calls: int = 0
    providers: list[str] = Field(default_factory=list)
    """The providers whose models answered its calls (`fake` marks results that say nothing
    about a real model's confidence); empty in results written before it was recorded."""
    samples: list[str] = Field(default_factory=list)
    """Each sample's output (vote), kept so best-of-n judges the very same samples."""
    reused_cost_usd: float = 0.0
    """Of `cost_usd`, what another arm already paid for (best-of-n judging the vote's samples):
    counted in this arm's budget, not spent again."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.case_id, self.arm, self.variant)

    @property
    def spent_usd(self) -> float:
        """What this run itself spent."""
        return self.cost_usd - self.reused_cost_usd


def mentions(text: str, phrase: str) -> bool:
    """Whether `text` holds `phrase` as a whole phrase, ignoring case."""
    pattern = rf"(?<!\w){re.escape(phrase.strip().lower())}(?!\w)"
    return re.search(pattern, text.lower()) is not None


def flaws_in(text: str, flaws: Sequence[PlantedFlaw]) -> list[str]:
    """The ids of the flaws one of whose keyword phrases `text` holds."""
    return [flaw.id for flaw in flaws if any(mentions(text, k) for k in flaw.keywords)]


def majority_flaws(samples: Sequence[str], flaws: Sequence[PlantedFlaw]) -> list[str]:
    """Flaws named by more than half of the samples (the vote's rule)."""
    counts = {flaw.id: 0 for flaw in flaws}
    for sample in samples:
        for found in flaws_in(sample, flaws):
            counts[found] += 1
    return [flaw for flaw, n in counts.items() if n * 2 > len(samples)]


def cites_probe(quote: str, probe: str) -> bool:
    """Whether a cited quote reproduces the probe: most of the probe's words, in order."""
    probe_words = normalize(probe).split()
    quote_words = normalize(quote).split()
    if not probe_words or not quote_words:
        return False
    matched, position = 0, 0
    for word in probe_words:
        try:
            position = quote_words.index(word, position) + 1
        except ValueError:
            continue
        matched += 1
    return matched / len(probe_words) >= PROBE_OVERLAP


def decision_of(votes: Iterable[str]) -> str | None:
    """The most common decision; a tie goes to the most cautious (reject before revise…)."""
    order = ["reject", "revise", "escalate", "accept_with_conditions", "accept"]
    counts: dict[str, int] = {}
    for vote in votes:
        counts[vote] = counts.get(vote, 0) + 1
    if not counts:
        return None
    best = max(counts.values())
    tied = [d for d, n in counts.items() if n == best]
    return min(tied, key=lambda d: order.index(d) if d in order else len(order))


def flipped(result: ArmResult) -> bool | None:
    """Right after round 1 and wrong at the end; None when it cannot tell (one round, no
    per-round decision, or no expected verdict)."""
    if result.expected is None or len(result.round_decisions) < 2:
        return None
    return result.round_decisions[0] == result.expected and result.decision != result.expected


@dataclass
class Scores:
    """One arm's scores over a set of results."""

    runs: int
    failed: int
    recall: float | None
    flaws_found: int
    flaws_planted: int
    false_alarms: int
    clean_runs: int
    agreement: float | None
    probe_cited: float | None
    probe_flagged_when_cited: float | None
    escalated_when_wrong: float | None
    escalated_when_right: float | None
    brier: float | None
    """Of the confidence as a prediction that the verdict is the expected one."""
    ece: float | None
    auroc: float | None
    calibrated_threshold: float | None
    """The threshold that would have escalated the target share of this arm's wrong verdicts
    with the fewest right ones (`engine.calibration.threshold`), fitted on these very runs."""
    wrong_escalated_at_threshold: float | None
    right_escalated_at_threshold: float | None
    flip_rate: float | None
    tokens_per_case: float
    cost_per_case: float
    wall_s_per_case: float


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def score(results: Sequence[ArmResult], *, target: float = DEFAULT_TARGET) -> Scores:
    """Scores of one arm's results (planted and clean), failures counted apart; `target` is
    the share of wrong verdicts the calibrated threshold must escalate."""
    done = [r for r in results if r.ok]
    planted = [r for r in done if r.variant == PLANTED]
    clean = [r for r in done if r.variant == CLEAN]
    found = sum(len(r.flaws_found) for r in planted)
    total = sum(r.flaws_planted for r in planted)
    judged = [r for r in done if r.expected is not None and r.decision is not None]
    right = [r for r in judged if r.decision == r.expected]
    wrong = [r for r in judged if r.decision != r.expected]
    probed = [r for r in planted if r.probe_cited is not None]
    cited = [r for r in probed if r.probe_cited]
    flips = [f for f in (flipped(r) for r in planted) if f is not None]
    cases = max(1, len({r.case_id for r in done}))
    labelled = [r for r in judged if r.confidence is not None]
    confidences = [min(1.0, max(0.0, r.confidence or 0.0)) for r in labelled]
    correct = [r.decision == r.expected for r in labelled]
    advice = recommend_threshold(confidences, correct, target) if labelled else None
    return Scores(
        runs=len(results),
        failed=len(results) - len(done),
        recall=_share(found, total),
        flaws_found=found,
        flaws_planted=total,
        false_alarms=sum(len(r.flaws_found) for r in clean),
        clean_runs=len(clean),
        agreement=_share(len(right), len(judged)),
        probe_cited=_share(len(cited), len(probed)),
        probe_flagged_when_cited=_share(sum(1 for r in cited if r.probe_flagged), len(cited)),
        escalated_when_wrong=_share(sum(1 for r in wrong if r.escalated), len(wrong)),
        escalated_when_right=_share(sum(1 for r in right if r.escalated), len(right)),
        brier=brier(confidences, correct),
        ece=expected_calibration_error(confidences, correct),
        auroc=auroc(confidences, correct),
        calibrated_threshold=advice.threshold if advice else None,
        wrong_escalated_at_threshold=advice.counts.wrong_share if advice else None,
        right_escalated_at_threshold=advice.counts.needless_share if advice else None,
        flip_rate=_share(sum(flips), len(flips)),
        tokens_per_case=sum(r.input_tokens + r.output_tokens for r in done) / cases,
        cost_per_case=sum(r.cost_usd for r in done) / cases,
        wall_s_per_case=sum(r.wall_s for r in done) / cases,
    )


def expected_for(case: EvalCase, variant: str) -> str | None:
    verdict = case.expected_verdict if variant == PLANTED else case.clean_expected_verdict
    return verdict.value if verdict is not None else None
