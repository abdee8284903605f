"""The confidence measured in code (issue 36): each component from scripted transcripts of every
protocol, the independent judges (blind, sides swapped, position bias when the swap flips a
decision, charged to the debate's budget), the unverified rule with no judge, and the logistic
combination: the documented cases, and monotone in each component."""

from __future__ import annotations

import math
import random
import re
from typing import Any

import pytest
from pydantic import SecretStr

from bot.intake.policy import SpecPolicy
from bot.providers import ProviderRegistry
from bot.settings import Settings
from engine.confidence import (
    DEFAULT_WEIGHTS,
    Component,
    ConfidenceComponents,
    ConfidenceWeights,
    IsotonicMap,
)
from engine.llm import LLMRequest
from engine.models import (
    ContextDocument,
    DebateFlag,
    DebateResult,
    DebateSpec,
    DebateStatus,
    ModelSettings,
    Participant,
    Role,
    Usage,
)
from engine.pricing import Pricing
from engine.providers.fake import FunctionLLM
from engine.runner import run_debate
from tests.helpers import DebateScript, judge_says, reply_for, shipped_prompts

FAKE = ModelSettings(provider="fake", model="fake-model")
OTHER = ModelSettings(provider="fake", model="other-family-model")
ADR = (
    "ADR-042: Redis cache-aside for pricing-service. Every key is written with a fixed TTL of"
    " 60 minutes. If Redis is unreachable, pricing-service returns HTTP 503 instead of querying"
    " Postgres directly."
)


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


async def run(spec: DebateSpec, llm: FunctionLLM) -> DebateResult:
    return await run_debate(spec, resolve_llm=lambda _m: llm, prompts=shipped_prompts())


def adversarial(**changes: Any) -> DebateSpec:
    values: dict[str, Any] = {
        "question": "Should we adopt ADR-042?",
        "context": [ContextDocument(title="ADR-042", text=ADR)],
        "default_model": FAKE,
    }
    values.update(changes)
    return DebateSpec.model_validate(values)


def judge_prompt(llm: FunctionLLM) -> str:
    [call] = [c for c in llm.calls if c.schema_name == "IndependentJudgment"]
    return call.messages[-1].content


def values(result: DebateResult) -> dict[Component, float | None]:
    assert result.verdict.components is not None
    return result.verdict.components.values


def notes(result: DebateResult) -> dict[Component, str]:
    assert result.verdict.components is not None
    return result.verdict.components.notes


# --- adversarial ------------------------------------------------------------------------------


async def test_adversarial_components_from_a_scripted_transcript() -> None:
    critic = reply_for(
        "critic",
        counter_arguments=["The TTL hides price changes.", "503 on outage.", "No owner."],
        evidence_cited=[
            "Every key is written with a fixed TTL of 60 minutes",
            "RFC 9999 section 4 forbids cache-aside for prices",
        ],
    )
    rebuttal = reply_for(
        "rebuttal",
        # Names R1.C2; the concession names nothing and answers one more; one stays open.
        rebuttals=["R1.C2: a fallback to Postgres answers the outage."],
        concessions=["The TTL is too long."],
    )
    moderator = reply_for("moderator", confidence_level="HIGH", decision="revise")
    script = DebateScript(
        critic=[critic],
        rebuttal=[rebuttal],
        moderator=[moderator],
        independent_judge=[judge_says("reject")],
    )
    llm = script.llm()

    result = await run(adversarial(), llm)

    assert values(result) == {
        Component.AGREEMENT: 1.0,
        Component.POSITION_BIAS: 0.0,
        Component.GROUNDING: 0.5,
        Component.UNANSWERED: pytest.approx(1 / 3),
        Component.OUTPUT_CHECKS: 0.0,
        Component.DECLARED: 1.0,
    }
    assert notes(result)[Component.UNANSWERED] == "1 of 3 objections unanswered"
    assert notes(result)[Component.GROUNDING] == "1 of 2 citations not found"
    # `reject` and `revise` both send the proposal back: the same decision for agreement.
    assert result.judgments[0].agrees
    # -3.2 + 3.0 + 2.2 x 0.5 - 1.2 / 3 + 0.4 = 0.9
    assert result.verdict.confidence == pytest.approx(sigmoid(0.9), abs=1e-4)


