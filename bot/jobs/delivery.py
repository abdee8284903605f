"""The delivery loop: sends every message debates owe (the outbox) until Slack takes it.

- Posts of one debate go out in order; updates (the parent's live status, a decided review)
  travel in a lane of their own, so a review request never waits on a status update.
- 5xx, timeouts, connection errors and 429 are retried with exponential backoff (honouring
  `Retry-After`) until the message's deadline, hours away. When Slack answers again after
  failures, every waiting message is made due at once instead of sleeping out its backoff.
- A message refused for its size is re-split smaller once; anything else Slack refuses is
  given up with a short notice in the thread, and the next message goes on.
- A refused bot token (`token_revoked`, `invalid_auth`, `missing_scope`, …; see
  `bot.slackweb.token`) is no message's fault: delivery pauses with every message still owed
  and held ones handed back, `auth.test` is asked now and then, and once Slack takes the token
  everything owed is sent, the debates owing a review request first. With OAuth installs
  (`per_workspace`) only that workspace's delivery pauses: the refusal is marked in the store
  (bot.store.refusals), so no replica claims its debates or sends what it is owed, and one
  replica at a time asks `auth.test` with its token, less and less often, until Slack takes
  it (for a `missing_scope`: grants the scope) or the app is installed there again. A refusal
  right after a probe took the token, before anything was delivered there, waits on from the
  wait it reached, with no second ERROR. Only the refused lane's messages are handed back: the
  workspace's other lanes may have theirs at Slack.
- A thread that cannot be reached (`not_in_channel`, `channel_not_found`, `is_archived`) halts
  its debate (the worker stops at the next turn), tells the requester by DM, and sends the review
  request by DM to the reviewers, else the requester, else the workspace admins. A deleted
  parent (or thread root) is posted again as a new parent that links the old thread; so is a
  thread Slack stopped threading (a reply it stored outside the thread is deleted, and nothing
  more is posted at the top level).
- Rows are claimed with an expiring claim, so any number of processes can run this loop on one
  database, and a process that dies mid-send is taken over after `claim_s`. The ts of every
  copy is stored, and a post whose answer was lost is looked for in Slack before it is sent
  again (bot.jobs.resend_check): a message is posted once.
- A debate's plan is streamed into its thread in a lane of its own: started once the parent is
  there, each newer version appended as what changed, stopped by the final version. While it
  streams, the parent's live status is not sent (the summary at the end is). A stream Slack
  will not start falls back to that status; one that cannot be continued (Slack closed it, it
  was deleted, a method was refused) becomes a normal message with the same content.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from bot.jobs.pause import OutagePause, idle
from bot.jobs.resend_check import SendOnce
from bot.messages import kit, owed, plan, posts
from bot.messages.owed import ASSISTANT_STATUS
from bot.slackweb.acting import acting_for
from bot.slackweb.errors import PostError, TokenRefusedError, UnthreadedError
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import SLACK_FAILURES, Posted, SlackPoster
from bot.slackweb.token import TokenGate, workspace_token_fix
from bot.store import outbox, refusals
from bot.store.db import in_session
from bot.store.debate_tables import Debate
from bot.store.errors import DatabaseUnavailableError
from bot.store.outbox import PARENT, PARENT_UPDATE, SHOWN_IN_STREAM, ClaimedStream, Draft, Lane
from bot.store.outbox_tables import (
    Outbox,
    OutboxAction,
    OutboxFallback,
    OutboxState,
    OutboxTarget,
    StreamState,
)
from bot.store.tenancy import EVERY_WORKSPACE, PENDING_TEAM, Workspace
from engine.models import DebateSpec

log = logging.getLogger(__name__)
R = TypeVar("R")

UNREACHABLE = frozenset({"not_in_channel", "channel_not_found", "is_archived"})
THREAD_GONE = frozenset({"thread_not_found", "message_not_found", "invalid_thread_ts"})
TOO_BIG = frozenset({"msg_too_long", "msg_blocks_too_long", "invalid_blocks"})
MAX_REPOSTS = 3
STREAM_CLOSED = frozenset({"message_not_in_streaming_state", "stopped_by_user"})
"""chat.appendStream and chat.stopStream on a stream that no longer takes chunks: "The message
is not in the streaming state" (stopped, or past the few minutes Slack keeps a stream open),
or someone pressed its stop. The message is still there, and can be changed as a message."""
STREAM_GONE = frozenset({"message_not_found"})
"""chat.appendStream and chat.stopStream: the streamed message is gone (deleted)."""
STILL_STREAMING = frozenset({"streaming_state_conflict"})
"""chat.update on a message that is still streaming."""
METHOD_ABSENT = frozenset({"unknown_method"})
"""Slack's answer to a method it does not have (an older workspace, a stand-in without
streaming): no later debate of this process asks for a stream again."""
PEOPLE = ("U", "W")
"""The ids a stream's recipient may have: a person (`U…`, or `W…` in an organization)."""


@dataclass
class DeliveryConfig:
    poll_s: float = 1.0
    claim_s: float = 30.0
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    status_interval_s: float = 2.0
    """Updates of one debate go at most this often: a status per turn is coalesced to the
    newest, and the channel's write budget (one a second) stays free for the rounds."""
    stream_interval_s: float = 1.0
    """A debate's stream is written at most this often: the plan's versions in between are
    coalesced into one append, within the channel's write budget."""
    per_workspace: bool = False
    """OAuth installs: a refused token holds only its workspace's messages (each has its own
    token); with one workspace's token from the environment, it pauses all delivery."""
    token_probe_s: float = 2.0
    token_probe_max_s: float = 15.0
    """While Slack refuses the bot token (with OAuth installs, a workspace's), `auth.test` is
    asked after `token_probe_s`, then twice as long each time up to `token_probe_max_s`."""


