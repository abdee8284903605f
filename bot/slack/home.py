"""App Home: the reviews the viewer may decide, recent debates in their channels with their
feedback, this month's spend, how each protocol's verdicts were received, and for workspace
admins the confidence's calibration and the weights they may adopt."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.jobs.sampling import calibration_report, review_sampler, sampling_note
from bot.messages import home_tab
from bot.settings import Settings
from bot.slack.reviews import Reviews
from bot.slackweb.people import SlackDirectory
from bot.store import operations, overview, reviews, weights
from bot.store.calibration import calibration_inputs, store_proposal
from bot.store.debate_tables import Debate
from bot.store.errors import WeightsNotFoundError
from bot.store.scoped import WorkspaceStore
from engine.calibration.report import CalibrationReport
from engine.calibration.sampling import ReviewSampler


@dataclass(kw_only=True, eq=False)
class AppHome(WorkspaceStore):
    """Builds a viewer's App Home from the store and Slack's directory."""

    directory: SlackDirectory
    reviews: Reviews
    settings: Settings
    sampler: ReviewSampler = field(init=False)

    def __post_init__(self) -> None:
        self.sampler = review_sampler(self.settings)

    async def adopt_weights(self, *, user: str, version: str) -> str:
        """Adopt the weights `version` when `user` is a workspace admin (Slack's directory
        says so, whatever the click carries); what happened, to show on their App Home."""
        if not await self.directory.is_admin(user):
            return "Only workspace admins can adopt confidence weights; nothing was changed."
        try:
            adoption = await self.db(lambda s: weights.adopt_weights(s, version=version, by=user))
        except WeightsNotFoundError as error:
            return f"Nothing was changed: {error}"
        return f"Adopted confidence weights {adoption.version}: new verdicts are scored with them."

    async def _calibration(self) -> CalibrationReport:
        """The calibration report, computed off the store's threads (a fit is CPU work), with
        the weights it proposes stored so the Adopt button finds them."""
        found, current = await self.db(calibration_inputs)
        report = await asyncio.to_thread(
            calibration_report, found, current=current, settings=self.settings
        )
        await self.db(lambda s: store_proposal(s, report=report))
        return report

    async def view(self, *, user: str, notice: str | None = None) -> dict[str, Any]:
        channels = await self.directory.channels_of(user)
        now = datetime.now(UTC)
        month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        open_items = await self.db(reviews.open_escalations)
        pending: list[home_tab.HomeDebate] = []
        for _escalation, debate in open_items:
            deciders = await self.reviews.deciders(debate)
            if deciders and await self.directory.is_one_of(user, deciders):
                pending.append(_home_item(debate))
        recent = await self.db(lambda s: overview.recent_debates(s, channel_ids=channels))
        ids = [d.id for d in recent if d.id is not None]
        votes = await self.db(lambda s: reviews.feedback_counts(s, debate_ids=ids))
        stats = await self.db(overview.protocol_stats)
        mine = await self.db(
            lambda s: operations.spend_since(s, since=month_start, requested_by=user)
        )
        everyone = await self.db(lambda s: operations.spend_since(s, since=month_start))
        calibration = await self._calibration() if await self.directory.is_admin(user) else None
        return home_tab.home_view(
            pending=pending,
            recent=[_home_item(d, votes.get(d.id or 0)) for d in recent],
            spend_mine=mine,
            spend_all=everyone,
            month=now.strftime("%B %Y"),
            stats=[
                home_tab.HomeStats(
                    protocol=s.protocol, debates=s.debates, positive=s.positive, negative=s.negative
                )
                for s in stats
            ],
            calibration=calibration,
            sampling=self._sampling(calibration),
            notice=notice,
        )

    def _sampling(self, report: CalibrationReport | None) -> str | None:
        """App Home's word on a raised sampled share (admins: it rests on the report's count of
        sampled reviews under the weights in use, the count the worker samples by)."""
        basis = report.overall.basis if report is not None else None
        return sampling_note(self.sampler, basis.sampled) if basis is not None else None


def _home_item(debate: Debate, votes: dict[str, int] | None = None) -> home_tab.HomeDebate:
    return home_tab.HomeDebate(
        debate_id=debate.id or 0,
        channel_id=debate.channel_id,
        question=debate.question,
        state=debate.state,
        outcome=debate.outcome,
        confidence=debate.confidence,
        positive=(votes or {}).get("positive", 0),
        negative=(votes or {}).get("negative", 0),
    )