async def test_the_adversarial_judge_reads_the_record_blind_with_the_sides_swapped() -> None:
    moderator = reply_for("moderator", synthesis="MODERATOR-SYNTHESIS decides it")
    llm = DebateScript(moderator=[moderator]).llm()

    await run(adversarial(), llm)

    prompt = judge_prompt(llm)
    assert "MODERATOR-SYNTHESIS" not in prompt
    assert "proposer" not in prompt.lower()
    # Swapped: the side that spoke first (for the proposition) is Position B.
    assert "Position A: argues against the proposition" in prompt
    assert "Position B: argues for the proposition" in prompt
    assert "[Position B] ARGUMENT:" in prompt
    assert "[Position A] CRITIQUE:" in prompt
    assert "PROPOSITION:" in prompt


# --- position bias and the judges' models ---------------------------------------------------


async def test_a_judge_on_the_deciding_model_flipped_by_the_swap_sets_position_bias() -> None:
    moderator = reply_for("moderator", decision="accept")
    flipped = await run(
        adversarial(),
        DebateScript(moderator=[moderator], independent_judge=[judge_says("reject")]).llm(),
    )
    held = await run(
        adversarial(),
        DebateScript(moderator=[moderator], independent_judge=[judge_says("accept")]).llm(),
    )

    assert values(flipped)[Component.POSITION_BIAS] == 1.0
    assert values(flipped)[Component.AGREEMENT] == 0.0
    assert DebateFlag.POSITION_BIAS in flipped.flags
    assert notes(flipped)[Component.POSITION_BIAS] == (
        "swapping the sides flipped a judge's decision"
    )
    assert values(held)[Component.POSITION_BIAS] == 0.0
    assert DebateFlag.POSITION_BIAS not in held.flags
    assert DEFAULT_WEIGHTS.logit(held.verdict.components or ConfidenceComponents()) - (
        DEFAULT_WEIGHTS.logit(flipped.verdict.components or ConfidenceComponents())
    ) == pytest.approx(3.0 + 1.0)


async def test_a_judge_of_another_model_that_disagrees_is_no_position_bias() -> None:
    moderator = reply_for("moderator", decision="accept")
    script = DebateScript(moderator=[moderator], independent_judge=[judge_says("reject")])
    llm = script.llm()
    asked: list[ModelSettings] = []

    def resolve(settings: ModelSettings) -> FunctionLLM:
        asked.append(settings)
        return llm

    spec = adversarial(
        participants=[Participant(role=Role.INDEPENDENT_JUDGE, name="judge-1", model=OTHER)]
    )
    result = await run_debate(spec, resolve_llm=resolve, prompts=shipped_prompts())

    assert asked[-1] == OTHER
    assert result.transcript[-1].model == "other-family-model"
    assert [(j.same_model, j.agrees) for j in result.judgments] == [(False, False)]
    assert values(result)[Component.AGREEMENT] == 0.0
    assert values(result)[Component.POSITION_BIAS] is None


async def test_three_judges_give_the_share_that_reaches_the_decision() -> None:
    moderator = reply_for("moderator", decision="accept")
    judges = [judge_says("accept"), judge_says("reject"), judge_says("accept_with_conditions")]
    llm = DebateScript(moderator=[moderator], independent_judge=[*judges]).llm()

    result = await run(adversarial(judges=3), llm)

    assert [(j.judge, j.swapped) for j in result.judgments] == [
        ("judge-1", True),
        ("judge-2", False),
        ("judge-3", True),
    ]
    assert values(result)[Component.AGREEMENT] == pytest.approx(2 / 3)
    # judge-2 saw the sides as the debate had them and decided otherwise than judges 1 and 3,
    # who saw them swapped: the swap flipped it.
    assert values(result)[Component.POSITION_BIAS] == 1.0
    assert notes(result)[Component.AGREEMENT] == "judges agree 2 of 3"
    assert [t.speaker for t in result.transcript if t.role is Role.INDEPENDENT_JUDGE] == [
        "judge-1",
        "judge-2",
        "judge-3",
    ]


