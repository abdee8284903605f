"""Every message and view the bot builds, at its size limits, passes `slack_sdk.models`
validation (each block is one slack_sdk knows, and its own checks accept it) and Slack's limits.

The records are filled to their schema's bounds (longest strings, longest lists), with text that
grows when escaped, so every builder is run where splitting matters most."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.messages import helptext, home_tab, kit, modals, posts, transcript
from bot.slack import assistant
from bot.store.channel_tables import ChannelSettings
from bot.store.channels import ChannelDefaults
from engine.llm import output_schema
from engine.models import (
    AdversarialRound,
    ConfidenceAdjustment,
    ConfidenceLevel,
    CriticTurn,
    DebateResult,
    DebateSpec,
    DebateStatus,
    Decision,
    ModeratorTurn,
    ProposerTurn,
    RebuttalTurn,
    Role,
    Usage,
    Verdict,
)
from engine.providers.fake import text_for_pattern
from engine.rounds import (
    Argument,
    Closing,
    ConsensusEntry,
    ConsensusPhase,
    Dimensions,
    FallacyFinding,
    PanelAnswer,
    PanelRound,
    PanelSpoken,
    Response,
    ScoredJudgment,
    StanceArgument,
    StanceSpoken,
    StancesRound,
    StructuredPhase,
    TraceEntry,
)

T = TypeVar("T", bound=BaseModel)
GROWING = "a&b<c>d "
"""Text that grows fivefold where it is escaped, and splits at its spaces."""


def filled(node: dict[str, Any], index: int = 0) -> Any:
    """The biggest value `node` allows: strings at their longest, lists at their longest."""
    if "enum" in node:
        return node["enum"][index % len(node["enum"])]
    if "anyOf" in node:
        return filled(next(o for o in node["anyOf"] if o.get("type") != "null"), index)
    kind = node.get("type")
    if kind == "object":
        return {k: filled(v, index) for k, v in node.get("properties", {}).items()}
    if kind == "array":
        return [filled(node["items"], i) for i in range(min(int(node.get("maxItems", 8)), 12))]
    if kind == "string":
        if "pattern" in node:
            return text_for_pattern(node["pattern"], index)
        return (GROWING * 400)[: int(node.get("maxLength", 600))].strip() or "x"
    if kind == "integer":
        return int(node.get("maximum", 10))
    if kind == "number":
        return float(node.get("maximum", 1.0))
    return True


def biggest(model: type[T]) -> T:
    return model.model_validate(filled(output_schema(model)))


def valid(message: kit.Message) -> None:
    """Slack's limits, and slack_sdk's own model of every block."""
    assert 0 < len(message.blocks) <= kit.MAX_BLOCKS
    assert 0 < len(message.text) <= kit.MAX_FALLBACK_CHARS
    assert kit.block_chars(message.blocks) <= kit.MAX_MESSAGE_CHARS
    for raw in message.blocks:
        parsed = Block.parse(raw)
        assert parsed is not None, f"slack_sdk does not know the block {raw['type']}"
        parsed.validate_json()
        if raw["type"] == "section":
            assert 0 < len(raw["text"]["text"]) <= kit.MAX_SECTION_CHARS


def valid_view(view: dict[str, Any]) -> None:
    parsed = View(**view)
    parsed.validate_json()
    assert len(view["blocks"]) <= kit.MAX_VIEW_BLOCKS
    for raw in view["blocks"]:
        block = Block.parse(raw)
        assert block is not None
        block.validate_json()


def result(protocol: str = "adversarial", **report: Any) -> DebateResult:
    long = (GROWING * 300)[:2_000]
    verdict = Verdict(
        status=DebateStatus.COMPLETE,
        decision=Decision.REVISE,
        synthesis=long,
        confidence=0.42,
        level=ConfidenceLevel.LOW,
        confidence_method=[ConfidenceAdjustment(reason=long[:300], delta=-0.1)] * 12,
        unresolved_points=[long[:600]] * 8,
        uncertainties=[long[:600]] * 8,
        escalate=True,
        escalation_reasons=[long[:600]] * 6,
    )
    now = datetime.now(UTC)
    return DebateResult(
        spec=DebateSpec(question=long[:4_000], protocol=protocol),
        verdict=verdict,
        report=report or None,
        started_at=now,
        finished_at=now,
    )


def adversarial_round() -> AdversarialRound:
    return AdversarialRound(
        round=3,
        proposer=biggest(ProposerTurn),
        critic=biggest(CriticTurn),
        critic_attempts=2,
        rebuttal=biggest(RebuttalTurn),
        moderator=biggest(ModeratorTurn),
        usage_by_role={Role.CRITIC: Usage(input_tokens=10, output_tokens=10)},
        cost_usd=1.5,
    )


def records() -> dict[str, Any]:
    text = (GROWING * 300)[:2_000]
    names = [f"debater-{n:02d}" for n in range(26)]
    args = {
        side: [biggest(Argument).model_copy(update={"id": f"{side}-{n}"}) for n in range(1, 6)]
        for side in ("PRO", "CON")
    }
    ids = [a.id for side in args.values() for a in side]
    return {
        "adversarial": adversarial_round(),
        "stances": StancesRound(
            round=6,
            max_rounds=6,
            arguments=[
                StanceSpoken(speaker=n, stance=text[:600], argument=biggest(StanceArgument))
                for n in names
            ],
        ),
        "consensus": ConsensusPhase(
            round=6,
            max_rounds=6,
            phase="consensus",
            contributions=[
                ConsensusEntry(
                    speaker=n,
                    round=6,
                    phase="consensus",
                    stance=text[:600],
                    rationale=text,
                    vote="release",
                )
                for n in names[:12]
            ],
            votes=[f"option-{n}" for n in range(8)],
            tally={f"option-{n}": 1 for n in range(8)},
            threshold=7,
            debaters=12,
            reached=None,
        ),
        "structured-openings": StructuredPhase(
            phase="openings", speakers={"PRO": "pro", "CON": "con"}, openings=args
        ),
        "structured-answers": StructuredPhase(
            phase="cross_examination",
            speakers={"PRO": "pro", "CON": "con"},
            answers={side: [biggest(Response)] * 5 for side in ("PRO", "CON")},
        ),
        "structured-closings": StructuredPhase(
            phase="closings",
            speakers={"PRO": "pro", "CON": "con"},
            closings={
                side: Closing(
                    concessions=["x" * 600] * 5,
                    unrebutted=["y" * 600] * 5,
                    final_position="z" * 2_000,
                )
                for side in ("PRO", "CON")
            },
        ),
        "structured-judgment": StructuredPhase(
            phase="judgment",
            speakers={"PRO": "pro", "CON": "con"},
            judgment=ScoredJudgment(
                decision=Decision.REJECT,
                confidence_level=ConfidenceLevel.LOW,
                scores={a: biggest(Dimensions) for a in ids},
                weighted={a: 10.0 for a in ids},
                totals={"PRO": 10.0, "CON": 10.0},
                leading_side=None,
                fallacies=[biggest(FallacyFinding).model_copy(update={"argument": a}) for a in ids],
                trace={a: biggest(TraceEntry) for a in ids},
                unresolved_questions=[text[:600]] * 8,
                recommendation=text,
            ),
        ),
        "panel": PanelRound(
            round=5,
            max_rounds=5,
            answers=[
                PanelSpoken(speaker=n, answer=biggest(PanelAnswer), changed=True)
                for n in names[:12]
            ],
            clusters=[[n] for n in names[:12]],
            convergence=1 / 12,
            threshold=0.8,
            early_stop=False,
        ),
    }


@pytest.mark.parametrize("name", list(records()))
def test_round_messages_at_their_limits(name: str) -> None:
    messages = transcript.round_messages(records()[name], max_rounds=3)
    for message in messages:
        valid(message)


@pytest.mark.parametrize(
    "report",
    [
        {},
        {"lines": ["x" * 500] * 9},
        {"side_totals": {"PRO": 1.0, "CON": 2.0}, "fallacies": [{}] * 10, "trace": [{}] * 10},
        {
            "routing": "debate",
            "aggregation": "judge",
            "rounds": [
                {"round": 1, "clusters": [[f"p{n}"] for n in range(12)], "convergence": 0.1}
            ],
            "aggregation_fallback": "majority (the judge's output was unparseable)" * 20,
        },
        {"judgment": {"verdict": "x"}, "winner": "A" * 60, "synthesis": {"k": "v" * 3_000}},
    ],
)
def test_verdict_messages_at_their_limits(report: dict[str, Any]) -> None:
    protocols = {"lines": "consensus", "side_totals": "structured", "routing": "panel"}
    protocol = next((p for key, p in protocols.items() if key in report), "stances")
    outcome = result(protocol if report else "adversarial", **report)
    messages = posts.verdict_messages(
        outcome, debate_id=7, seal="f" * 64, outcome=transcript.outcome_sections(outcome)
    )
    for message in messages:
        valid(message)
    assert messages[-1].blocks[-1]["type"] == "context_actions", "feedback under the verdict"


def test_every_other_message_at_its_limits() -> None:
    long = (GROWING * 6_000)[:40_000]
    outcome = result(
        report={
            "triage": {
                "debated": False,
                "reason": long[:300],
                "task_type": "contract",
                "downside": 0.1,
                "rationale": long[:600],
            }
        }
    )
    parent = posts.parent_message(
        debate_id=1,
        question=long,
        requested_by="U1",
        protocol="panel",
        max_rounds=5,
        status="complete",
        detail=long[:500],
        verdict=outcome.verdict,
        cost_usd=12.5,
    )
    built = [
        parent,
        *posts.material_messages("The full question", long),
        posts.answer_message(outcome, debate_id=1),
        posts.answer_message(outcome, debate_id=1, taken=long[:500]),
        posts.escalation_message(
            escalation_id=1,
            debate_id=1,
            reasons=[long[:600]] * 6,
            reviewers=["U1", "S2"] * 10,
            confidence=0.1,
            question=long,
            synthesis=long[:2_000],
        ),
        posts.escalation_decided_message(
            debate_id=1,
            reasons=[long[:600]] * 6,
            decision="approved",
            reviewer="U1",
            note=long[:3_000],
            decided_at="2026-11-22 10:00 UTC",
        ),
        posts.notice(long[:2_900]),
        posts.direct(parent, channel_id="C1", reason=long[:300]),
        posts.reposted_parent(parent, old_link="https://example.slack.com/archives/C1/p1"),
    ]
    for message in built:
        valid(message)


def test_every_view_at_its_limits() -> None:
    settings = ChannelSettings(
        channel_id="C1",
        reviewers=["U1"] * 50,
        owners=["U2"] * 50,
        budget_usd=99.0,
        adr_watch=True,
        triage=True,
        route=True,
    )
    item = home_tab.HomeDebate(
        debate_id=1,
        channel_id="C1",
        question="q" * 4_000,
        state="finished",
        outcome="COMPLETE",
        confidence=0.5,
        positive=3,
        negative=4,
    )
    views = [
        modals.debate_modal(
            channel_id="C1", protocols=["adversarial"] * 5, protocol="adversarial", rounds=3
        ),
        modals.config_modal(
            settings=settings,
            defaults=ChannelDefaults(rounds=1, threshold=0.6),
            protocols=["adversarial", "panel"],
        ),
        modals.review_note_modal(escalation_id=1, decision="approved"),
        home_tab.home_view(
            pending=[item] * 30,
            recent=[item] * 30,
            spend_mine=1.0,
            spend_all=2.0,
            month="November 2026",
            stats=[home_tab.HomeStats(protocol="panel", debates=9, positive=1, negative=2)] * 5,
        ),
    ]
    for view in views:
        valid_view(view)


def test_the_assistant_texts_fit() -> None:
    for prompt in assistant.SUGGESTED_PROMPTS:
        assert len(prompt["title"]) <= 75
    assert len(helptext.protocol_advice()) <= kit.MAX_FALLBACK_CHARS
