"""`Intake`: admits a `DebateRequest` and queues it, with the messages a new debate owes, in one
transaction. Every trigger comes through here; the CLI, an operator's tool with no channel,
builds its spec with the same policy, checks it with the same `checked_spec`, and queues it
directly."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Engine
from sqlmodel import Session

from bot.intake.checked import checked_spec
from bot.intake.errors import NotAdmittedError, TokenRefusedNotAdmittedError
from bot.intake.policy import TRIAGED_SOURCES, SpecPolicy
from bot.intake.request import Ask, DebateRequest, FollowUp
from bot.messages import owed
from bot.slackweb.token import TokenGate, workspace_refusal
from bot.store import channels, outbox, queue, refusals
from bot.store.channel_tables import ChannelSettings
from bot.store.db import in_session
from bot.store.debate_tables import Debate
from bot.store.errors import BudgetExceededError, InFlightLimitError, StoreNoAnswerError
from bot.store.queue import InFlightLimits, NewDebate, SpendCaps
from bot.store.tenancy import Workspace
from bot.store.thresholds import adopted_threshold
from engine.models import DebateSpec, ThresholdSource

log = logging.getLogger(__name__)


class Reach(Protocol):
    """Whether the bot can post in a channel (Slack's directory, `bot.slackweb.people`)."""

    async def cannot_post_in(self, channel: str) -> str | None: ...

    async def bot_identity(self) -> tuple[str | None, str]: ...


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


class Intake:
    """Admission and enqueueing for every trigger."""

    def __init__(
        self,
        *,
        engine: Engine,
        policy: SpecPolicy,
        reach: Reach | None = None,
        limits: InFlightLimits | None = None,
        caps: SpendCaps | None = None,
        review_channel: str | None = None,
        wake: Callable[[], None] = lambda: None,
        gate: TokenGate | None = None,
        tokens_per_workspace: bool = False,
        workspace: Workspace,
    ) -> None:
        self.engine = engine
        self.policy = policy
        self.reach = reach
        self.limits = limits
        self.caps = caps or SpendCaps()
        self.review_channel = review_channel
        self.wake = wake
        self.gate = gate
        self.tokens_per_workspace = tokens_per_workspace
        self.workspace = workspace

    async def submit(self, request: DebateRequest) -> Started:
        """Admit `request` and queue it; NotAdmittedError says why it was not."""
        return await self.enqueue(await self.admit(request))

    async def check_reachable(self, channel: str) -> None:
        """Refuse (NotAdmittedError) when the bot cannot post in `channel`, saying how to fix
        it; a trigger that reads the channel first calls this before reading."""
        if self.reach is None:
            return
        problem = await self.reach.cannot_post_in(channel)
        if problem is None:
            return
        if problem == "is_archived":
            raise NotAdmittedError(
                f"this channel is archived, so I cannot post a debate in it ({problem})"
            )
        _, name = await self.reach.bot_identity()
        raise NotAdmittedError(
            f"I am not in this channel, so I could not post the debate here ({problem})."
            f" Run `/invite @{name}` and ask again"
        )

    async def check_token(self) -> None:
        """Refuse (TokenRefusedNotAdmittedError) while Slack refuses the bot token: the
        process's `gate`, or with OAuth installs (`tokens_per_workspace`) the workspace's, as
        the store has it. A trigger that reads Slack first calls this before reading."""
        if self.gate is not None and self.gate.code is not None:
            raise TokenRefusedNotAdmittedError(
                self.gate.refusal(), code=self.gate.code, scope=self.gate.needed
            )
        if not self.tokens_per_workspace:
            return
        refused = await in_session(
            self.engine,
            lambda s: refusals.refusal_for(s, workspace=self.workspace),
            workspace=self.workspace,
        )
        if refused is not None:
            raise TokenRefusedNotAdmittedError(
                workspace_refusal(refused.code, refused.scope),
                code=refused.code,
                scope=refused.scope,
            )

    async def admit(self, request: DebateRequest) -> Admitted:
        """Everything checked before anything is stored or paid for: that Slack takes the bot
        token (the process's `gate`; with OAuth installs, `tokens_per_workspace`, the
        workspace's, as the store has it), that the bot can post where a new question's debate
        and review request go, and the spec by policy (built and validated once)."""
        asked = request.asked
        review_in = request.review_in
        if request.channel_id is not None:
            # Nothing it queued could be posted, and it would be paid for.
            await self.check_token()
        if isinstance(asked, Ask):
            if request.channel_id is not None and not _is_dm(request.channel_id):
                await self.check_reachable(request.channel_id)
            if review_in is None and _is_dm(request.channel_id):
                # A DM (the assistant pane) has no channel beside it: the deployment's review
                # channel takes the request.
                review_in = self.review_channel
            if review_in is not None:
                await self.check_reachable(review_in)
        spec = await self._spec(request)
        channel = request.channel_id
        triage = False
        if channel is not None and request.source in TRIAGED_SOURCES:
            triage = (await self._settings(channel))[0].triage
        new = NewDebate(
            trigger_key=request.trigger_key,
            spec=spec,
            source=request.source,
            channel_id=channel,
            thread_ts=request.thread_ts,
            requested_by=request.requested_by,
            triage=triage,
            parent_debate_id=asked.original.id if isinstance(asked, FollowUp) else None,
            review_channel_id=review_in,
            reviewers_channel_id=self._reviewers_channel(request),
            link=request.link,
        )
        return Admitted(request=request, spec=spec, new=new)

    def _reviewers_channel(self, request: DebateRequest) -> str | None:
        """Whose reviewers decide: the server's choice, never `--review-in`'s. A debate in a
        channel is that channel's; one in a DM goes to the deployment's review channel (or to
        the workspace admins); a continued debate stays with the original's."""
        asked = request.asked
        if isinstance(asked, FollowUp) and asked.continues:
            return asked.original.reviewers_channel_id
        if _is_dm(request.channel_id):
            return self.review_channel
        return request.channel_id

    async def enqueue(self, admitted: Admitted) -> Started:
        """Queue an admitted request with the messages a new debate owes (in one transaction),
        or find the debate its trigger key already queued. NotAdmittedError when it would pass
        a limit or a monthly budget."""
        asked = admitted.request.asked
        try:
            if isinstance(asked, FollowUp) and asked.continues:
                original = asked.original.id
                assert original is not None
                debate, created = await in_session(
                    self.engine,
                    lambda s: queue.fork_debate(s, new=admitted.new, original_id=original),
                    workspace=self.workspace,
                )
            else:
                debate, created = await in_session(
                    self.engine, lambda s: self._queue(s, admitted), workspace=self.workspace
                )
        except InFlightLimitError as error:
            raise NotAdmittedError(_limit_text(error)) from error
        except BudgetExceededError as error:
            raise NotAdmittedError(_budget_text(error)) from error
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

    async def _settings(
        self, channel: str
    ) -> tuple[ChannelSettings, tuple[float, ThresholdSource] | None]:
        """The channel's settings and the threshold its workspace adopted (None: fixed)."""
        return await in_session(
            self.engine,
            lambda s: (channels.channel_settings(s, channel_id=channel), adopted_threshold(s)),
            workspace=self.workspace,
        )

    async def _spec(self, request: DebateRequest) -> DebateSpec:
        """The spec of `request`, checked (`checked_spec`): a new question's by policy and the
        channel's settings; a follow-up's own, to `rounds` when asked."""
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
        settings, adopted = (
            await self._settings(request.channel_id)
            if request.channel_id is not None
            else (ChannelSettings(channel_id=""), None)
        )
        return checked_spec(
            lambda: self.policy.for_channel(
                settings,
                ask.question,
                context=ask.context,
                protocol=ask.protocol,
                rounds=ask.rounds,
                budget_usd=ask.budget_usd,
                stances_for=ask.stances_for,
                stances_against=ask.stances_against,
                route=ask.route,
                adopted=adopted,
            )
        )


def _is_dm(channel: str | None) -> bool:
    return channel is not None and channel[:1] == "D"


def _limit_text(error: InFlightLimitError) -> str:
    """A limit refusal as the person reads it: the limit, and the setting that raises it."""
    if error.scope == "user":
        return (
            f"you already have {error.count} debates queued or running, the most one person may"
            f" have at once (DEBATEBOT_MAX_DEBATES_PER_USER={error.limit}); wait for one to"
            " finish, or ask the bot's admin to raise that setting"
        )
    return (
        f"this channel already has {error.count} debates queued or running, the most it may"
        f" have at once (DEBATEBOT_MAX_DEBATES_PER_CHANNEL={error.limit}); wait for one to"
        " finish, or ask the bot's admin to raise that setting"
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