async def test_two_judges_of_another_model_in_both_orientations_measure_position_bias() -> None:
    moderator = reply_for("moderator", decision="accept")
    spec = adversarial(
        judges=2,
        participants=[
            Participant(role=Role.INDEPENDENT_JUDGE, name=f"judge-{n}", model=OTHER) for n in (1, 2)
        ],
    )

    async def judged(first: str, second: str) -> DebateResult:
        script = DebateScript(
            moderator=[moderator], independent_judge=[judge_says(first), judge_says(second)]
        )
        return await run(spec, script.llm())

    held = await judged("reject", "revise")
    flipped = await judged("accept", "reject")

    assert [j.same_model for j in held.judgments] == [False, False]
    assert values(held)[Component.AGREEMENT] == 0.0
    assert values(held)[Component.POSITION_BIAS] == 0.0, "both send it back, either way round"
    assert values(flipped)[Component.AGREEMENT] == 0.5
    assert values(flipped)[Component.POSITION_BIAS] == 1.0


def test_the_policy_gives_the_judge_the_other_family_when_its_key_is_set() -> None:
    keyed = Settings(
        provider="openai",
        openai_api_key=SecretStr("sk-real-looking-0123456789"),
        anthropic_api_key=SecretStr("sk-ant-real-looking-0123456789"),
        cross_family_moderator=False,
        judges=2,
    )
    spec = SpecPolicy(keyed, ProviderRegistry(keyed)).spec("Adopt it?")
    judges = [p for p in spec.participants if p.role is Role.INDEPENDENT_JUDGE]
    assert spec.judges == 2
    assert [j.name for j in judges] == ["judge-1", "judge-2"]
    assert {j.model.provider for j in judges} == {"anthropic"}
    anthropic_debaters = SpecPolicy(keyed, ProviderRegistry(keyed)).models("anthropic")["debaters"]
    assert {j.model.model for j in judges} == {anthropic_debaters.model}, "the debaters' tier"
    assert spec.participant_for(Role.MODERATOR).model.provider == "openai"

    alone = Settings(provider="openai", openai_api_key=SecretStr("sk-real-looking-0123456789"))
    spec = SpecPolicy(alone, ProviderRegistry(alone)).spec("Adopt it?", judges=0)
    assert spec.judges == 0
    assert not [p for p in spec.participants if p.role is Role.INDEPENDENT_JUDGE]
    spec = SpecPolicy(alone, ProviderRegistry(alone)).spec("Adopt it?", protocol="structured")
    [judge] = [p for p in spec.participants if p.role is Role.INDEPENDENT_JUDGE]
    assert judge.model == spec.default_model, "the debaters' own model"
    assert judge.model != spec.participant_for(Role.JUDGE).model


# --- stances ---------------------------------------------------------------------------------

STANCES = {"alice": "keep PostgreSQL", "bob": "move to DynamoDB"}


def stances_llm(scores: tuple[int, int], winner: str | None, independent: str) -> FunctionLLM:
    def reply(request: LLMRequest) -> dict[str, Any]:
        if request.schema_name == "StanceArgument":
            return {"argument": "Orders need transactions.", "key_points": ["ACID"]}
        if request.schema_name == "IndependentJudgment":
            return {"reasoning": "transactions decide it", "decision": independent}
        labels = ["Debater A", "Debater B"]
        return {
            "scores": [{"stance": la, "score": s} for la, s in zip(labels, scores, strict=True)],
            "verdict": "Keep the relational store.",
            "winner": winner,
            "reasoning": "The consistency argument stood.",
            "confidence_level": "MODERATE",
        }

    return FunctionLLM(reply)