class OutboxDelivery:
    """Sends due outbox rows through the poster, lane by lane, with the rules above."""

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
    ) -> None:
        self.engine = engine
        self.poster = poster
        self.directory = directory
        self.owner = owner
        self.config = config or DeliveryConfig()
        self._rng = rng or random.Random()
        self._wake = asyncio.Event()
        self._lanes: dict[Lane, asyncio.Task[None]] = {}
        self._failing = False
        self._updated_at: dict[int, float] = {}
        self._streamed_at: dict[int, float] = {}
        self._no_streaming: str | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._moving = asyncio.Lock()
        self.gate = gate or TokenGate()
        self.once = SendOnce(engine=engine, poster=poster, directory=directory, owner=owner)
        self._probe_at = 0.0
        self._probe_wait = self.config.token_probe_s
        self._probe_backoff = refusals.Backoff(
            first_s=self.config.token_probe_s, max_s=self.config.token_probe_max_s
        )
        self._probes: dict[str, asyncio.Task[None]] = {}
        self._probes_looked_at = -math.inf
        self._probation: list[refusals.BotState] = []
        """The bots a probe took with nothing delivered since (`refusals.on_probation`), as of
        the last look for due lanes: a delivery to one of their workspaces proves it."""

    async def _db(self, work: Callable[[Session], R]) -> R:
        return await in_session(self.engine, work, workspace=EVERY_WORKSPACE)

    def wake(self) -> None:
        """Look for due messages now rather than at the next poll (rows were just written)."""
        self._wake.set()

    # --- the loop ----------------------------------------------------------------------------

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
        if self.config.per_workspace:
            await self._probe_refused()
        elif self.gate.refused and not await self._token_taken():
            return 0
        horizon = asyncio.get_running_loop().time() - self.config.status_interval_s
        self._updated_at = {d: at for d, at in self._updated_at.items() if at > horizon}
        self._streamed_at = {d: at for d, at in self._streamed_at.items() if at > horizon}
        started = 0
        lanes, self._probation = await self._db(self._due)
        for lane in lanes:
            if lane not in self._lanes:
                self._lanes[lane] = asyncio.create_task(self._run_lane(lane))
                started += 1
        return started

    def _due(self, session: Session) -> tuple[list[Lane], list[refusals.BotState]]:
        """The due lanes, and (with OAuth installs) the bots on probation."""
        lanes = outbox.due_lanes(session)
        return lanes, refusals.on_probation(session) if self.config.per_workspace else []

    async def _token_taken(self) -> bool:
        """Whether Slack takes the bot token again, asked at most every so often."""
        loop = asyncio.get_running_loop()
        if loop.time() < self._probe_at:
            return False
        try:
            refused = await self.directory.check_token()
        except PostError as error:
            # Slack did not answer: no news about the token; ask again later.
            log.warning("cannot ask Slack about the bot token yet: %s", error)
            refused = self.gate.refused_error()
        if refused is not None:
            self.gate.refuse(refused)
            self._probe_at = loop.time() + self._probe_wait
            self._probe_wait = min(self._probe_wait * 2, self.config.token_probe_max_s)
            return False
        self.gate.accept()
        self._probe_wait = self.config.token_probe_s
        await self._db(outbox.pull_in_retries)
        return True

    async def _probe_refused(self) -> None:
        """Start asking Slack about each workspace token it refuses whose probe is due, in the
        background (the store hands each due probe to one replica); looked for at most every
        half `token_probe_s`."""
        now = asyncio.get_running_loop().time()
        if now < self._probes_looked_at + self.config.token_probe_s / 2:
            return
        self._probes_looked_at = now
        self._probes = {bot: task for bot, task in self._probes.items() if not task.done()}
        due = await self._db(lambda s: refusals.claim_probes(s, backoff=self._probe_backoff))
        for bot in due:
            if bot.installation not in self._probes:
                self._probes[bot.installation] = asyncio.create_task(self._probe(bot))

    async def _probe(self, bot: refusals.BotState) -> None:
        """Ask `auth.test` with the bot's token (for a `missing_scope`, whether it now has the
        scope): taken, its mark is cleared (every replica then claims its debates and sends what
        it is owed); refused, the code is kept up to date."""
        where = bot.installation
        refusal = bot.refusal
        scope = refusal.scope if refusal is not None and refusal.code == "missing_scope" else None
        try:
            with acting_for(bot.acting_as):
                refused = await self.directory.check_token(scope=scope)
        except TokenRefusedError as error:
            refused = error  # refused before Slack was asked (its renewal was refused)
        except PostError as error:
            log.warning("cannot ask Slack about the bot token of %s yet: %s", where, error)
            return
        try:
            if refused is not None:
                await self._note_refused(bot.acting_as, refused)
                return
            if await self._db(lambda s: refusals.accept(s, installation=where)):
                log.warning(
                    "Slack takes the bot token of %s again: delivering what it is owed, and"
                    " claiming its debates",
                    where,
                )
        except DatabaseUnavailableError as error:
            log.error("the bot token of %s was asked about, but not noted: %s", where, error)
            return
        self.wake()

    async def drain(self) -> None:
        """Deliver everything due now and wait for it (`worker --exit-when-idle` does, to end)."""
        while await self.start_due() or any(not t.done() for t in self._lanes.values()):
            await asyncio.gather(*self._lanes.values(), return_exceptions=True)

    async def cancel_lanes(self) -> None:
        tasks = [*self._lanes.values(), *self._probes.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._lanes.clear()
        self._probes.clear()

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
            if self.config.per_workspace:
                await self._hold(lane, workspace, error)
                return
            self.gate.refuse(error)
            self._probe_at = asyncio.get_running_loop().time() + self._probe_wait
            await self._db(lambda s: outbox.release_lane(s, owner=self.owner, lane=lane))

    async def _hold(self, lane: Lane, workspace: Workspace, error: TokenRefusedError) -> None:
        """One workspace's token is refused: marked in the store for every replica (its debates
        are not claimed, none of its lanes is due), and what this lane holds handed back with no
        attempt counted (the workspace's other lanes hand back theirs as they meet the refusal,
        or record what Slack took). With no bot stored for it (uninstalled: an uninstall drops
        what the workspace is owed, bot.slack.installs), or none noted (the database did not
        answer), the claimed message waits out its claim."""
        try:
            noted = await self._note_refused(workspace, error)
        except DatabaseUnavailableError as failure:
            log.error("delivery to workspace %s held, not noted: %s", workspace.team_id, failure)
            return
        if noted is None:
            log.warning("delivery to workspace %s held: %s", workspace.team_id, error)
            return
        fix = workspace_token_fix(error.code, error.needed)
        if noted == refusals.Noted.NEW:
            log.error(
                "Slack refused the bot token of workspace %s (%s): what it is owed is held (none"
                " is given up) and none of its debates is claimed until the token works; to fix"
                " it, %s",
                workspace.team_id,
                error.code,
                fix,
            )
        elif noted == refusals.Noted.AGAIN:
            log.warning(
                "Slack refused the bot token of workspace %s again (%s) though auth.test took"
                " it: held again, asked less often; to fix it, %s",
                workspace.team_id,
                error.code,
                fix,
            )
        with contextlib.suppress(DatabaseUnavailableError):  # else they lapse in `claim_s`
            await self._db(lambda s: outbox.release_lane(s, owner=self.owner, lane=lane))

    async def _note_refused(
        self, workspace: Workspace, error: TokenRefusedError
    ) -> refusals.Noted | None:
        """Mark in the store that Slack refuses the token `workspace` acts with (`refuse`)."""
        return await self._db(
            lambda s: refusals.refuse(
                s,
                workspace=workspace,
                code=error.code,
                scope=error.needed,
                backoff=self._probe_backoff,
            )
        )

    async def _deliver_lane(self, lane: Lane) -> None:
        if lane.debate_id is None:
            while await self._next_channel_post(lane.channel, lane.team_id):
                pass
        elif lane.action == OutboxAction.POST:
            while await self._next_post(lane.debate_id):
                pass
        elif lane.action == OutboxAction.STREAM:
            while await self._next_stream(lane.debate_id):
                pass
        else:
            await self._updates(lane.debate_id)

    # --- a channel's own posts (no debate: the digest) ----------------------------------------

    async def _next_channel_post(self, channel: str, team_id: str) -> bool:
        """Deliver the head of a channel's own posts (in workspace `team_id`): retried,
        re-split and given up by the same rules as a debate's, with no thread to tell when one
        is refused."""
        row = await self._db(
            lambda s: outbox.claim_channel_head(
                s,
                channel_id=channel,
                team_id=team_id,
                owner=self.owner,
                claim_s=self.config.claim_s,
            )
        )
        if row is None:
            return False
        try:
            posted = await self.once.post(
                row, channel=row.channel_id, message=kit.Message(row.text, row.blocks)
            )
        except PostError as error:
            if error.retryable:
                await self._retry(row, error)
                return False
            self._recovered()
            if error.code in TOO_BIG and row.part == 0:
                await self._resplit(row, error.code)
                return True
            await self._fail(row, f"refused by Slack: {error.code}")
            return True
        except asyncio.CancelledError:
            with contextlib.suppress(DatabaseUnavailableError):
                await self._release(row)
            raise
        await self._sent(row, [posted], "channel")
        return True

    # --- posts -------------------------------------------------------------------------------

    async def _next_post(self, debate_id: int) -> bool:
        """Deliver the head of the debate's post lane; True when the next one may follow now."""
        claimed = await self._db(
            lambda s: outbox.claim_head(
                s, debate_id=debate_id, owner=self.owner, claim_s=self.config.claim_s
            )
        )
        if claimed is None:
            return False
        row, debate = claimed
        try:
            return await self._post(row, debate)
        except asyncio.CancelledError:
            with contextlib.suppress(DatabaseUnavailableError):
                await self._release(row)
            raise

    async def _post(self, row: Outbox, debate: Debate) -> bool:
        if row.target == OutboxTarget.DM:
            delivered = await self._direct(row, list(row.recipients), "direct message")
            if delivered is False:
                await self._fail(row, "no recipient could be sent a DM")
            return delivered is True
        if debate.halt_reason is not None:
            return await self._unreachable(row, debate, debate.halt_reason)
        thread_ts = None
        if row.target == OutboxTarget.THREAD:
            thread_ts = debate.thread_ts
            if thread_ts is None:
                return await self._unreachable(row, debate, "the debate's thread was never posted")
        try:
            posted = await self.once.post(
                row,
                channel=row.channel_id,
                message=kit.Message(row.text, row.blocks),
                thread_ts=thread_ts,
            )
        except PostError as error:
            return await self._post_failed(row, debate, error)
        await self._sent(row, [posted], "thread" if thread_ts else "channel")
        return True

    async def _post_failed(self, row: Outbox, debate: Debate, error: PostError) -> bool:
        if isinstance(error, UnthreadedError):
            await self._remove_stray(error.stray)
            return await self._move_thread(row, debate, error.code)
        if error.retryable:
            await self._retry(row, error)
            return False
        self._recovered()
        if error.code in UNREACHABLE:
            reason = f"cannot post in <#{row.channel_id}> ({error.code})"
            await self._halt(debate, reason)
            return await self._unreachable(row, debate, reason)
        if error.code in THREAD_GONE and row.target == OutboxTarget.THREAD:
            return await self._move_thread(row, debate, error.code)
        if error.code in TOO_BIG and row.part == 0:
            await self._resplit(row, error.code)
            return True
        await self._give_up(row, error.code)
        return True

    async def _resplit(self, row: Outbox, code: str) -> None:
        """Replace a message refused for its size by smaller parts, sent in its place."""
        parts = kit.resplit(kit.Message(row.text, row.blocks))
        drafts = [Draft(key="", text=p.text, blocks=p.blocks) for p in parts]
        await self._db(
            lambda s: outbox.split(
                s, row_id=row.id or 0, owner=self.owner, error=code, parts=drafts
            )
        )
        log.warning("%s: %s refused (%s); re-split", _owner_of(row), row.key, code)

    async def _move_thread(self, row: Outbox, debate: Debate, code: str) -> bool:
        """The thread's root, or the parent an update changes, is gone: post the parent again,
        and send `row` again there. A post whose re-post fails is handled as its own failure
        (a lost channel halts the debate); an update is retried or given up. Two lanes of a
        debate finding it gone together (its next round and the parent's summary) move it
        once: the second finds it moved."""
        assert debate.id is not None
        debate_id = debate.id

        def now(s: Session) -> tuple[Debate | None, str]:
            return s.get(Debate, debate_id), outbox.current_parent(s, debate_id=debate_id)

        try:
            async with self._moving:
                current, parent_key = await self._db(now)
                assert current is not None
                if row.action == OutboxAction.UPDATE:
                    # An update was claimed with the parent it changed; it has a newer one now.
                    moved_before = parent_key != row.target_key
                else:
                    # A post was claimed with the debate's thread; it is in a newer one now.
                    moved_before = current.thread_ts != debate.thread_ts
                if moved_before:
                    moved: Posted | None = Posted(
                        channel=current.channel_id or row.channel_id, ts=current.thread_ts or ""
                    )
                else:
                    moved = await self._repost_parent(debate, code)
        except PostError as error:
            if row.action == OutboxAction.POST:
                return await self._post_failed(row, debate, error)
            if error.retryable:
                await self._retry(row, error)
                return False
            await self._give_up(row, error.code)
            return True
        if moved is None:
            await self._give_up(row, code)
            return True
        if row.key == PARENT and row.action == OutboxAction.POST:
            # The parent a thread was to open with: the one posted again stands for it, so the
            # question is not shown twice.
            await self._sent(row, [moved], "re-created parent")
            return True
        await self._release(row)
        return True

    async def _unreachable(self, row: Outbox, debate: Debate, reason: str) -> bool:
        """The thread cannot be reached: review requests go by DM (reviewers, else the
        requester, else the workspace admins); anything else is given up."""
        if row.fallback != OutboxFallback.REVIEWERS:
            await self._fail(row, f"thread unreachable: {reason}")
            return True
        chain: list[tuple[str, list[str] | None]] = [
            ("reviewers", await self.directory.people_in(row.recipients)),
            ("requester", [debate.requested_by] if debate.requested_by else []),
            ("workspace admins", None),
        ]
        for label, people in chain:
            try:
                users = people if people is not None else await self.directory.admins()
            except PostError as error:
                if error.retryable:
                    await self._retry(row, error)
                    return False
                users = []
            if not users:
                continue
            delivered = await self._direct(row, users, label, reason=reason)
            if delivered is not False:
                return delivered is True
        await self._fail(row, f"thread unreachable ({reason}) and no one could be sent a DM")
        return True

    async def _direct(
        self, row: Outbox, users: list[str], label: str, *, reason: str | None = None
    ) -> bool | None:
        """DM the message to each of `users`. True: at least one copy was delivered (and
        recorded); None: nothing was, but trying later may help (the row is rescheduled);
        False: every recipient refused."""
        message = kit.Message(row.text, row.blocks)
        if reason is not None:
            message = posts.direct(message, channel_id=row.channel_id, reason=reason)
        delivered: list[tuple[str, Posted]] = []
        transient: PostError | None = None
        for user in users:
            try:
                channel = await self.directory.dm_channel(user)
                delivered.append(
                    (user, await self.once.post(row, channel=channel, message=message))
                )
            except PostError as error:
                log.warning("debate %s: DM to %s failed: %s", row.debate_id, user, error)
                if error.retryable:
                    transient = error
        if delivered:
            names = ",".join(user for user, _ in delivered)
            await self._sent(row, [posted for _, posted in delivered], f"dm to {label}: {names}")
            return True
        if transient is not None:
            await self._retry(row, transient)
            return None
        return False

    async def _remove_stray(self, stray: Posted) -> None:
        """Delete a reply Slack stored outside its thread: at the channel's top level it reads
        out of context, and the debate goes on in a new thread. If Slack will not delete it, it
        is left, and said so in the log."""
        try:
            await self.poster.delete(channel=stray.channel, ts=stray.ts)
        except PostError as error:
            log.warning(
                "a reply posted outside its thread (%s in %s) was left: %s",
                stray.ts,
                stray.channel,
                error,
            )

    async def _repost_parent(self, debate: Debate, code: str) -> Posted | None:
        """Post the parent again at the top level, linking the old thread; None when it was
        already re-posted `MAX_REPOSTS` times (something else is wrong). Raises PostError."""
        assert debate.id is not None
        debate_id, channel = debate.id, debate.channel_id or ""
        if await self._db(
            lambda s: outbox.row_for(s, debate_id=debate_id, key=f"{PARENT}:{MAX_REPOSTS + 1}")
        ):
            return None
        spec = DebateSpec.model_validate_json(debate.spec_json)
        link = await self._permalink(channel, debate.thread_ts) if debate.thread_ts else None
        message = owed.reposted_parent(debate, spec, old_link=link)
        posted = await self.poster.post(channel=channel, message=message, attempts=1)
        await self._db(
            lambda s: outbox.new_parent(
                s,
                debate_id=debate_id,
                channel_id=channel,
                ts=posted.ts,
                text=message.text,
                blocks=message.blocks,
                becomes_thread=True,
            )
        )
        log.warning("debate %s: parent posted again (%s)", debate_id, code)
        return posted

    async def _permalink(self, channel: str, ts: str) -> str | None:
        try:
            response = await self.poster.client.chat_getPermalink(channel=channel, message_ts=ts)
        except SLACK_FAILURES as error:
            # A link is a nicety: the parent is posted again without one.
            log.info("no permalink for %s in %s: %s", ts, channel, error)
            return None
        link = response.get("permalink")
        return str(link) if link else None

    # --- updates -----------------------------------------------------------------------------

    async def _updates(self, debate_id: int) -> None:
        loop = asyncio.get_running_loop()
        wait = self._updated_at.get(debate_id, -math.inf) + self.config.status_interval_s
        if wait > loop.time():
            # Rows written while this lane waits coalesce, so the newest status goes out.
            await asyncio.sleep(wait - loop.time())

        def claim(s: Session) -> tuple[list[tuple[Outbox, Outbox | None]], bool]:
            claimed = outbox.claim_updates(
                s, debate_id=debate_id, owner=self.owner, claim_s=self.config.claim_s
            )
            # Asked after the claim: a summary claimed here was committed with the ending.
            return claimed, outbox.progress_streamed(s, debate_id=debate_id)

        claimed, streamed = await self._db(claim)
        for row, target in claimed:
            if streamed and row.key == PARENT_UPDATE:
                # The streamed plan shows the progress: one write fewer in the channel.
                await self._sent(row, [], SHOWN_IN_STREAM)
                continue
            await self._update(row, target)
        if claimed:
            self._updated_at[debate_id] = loop.time()

    async def _update(self, row: Outbox, target: Outbox | None) -> None:
        if target is None or target.state in ("failed", "split"):
            await self._fail(row, f"the message it changes ({row.target_key}) was never posted")
            return
        if not target.deliveries:
            await self._retry_quietly(row)
            return
        if row.key == ASSISTANT_STATUS:
            await self._assistant_status(row)
            return
        message = kit.Message(row.text, row.blocks)
        if target.key.startswith(f"{PARENT}:"):
            # A re-posted parent keeps its note about the deleted original through updates.
            message = kit.Message(message.text, [*message.blocks, target.blocks[-1]])
        for channel, ts in target.deliveries:
            try:
                await self.poster.update(channel=channel, ts=ts, message=message, attempts=1)
            except PostError as error:
                if error.retryable:
                    await self._retry(row, error)
                    return
                self._recovered()
                if error.code in THREAD_GONE and (row.target_key or "").startswith(PARENT):
                    debate = await self._db(lambda s: s.get(Debate, row.debate_id))
                    assert debate is not None
                    await self._move_thread(row, debate, error.code)
                    return
                if len(target.deliveries) == 1:
                    await self._give_up(row, error.code)
                    return
                log.warning("debate %s: update of one copy failed: %s", row.debate_id, error)
        await self._sent(row, [], "updated")

    async def _assistant_status(self, row: Outbox) -> None:
        """The assistant thread's status line; it is a nicety, so a refusal is only logged."""
        debate = await self._db(lambda s: s.get(Debate, row.debate_id))
        assert debate is not None
        try:
            await self.poster.assistant_status(
                channel=row.channel_id,
                thread_ts=debate.thread_ts or "",
                status=row.text,
                attempts=1,
                loading_messages=list(owed.LOADING_MESSAGES) if row.text else None,
            )
        except PostError as error:
            if error.retryable:
                await self._retry(row, error)
                return
            self._recovered()
            await self._fail(row, f"refused by Slack: {error.code}")
            return
        await self._sent(row, [], "assistant status")

    # --- the streamed plan ---------------------------------------------------------------

    async def _next_stream(self, debate_id: int) -> bool:
        """Deliver the debate's stream row if it is due; True when it is due again at once."""
        loop = asyncio.get_running_loop()
        wait = self._streamed_at.get(debate_id, -math.inf) + self.config.stream_interval_s
        if wait > loop.time():
            # Versions written while this lane waits are coalesced into one append.
            await asyncio.sleep(wait - loop.time())
        claimed = await self._db(
            lambda s: outbox.claim_stream(
                s, debate_id=debate_id, owner=self.owner, claim_s=self.config.claim_s
            )
        )
        if claimed is None:
            return False
        try:
            again = await self._stream(claimed)
        except asyncio.CancelledError:
            with contextlib.suppress(DatabaseUnavailableError):
                await self._release(claimed.row)
            raise
        self._streamed_at[debate_id] = loop.time()
        return again

    async def _stream(self, claimed: ClaimedStream) -> bool:
        row, debate, parent = claimed.row, claimed.debate, claimed.parent
        content = plan.StreamContent.of_row(row.text, row.blocks)
        moved = row.stream_thread_ts not in (None, debate.thread_ts)
        if row.stream_state in (StreamState.OPEN, StreamState.MESSAGE) and moved:
            # The debate's parent was posted again: the plan follows it to the new thread.
            await self._leave_thread(row)
            row.stream_state, row.streamed, row.deliveries = None, [], []
        if row.stream_state == StreamState.MESSAGE:
            return await self._plan_message(row, debate, content, row.ts)
        if row.stream_state == StreamState.OPEN:
            return await self._continue_stream(row, debate, content)
        if parent is not None and parent.state in (OutboxState.PENDING, OutboxState.SENDING):
            # "Streamed messages should always be replies": it starts once the parent is there.
            await self._retry_quietly(row)
            return False
        return await self._start_stream(row, debate, content)

    async def _start_stream(self, row: Outbox, debate: Debate, content: plan.StreamContent) -> bool:
        """Start the debate's stream in its thread, or fall back to the parent's status."""
        if self._no_streaming is not None:
            return await self._refuse_stream(row, self._no_streaming)
        if debate.halt_reason is not None:
            await self._fail(row, f"thread unreachable: {debate.halt_reason}")
            return False
        if debate.thread_ts is None:
            return await self._refuse_stream(row, "the debate's thread was never posted")
        recipient = debate.requested_by or ""
        if not recipient.startswith(PEOPLE):
            # recipient_user_id "Required when streaming to channels"; a stream goes to a
            # person, and a debate asked for by an app or a workflow has none.
            return await self._refuse_stream(row, "no person to stream to")
        try:
            team = await self.directory.recipient_team()
        except PostError as error:
            await self._retry(row, error)
            return False
        if team is None:
            # recipient_team_id, "Required when streaming to channels".
            return await self._refuse_stream(row, "no team to stream to")
        if row.stream_state == StreamState.STARTING:
            adopted = await self._adopt_stream(row, debate, content)
            if adopted is not None:
                return adopted
        row_id = row.id or 0
        await self._db(lambda s: outbox.stream_starting(s, row_id=row_id, owner=self.owner))
        try:
            posted = await self.poster.start_stream(
                channel=row.channel_id,
                thread_ts=debate.thread_ts,
                chunks=content.chunks,
                recipient_user_id=recipient,
                recipient_team_id=team,
                attempts=1,
            )
        except TokenRefusedError as refused:
            if refused.code != "missing_scope":
                raise
            # A scope only streaming needs: no reason to stop every other message.
            return await self._refuse_stream(row, f"missing_scope {refused.needed or ''}".strip())
        except PostError as error:
            if error.retryable:
                # The start may have reached Slack all the same: the next try looks first.
                await self._retry(row, error)
                return False
            self._recovered()
            if error.code in UNREACHABLE:
                # The post lane finds the channel gone too, and halts the debate.
                await self._fail(row, f"refused by Slack: {error.code}")
                return False
            if error.code in THREAD_GONE:
                # As for a post: the parent is posted again (once, whichever lane finds the
                # thread gone first), and the stream starts in the new thread.
                return await self._move_thread(row, debate, error.code)
            if error.code in METHOD_ABSENT:
                self._no_streaming = error.code
            return await self._refuse_stream(row, error.code)
        await self._streamed(
            row,
            content.chunks,
            StreamState.OPEN,
            deliveries=[[posted.channel, posted.ts]],
            thread_ts=debate.thread_ts,
            more=content.final,
        )
        return content.final

    async def _adopt_stream(
        self, row: Outbox, debate: Debate, content: plan.StreamContent
    ) -> bool | None:
        """A start whose answer never came back may have opened a stream in the thread. The
        bot's replies there that no outbox row knows are tried, newest first, with the whole
        plan appended (a `task_update` replaces its task, so sending one twice changes
        nothing): one that takes it is that stream, continued from here. None when there is
        none (a new stream is started); False when the row waits for a retry."""
        assert debate.id is not None
        assert debate.thread_ts is not None
        debate_id, channel, thread_ts = debate.id, row.channel_id, debate.thread_ts
        try:
            found = await self.directory.bot_messages(channel, thread_ts=thread_ts)
        except PostError as error:
            if error.retryable:
                await self._retry(row, error)
                return False
            log.warning("debate %s: cannot look for a stream already started: %s", debate_id, error)
            return None
        known = await self._db(
            lambda s: outbox.delivered_ts(s, channel_id=channel, thread_ts=thread_ts)
        )
        for ts in reversed([ts for ts, _ in found.messages if ts not in known]):
            try:
                await self.poster.append_stream(
                    channel=channel, ts=ts, chunks=content.chunks, attempts=1
                )
            except TokenRefusedError as refused:
                if refused.code != "missing_scope":
                    raise
                return None  # the start is refused the same way, and falls back
            except PostError as error:
                if error.retryable:
                    await self._retry(row, error)
                    return False
                continue  # not a stream in progress (a message, or a stream already closed)
            log.info("debate %s: the stream started before (%s) is continued", debate_id, ts)
            await self._streamed(
                row,
                content.chunks,
                StreamState.OPEN,
                deliveries=[[channel, ts]],
                thread_ts=thread_ts,
                more=content.final,
            )
            return content.final
        return None

    async def _continue_stream(
        self, row: Outbox, debate: Debate, content: plan.StreamContent
    ) -> bool:
        """Append what changed, or stop with the final version. A stream that cannot take it
        becomes a normal message with the same content."""
        channel, ts = row.deliveries[0] if row.deliveries else (row.channel_id, "")
        sent = row.streamed
        chunks = (
            plan.closing_chunks(sent, content)
            if content.final
            else plan.delta(sent, content.chunks)
        )
        try:
            if content.final:
                await self.poster.stop_stream(
                    channel=channel, ts=ts, chunks=chunks, blocks=content.closing, attempts=1
                )
            elif chunks:
                await self.poster.append_stream(channel=channel, ts=ts, chunks=chunks, attempts=1)
        except TokenRefusedError as refused:
            if refused.code != "missing_scope":
                raise
            await self._abandon(channel, ts, refused.code)
            return await self._plan_message(row, debate, content, ts)
        except PostError as error:
            if error.retryable:
                # Sent again from what Slack is known to have: a task it took twice is the same.
                await self._retry(row, error)
                return False
            self._recovered()
            if error.code in UNREACHABLE:
                await self._fail(row, f"refused by Slack: {error.code}")
                return False
            if error.code in STREAM_GONE:
                return await self._plan_message(row, debate, content, None)
            if error.code not in STREAM_CLOSED:
                # Any other refusal of an append or a stop: end the stream as it stands, then
                # show the plan as a message in its place.
                await self._abandon(channel, ts, error.code)
            return await self._plan_message(row, debate, content, ts)
        state = StreamState.CLOSED if content.final else StreamState.OPEN
        await self._streamed(row, plan.merged(sent, chunks), state)
        return False

    async def _leave_thread(self, row: Outbox) -> None:
        """Stop the plan's message in a thread the debate has left, and delete it: the whole
        plan starts again in the new thread (if Slack will not delete it, it is left stopped)."""
        if not row.deliveries:
            return
        channel, ts = row.deliveries[0]
        if row.stream_state == StreamState.OPEN:
            await self._abandon(channel, ts, "thread moved")
        try:
            await self.poster.delete(channel=channel, ts=ts)
        except (PostError, TokenRefusedError) as error:
            log.warning("debate %s: the plan left in %s stays: %s", row.debate_id, ts, error)

    async def _abandon(self, channel: str, ts: str, code: str) -> None:
        """Stop a stream that was refused more, so it is not left streaming (best effort: a
        token Slack refuses is found out again by the message that follows)."""
        try:
            await self.poster.stop_stream(channel=channel, ts=ts, attempts=1)
        except (PostError, TokenRefusedError) as error:
            log.info("stream %s in %s not stopped after %s: %s", ts, channel, code, error)

    async def _plan_message(
        self, row: Outbox, debate: Debate, content: plan.StreamContent, ts: str | None
    ) -> bool:
        """The plan as a normal message: the stream's own message changed in place when it is
        still there (nothing said twice; the SDK's `ChatStream.ts` names `chat.update` as the
        fallback "if the stream expires server-side"), else posted in the thread (nothing
        lost). Later versions change that message."""
        message = plan.as_message(content)
        state = StreamState.CLOSED if content.final else StreamState.MESSAGE
        channel = row.deliveries[0][0] if row.deliveries else row.channel_id
        if ts:
            try:
                await self.poster.update(channel=channel, ts=ts, message=message, attempts=1)
            except PostError as error:
                if error.retryable:
                    await self._retry(row, error)
                    return False
                self._recovered()
                if error.code in STILL_STREAMING:
                    # Our stop did not take: try it again, and the change after it.
                    await self._abandon(channel, ts, error.code)
                    await self._retry(row, error)
                    return False
                log.warning(
                    "debate %s: the plan's message %s cannot be changed (%s); posting it anew",
                    row.debate_id,
                    ts,
                    error.code,
                )
            else:
                await self._streamed(row, content.chunks, state, delivered_to="message")
                return False
        if debate.thread_ts is None:
            await self._fail(row, "the debate's thread was never posted")
            return False
        try:
            posted = await self.poster.post(
                channel=row.channel_id, message=message, thread_ts=debate.thread_ts, attempts=1
            )
        except UnthreadedError as error:
            # Nothing goes to the top level: the post lane re-creates the thread on its next
            # reply, and the plan follows it there.
            await self._remove_stray(error.stray)
            await self._retry(row, error)
            return False
        except PostError as error:
            if error.retryable:
                await self._retry(row, error)
                return False
            self._recovered()
            await self._give_up(row, error.code)
            return False
        await self._streamed(
            row,
            content.chunks,
            state,
            deliveries=[[posted.channel, posted.ts]],
            thread_ts=debate.thread_ts,
            delivered_to="message",
        )
        return False

    async def _refuse_stream(self, row: Outbox, code: str) -> bool:
        """Slack will not stream here: the parent's live status shows the progress instead."""
        log.info(
            "debate %s: no streamed plan (%s); the parent shows the status", row.debate_id, code
        )
        await self._db(
            lambda s: outbox.refuse_stream(
                s, row_id=row.id or 0, owner=self.owner, error=f"stream refused: {code}"
            )
        )
        self.wake()
        return False

    async def _streamed(
        self,
        row: Outbox,
        streamed: list[dict[str, object]],
        state: StreamState,
        *,
        deliveries: list[list[str]] | None = None,
        thread_ts: str | None = None,
        delivered_to: str = "stream",
        more: bool = False,
    ) -> None:
        self._recovered()
        await self._db(
            lambda s: outbox.mark_streamed(
                s,
                row_id=row.id or 0,
                owner=self.owner,
                version=row.version,
                streamed=streamed,
                stream_state=state,
                deliveries=deliveries,
                thread_ts=thread_ts,
                delivered_to=delivered_to,
                more=more,
            )
        )
        await self._proven(row)

    # --- bookkeeping -------------------------------------------------------------------------

    def _backoff(self, row: Outbox, error: PostError) -> float:
        exponential = self.config.backoff_base_s * 2.0 ** min(row.attempts, 16)
        capped = min(self.config.backoff_max_s, exponential)
        delay = capped / 2 + self._rng.uniform(0, capped / 2)
        return max(delay, error.retry_after_s or 0.0)

    async def _retry(self, row: Outbox, error: PostError) -> None:
        self._failing = True
        delay = self._backoff(row, error)
        log.warning(
            "%s: %s not delivered (%s: %s); retry %d in %.1fs",
            _owner_of(row),
            row.key,
            error.code,
            error,
            row.attempts + 1,
            delay,
        )
        updated = await self._db(
            lambda s: outbox.mark_retry(
                s,
                row_id=row.id or 0,
                owner=self.owner,
                error=f"{error.code}: {error}",
                delay_s=delay,
            )
        )
        if updated is not None and updated.state == "failed":
            log.error("%s: %s given up after its deadline", _owner_of(row), row.key)

    async def _retry_quietly(self, row: Outbox) -> None:
        await self._db(
            lambda s: outbox.mark_retry(
                s,
                row_id=row.id or 0,
                owner=self.owner,
                error="waiting for the message it changes",
                delay_s=self.config.poll_s,
                failed_attempt=False,
            )
        )

    def _recovered(self) -> None:
        """Slack answered: pull every message waiting out a backoff forward."""
        if self._failing:
            self._failing = False
            task = asyncio.get_running_loop().create_task(self._pull_in())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _pull_in(self) -> None:
        moved = await self._db(outbox.pull_in_retries)
        if moved:
            log.info("Slack answers again; %d waiting message(s) are due now", moved)
            self.wake()

    async def _sent(self, row: Outbox, posted: list[Posted], where: str) -> None:
        self._recovered()
        await self._db(
            lambda s: outbox.mark_sent(
                s,
                row_id=row.id or 0,
                owner=self.owner,
                version=row.version,
                deliveries=[[p.channel, p.ts] for p in posted],
                delivered_to=where,
            )
        )
        if where != SHOWN_IN_STREAM:
            await self._proven(row)

    async def _proven(self, row: Outbox) -> None:
        """Slack took a message of `row`'s workspace: if a probe's word was all its bot had
        (`refusals.on_probation`), the token is proven, and a later refusal is news again."""
        workspace = Workspace(team_id=row.team_id or PENDING_TEAM, enterprise_id=row.enterprise_id)
        if not any(_may_serve(bot, workspace) for bot in self._probation):
            return
        if await self._db(lambda s: refusals.delivered(s, workspace=workspace)):
            log.info("delivery to workspace %s works again", workspace.team_id)
        self._probation = [bot for bot in self._probation if not _may_serve(bot, workspace)]

    async def _release(self, row: Outbox) -> None:
        await self._db(lambda s: outbox.release(s, row_id=row.id or 0, owner=self.owner))

    async def _fail(self, row: Outbox, error: str, notices: list[Draft] | None = None) -> None:
        log.error("%s: %s not delivered: %s", _owner_of(row), row.key, error)
        await self._db(
            lambda s: outbox.mark_failed(
                s, row_id=row.id or 0, owner=self.owner, error=error, notices=notices or []
            )
        )

    async def _give_up(self, row: Outbox, code: str) -> None:
        """Slack refused the message for good: say so in the thread, and go on."""
        notices = []
        if not row.key.startswith("notice:"):
            notices.append(owed.given_up(row.debate_id, row.key, code))
        await self._fail(row, f"refused by Slack: {code}", notices)

    async def _halt(self, debate: Debate, reason: str) -> None:
        """Stop the debate at its next turn and tell the requester why, by DM."""
        assert debate.id is not None
        debate_id = debate.id
        notices = []
        if debate.requested_by:
            _, name = await self.directory.bot_identity()
            notices.append(owed.halted(debate, reason, name))
        halted = await self._db(
            lambda s: outbox.halt(s, debate_id=debate_id, reason=reason, notices=notices)
        )
        if halted:
            log.error("debate %s halted: %s", debate_id, reason)
            debate.halt_reason = reason
            self.wake()


def _may_serve(bot: refusals.BotState, workspace: Workspace) -> bool:
    """Whether `workspace` may act with `bot`: its own install's, or its org's org-wide one
    (which one it does, the store knows: `refusals.delivered`)."""
    if bot.team_id is not None:
        return bot.team_id == workspace.team_id
    return workspace.enterprise_id is not None and bot.enterprise_id == workspace.enterprise_id


def _owner_of(row: Outbox) -> str:
    """Whose message `row` is, for the log: a debate's, or a channel's own."""
    return f"channel {row.channel_id}" if row.debate_id is None else f"debate {row.debate_id}"
