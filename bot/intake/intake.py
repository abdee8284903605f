"""`Intake`: admits a `DebateRequest` from any front door and queues it, with the messages a new
debate owes, in one transaction. Every door comes through here, the terminal's, the web page's,
the HTTP API's, *Another round* and *Debate anyway* included: one validation, one count of
debates in flight, one check of the monthly caps and budgets. What only a door can check (Slack's
bot token, whether the bot can post in a channel) it passes in as `DoorChecks`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlmodel import Session

from bot.intake.checked import checked_spec
from bot.intake.doors import DoorChecks
from bot.intake.errors import LimitNotAdmittedError
from bot.intake.policy import DEPLOYMENT_DEFAULTS, TRIAGED_SOURCES, PlaceSettings, SpecPolicy
from bot.intake.request import Ask, DebateRequest, FollowUp, OriginKind
from bot.messages import owed
from bot.store import channels, outbox, queue
from bot.store.db import in_session
from bot.store.debate_tables import Debate
from bot.store.errors import BudgetExceededError, InFlightLimitError, StoreNoAnswerError
from bot.store.queue import InFlightLimits, NewDebate, SpendCaps
from bot.store.tenancy import Workspace
from bot.store.thresholds import adopted_threshold
from engine.models import DebateSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Admitted:
    """A request the intake admitted: its spec, built and checked once, and the row to queue."""

    request: DebateRequest
    spec: DebateSpec
    new: NewDebate


@dataclass(frozen=True)
class Started:
    debate: Debate
    created: bool


@dataclass(kw_only=True, eq=False)
class Intake:
    """Admission and enqueueing for every front door."""

    engine: Engine
    policy: SpecPolicy
    limits: InFlightLimits | None = None
    caps: SpendCaps = field(default_factory=SpendCaps)
    review_channel: str | None = None
    agents_review_channel: str | None = None
    wake: Callable[[], None] = lambda: None
    checks: DoorChecks | None = None
    workspace: Workspace

    async def submit(self, request: DebateRequest) -> Started:
        """Admit `request` and queue it; NotAdmittedError says why it was not."""
        return await self.enqueue(await self.admit(request))

    async def check_reachable(self, place: str) -> None:
        """Refuse (NotAdmittedError) when the door says the bot cannot post in `place`; a
        trigger that reads the place first calls this before reading."""
        if self.checks is not None:
            await self.checks.check_reachable(place)

    async def check_token(self) -> None:
        """Refuse (TokenRefusedNotAdmittedError) while the door cannot deliver; a trigger that
        reads its door's service first calls this before reading."""
        if self.checks is not None:
            await self.checks.check_token()

    async def admit(self, request: DebateRequest) -> Admitted:
        """Everything checked before anything is stored or paid for: the door's own checks
        (Slack: that it takes the bot token, that the bot can post where a new question's
        debate and review request go), the spec by policy (built and validated once), and the
        debates in flight and monthly caps as they stand (`enqueue` counts them again in its
        transaction), so a follow-up refused here changes nothing."""
        asked = request.asked
        origin = request.origin
        review_in = request.review_in
        if request.place is not None:
            # Nothing it queued could be posted, and it would be paid for.
            await self.check_token()
        if isinstance(asked, Ask):
            if request.place is not None and origin.kind.has_reviewers:
                await self.check_reachable(request.place)
            if review_in is None:
                review_in = self._borrowed_review_channel(origin.kind)
            if review_in is not None:
                await self.check_reachable(review_in)
        spec = await self._spec(request)
        triage = False
        if request.place is not None and request.source in TRIAGED_SOURCES:
            triage = (await self._place(request.place)).triage
        new = NewDebate(
            trigger_key=request.trigger_key,
            spec=spec,
            source=request.source,
            channel_id=request.place,
            thread_ts=origin.thread,
            requested_by=request.requested_by,
            triage=triage,
            parent_debate_id=asked.original_id if isinstance(asked, FollowUp) else None,
            review_channel_id=review_in,
            reviewers_channel_id=self._reviewers_place(request),
            link=request.link,
        )
        await self._within_limits(new)
        return Admitted(request=request, spec=spec, new=new)

    def _reviewers_place(self, request: DebateRequest) -> str | None:
        """Whose reviewers decide: the server's choice, never `--review-in`'s. A debate in a
        channel is that channel's; one in a DM goes to the deployment's review channel (or to
        the workspace admins); a continued debate stays with the original's; a door with no
        place has none (its own page decides) unless it borrows a review channel (a coding
        agent's, DEBATEBOT_MCP_REVIEW_CHANNEL)."""
        asked = request.asked
        if isinstance(asked, FollowUp) and asked.continues:
            return asked.reviewers_place
        kind = request.origin.kind
        return request.place if kind.has_reviewers else self._borrowed_review_channel(kind)

    def _borrowed_review_channel(self, kind: OriginKind) -> str | None:
        """The deployment's review channel a place without reviewers of its own borrows: a DM's
        (DEBATEBOT_REVIEW_CHANNEL), a coding agent's (DEBATEBOT_MCP_REVIEW_CHANNEL); None
        for the others."""
        if kind.borrows_review_channel:
            return self.review_channel
        if kind.borrows_agents_review_channel:
            return self.agents_review_channel
        return None

    async def _within_limits(self, new: NewDebate) -> None:
        """NotAdmittedError when `new` would pass a limit on debates in flight or a monthly
        cap as they stand now (read only; `enqueue` decides in its transaction)."""
        try:
            await in_session(
                self.engine,
                lambda s: queue.check_admission(s, new=new, limits=self.limits, caps=self.caps),
                workspace=self.workspace,
            )
        except InFlightLimitError as error:
            raise LimitNotAdmittedError(_limit_text(error, new)) from error
        except BudgetExceededError as error:
            raise LimitNotAdmittedError(_budget_text(error)) from error

    async def enqueue(self, admitted: Admitted) -> Started:
        """Queue an admitted request with the messages a new debate owes (in one transaction),
        or find the debate its trigger key already queued. NotAdmittedError when it would pass
        a limit or a monthly budget."""
        asked = admitted.request.asked
        try:
            if isinstance(asked, FollowUp) and asked.continues:
                original = asked.original_id
                debate, created = await in_session(
                    self.engine,
                    lambda s: queue.fork_debate(
                        s,
                        new=admitted.new,
                        original_id=original,
                        limits=self.limits,
                        caps=self.caps,
                    ),
                    workspace=self.workspace,
                )
            else:
                debate, created = await in_session(
                    self.engine, lambda s: self._queue(s, admitted), workspace=self.workspace
                )
        except InFlightLimitError as error:
            raise LimitNotAdmittedError(_limit_text(error, admitted.new)) from error
        except BudgetExceededError as error:
            raise LimitNotAdmittedError(_budget_text(error)) from error
        except StoreNoAnswerError as error:
            # The insert may still be committed when the database answers: nobody may be told
            # that nothing was queued.
            raise StoreNoAnswerError(str(error), may_have_stored=True) from error
        if created:
            self.wake()
        return Started(debate, created)

    def _queue(self, session: Session, admitted: Admitted) -> tuple[Debate, bool]:
        debate, created = queue.add_debate(
            session, new=admitted.new, limits=self.limits, caps=self.caps
        )
        if not created:
            return debate, False
        if owed.owes_messages(debate):
            outbox.stage(session, debate=debate, drafts=owed.opening(debate, admitted.spec))
        session.commit()
        session.refresh(debate)
        return debate, True

    async def _place(self, place: str) -> PlaceSettings:
        row = await in_session(
            self.engine,
            lambda s: channels.channel_settings(s, channel_id=place),
            workspace=self.workspace,
        )
        return PlaceSettings.of_channel(row)

    async def _spec(self, request: DebateRequest) -> DebateSpec:
        """The spec of `request`, checked (`checked_spec`): a new question's by policy and its
        place's settings (none: the deployment's defaults); a follow-up's own, to `rounds`
        when asked."""
        asked = request.asked
        if isinstance(asked, FollowUp):
            rounds = asked.rounds
            spec = asked.spec

            def follow_up() -> DebateSpec:
                if rounds is None:
                    return spec
                return spec.model_copy(update={"max_rounds": rounds, "min_rounds": rounds})

            return checked_spec(follow_up)
        ask = asked
        place = (
            await self._place(request.place) if request.place is not None else DEPLOYMENT_DEFAULTS
        )
        # The threshold the workspace adopted with its weights applies wherever a debate was
        # asked for; a channel's own threshold still wins (SpecPolicy.for_place).
        adopted = await in_session(self.engine, adopted_threshold, workspace=self.workspace)
        return checked_spec(lambda: self.policy.for_place(place, ask, adopted))


