"""A sixth protocol, declared inside this test and registered by a fixture, touching no product
file: `debatebot run` runs it, its rounds and outcome render as valid Block Kit, the live plan
follows it, and `debatebot eval` scores it like the shipped ones. Nothing in `bot/` had to learn
its name."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from bot.cli import main
from bot.messages import kit, owed, posts, transcript
from bot.messages.plan import Plan
from engine.errors import LLMError
from engine.events import DebateEvent, RoundFinished, TurnFinished, TurnStarted
from engine.evidence import (
    DECISION_GROUPS,
    BlindView,
    Entry,
    IndependentJudgment,
    ProtocolEvidence,
    share_note,
)
from engine.ledger import BudgetExhausted, TurnLedger
from engine.models import (
    DebateResult,
    DebateSpec,
    DebateStatus,
    Decision,
    Role,
    RoundRecordBase,
    ShortText,
    TurnRecord,
    utcnow,
)
from engine.prompts import PromptLibrary
from engine.protocols import PROTOCOLS
from engine.protocols.base import (
    Asker,
    Ending,
    common_verdict,
    finish,
    named_debaters,
    no_verdict,
    options_for,
)
from engine.protocols.definition import (
    Confidence,
    DefaultDebater,
    Labels,
    PlanTasks,
    ProtocolDefinition,
    ProtocolView,
    TurnKey,
    expect,
)
from engine.protocols.outputs import Outputs
from engine.providers.fake import SchemaFillingLLM
from engine.runner import run_debate
from engine.views import Block, Bullets, Icon, RoundView, Table, code, line, section, strong
from tests.helpers import REVIEW_CASES, shipped_prompts
from tests.unit.test_block_kit import valid
from tests.unit.test_live_plan import sdk_valid

TOY = "toy"
HOSTILE = "<!channel> & <https://evil.example|click>"


class ToyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    loud: bool = False


class ToyTurn(BaseModel):
    claim: ShortText
    points: list[ShortText] = Field(min_length=1, max_length=3)
    decision: Decision


class ToyRound(RoundRecordBase):
    kind: Literal["toy"] = "toy"
    round: int
    said: dict[str, ToyTurn]

    @property
    def slot(self) -> str:
        return str(self.round)


OUTPUTS = Outputs.of(TOY, ToyTurn, IndependentJudgment)


class ToyProtocol:
    """Each debater claims and decides every round; the last round's majority decides."""

    def validate(self, spec: DebateSpec) -> None:
        options_for(ToyOptions, spec)
        named_debaters(spec)

    async def run(
        self, spec: DebateSpec, *, ledger: TurnLedger, prompts: PromptLibrary
    ) -> DebateResult:
        started_at = utcnow()
        asker = Asker(spec=spec, ledger=ledger, prompts=prompts, outputs=OUTPUTS)
        ending = Ending()
        said: dict[str, ToyTurn] = {}
        try:
            for number in range(1, spec.max_rounds + 1):
                for debater in spec.debaters():
                    said[debater.name or ""] = await asker.ask(
                        "single/review.md",
                        round=number,
                        role=Role.DEBATER,
                        speaker=debater.name or "",
                        step="claiming",
                        output_type=ToyTurn,
                    )
                await ledger.emit(RoundFinished(record=ToyRound(round=number, said=dict(said))))
        except (BudgetExhausted, LLMError) as stop:
            ending.record(stop)
        report = {"said": {n: t.model_dump(mode="json") for n, t in said.items()}}
        if not said:
            verdict = no_verdict(spec, ending)
        else:
            decisions = [t.decision for t in said.values()]
            top = max(set(decisions), key=decisions.count)
            verdict = common_verdict(
                spec, ending, decision=top, synthesis=f"{HOSTILE} the toys say {top.value}"
            )
        return finish(spec, ledger, ending, verdict, started_at=started_at, report=report)

    def evidence(self, result: DebateResult) -> ProtocolEvidence:
        said = (result.report or {}).get("said") or {}
        if not said:
            return ProtocolEvidence(reached=False)
        names = list(said)
        behind = sum(1 for t in said.values() if t["decision"] == result.verdict.decision.value)
        return ProtocolEvidence(
            reached=True,
            unanswered=share_note(len(said) - behind, len(said), "toys not behind it"),
            view=BlindView(
                positions=tuple(f"toy {n}" for n in range(len(names))),
                entries=tuple(Entry(i, 1, said[name]["claim"]) for i, name in enumerate(names)),
                choices=tuple(d.value for d in Decision),
                explain="one of accept, accept_with_conditions, revise, reject, escalate",
                decided=result.verdict.decision.value,
                decided_by=result.spec.default_model,
                outputs=OUTPUTS,
                round=result.spec.max_rounds,
                groups=dict(DECISION_GROUPS),
            ),
        )


