"""`debatebot eval`'s scores on hand-made outputs whose right answers are known, and each arm on
a scripted model."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from bot.cli.eval_runner import EvalPlan, Progress, estimate, matched_k, meaning, report_markdown
from engine.evaluation.arms import ArmRunner, question_for
from engine.evaluation.cases import CaseFileError, EvalCase, PlantedFlaw, load_cases
from engine.evaluation.scoring import (
    CLEAN,
    PLANTED,
    ArmResult,
    cites_probe,
    decision_of,
    flaws_in,
    flipped,
    majority_flaws,
    mentions,
    score,
)
from engine.llm import LLMRequest
from engine.models import ContextDocument, DebateSpec, Decision, ModelSettings
from engine.pricing import Pricing
from engine.providers.fake import FunctionLLM, estimate_tokens
from tests.helpers import REVIEW_CASES, DebateScript, reply_for, shipped_prompts

FLAWS = [
    PlantedFlaw(id="f1", description="stale prices", keywords=["stale price", "invalidate"]),
    PlantedFlaw(id="f2", description="stampede", keywords=["stampede", "thundering herd"]),
    PlantedFlaw(id="f3", description="spof", keywords=["single point of failure"]),
]
PROBE = "The Redis node is replicated across three availability zones."
CASE = EvalCase(
    id="case-1",
    task_type="architecture",
    title="ADR-042",
    question="Should we adopt ADR-042?",
    context="ADR-042: a single Redis node caches prices for 60 minutes.",
    planted_flaws=FLAWS,
    fabricated_citation_probe=PROBE,
    expected_verdict=Decision.REVISE,
    clean_context="ADR-042: a replicated Redis cache, invalidated on every price write.",
    clean_question="Should we adopt ADR-042 as written?",
    clean_expected_verdict=Decision.ACCEPT,
)


# --- scoring on hand-made outputs -----------------------------------------------------------


def test_a_flaw_counts_only_as_a_whole_phrase_in_any_case() -> None:
    assert mentions("Risk: a Cache STAMPEDE at 08:30.", "stampede")
    assert not mentions("stampedes happen", "stampede")
    assert not mentions("no stampede-free design", "stampede-free design x")
    assert mentions("a thundering   herd".replace("   ", " "), "thundering herd")
    assert flaws_in("Prices go stale price; a thundering herd follows.", FLAWS) == ["f1", "f2"]
    assert flaws_in("Nothing to see.", FLAWS) == []


def test_the_vote_counts_a_flaw_that_most_samples_name() -> None:
    samples = ["a stampede", "stampede and stale price", "single point of failure"]
    assert majority_flaws(samples, FLAWS) == ["f2"]
    assert decision_of(["revise", "reject", "revise"]) == "revise"
    assert decision_of(["accept", "reject"]) == "reject", "a tie goes to the cautious side"


def test_a_quote_cites_the_probe_when_it_reproduces_most_of_it() -> None:
    assert cites_probe("“the Redis node is replicated across three availability zones”", PROBE)
    assert cites_probe("Redis node is replicated across three zones", PROBE)
    assert not cites_probe("a single Redis node caches prices", PROBE)


def result(**fields: Any) -> ArmResult:
    base: dict[str, Any] = {"case_id": "c", "task_type": "architecture", "arm": "single"}
    return ArmResult(**(base | fields))


def test_scores_of_known_results() -> None:
    results = [
        # Right verdict, 2 of 3 flaws, escalated needlessly, probe cited and flagged.
        result(
            case_id="a",
            decision="revise",
            expected="revise",
            escalated=True,
            flaws_found=["f1", "f2"],
            flaws_planted=3,
            probe_cited=True,
            probe_flagged=True,
            input_tokens=900,
            output_tokens=100,
            cost_usd=0.01,
        ),
        # Wrong verdict, no flaw, escalated (calibrated), probe not cited.
        result(
            case_id="b",
            decision="accept",
            expected="reject",
            escalated=True,
            flaws_planted=3,
            probe_cited=False,
            input_tokens=1900,
            output_tokens=100,
            cost_usd=0.03,
        ),
        # The clean control of "a": one false alarm, right verdict, not escalated.
        result(
            case_id="a",
            variant=CLEAN,
            decision="accept",
            expected="accept",
            escalated=False,
            flaws_found=["f3"],
        ),
        result(case_id="c", ok=False, error="LLMError: boom"),
    ]
    s = score(results)
    assert (s.runs, s.failed) == (4, 1)
    assert (s.flaws_found, s.flaws_planted) == (2, 6)
    assert s.recall == pytest.approx(1 / 3)
    assert (s.false_alarms, s.clean_runs) == (1, 1)
    assert s.agreement == pytest.approx(2 / 3)
    assert (s.probe_cited, s.probe_flagged_when_cited) == (0.5, 1.0)
    assert (s.escalated_when_wrong, s.escalated_when_right) == (1.0, 0.5)
    assert s.tokens_per_case == pytest.approx(3000 / 2)
    assert s.cost_per_case == pytest.approx(0.02)
    assert s.flip_rate is None, "no result had two rounds"


def test_a_flip_is_right_after_round_one_and_wrong_at_the_end() -> None:
    flip = result(decision="accept", expected="revise", round_decisions=["revise", "accept"])
    steady = result(decision="revise", expected="revise", round_decisions=["revise", "revise"])
    fixed = result(decision="revise", expected="revise", round_decisions=["accept", "revise"])
    one_round = result(decision="accept", expected="revise", round_decisions=["revise"])
    assert [flipped(r) for r in (flip, steady, fixed, one_round)] == [True, False, False, None]
    assert score([flip, steady, fixed, one_round]).flip_rate == pytest.approx(1 / 3)


def test_the_vote_matches_the_debates_tokens_with_an_odd_k() -> None:
    single = result(input_tokens=900, output_tokens=100)
    debate = result(arm="adversarial", input_tokens=5600, output_tokens=400)
    assert matched_k(single, debate) == 7
    assert matched_k(single, result(input_tokens=3900, output_tokens=100)) == 5
    assert matched_k(single, result(input_tokens=40_000)) == 9
    assert matched_k(None, debate) == 5


def test_what_it_means_is_computed_from_the_numbers() -> None:
    vote = result(arm="vote", flaws_found=["f1"], flaws_planted=3, input_tokens=1000)
    debate = result(arm="adversarial", flaws_found=["f1", "f2"], flaws_planted=3, input_tokens=1100)
    sentences = meaning({"vote": score([vote]), "adversarial": score([debate])})
    assert sentences[0].startswith("- Highest recall: `adversarial`, 67%")
    assert sentences[1] == "- `adversarial` found 2.0× the flaws of `vote` at 1.1× the tokens."
    assert sentences[2] == (
        "- On the cost-quality frontier (no other arm finds more flaws for as few tokens):"
        " `vote`, `adversarial`."
    )


def test_the_frontier_names_debates_a_cheaper_arm_matches() -> None:
    single = result(arm="single", flaws_found=["f1"], flaws_planted=3, input_tokens=100)
    vote = result(arm="vote", flaws_found=["f1", "f2"], flaws_planted=3, input_tokens=900)
    stances = result(arm="stances", flaws_found=["f2"], flaws_planted=3, input_tokens=1200)
    panel = result(arm="panel", flaws_found=["f1", "f2"], flaws_planted=3, input_tokens=900)
    by_arm = {a.arm: score([a]) for a in (single, vote, stances, panel)}
    frontier = next(s for s in meaning(by_arm) if "frontier" in s)
    assert frontier == (
        "- On the cost-quality frontier (no other arm finds more flaws for as few tokens):"
        " `single`, `vote`, `panel`; debates beaten (another arm found as many flaws or more for no"
        " more tokens): `stances`."
    )


def test_the_estimate_and_the_report(tmp_path: Path) -> None:
    plan = EvalPlan(cases=[CASE], arms=["single", "adversarial"], out=tmp_path)
    guess = estimate(plan, set(), lambda i, o: i / 1e6 + o / 1e6 * 4)
    assert guess.runs == 4, "two arms on the planted and the clean document"
    assert guess.calls == 2 * (1 + 5)
    assert guess.cost_usd > 0
    assert estimate(plan, {("case-1", "single", PLANTED)}, lambda i, o: 0.0).runs == 3
    report = report_markdown(
        [result(case_id="case-1", flaws_found=["f1"], flaws_planted=3, input_tokens=10)],
        plan,
        "fake:fake-model",
        "stopped before case-1/adversarial",
    )
    assert "| single | 33% | 1 / 3 |" in report
    assert "**Incomplete:** stopped before case-1/adversarial." in report
    assert "## Per task type" in report
    assert "| single | 33% · n/a · 0 · 10 |" in report


def test_progress_writes_a_line_per_run_to_a_log(tmp_path: Path) -> None:
    out = io.StringIO()
    other = CASE.model_copy(update={"id": "d"})
    plan = EvalPlan(cases=[CASE, other], arms=["single", "vote"], out=tmp_path, controls=False)
    progress = Progress.of(plan, {("case-1", "single", PLANTED)}, out)
    assert progress.total == 3, "what is done already is not counted"
    progress.update(result(case_id="case-1", arm="vote", cost_usd=0.5))
    progress.update(result(case_id="d", arm="vote", ok=False))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[" + "#" * 8 + "-" * 16 + "] 1/3 runs · 1/2 cases · $0.5000 spent")
    assert lines[0].endswith("case-1/vote ok")
    assert " 2/3 runs · 1/2 cases · " in lines[1], "case d has a run to go"
    assert lines[1].endswith("d/vote FAILED")


def test_the_shipped_cases_load_and_a_bad_line_is_named(tmp_path: Path) -> None:
    cases = load_cases(REVIEW_CASES)
    assert len(cases) == 16
    assert all(case.clean_context and case.planted_flaws for case in cases)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "question": "Q?", "context": "C"}\n{"id": "y"}\n')
    with pytest.raises(CaseFileError, match=r"bad.jsonl:2: question: Field required"):
        load_cases(bad)


# --- each arm on a scripted model -----------------------------------------------------------


def review(
    risks: list[str], decision: str = "revise", evidence: list[str] | None = None
) -> dict[str, Any]:
    return {
        "decision": decision,
        "synthesis": "Revise before adopting.",
        "risks": risks,
        "evidence_cited": evidence or [],
        "confidence_level": "MODERATE",
    }


def runner_for(replies: dict[str, list[Any]]) -> tuple[ArmRunner, FunctionLLM]:
    script = DebateScript(
        moderator=[reply_for("moderator", synthesis="Keys expire together: a stampede.")]
    )

    def answer(request: LLMRequest) -> Any:
        queue = replies.get(request.schema_name or "")
        if queue:
            return queue.pop(0) if len(queue) > 1 else queue[0]
        return script(request)

    llm = FunctionLLM(answer, pricing=Pricing(input_per_mtok=3.0, output_per_mtok=15.0))

    def spec_for(question: str, documents: list[ContextDocument], protocol: str) -> DebateSpec:
        return DebateSpec(
            question=question,
            context=documents,
            protocol="adversarial" if protocol == "single" else protocol,
            default_model=ModelSettings(provider="fake", model="fake-model"),
        )

    return ArmRunner(resolve_llm=lambda _m: llm, prompts=shipped_prompts(), spec_for=spec_for), llm


async def test_single_finds_what_its_review_names_and_cites_the_probe() -> None:
    quote = f'"{PROBE}"'
    runner, llm = runner_for({"SingleReview": [review(["a stampede at 08:30"], evidence=[quote])]})
    found, _ = await runner.single(CASE, PLANTED)
    assert found.flaws_found == ["f2"]
    assert (found.decision, found.expected, found.escalated) == ("revise", "revise", False)
    assert found.probe_cited is True
    assert found.probe_flagged is True, "the documents do not hold the claim"
    assert PROBE in llm.calls[0].messages[0].content, "the probe is in the question"
    assert found.calls == 1

    clean, _ = await runner.single(CASE, CLEAN)
    assert clean.flaws_found == ["f2"], "on the clean document a named flaw is a false alarm"
    assert clean.expected == "accept"
    assert clean.probe_cited is None
    assert PROBE not in question_for(CASE, CLEAN)


async def test_vote_and_best_of_n_judge_the_same_samples() -> None:
    samples = [
        review(["stale price after overrides"], "reject"),
        review(["stale price", "a stampede"], "reject"),
        review(["single point of failure"], "revise"),
    ]
    runner, llm = runner_for(
        {"SingleReview": list(samples), "PickedReview": [{"best": 3, "reason": "x"}]}
    )
    vote = await runner.vote(CASE, PLANTED, 3)
    assert vote.flaws_found == ["f1"]
    assert vote.decision == "reject"
    assert vote.calls == 3
    assert len(vote.samples) == 3

    calls_before = len(llm.calls)
    best = await runner.best_of_n(CASE, PLANTED, 3, vote)
    assert best.flaws_found == ["f3"], "the judge picked the third sample"
    assert best.decision == "revise"
    assert len(llm.calls) == calls_before + 1, "the samples were the vote's: only the judge ran"
    judge = llm.calls[-1]
    judge_tokens = sum(estimate_tokens(m.content) for m in judge.messages)
    assert best.calls == 4, "best-of-n is charged for the samples it needs, and its judge"
    assert best.input_tokens == vote.input_tokens + judge_tokens
    assert best.output_tokens > vote.output_tokens
    assert best.wall_s >= vote.wall_s
    assert best.reused_cost_usd == vote.cost_usd
    assert vote.cost_usd > 0
    assert best.spent_usd == pytest.approx(best.cost_usd - vote.cost_usd), "spent once"
    assert 0 < best.spent_usd < vote.cost_usd, "best-of-n itself spent only the judge's call"


async def test_a_debate_is_scored_on_its_final_output() -> None:
    runner, _ = runner_for({})
    debate = await runner.debate(CASE, PLANTED, "adversarial")
    assert debate.ok
    assert debate.flaws_found == ["f2"], "the moderator's synthesis names the stampede"
    assert debate.round_decisions == [debate.decision]
    assert debate.calls == 6, "five turns, then the independent judge"
    assert debate.input_tokens > 0


def test_the_calibration_sentence_weighs_needless_escalations_too() -> None:
    def verdicts(arm: str, escalated_right: bool) -> list[ArmResult]:
        common = {"arm": arm, "flaws_planted": 3, "input_tokens": 100}
        return [
            result(case_id="w", decision="accept", expected="reject", escalated=True, **common),
            result(
                case_id="r",
                decision="reject",
                expected="reject",
                escalated=escalated_right,
                **common,
            ),
        ]

    by_arm = {"single": score(verdicts("single", True)), "vote": score(verdicts("vote", False))}
    calibration = next(s for s in meaning(by_arm) if "disagreed" in s)
    assert calibration == (
        "- Of the verdicts that disagreed with the experts, `vote` sent 100% to human review,"
        " and 0% of those that agreed (needlessly)."
    )


def test_the_confidence_is_scored_for_correctness_and_its_threshold_reported(
    tmp_path: Path,
) -> None:
    common = {"arm": "adversarial", "flaws_planted": 3, "input_tokens": 100}
    results = [
        result(case_id="r1", decision="accept", expected="accept", confidence=0.9, **common),
        result(case_id="r2", decision="accept", expected="accept", confidence=0.5, **common),
        result(case_id="w1", decision="accept", expected="reject", confidence=0.4, **common),
        result(case_id="w2", decision="reject", expected="accept", confidence=0.7, **common),
        # No expected verdict: not a label.
        result(case_id="x", decision="accept", confidence=0.1, **common),
    ]
    s = score(results)
    # (0.1² + 0.5² + 0.4² + 0.7²) / 4
    assert s.brier == pytest.approx((0.01 + 0.25 + 0.16 + 0.49) / 4)
    # Each verdict alone in its bin: |1-0.9|, |1-0.5|, |0-0.4|, |0-0.7| averaged.
    assert s.ece == pytest.approx((0.1 + 0.5 + 0.4 + 0.7) / 4)
    # Right 0.9 beats both wrong, right 0.5 beats 0.4 only: 3 of 4 pairs.
    assert s.auroc == pytest.approx(0.75)
    # Both wrong verdicts (95 % of 2 is 2): past 0.7, halfway to 0.9; 0.5 goes needlessly.
    assert s.calibrated_threshold == pytest.approx(0.8)
    assert (s.wrong_escalated_at_threshold, s.right_escalated_at_threshold) == (1.0, 0.5)

    plan = EvalPlan(cases=[CASE], arms=["single", "adversarial"], out=tmp_path, controls=False)
    report = report_markdown(results, plan, "fake:fake-model", None)
    assert "## Confidence" in report
    assert "| adversarial | 0.227 | 0.425 | 0.75 | 0.80 | 100% | 50% |" in report
    assert "| single | n/a | n/a | n/a | n/a | n/a | n/a |" in report