def stances_spec() -> DebateSpec:
    return DebateSpec(
        question="Which database should the orders service use?",
        protocol="stances",
        max_rounds=1,
        default_model=FAKE,
        participants=[
            Participant(role=Role.DEBATER, name=n, stance=s, model=FAKE) for n, s in STANCES.items()
        ],
    )


async def test_stances_components_the_judges_lead_and_a_swap_that_flips() -> None:
    # Swapped, the second debater (bob, Debater B for the stances judge) is Position A.
    agreeing = await run(stances_spec(), stances_llm((4, 6), "Debater B", "Position A"))
    flipped = await run(stances_spec(), stances_llm((4, 6), "Debater B", "Position B"))

    assert values(agreeing)[Component.UNANSWERED] == pytest.approx(0.5)
    assert notes(agreeing)[Component.UNANSWERED] == "judge's lead 2 of 10 (scores 6 and 4)"
    assert values(agreeing)[Component.DECLARED] == 0.5
    assert [(j.decision, j.agrees) for j in agreeing.judgments] == [("bob", True)]
    assert values(agreeing)[Component.POSITION_BIAS] == 0.0
    assert [(j.decision, j.agrees) for j in flipped.judgments] == [("alice", False)]
    assert values(flipped)[Component.POSITION_BIAS] == 1.0
    assert DebateFlag.POSITION_BIAS in flipped.flags


async def test_a_stances_synthesis_is_judged_as_a_synthesis() -> None:
    result = await run(stances_spec(), stances_llm((7, 7), None, "synthesis"))

    assert values(result)[Component.UNANSWERED] == 1.0, "no lead at all"
    assert [(j.decision, j.agrees) for j in result.judgments] == [("synthesis", True)]


# --- consensus -------------------------------------------------------------------------------


def consensus_llm(votes: dict[str, str], independent: str) -> FunctionLLM:
    def reply(request: LLMRequest) -> dict[str, str]:
        prompt = request.messages[-1].content
        if request.schema_name == "IndependentJudgment":
            return {"reasoning": "the critique stands", "decision": independent}
        speaker = re.search(r'debater "([^"]+)"', prompt)
        assert speaker is not None
        name = speaker.group(1)
        return {"stance": "holds a position", "rationale": "reasons", "vote": votes[name]}

    return FunctionLLM(reply)


def consensus_spec(**options: Any) -> DebateSpec:
    return DebateSpec(
        question="Release version 4.2 on Friday?",
        protocol="consensus",
        max_rounds=1,
        default_model=FAKE,
        participants=[Participant(role=Role.DEBATER, name=n, model=FAKE) for n in "abc"],
        options=options,
    )


async def test_consensus_components_the_votes_not_behind_the_decision() -> None:
    llm = consensus_llm({"a": "release", "b": "revise", "c": "revise"}, "release")

    result = await run(consensus_spec(threshold=2), llm)

    assert result.report is not None
    assert result.report["decision"] == "revise"
    assert values(result)[Component.UNANSWERED] == pytest.approx(1 / 3)
    assert values(result)[Component.DECLARED] is None
    assert [(j.decision, j.agrees) for j in result.judgments] == [("release", False)]
    prompt = judge_prompt(llm)
    assert "vote" not in prompt.split("RECORD:")[1].split("- reasoning")[0].lower()
    assert "one of release, revise, escalate" in prompt


async def test_consensus_votes_of_one_meaning_agree() -> None:
    """A vote stands for a decision (`decisions`): two votes for accepting agree."""
    llm = consensus_llm({"a": "ship", "b": "ship", "c": "hold"}, "ship-it-now")
    spec = consensus_spec(
        votes=["ship", "ship-it-now", "hold"],
        decisions={"ship": "accept", "ship-it-now": "accept", "hold": "revise"},
    )

    result = await run(spec, llm)

    assert [(j.decision, j.agrees) for j in result.judgments] == [("ship-it-now", True)]