class ToyView(ProtocolView):
    def round(self, record: RoundRecordBase, max_rounds: int) -> RoundView:
        played = expect(record, ToyRound, TOY)
        body: list[Block] = [
            section(
                line(strong(name, Icon.SPEECH), " decides ", code(turn.decision.value)),
                line(turn.claim),
                Bullets(tuple(turn.points)),
            )
            for name, turn in played.said.items()
        ]
        rows = tuple((name, turn.decision.value) for name, turn in played.said.items())
        body.append(section(line(strong("Decisions")), Table(("toy", "decision"), rows)))
        return RoundView(f"Toy round {played.round} of {max_rounds}", tuple(body))

    def outcome(self, result: DebateResult) -> tuple[Block, ...]:
        said = (result.report or {}).get("said") or {}
        return (section(line(strong("Toy outcome:"), f" {len(said)} toys spoke; {HOSTILE}")),)


class ToyPlan(PlanTasks):
    def title(self, spec: DebateSpec, key: TurnKey) -> str:
        number, role, speaker, _phase, _attempt = key
        if role is Role.DEBATER:
            return f"Toy round {number}: {speaker} plays"
        return super().title(spec, key)

    def summary(self, spec: DebateSpec, turn: TurnRecord) -> str:
        if turn.role is Role.DEBATER:
            return f"{turn.speaker} decides {turn.parsed.get('decision')}"
        return super().summary(spec, turn)


DEFINITION = ProtocolDefinition(
    name=TOY,
    engine=ToyProtocol,
    default_rounds=2,
    max_rounds=2,
    labels=Labels("Toy", "toys claim and decide.", "For testing the registry."),
    view=ToyView(),
    plan=ToyPlan(),
    confidence=Confidence("the toys not behind the decision", "none"),
    options=ToyOptions,
    default_debaters=(DefaultDebater("teddy"), DefaultDebater("robot")),
    calls_per_run=4,
)


@pytest.fixture(autouse=True)
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The toy in the registry, for this test only; the CLI's settings on a fresh database."""
    for name in [n for n in os.environ if n.startswith("DEBATEBOT_")]:
        if not name.startswith("DEBATEBOT_TEST_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DEBATEBOT_REVIEW_SAMPLE_RATE", "0")
    monkeypatch.setenv("DEBATEBOT_REVIEW_SAMPLE_MAX", "0")
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.sqlite3'}")
    monkeypatch.setitem(PROTOCOLS, TOY, DEFINITION)
    monkeypatch.chdir(tmp_path)
    assert main(["db", "upgrade"]) == 0


def toy_spec() -> DebateSpec:
    from tests.unit.test_fake_model import debaters

    return DebateSpec(
        question=f"Should the toys decide? {HOSTILE}",
        protocol=TOY,
        max_rounds=2,
        participants=debaters("teddy", "robot"),
    )


