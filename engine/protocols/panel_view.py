"""The `panel` protocol as the application knows it (`DEFINITION`): its rounds, options, flags,
labels, live-plan tasks, how a round and the aggregation read, and what its confidence
components mean."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.models import DebateResult, DebateSpec, Role, RoundRecordBase, TurnRecord
from engine.protocols.definition import (
    Confidence,
    DefaultDebater,
    Flags,
    Labels,
    PlanTasks,
    ProtocolDefinition,
    ProtocolView,
    TurnKey,
    expect,
)
from engine.protocols.panel import PanelOptions, PanelProtocol
from engine.rounds import PanelRound
from engine.views import (
    Block,
    Icon,
    Inline,
    Line,
    RoundView,
    code,
    emphasis,
    line,
    section,
    strong,
)

NAME = "panel"
CHANGED: dict[bool | None, tuple[Inline, ...]] = {
    None: (),
    True: (" \u00b7 ", emphasis("changed")),
    False: (" \u00b7 ", emphasis("kept")),
}


def _groups(clusters: Sequence[Sequence[str]]) -> str:
    return " \u00b7 ".join("[" + ", ".join(names) + "]" for names in clusters)


class PanelView(ProtocolView):
    """A round: every panelist's answer, the clusters and the convergence; the outcome: the
    aggregation, or the fast model's answer when it answered alone."""

    def round(self, record: RoundRecordBase, max_rounds: int) -> RoundView:
        played = expect(record, PanelRound, NAME)
        body: list[Block] = []
        for spoken in played.answers:
            a = spoken.answer
            body.append(
                section(
                    line(
                        strong(spoken.speaker),
                        " \u2014 ",
                        code(a.decision.value),
                        f", confidence {a.confidence:.2f}",
                        *CHANGED[spoken.changed],
                    ),
                    line(a.answer),
                )
            )
        lines = [
            line(strong("Clusters:"), " ", _groups(played.clusters)),
            line(
                strong("Convergence"),
                f" {played.convergence:.2f} (stops at {played.threshold:.2f})",
            ),
        ]
        if played.early_stop:
            lines.append(line(Icon.FINISHED, " The panel converged; no more rounds."))
        body.append(section(*lines))
        return RoundView(f"Round {played.round} of {played.max_rounds}", tuple(body))

    def outcome(self, result: DebateResult) -> tuple[Block, ...]:
        report: dict[str, Any] = result.report or {}
        if not report:
            return ()
        if report.get("routing") == "single_agent":
            router = report.get("router") or {}
            return (
                section(
                    line(
                        strong("Panel:"),
                        " answered by the fast model alone (routing ",
                        code("single_agent"),
                        f", confidence {float(router.get('confidence', 0)):.2f}); no panel was"
                        " convened.",
                    )
                ),
            )
        rounds = report.get("rounds") or []
        first: list[Inline] = [
            strong("Panel:"),
            " aggregation ",
            code(str(report.get("aggregation"))),
        ]
        lines: list[Line] = []
        if rounds:
            last = rounds[-1]
            first.append(
                f" \u00b7 {len(rounds)} round(s) \u00b7 final convergence {last['convergence']:.2f}"
            )
            lines.append(line(strong("Clusters:"), " ", _groups(last["clusters"])))
        if report.get("aggregation_fallback"):
            lines.append(line(emphasis(f"Fell back to {report['aggregation_fallback']}")))
        return (section(line(*first), *lines),)


class PanelPlan(PlanTasks):
    """A router first when asked; then each round, every panelist; a judge when it aggregates."""

    def title(self, spec: DebateSpec, key: TurnKey) -> str:
        number, role, speaker, _phase, _attempt = key
        if role is not Role.DEBATER:
            return super().title(spec, key)
        doing = "answers on its own" if number <= 1 else "revises after the peers' critique"
        return f"Round {number}: {speaker} {doing}"

    def summary(self, spec: DebateSpec, turn: TurnRecord) -> str:
        p = turn.parsed
        if turn.role is Role.JUDGE:
            return f"judge: picks answer {p.get('chosen')}"
        if "confidence" in p:
            changed = ", changed" if p.get("changed_from_previous") else ""
            speaker = turn.speaker or turn.role.value
            return (
                f"{speaker}: {p.get('decision')}, confidence {float(p['confidence']):.2f}{changed}"
            )
        return super().summary(spec, turn)


DEFINITION = ProtocolDefinition(
    name=NAME,
    engine=PanelProtocol,
    default_rounds=3,
    max_rounds=5,
    labels=Labels(
        display_name="Panel",
        description="independent answers from several perspectives, peer critique, measured"
        " convergence.",
        advice="For open questions; add `--route` to let a fast model answer the easy ones.",
    ),
    view=PanelView(),
    plan=PanelPlan(),
    confidence=Confidence(
        unanswered="the panelists outside the chosen answer",
        declared="the chosen answers' mean stated confidence (the router's, when it answered"
        " alone)",
    ),
    options=PanelOptions,
    flags=Flags(takes_route=True),
    default_debaters=(
        DefaultDebater("architect", hint="Judge it as the system's architect."),
        DefaultDebater("security", hint="Judge it as the security reviewer."),
        DefaultDebater("operator", hint="Judge it as the on-call engineer who runs it."),
    ),
    calls_per_run=10,
)