# --- panel -----------------------------------------------------------------------------------

SIMILAR = "Adopt the queue because retries become safe and ordered"
DIFFERENT = "Reject it: the team cannot operate another stateful system"


async def test_panel_components_convergence_and_the_chosen_answers_confidence() -> None:
    answers = {"ana": (SIMILAR, 0.9), "ben": (DIFFERENT, 0.4), "cy": (SIMILAR, 0.7)}

    def reply(request: LLMRequest) -> dict[str, Any]:
        if request.schema_name == "IndependentJudgment":
            return {"reasoning": "retries become safe", "decision": "accept_with_conditions"}
        name = re.search(r'panelist "([^"]+)"', request.messages[-1].content)
        assert name is not None
        text, confidence = answers[name.group(1)]
        decision = "reject" if text == DIFFERENT else "accept"
        return {"decision": decision, "answer": text, "confidence": confidence}

    llm = FunctionLLM(reply)
    spec = DebateSpec(
        question="Adopt a message queue for billing retries?",
        protocol="panel",
        max_rounds=1,
        default_model=FAKE,
        participants=[Participant(role=Role.DEBATER, name=n, model=FAKE) for n in answers],
    )

    result = await run(spec, llm)

    assert values(result)[Component.UNANSWERED] == pytest.approx(1 / 3)
    assert notes(result)[Component.UNANSWERED] == "1 of 3 panelists outside the chosen answer"
    assert values(result)[Component.DECLARED] == pytest.approx(0.8)
    assert result.judgments[0].agrees
    prompt = judge_prompt(llm)
    assert "0.90" not in prompt
    assert "ana" not in prompt
    assert SIMILAR in prompt


# --- structured ------------------------------------------------------------------------------


def structured_llm(trace: dict[str, str], independent: str) -> FunctionLLM:
    def argument(side: str, n: int) -> dict[str, str]:
        evidence = {
            ("PRO", 1): '"Every key is written with a fixed TTL of 60 minutes"',
            ("PRO", 2): '"pricing-service falls back to a local replica"',
        }.get((side, n), "the incident log of March")
        return {
            "id": f"{side}-{n}",
            "claim": f"{side} claim number {n} about the cache",
            "reasoning": f"Because the cache decides latency, reason {n} follows directly.",
            "evidence": evidence,
        }

    def reply(request: LLMRequest) -> Any:
        prompt = request.messages[1].content
        kind = request.schema_name
        if kind == "IndependentJudgment":
            return {"reasoning": "the TTL argument stands", "decision": independent}
        side = "PRO" if "the PRO side" in prompt or "judge the PRO arguments" in prompt else "CON"
        other = "CON" if side == "PRO" else "PRO"
        if kind == "Opening":
            return {"arguments": [argument(side, n) for n in (1, 2, 3)]}
        if kind == "CrossExamination":
            return {
                "responses": [
                    {
                        "target": f"{other}-{n}",
                        "response": "refute",
                        "explanation": f"{other}-{n} ignores the outage.",
                        "follow_up_question": "What happens on an outage?",
                    }
                    for n in (1, 2, 3)
                ]
            }
        if kind == "Closing":
            return {"concessions": [], "unrebutted": [f"{side}-1"], "final_position": "Adopt."}
        if kind == "SideJudgment":
            own = [f"{side}-{n}" for n in (1, 2, 3)]
            dims = {"logic": 7, "evidence": 6, "responsiveness": 6, "honesty": 8}
            return {
                "scores": {a: dims for a in own},
                "trace": {a: {"status": trace.get(a, "UPHELD"), "note": "n"} for a in own},
            }
        return {
            "decision": "accept_with_conditions",
            "confidence_level": "LOW",
            "fallacies": [],
            "unresolved_questions": [],
            "recommendation": "Adopt it with a fallback.",
        }

    return FunctionLLM(reply)