def _limit_text(error: InFlightLimitError, new: NewDebate) -> str:
    """A limit refusal as the person reads it: the limit, and the setting that raises it. A
    follow-up counts against the person who asked for the original, who may not be the one
    who pressed its button."""
    place = new.channel_id
    if error.scope == "user":
        who = (
            "the person who asked for it already has"
            if new.parent_debate_id
            else "you already have"
        )
        return (
            f"{who} {error.count} debates queued or running, the most one person may"
            f" have at once (DEBATEBOT_MAX_DEBATES_PER_USER={error.limit}); wait for one to"
            " finish, or ask the bot's admin to raise that setting"
        )
    where = "this channel already has" if place is not None else "there are already"
    outside = "" if place is not None else " asked outside Slack (web page, API, terminal)"
    return (
        f"{where} {error.count} debates{outside} queued or running, the most"
        f" {'it' if place is not None else 'they'} may have at once"
        f" (DEBATEBOT_MAX_DEBATES_PER_CHANNEL={error.limit}); wait for one to finish, or ask"
        " the bot's admin to raise that setting"
    )


def _budget_text(error: BudgetExceededError) -> str:
    """A budget refusal: the cap, this month's spend, and who can change what."""
    ceiling = f"up to ${error.ceiling:.2f}" if error.ceiling else "more"
    if error.scope == "channel":
        where, fix = (
            "This channel",
            "a channel owner can raise it with `/debate config set monthly_budget 50`",
        )
    else:
        where, fix = (
            "The workspace",
            "the bot's admin can raise DEBATEBOT_WORKSPACE_MONTHLY_BUDGET_USD",
        )
    return (
        f"{where} has spent ${error.spent:.2f} of its ${error.cap:.2f} monthly budget this month,"
        f" and this debate could cost {ceiling}, so nothing was queued. Spending resets on the 1st"
        f" (UTC); {fix}, or a smaller `--budget` may fit"
    )
