"""App Home: the reviews waiting for the viewer, recent debates with their feedback, spend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.messages.kit import MAX_VIEW_BLOCKS, Block, clip, divider, escape, header, sections


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
) -> dict[str, Any]:
    """App Home: reviews waiting for this user, recent debates in their channels with their
    feedback, spend, and how each protocol's verdicts were received."""
    blocks: list[Block] = [header("Reviews waiting for you")]
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
    return {"type": "home", "blocks": blocks[:MAX_VIEW_BLOCKS]}


def _home_line(item: HomeDebate) -> Block:
    where = f" in <#{item.channel_id}>" if item.channel_id else ""
    state = item.state
    if item.outcome:
        state = f"{item.outcome}, confidence {item.confidence or 0:.2f}"
    if item.positive or item.negative:
        state += f" \u00b7 :+1: {item.positive} :-1: {item.negative}"
    text = f"*#{item.debate_id}*{where} \u2014 {escape(clip(item.question, 300))}\n_{state}_"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}