async def test_structured_components_the_trace_and_quoted_evidence() -> None:
    trace = {"CON-1": "UPHELD", "CON-2": "PARTIALLY_UPHELD", "CON-3": "REFUTED"}
    llm = structured_llm(trace, "accept")
    spec = DebateSpec(
        question="Should we adopt ADR-042?",
        protocol="structured",
        context=[ContextDocument(title="ADR-042", text=ADR)],
        default_model=FAKE,
    )

    result = await run(spec, llm)

    assert values(result)[Component.UNANSWERED] == pytest.approx(0.5)
    assert notes(result)[Component.UNANSWERED] == "1 of 3 objections unanswered, 1 partly"
    assert values(result)[Component.DECLARED] == 0.0
    # Two quoted pieces of evidence are checked (an unquoted fact is not): one is invented.
    assert [(c.quote, c.verified) for c in result.citations] == [
        ("Every key is written with a fixed TTL of 60 minutes", True),
        ("pricing-service falls back to a local replica", False),
    ]
    assert values(result)[Component.GROUNDING] == 0.5
    assert DebateFlag.FABRICATED_CITATION in result.flags
    assert result.judgments[0].agrees
    prompt = judge_prompt(llm)
    assert "PRO-1" not in prompt
    assert "CON-2" not in prompt
    assert "A-1:" in prompt
    assert "B-1:" in prompt
    assert "Openings:" in prompt


# --- no judge, a refused judge, a failed judge ---------------------------------------------


async def test_with_no_judge_an_unclear_result_escalates_as_unverified() -> None:
    llm = DebateScript().llm()

    result = await run(adversarial(judges=0), llm)

    assert not any(call.schema_name == "IndependentJudgment" for call in llm.calls)
    assert values(result)[Component.AGREEMENT] is None
    assert DebateFlag.CONFIDENCE_UNVERIFIED in result.flags
    assert result.verdict.components is not None
    assert result.verdict.components.line().startswith(
        "confidence unverified: judges are set to 0: --judges or DEBATEBOT_JUDGES"
    )
    [unverified] = [r for r in result.verdict.escalation_reasons if "unverified" in r]
    assert "not clear and grounded: nothing cited to check" in unverified
    assert result.verdict.escalate


async def test_with_no_judge_a_clear_grounded_result_stands() -> None:
    critic = reply_for("critic", evidence_cited=["Every key is written with a fixed TTL"])
    moderator = reply_for("moderator", confidence_level="HIGH", decision="revise")
    llm = DebateScript(critic=[critic], moderator=[moderator]).llm()

    result = await run(adversarial(judges=0), llm)

    assert DebateFlag.CONFIDENCE_UNVERIFIED in result.flags
    # -3.2 + 3.0 x 0.5 (no judge) + 2.2 (every citation found) + 0.4 (HIGH) = 0.9
    assert result.verdict.confidence == pytest.approx(sigmoid(0.9), abs=1e-4)
    assert not result.verdict.escalate, result.verdict.escalation_reasons


async def test_a_judge_the_budget_cannot_afford_leaves_the_confidence_unverified() -> None:
    # Each call costs $0.01 and could cost about $0.09 (its prompt and schema at one token a
    # byte, and max_tokens): the five debate calls fit $0.14; the judge's worst case, its prompt
    # holding the whole record, does not fit beside the $0.05 they spent.
    pricing = Pricing(input_per_mtok=10.0, output_per_mtok=0.0)
    llm = DebateScript().llm(pricing=pricing, usage=Usage(input_tokens=1_000, output_tokens=50))

    result = await run(adversarial(budget_usd=0.14), llm)

    assert result.status is DebateStatus.COMPLETE
    assert len(llm.calls) == 5
    assert result.cost_usd <= 0.14
    [check] = result.judgments
    assert check.decision is None
    assert (check.error or "").startswith("the budget could not afford it (")
    assert values(result)[Component.AGREEMENT] is None
    assert notes(result)[Component.AGREEMENT].startswith(
        "confidence unverified: the budget could not afford it"
    )
    assert any("the confidence is unverified" in r for r in result.verdict.escalation_reasons)


