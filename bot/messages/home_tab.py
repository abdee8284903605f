"""App Home: the reviews waiting for the viewer, recent debates with their feedback, spend, and
for admins the confidence's calibration with a button to adopt proposed weights."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.messages.action_ids import ACTION_ADOPT_WEIGHTS
from bot.messages.kit import (
    MAX_VIEW_BLOCKS,
    Block,
    clip,
    context,
    divider,
    escape,
    header,
    plain,
    sections,
)
from engine.calibration.fitting import Proposal, Refused
from engine.calibration.guarantee import Guaranteed, describe
from engine.calibration.report import CalibrationReport, Figures


@dataclass(frozen=True)
class HomeDebate:
    debate_id: int
    channel_id: str | None
    question: str
    state: str
    outcome: str | None
    confidence: float | None
    positive: int = 0
    negative: int = 0


@dataclass(frozen=True)
class HomeStats:
    protocol: str
    debates: int
    positive: int
    negative: int


def home_view(
    *,
    pending: Sequence[HomeDebate],
    recent: Sequence[HomeDebate],
    spend_mine: float,
    spend_all: float,
    month: str,
    stats: Sequence[HomeStats] = (),
    calibration: CalibrationReport | None = None,
    sampling: str | None = None,
    notice: str | None = None,
) -> dict[str, Any]:
    """App Home: reviews waiting for this user, recent debates in their channels with their
    feedback, spend, how each protocol's verdicts were received, and (given to admins only)
    the `calibration` report, with `sampling` saying when the sampled share is raised;
    `notice` says what the viewer's last click did."""
    blocks: list[Block] = [context(escape(notice))] if notice else []
    blocks += [header("Reviews waiting for you")]
    blocks += [_home_line(item) for item in pending[:20]] or sections("_Nothing waiting._")
    blocks += [divider(), header("Recent debates in your channels")]
    blocks += [_home_line(item) for item in recent[:20]] or sections("_No debates yet._")
    blocks += [
        divider(),
        header(f"Spend in {month}"),
        *sections(f"Debates you started: *${spend_mine:.4f}*\nWhole workspace: *${spend_all:.4f}*"),
    ]
    if stats:
        lines = [
            f"`{s.protocol}` \u00b7 {s.debates} debate(s) \u00b7 :+1: {s.positive}"
            f" \u00b7 :-1: {s.negative}"
            for s in stats
        ]
        blocks += [divider(), header("Verdict feedback by protocol"), *sections("\n".join(lines))]
    if calibration is not None:
        blocks += [divider(), *calibration_blocks(calibration)]
        blocks += [context(escape(sampling))] if sampling else []
    return {"type": "home", "blocks": blocks[:MAX_VIEW_BLOCKS]}


def _figures_line(figures: Figures) -> str:
    if not figures.labels:
        return f"*{escape(figures.group)}*: no labels yet"
    parts = [
        f"*{escape(figures.group)}*: {figures.labels} label(s), {figures.wrong} wrong,"
        f" {figures.sampled} sampled",
        f"Brier {figures.brier:.3f}" if figures.brier is not None else "Brier n/a",
        f"ECE {figures.ece:.3f}" if figures.ece is not None else "ECE n/a",
        f"AUROC {figures.auroc:.2f}" if figures.auroc is not None else "AUROC n/a",
    ]
    for outcome in (figures.guaranteed or {}).values():
        parts.append(
            f"guaranteed threshold ({describe(outcome.reading, outcome.alpha)}):"
            + (
                f" {outcome.threshold:.3f}, escalates {outcome.escalated_share:.0%}"
                if isinstance(outcome, Guaranteed)
                else " none yet"
                + (f", about {outcome.more_labels} more labels" if outcome.more_labels else "")
            )
        )
    advice = figures.advice
    if advice is not None:
        counts = advice.counts
        parts.append(
            f"threshold {advice.threshold:.3f}"
            + ("" if advice.reached else " (target not reachable)")
            + f" escalates {counts.wrong_escalated} of {counts.wrong} wrong and"
            f" {counts.right_escalated} of {counts.right} right needlessly"
        )
    return " \u00b7 ".join(parts)


def calibration_blocks(report: CalibrationReport) -> list[Block]:
    """The calibration section admins see: the figures per task type, the weights in use, and
    the proposed weights with a button that adopts them (the server checks the clicker is an
    admin)."""
    lines = [_figures_line(f) for f in [report.overall, *report.by_task_type]]
    lines.append(_figures_line(report.feedback) + " _(weaker labels, not fitted)_")
    blocks: list[Block] = [
        header("Confidence calibration (admins)"),
        *sections("\n".join(lines)),
        context(
            f"Weights in use: `{escape(report.current.version)}`. Labels: Approve and Reject on"
            " review requests, imported eval runs, and (apart) feedback. `debatebot calibration`"
            " prints the same with the reliability diagram."
        ),
    ]
    fit = report.fit
    if isinstance(fit, Proposal):
        version = fit.weights.version
        blocks += sections(
            f"*Proposed weights* `{escape(version)}` ({escape(fit.method)}): held-out Brier"
            f" {fit.brier_fit:.4f} against {fit.brier_current:.4f} of the weights in use, on"
            f" {fit.held_out} label(s)."
            + (
                f" There, catching {report.target:.0%} of the wrong verdicts escalates"
                f" {fit.needless_fit:.0%} of the right ones needlessly, against"
                f" {fit.needless_current:.0%} with the weights in use."
                if fit.needless_fit is not None and fit.needless_current is not None
                else ""
            )
        )
        blocks.append(
            {
                "type": "actions",
                "block_id": "calibration",
                "elements": [
                    {
                        "type": "button",
                        "text": plain(clip(f"Adopt {version}", 75)),
                        "action_id": ACTION_ADOPT_WEIGHTS,
                        "value": version,
                        "style": "primary",
                        "confirm": {
                            "title": plain("Adopt these weights?"),
                            "text": plain(
                                f"New verdicts will be scored with {version}; each verdict"
                                " records the version that scored it."
                            ),
                            "confirm": plain("Adopt"),
                            "deny": plain("Cancel"),
                        },
                    }
                ],
            }
        )
    elif isinstance(fit, Refused):
        blocks.append(context(f"No weights proposed: {escape(fit.reason)}"))
    else:
        blocks.append(context(f"No fit yet: {escape(fit.reason)}"))
    return blocks


def _home_line(item: HomeDebate) -> Block:
    where = f" in <#{item.channel_id}>" if item.channel_id else ""
    state = item.state
    if item.outcome:
        state = f"{item.outcome}, confidence {item.confidence or 0:.2f}"
    if item.positive or item.negative:
        state += f" \u00b7 :+1: {item.positive} :-1: {item.negative}"
    text = f"*#{item.debate_id}*{where} \u2014 {escape(clip(item.question, 300))}\n_{state}_"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}
