"""What reviewers and readers do with a verdict: decide its review (approve, reject, or one more
round), start the debate a triage decided against, and vote on the verdict. Who may decide is
the server's decision, made here, whatever the click says."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.intake.errors import NotAdmittedError
from bot.intake.intake import Admitted, Intake, Started
from bot.intake.request import DebateRequest, FollowUp, Origin
from bot.jobs.notifier import DebateNotifier
from bot.messages import kit, owed
from bot.metrics import Metrics
from bot.slack.admission import slack_origin
from bot.slack.channel_config import channel_settings_of
from bot.slack.errors import CommandError, NotAllowedError, ReviewGoneError
from bot.slackweb.people import SlackDirectory
from bot.store import endings, outbox, queue, reviews
from bot.store.debate_tables import Debate, DebateSource, TriageState
from bot.store.errors import DebateNotFoundError
from bot.store.receipts import ReceiptIssuer
from bot.store.results import StoredResult
from bot.store.review_tables import Escalation, EscalationState, FeedbackValue, Review
from bot.store.scoped import WorkspaceStore
from engine.models import DebateSpec, utcnow
from engine.protocols import definition_for, flagged

log = logging.getLogger(__name__)

ReviewFollower = Callable[[Debate, Review], Awaitable[None]]
"""Told of each review decision (the pull request comment shows it)."""


@dataclass(kw_only=True, eq=False)
class Reviews(WorkspaceStore):
    """Review decisions, *Debate anyway* and feedback, on the store, the intake and Slack's
    directory."""

    intake: Intake
    notifier: DebateNotifier
    directory: SlackDirectory
    allow_self_review: bool = False
    metrics: Metrics | None = None
    after_review: ReviewFollower | None = None
    receipts: ReceiptIssuer | None = None

    async def _escalation(self, escalation_id: int) -> tuple[Escalation, Debate]:
        escalation = await self.db(lambda s: reviews.get_escalation(s, escalation_id=escalation_id))
        if escalation is None:
            raise _gone(escalation_id)
        debate_id = escalation.debate_id
        try:
            debate = await self.db(lambda s: queue.get_debate(s, debate_id=debate_id))
        except DebateNotFoundError as error:
            raise _gone(escalation_id) from error
        return escalation, debate

    async def deciders(self, debate: Debate) -> list[str]:
        """The people (user ids and user groups) who may decide `debate`'s review, as the
        server has it now: the reviewers configured for the channel chosen when the debate was
        queued (`reviewers_channel_id`), without the requester unless self-review is allowed.
        Empty means the workspace admins decide (then too without the requester)."""
        if debate.reviewers_channel_id is None:
            return []
        settings = await channel_settings_of(
            self.engine, self.workspace, debate.reviewers_channel_id
        )
        reviewers = list(settings.reviewers)
        requester = debate.requested_by
        if self.allow_self_review or requester is None or not reviewers:
            return reviewers
        people = await self.directory.people_in(reviewers)
        if requester not in people:
            return reviewers
        # The requester is a reviewer (directly or through a group): the others decide, or,
        # when there are no others, the admins.
        return [person for person in people if person != requester]

    async def authorize_review(self, *, escalation_id: int, user: str) -> tuple[Escalation, Debate]:
        """The escalation, if `user` may decide it; NotAllowedError otherwise. Who may is the
        server's decision (`deciders`), whatever channel the request was posted in."""
        escalation, debate = await self._escalation(escalation_id)
        if user == debate.requested_by and not self.allow_self_review:
            raise NotAllowedError(
                f"You asked for debate #{debate.id}, so someone else must decide its review."
                " Nothing was changed. (A workspace that wants requesters to review their own"
                " debates sets DEBATEBOT_ALLOW_SELF_REVIEW=true.)",
                plain="You asked for this debate, so someone else must decide its review.",
            )
        reviewers = await self.deciders(debate)
        if not await self.directory.may_review(user, reviewers):
            who = ", ".join(kit.mention(p) for p in reviewers) or "workspace admins"
            raise NotAllowedError(
                f"Only the reviewers of debate #{debate.id}'s channel ({who}) can decide it."
                " Nothing was changed.",
                plain="Only the reviewers of this debate's channel can decide this review.",
            )
        return escalation, debate

    async def existing_review(self, escalation_id: int) -> Review | None:
        return await self.db(lambda s: reviews.review_of(s, escalation_id=escalation_id))

    async def decide(
        self, *, escalation_id: int, user: str, decision: EscalationState, note: str | None
    ) -> tuple[Review, bool]:
        """Record a reviewer's decision once, with the review request shown decided (an owed
        update, delivered like every other message). *Another round* is admitted before the
        decision is stored, so one that cannot run changes nothing."""
        escalation, debate = await self.authorize_review(escalation_id=escalation_id, user=user)
        more = None
        if decision == EscalationState.ANOTHER_ROUND:
            more = await self._another_round(debate, escalation_id)
        now = utcnow()
        drafts = owed.decided(
            escalation, debate, reviewer=user, decision=decision, note=note, at=now
        )
        try:
            review, created = await self.db(
                lambda s: reviews.record_review(
                    s,
                    escalation_id=escalation_id,
                    reviewer=user,
                    decision=decision,
                    note=note,
                    decided_at=now,
                    drafts=drafts,
                    receipts=self.receipts,
                    receipt_drafts=owed.receipt_files,
                )
            )
        except DebateNotFoundError as error:  # removed while the reviewer decided
            raise _gone(escalation_id) from error
        if not created:
            return review, False
        self.notifier.wake()
        if self.metrics is not None:
            waited = (review.created_at - escalation.created_at).total_seconds()
            self.metrics.review_turnaround.observe(max(0.0, waited))
        if self.after_review is not None:
            await self.after_review(debate, review)
        if more is not None:
            started = await self._enqueue(more)
            if started.created:
                assert started.debate.id is not None
                rounds = more.spec.max_rounds
                await self.notifier.owe(debate, [owed.another_round(rounds, started.debate.id)])
        return review, True

    async def _another_round(self, debate: Debate, escalation_id: int) -> Admitted:
        """The continuation of `debate` with one round more than it ran, admitted."""
        assert debate.id is not None
        debate_id = debate.id
        record = await self.db(lambda s: endings.verdict_for(s, debate_id=debate_id))
        spec = DebateSpec.model_validate_json(debate.spec_json)
        if not definition_for(spec.protocol).flags.another_round:
            # Other protocols end on their own rule (a vote, convergence, a judgment), so one
            # more round of them is a new debate, not a continuation.
            continued = " and ".join(flagged(lambda flags: flags.another_round))
            raise CommandError(
                f"another round continues {continued} debates only; this was `{spec.protocol}`."
                " Start a new debate with more --rounds instead"
            )
        ran = len(StoredResult.read(record.result_json).rounds) if record is not None else 0
        request = DebateRequest(
            trigger_key=f"another_round:{escalation_id}",
            source=DebateSource.ANOTHER_ROUND,
            asked=FollowUp(
                original_id=debate.id,
                spec=spec,
                continues=True,
                rounds=ran + 1,
                reviewers_place=debate.reviewers_channel_id,
            ),
            origin=_origin_of(debate),
            requested_by=debate.requested_by,
            review_in=debate.review_channel_id,
        )
        try:
            return await self.intake.admit(request)
        except NotAdmittedError as error:
            raise CommandError(f"another round is not possible: {error}") from error

    async def _enqueue(self, admitted: Admitted) -> Started:
        try:
            return await self.intake.enqueue(admitted)
        except NotAdmittedError as error:
            raise CommandError(str(error)) from error

    async def debate_anyway(self, *, debate_id: int, user: str) -> Started:
        """Start the debate a triage decided against, in the same thread, exactly once however
        often the button is clicked; it owes the answer message an update saying who did."""
        original = await self.db(lambda s: queue.get_debate(s, debate_id=debate_id))
        if original.triage != TriageState.ANSWERED or original.channel_id is None:
            raise CommandError(f"debate #{debate_id} was not answered without a debate")
        record = await self.db(lambda s: endings.verdict_for(s, debate_id=debate_id))
        assert record is not None
        answered = StoredResult.read(record.result_json)
        spec = DebateSpec.model_validate_json(original.spec_json)
        try:
            started = await self.intake.submit(
                DebateRequest(
                    trigger_key=f"anyway:{debate_id}",
                    source=DebateSource.DEBATE_ANYWAY,
                    asked=FollowUp(original_id=debate_id, spec=spec),
                    origin=slack_origin(original.channel_id, original.thread_ts),
                    requested_by=user,
                )
            )
        except NotAdmittedError as error:
            raise CommandError(str(error)) from error
        if started.created:
            assert started.debate.id is not None
            taken = owed.answer_taken(original, answered, user, started.debate.id)
            await self.notifier.owe(original, [taken])
        return started

    async def record_feedback(
        self, *, value: str, user: str, channel: str, message_ts: str | None
    ) -> tuple[int, bool]:
        """Store a thumbs up or down from a verdict's feedback buttons: (debate id, changed).
        The click must come from the verdict message of the debate it names, so a forged
        payload cannot vote on another debate; NotAllowedError otherwise."""
        kind, _, raw_id = value.partition(":")
        if kind not in set(FeedbackValue) or not (raw_id.isascii() and raw_id.isdigit()):
            raise NotAllowedError("This feedback button is not one of mine; nothing was recorded.")
        debate_id = int(raw_id)
        rows = await self.db(lambda s: outbox.rows_of(s, debate_id=debate_id))
        verdicts = {
            (c, ts)
            for row in rows
            if row.key.split(":")[0] == "verdict"
            for c, ts in row.deliveries
        }
        if (channel, message_ts) not in verdicts:
            log.warning("feedback for debate %s from a message that is not its verdict", raw_id)
            raise NotAllowedError(
                "This feedback does not belong to a verdict of mine; nothing was recorded."
            )
        _, changed = await self.db(
            lambda s: reviews.record_feedback(
                s, debate_id=debate_id, user_id=user, value=FeedbackValue(kind)
            )
        )
        return debate_id, changed


def _origin_of(debate: Debate) -> Origin:
    """The Slack conversation and thread a follow-up of `debate` lives in."""
    if debate.channel_id is None:
        raise CommandError(
            f"debate #{debate.id} was not asked in Slack; decide it where it was asked"
            " (`debatebot web` shows its review)"
        )
    return slack_origin(debate.channel_id, debate.thread_ts)


def _gone(escalation_id: int) -> ReviewGoneError:
    """The refusal of a decision on a review request that no longer exists, logged in a line."""
    log.warning(
        "a decision on review request %s, which no longer exists, was refused", escalation_id
    )
    return ReviewGoneError(
        f"Review request {escalation_id} no longer exists (its debate was deleted, or the"
        " request was removed), so your decision was not recorded and nothing was changed. If"
        " the question still needs a decision, start a new debate with `/debate`."
    )