async def test_a_judge_that_fails_leaves_the_confidence_unverified_and_the_debate_complete() -> (
    None
):
    llm = DebateScript(independent_judge=["not a judgment"]).llm()

    result = await run(adversarial(), llm)

    assert result.status is DebateStatus.COMPLETE
    assert (result.judgments[0].error or "").startswith("the judge failed:")
    assert DebateFlag.CONFIDENCE_UNVERIFIED in result.flags


async def test_a_resumed_debate_replays_its_judge() -> None:
    first = await run(adversarial(), DebateScript().llm())
    llm = DebateScript().llm()

    again = await run_debate(
        adversarial(),
        resolve_llm=lambda _m: llm,
        prompts=shipped_prompts(),
        recorded=first.transcript,
    )

    assert llm.calls == []
    assert again.verdict == first.verdict
    assert again.judgments == first.judgments


# --- the logistic combination ----------------------------------------------------------------


def components(**given: float | None) -> ConfidenceComponents:
    return ConfidenceComponents(values={Component(name): value for name, value in given.items()})


@pytest.mark.parametrize(
    ("case", "given", "expected"),
    [
        ("everything good", {"agreement": 1, "grounding": 1, "unanswered": 0, "declared": 1}, 0.92),
        (
            "the judge disagrees",
            {"agreement": 0, "grounding": 1, "unanswered": 0, "declared": 1},
            0.35,
        ),
        (
            "every citation invented",
            {"agreement": 1, "grounding": 0, "unanswered": 0, "declared": 1},
            0.55,
        ),
        ("nothing cited", {"agreement": 1, "unanswered": 0, "declared": 1}, 0.79),
        (
            "one output finding",
            {
                "agreement": 1,
                "grounding": 1,
                "unanswered": 0,
                "declared": 1,
                "output_checks": 1 / 3,
            },
            0.50,
        ),
    ],
)
def test_the_default_weights_score_the_documented_cases(
    case: str, given: dict[str, float], expected: float
) -> None:
    full = {"position_bias": 0.0, "output_checks": 0.0, **given}
    assert DEFAULT_WEIGHTS.score(components(**full)) == pytest.approx(expected, abs=0.005), case


MORE_IS_BETTER = (Component.AGREEMENT, Component.GROUNDING, Component.DECLARED)
MORE_IS_WORSE = (Component.POSITION_BIAS, Component.UNANSWERED, Component.OUTPUT_CHECKS)


@pytest.mark.parametrize(
    "weights",
    [
        DEFAULT_WEIGHTS,
        DEFAULT_WEIGHTS.model_copy(
            update={
                "version": "with-isotonic",
                "isotonic": IsotonicMap(xs=[0.0, 0.3, 0.6, 1.0], ys=[0.05, 0.2, 0.2, 0.9]),
            }
        ),
    ],
    ids=["logistic", "with an isotonic map"],
)
def test_the_confidence_is_monotone_in_each_component(weights: ConfidenceWeights) -> None:
    """Seeded and bounded: more agreement, grounding or declared level never lowers the
    confidence; more position bias, unanswered objections or findings never raise it, whatever
    the other components are (measured or not)."""
    rng = random.Random(36)
    for _ in range(2_000):
        base = {c: (None if rng.random() < 0.2 else rng.random()) for c in Component}
        component = rng.choice(list(Component))
        low, high = sorted((rng.random(), rng.random()))
        lower = weights.score(ConfidenceComponents(values={**base, component: low}))
        higher = weights.score(ConfidenceComponents(values={**base, component: high}))
        if component in MORE_IS_BETTER:
            assert higher >= lower, (component, base, low, high)
        else:
            assert component in MORE_IS_WORSE
            assert higher <= lower, (component, base, low, high)