def test_the_cli_runs_the_toy_protocol(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "record.json"
    code = main(
        [
            "run",
            "Should the toys decide?",
            "--provider",
            "fake",
            "--protocol",
            TOY,
            "--option",
            "loud=true",
            "--json",
            str(out),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "STATUS      COMPLETE" in printed.out
    assert "0 of 2 toys not behind it" in printed.out
    assert "JUDGE       judge-1" in printed.out
    # `run --json` writes the debate's export; its `result` part is the whole DebateResult.
    result = DebateResult.model_validate(json.loads(out.read_text())["result"])
    assert result.spec.protocol == TOY
    assert result.spec.max_rounds == DEFINITION.default_rounds
    assert [d.name for d in result.spec.debaters()] == ["teddy", "robot"]
    assert result.spec.options == {"loud": True}
    spoken = [t for t in result.transcript if t.role is Role.DEBATER]
    assert [(t.round, t.speaker) for t in spoken] == [
        (1, "teddy"),
        (1, "robot"),
        (2, "teddy"),
        (2, "robot"),
    ]


def test_a_bad_toy_option_is_refused_by_its_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "Q?", "--provider", "fake", "--protocol", TOY, "--option", "volume=11"])
    assert code == 1
    assert "the toy protocol has no option volume; its options are loud" in capsys.readouterr().err


async def test_the_toy_renders_in_slack_and_the_live_plan_follows_it() -> None:
    spec = toy_spec()
    plan = Plan(debate_id=9, spec=spec)
    messages: list[Any] = []
    progress: list[tuple[str, str]] = []
    versions: list[list[dict[str, Any]]] = []

    async def sink(event: DebateEvent) -> None:
        if isinstance(event, TurnStarted):
            progress.append(transcript.progress(event, spec))
            if plan.started(event):
                versions.append(plan.live().chunks)
        elif isinstance(event, TurnFinished):
            if plan.finished(event.turn):
                versions.append(plan.live().chunks)
        elif isinstance(event, RoundFinished):
            messages.extend(owed.round_finished(event, spec))

    model = SchemaFillingLLM(seed=4)
    result = await run_debate(
        spec, resolve_llm=lambda _: model, prompts=shipped_prompts(), sink=sink
    )
    assert result.status is DebateStatus.COMPLETE, result.error

    # Two rounds, one message each, valid Block Kit with every model text escaped.
    assert [m.key for m in messages] == ["round:1", "round:2"]
    for draft in messages:
        message = kit.Message(draft.text, draft.blocks)
        valid(message)
        assert message.blocks[0]["text"]["text"].startswith("Toy round")
        assert "<!channel>" not in json.dumps(message.blocks)
    verdict = posts.verdict_messages(
        result, debate_id=9, outcome=transcript.outcome_sections(result)
    )
    for message in verdict:
        valid(message)
    text = json.dumps([m.blocks for m in verdict])
    assert "*Toy outcome:* 2 toys spoke; &lt;!channel&gt; &amp; &lt;https://evil.example" in text
    assert "<!channel>" not in text

    # The live plan: the protocol's titles and summaries, announced a round at a time.
    assert progress[0] == ("running", "teddy is claiming \u00b7 round 1 of 2")
    final = Plan.of_result(9, result).closed(result)
    titles = [c["title"] for c in final.chunks if c["type"] == "task_update"]
    assert titles[:4] == [
        "Toy round 1: teddy plays",
        "Toy round 1: robot plays",
        "Toy round 2: teddy plays",
        "Toy round 2: robot plays",
    ]
    outputs = [c.get("output", "") for c in final.chunks if c["type"] == "task_update"]
    assert all(o.startswith(("teddy decides ", "robot decides ")) for o in outputs[:4])
    assert [c["id"] for c in final.chunks[1:]] == [*plan.tasks, "checks"]
    assert any(c["status"] == "pending" for c in versions[0][1:]), "a round is announced"
    for version in [*versions, final.chunks]:
        sdk_valid(version)


def test_eval_runs_the_toy_arm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(REVIEW_CASES.read_text().splitlines()[0] + "\n")
    out = tmp_path / "eval"
    code = main(
        [
            "eval",
            "--cases",
            str(cases),
            "--provider",
            "fake",
            "--arms",
            f"single,{TOY}",
            "--no-controls",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "1 case(s) x 2 arm(s) on fake:fake-model" in err
    assert "about 5 model calls" in err, "the toy's calls_per_run and the single arm's one"
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["arm"] for r in results} == {"single", TOY}
    assert all(r["ok"] for r in results), [r.get("error") for r in results]
    assert f"| {TOY} |" in (out / "report.md").read_text()
