"""The delivery loop: sends every message debates owe (the outbox) until Slack takes it.

Rows are claimed with an expiring claim, so any number of processes can run this loop on one
database, and a process that dies mid-send is taken over after `claim_s`. The ts of every copy
is stored, and a post whose answer was lost is looked for in Slack before it is sent again
(bot.jobs.resend_check): a message is posted once. Each lane of due messages runs as a task of
its own, with its workspace's bot token:

- posts: a debate's posts in order, and a channel's own (the digest) (`posts`), on thread
  moves when a parent or thread is lost (`threads`), its receipt files among them (`files`);
- updates: the parent's live status, a decided review (`updates`), the thread's agent session
  (`sessions`), so a review request never waits on a status update;
- the plan: a debate's live plan streamed into its thread (`stream`, `open_stream`).

Every lane reads Slack's failures by one ladder, retrying through outages, and records what
became of each message (`outcomes`); a refused bot token holds delivery instead (`holds`).
"""

from __future__ import annotations

import asyncio
import logging
import random

from sqlalchemy import Engine
from sqlmodel import Session

from bot.jobs.delivery.config import DeliveryConfig
from bot.jobs.delivery.files import ReceiptFiles
from bot.jobs.delivery.holds import TokenHolds
from bot.jobs.delivery.open_stream import OpenStream
from bot.jobs.delivery.outcomes import Outcomes
from bot.jobs.delivery.posts import PostLanes
from bot.jobs.delivery.sessions import AgentSessions
from bot.jobs.delivery.stream import PlanStream
from bot.jobs.delivery.threads import ThreadMoves
from bot.jobs.delivery.updates import UpdateLane
from bot.jobs.pause import OutagePause, idle
from bot.jobs.resend_check import SendOnce
from bot.metrics import Metrics
from bot.slackweb.acting import acting_for
from bot.slackweb.errors import TokenRefusedError
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import SlackPoster
from bot.slackweb.sharing import FileShares
from bot.slackweb.token import TokenGate
from bot.store import outbox_claims, refusals
from bot.store.errors import DatabaseUnavailableError
from bot.store.outbox_claims import Lane
from bot.store.outbox_tables import OutboxAction
from bot.store.tenancy import PENDING_TEAM, Workspace

__all__ = ["DeliveryConfig", "OutboxDelivery"]

log = logging.getLogger(__name__)


class OutboxDelivery:
    """Finds the lanes with a due message and runs each (its module says how it delivers)."""

    def __init__(
        self,
        *,
        engine: Engine,
        poster: SlackPoster,
        directory: SlackDirectory,
        owner: str,
        config: DeliveryConfig | None = None,
        rng: random.Random | None = None,
        gate: TokenGate | None = None,
        metrics: Metrics | None = None,
        shares: FileShares | None = None,
    ) -> None:
        self.engine = engine
        self.poster = poster
        self.directory = directory
        self.owner = owner
        self.config = config or DeliveryConfig()
        self._wake = asyncio.Event()
        self._lanes: dict[Lane, asyncio.Task[None]] = {}
        self.outcomes = Outcomes(
            engine=engine,
            directory=directory,
            owner=owner,
            config=self.config,
            rng=rng or random.Random(),
            wake=self.wake,
        )
        self.holds = TokenHolds(
            outcomes=self.outcomes, directory=directory, gate=gate or TokenGate()
        )
        threads = ThreadMoves(outcomes=self.outcomes, poster=poster)
        once = SendOnce(engine=engine, poster=poster, directory=directory, owner=owner)
        self.posts = PostLanes(
            outcomes=self.outcomes,
            directory=directory,
            once=once,
            threads=threads,
            files=ReceiptFiles(
                outcomes=self.outcomes, poster=poster, shares=shares or FileShares.of(poster)
            ),
        )
        self.updates = UpdateLane(
            outcomes=self.outcomes,
            poster=poster,
            threads=threads,
            sessions=AgentSessions(outcomes=self.outcomes, poster=poster, metrics=metrics),
        )
        self.stream = PlanStream(
            outcomes=self.outcomes,
            poster=poster,
            directory=directory,
            threads=threads,
            open=OpenStream(outcomes=self.outcomes, poster=poster, threads=threads),
        )

    @property
    def gate(self) -> TokenGate:
        """Whether Slack takes the bot token (one workspace's token from the environment)."""
        return self.holds.gate

    def wake(self) -> None:
        """Look for due messages now rather than at the next poll (rows were just written)."""
        self._wake.set()

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set; a database outage pauses delivery instead of ending it."""
        log.info("delivering owed Slack messages as %s", self.owner)
        outage = OutagePause("delivery")
        try:
            while not stop.is_set():
                try:
                    await self.start_due()
                except DatabaseUnavailableError as error:
                    await outage.failed(error, stop, log)
                    continue
                outage.succeeded(log)
                await idle(stop, self._wake, self.config.poll_s)
        finally:
            await self.cancel_lanes()

    async def start_due(self) -> int:
        """Start a task for every lane with a due message that has none yet; returns how many.
        None while Slack refuses the bot token (until a probe finds it taken again)."""
        self._lanes = {lane: task for lane, task in self._lanes.items() if not task.done()}
        if not await self.holds.may_deliver():
            return 0
        horizon = asyncio.get_running_loop().time() - self.config.status_interval_s
        self.updates.pace.forget_before(horizon)
        self.stream.pace.forget_before(horizon)
        started = 0
        lanes, self.outcomes.probation = await self.outcomes.db(self._due)
        for lane in lanes:
            if lane not in self._lanes:
                self._lanes[lane] = asyncio.create_task(self._run_lane(lane))
                started += 1
        return started

    def _due(self, session: Session) -> tuple[list[Lane], list[refusals.BotState]]:
        """The due lanes, and (with OAuth installs) the bots on probation."""
        lanes = outbox_claims.due_lanes(session)
        return lanes, refusals.on_probation(session) if self.config.per_workspace else []

    async def drain(self) -> None:
        """Deliver everything due now and wait for it (`worker --exit-when-idle` does, to end)."""
        while await self.start_due() or any(not t.done() for t in self._lanes.values()):
            await asyncio.gather(*self._lanes.values(), return_exceptions=True)

    async def cancel_lanes(self) -> None:
        tasks = list(self._lanes.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, *self.holds.cancel_probes(), return_exceptions=True)
        self._lanes.clear()

    async def _run_lane(self, lane: Lane) -> None:
        # Every Slack call of the lane is made with its workspace's bot token (OAuth installs;
        # the one workspace's client has its own token and ignores this).
        workspace = Workspace(
            team_id=lane.team_id or PENDING_TEAM, enterprise_id=lane.enterprise_id
        )
        try:
            with acting_for(workspace):
                await self._deliver_lane(lane)
        except DatabaseUnavailableError as error:
            where = (
                f"channel {lane.channel}" if lane.debate_id is None else f"debate {lane.debate_id}"
            )
            log.error("delivery for %s paused: %s", where, error)
        except TokenRefusedError as error:
            await self.holds.refused(lane, workspace, error)

    async def _deliver_lane(self, lane: Lane) -> None:
        if lane.debate_id is None:
            while await self.posts.next_channel_post(lane.channel, lane.team_id):
                pass
        elif lane.action == OutboxAction.POST:
            while await self.posts.next_post(lane.debate_id):
                pass
        elif lane.action == OutboxAction.STREAM:
            while await self.stream.next_stream(lane.debate_id):
                pass
        else:
            await self.updates.send_due(lane.debate_id)
