"""What the Slack listeners ask for, kept out of the listeners so they stay thin: queue a debate
from a command, a modal, an ADR post or a reaction; decide a review; change channel settings;
build App Home.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError
from sqlalchemy import Engine
from sqlmodel import Session

from bot.adr import adr_title, is_adr
from bot.hosts import (
    Fetched,
    HostClients,
    HostLink,
    LinkError,
    NoAdrError,
    fetch,
    find_link,
    is_adr_path,
)
from bot.messages import home_tab, kit, posts
from bot.messages.owed import DebateNotifier
from bot.metrics import Metrics
from bot.settings import SettingsError
from bot.slack import triggers
from bot.slack.commands import LINKED_QUESTION, DebateCommand, parse_command
from bot.slack.errors import CommandError, NotAllowedError
from bot.slackweb.files import UploadRefusedError, Uploads, is_document_upload, read_upload
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import SlackPoster
from bot.store import operations, outbox, repository
from bot.store import slack as store
from bot.store.db import in_session
from bot.store.errors import BudgetExceededError, InFlightLimitError, StoreNoAnswerError
from bot.store.outbox import Draft
from bot.store.repository import InFlightLimits, SpendCaps
from bot.store.results import StoredResult
from bot.store.tables import (
    ChannelSettings,
    Debate,
    DebateSource,
    Escalation,
    EscalationState,
    FeedbackValue,
    Review,
    TriageState,
)
from engine.errors import SpecError
from engine.models import ContextDocument, DebateSpec
from engine.protocols import PROTOCOL_NAMES, checked_protocol

log = logging.getLogger(__name__)
R = TypeVar("R")


@dataclass(frozen=True)
class Started:
    debate: Debate
    created: bool


class NewSpec(Protocol):
    """Builds a debate's spec from what was asked and the deployment's defaults (the
    composition root's `DebateServices.new_spec`)."""

    def __call__(
        self,
        question: str,
        *,
        context: list[ContextDocument] | None = ...,
        protocol: str = ...,
        rounds: int | None = ...,
        default_rounds: int | None = ...,
        budget_usd: float | None = ...,
        threshold: float | None = ...,
        stances_for: Sequence[str] = ...,
        stances_against: Sequence[str] = ...,
        route: bool = ...,
    ) -> DebateSpec: ...


ReviewFollower = Callable[[Debate, Review], Awaitable[None]]
"""Told of each review decision (the pull request comment shows it)."""


class SlackDebates:
    """The bot's use cases, on the store, the notifier and Slack's directory."""

    def __init__(
        self,
        *,
        engine: Engine,
        new_spec: NewSpec,
        notifier: DebateNotifier,
        poster: SlackPoster,
        directory: SlackDirectory,
        wake_workers: Callable[[], None],
        protocols: tuple[str, ...] = PROTOCOL_NAMES,
        limits: InFlightLimits | None = None,
        caps: SpendCaps | None = None,
        review_channel: str | None = None,
        allow_self_review: bool = False,
        metrics: Metrics | None = None,
        hosts: HostClients | None = None,
        after_review: ReviewFollower | None = None,
        uploads: Uploads | None = None,
    ) -> None:
        self.engine = engine
        self.new_spec = new_spec
        self.notifier = notifier
        self.poster = poster
        self.directory = directory
        self.wake_workers = wake_workers
        self.protocols = protocols
        self.limits = limits
        self.caps = caps or SpendCaps()
        self.review_channel = review_channel
        self.allow_self_review = allow_self_review
        self.metrics = metrics
        self.hosts = hosts
        self.after_review = after_review
        self.uploads = uploads or Uploads()

    async def db(self, work: Callable[[Session], R]) -> R:
        return await in_session(self.engine, work)

    async def settings_of(self, channel: str) -> ChannelSettings:
        return await self.db(lambda s: store.channel_settings(s, channel_id=channel))

    # --- starting debates ------------------------------------------------------------------

    def _spec(
        self,
        settings: ChannelSettings,
        question: str,
        *,
        context: list[ContextDocument] | None = None,
        protocol: str | None = None,
        rounds: int | None = None,
        budget_usd: float | None = None,
        stances_for: tuple[str, ...] = (),
        stances_against: tuple[str, ...] = (),
        route: bool | None = None,
    ) -> DebateSpec:
        """A validated spec with the channel's defaults; CommandError says what to change."""
        protocol = protocol or settings.protocol
        try:
            spec = self.new_spec(
                question,
                context=list(context or []),
                protocol=protocol,
                rounds=rounds,
                default_rounds=settings.rounds,
                budget_usd=budget_usd if budget_usd is not None else settings.budget_usd,
                threshold=settings.threshold,
                stances_for=stances_for,
                stances_against=stances_against,
                route=settings.route and protocol == "panel" if route is None else route,
            )
            checked_protocol(spec)
        except ValidationError as error:
            problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in error.errors())
            raise CommandError(f"cannot start this debate: {problems}") from error
        except (SpecError, SettingsError) as error:
            raise CommandError(f"cannot start this debate: {error}") from error
        return spec

    def _command_spec(
        self,
        settings: ChannelSettings,
        command: DebateCommand,
        *,
        question: str | None = None,
        context: list[ContextDocument] | None = None,
    ) -> DebateSpec:
        """The spec a `/debate`-style command asks for (its question, or `question` when the
        caller framed it, e.g. an ADR pasted in the assistant)."""
        return self._spec(
            settings,
            question or command.question,
            context=context,
            protocol=command.protocol,
            rounds=command.rounds,
            budget_usd=command.budget_usd,
            stances_for=command.stances_for,
            stances_against=command.stances_against,
            route=command.route or None,
        )

    async def _start(
        self,
        *,
        trigger_key: str,
        spec: DebateSpec,
        source: DebateSource,
        channel: str,
        user: str | None,
        thread_ts: str | None = None,
        triage: bool = False,
        parent_debate_id: int | None = None,
        review_channel_id: str | None = None,
        link: str | None = None,
    ) -> Started:
        try:
            debate, created = await self.db(
                lambda s: repository.enqueue_debate(
                    s,
                    trigger_key=trigger_key,
                    spec=spec,
                    source=source,
                    channel_id=channel,
                    thread_ts=thread_ts,
                    requested_by=user,
                    messages=self.notifier.opening,
                    limits=self.limits,
                    caps=self.caps,
                    triage=triage,
                    parent_debate_id=parent_debate_id,
                    review_channel_id=review_channel_id,
                    # Who decides is the server's choice, never `--review-in`'s: a debate in
                    # a channel is that channel's; one in a DM (the assistant pane) goes to
                    # the deployment's review channel, or to the workspace admins.
                    reviewers_channel_id=self.review_channel if channel[:1] == "D" else channel,
                    link=link,
                )
            )
        except InFlightLimitError as error:
            raise CommandError(_limit_text(error)) from error
        except BudgetExceededError as error:
            raise CommandError(_budget_text(error)) from error
        except StoreNoAnswerError as error:
            # The insert may still be committed when the database answers: nobody may be told
            # that nothing was queued.
            raise StoreNoAnswerError(str(error), may_have_stored=True) from error
        if created:
            self.wake_workers()
            self.notifier.wake()
        return Started(debate, created)

    async def check_reachable(self, channel: str) -> None:
        """Refuse (CommandError) before anything is queued or paid for when the bot cannot
        post in `channel`, saying how to fix it."""
        problem = await self.directory.cannot_post_in(channel)
        if problem is None:
            return
        _, name = await self.directory.bot_identity()
        if problem == "is_archived":
            raise CommandError(
                f"this channel is archived, so I cannot post a debate in it ({problem})"
            )
        raise CommandError(
            f"I am not in this channel, so I could not post the debate here ({problem})."
            f" Run `/invite @{name}` and ask again"
        )

    async def start_from_command(
        self,
        *,
        command: DebateCommand,
        channel: str,
        user: str,
        trigger_key: str,
        source: DebateSource,
        reachable: bool = False,
    ) -> Started:
        """Queue the debate a command or the form asks for; `reachable` when the caller has
        already checked that the bot can post in the channel."""
        settings = await self.settings_of(channel)
        if not reachable:
            await self.check_reachable(channel)
        if command.review_in:
            await self.check_reachable(command.review_in)
        context, question, link = None, None, None
        if command.adr_url:
            link, fetched = await self.linked(command.adr_url)
            context = fetched.documents
            if command.question == LINKED_QUESTION:
                question = (
                    f"Should the team accept this architecture decision record: {fetched.title}?"
                )
        spec = self._command_spec(settings, command, question=question, context=context)
        return await self._start(
            trigger_key=trigger_key,
            spec=spec,
            source=source,
            channel=channel,
            user=user,
            review_channel_id=command.review_in,
            link=link.url if link else None,
        )

    async def linked_adr(
        self, text: str, settings: ChannelSettings
    ) -> tuple[HostLink, Fetched] | None:
        """The ADR behind a link in `text`, or None when the link leads to no ADR (a source
        file, a pull request without ADR files). CommandError when the host refuses."""
        try:
            link, fetched = await self.linked(text)
        except CommandError as error:
            if isinstance(error.__cause__, NoAdrError):
                return None
            raise
        lead = fetched.documents[0].text
        if link.kind == "file" and not (
            is_adr_path(link.path) or is_adr(lead, settings.adr_pattern)
        ):
            return None
        return link, fetched

    def link_in(self, text: str) -> HostLink | None:
        """The first GitHub or GitLab link in `text`; CommandError for one whose path could
        reach outside its repository (`..`, an encoded `/`), which is never fetched."""
        if self.hosts is None:
            return None
        try:
            return find_link(text, self.hosts.config)
        except LinkError as error:
            raise CommandError(str(error)) from error

    async def linked(self, text: str) -> tuple[HostLink, Fetched]:
        """The ADR a GitHub or GitLab link in `text` points to, fetched; CommandError says why
        it cannot be (no such link, a private repository, a rate limit, a file too large)."""
        link = self.link_in(text)
        if link is None or self.hosts is None:
            raise CommandError(
                "that is not a link to a file or a pull request on the configured GitHub or"
                " GitLab (DEBATEBOT_GITHUB_URL, DEBATEBOT_GITLAB_URL)"
            )
        try:
            return link, await fetch(link, self.hosts)
        except LinkError as error:
            raise CommandError(str(error)) from error

    async def start_from_adr(
        self, *, channel: str, ts: str, user: str | None, text: str
    ) -> Started | None:
        """A top-level ADR post in a watching channel debates itself in its thread."""
        settings = await self.settings_of(channel)
        if not settings.adr_watch:
            return None
        if self.link_in(text) is not None:
            return await self._start_linked(settings, channel=channel, ts=ts, user=user, text=text)
        if not is_adr(text, settings.adr_pattern):
            return None
        spec = self._spec(
            settings,
            triggers.adr_question(text),
            context=[ContextDocument(title=adr_title(text), text=text)],
            protocol="adversarial",
        )
        return await self._start(
            trigger_key=f"adr:{channel}:{ts}",
            spec=spec,
            source=DebateSource.ADR,
            channel=channel,
            user=user,
            thread_ts=ts,
            triage=settings.triage,
        )

    async def _start_linked(
        self, settings: ChannelSettings, *, channel: str, ts: str, user: str | None, text: str
    ) -> Started | None:
        """A post linking an ADR on GitHub or GitLab. A link posted in passing (a source file,
        a pull request without ADR files) starts nothing and is not answered."""
        found = await self.linked_adr(text, settings)
        if found is None:
            return None
        link, fetched = found
        documents = list(fetched.documents)
        if text.strip():
            documents.append(ContextDocument(title="The Slack message with the link", text=text))
        spec = self._spec(
            settings,
            f"Should the team accept this architecture decision record: {fetched.title}?",
            context=documents,
            protocol="adversarial",
        )
        return await self._start(
            trigger_key=f"adr:{channel}:{ts}",
            spec=spec,
            source=DebateSource.LINK,
            channel=channel,
            user=user,
            thread_ts=ts,
            triage=settings.triage,
            link=link.url,
        )

    async def start_from_upload(
        self, *, channel: str, ts: str, user: str | None, text: str, files: list[dict[str, Any]]
    ) -> Started | None:
        """A top-level post with an uploaded ADR (a Markdown file or a snippet) in a watching
        channel: the file is read with the bot token and debated as the context. A file that
        cannot be read raises CommandError saying why (too large, binary, no access)."""
        settings = await self.settings_of(channel)
        uploads = [f for f in files if is_document_upload(f)]
        if not settings.adr_watch or not uploads:
            return None
        documents = []
        for file in uploads:
            try:
                documents.append(
                    await read_upload(
                        self.poster.client,
                        str(file.get("id")),
                        files_url=self.uploads.files_url,
                        timeout_s=self.uploads.timeout_s,
                    )
                )
            except UploadRefusedError as error:
                raise CommandError(str(error)) from error
        pattern = settings.adr_pattern
        adr = next((d for d in documents if is_adr(d.text, pattern)), None)
        if adr is None and not is_adr(text, pattern):
            return None
        lead = adr or documents[0]
        context = [lead, *(d for d in documents if d is not lead)]
        if text.strip():
            context.append(ContextDocument(title="The message the file came with", text=text))
        spec = self._spec(
            settings, triggers.adr_question(lead.text), context=context, protocol="adversarial"
        )
        return await self._start(
            trigger_key=f"adr:{channel}:{ts}",
            spec=spec,
            source=DebateSource.UPLOAD,
            channel=channel,
            user=user,
            thread_ts=ts,
            triage=settings.triage,
        )

    async def start_from_reaction(
        self, *, channel: str, ts: str, user: str, reaction: str
    ) -> Started | None:
        """The channel's review reaction debates the thread the message belongs to."""
        settings = await self.settings_of(channel)
        if reaction != settings.trigger_reaction:
            return None
        return await self.start_from_thread(
            channel=channel, ts=ts, user=user, source=DebateSource.REACTION, triage=settings.triage
        )

    async def start_from_thread(
        self, *, channel: str, ts: str, user: str, source: DebateSource, triage: bool = False
    ) -> Started:
        """Debate the whole thread `ts` belongs to, read from Slack, in that thread (after a
        triage, when `triage`)."""
        settings = await self.settings_of(channel)
        await self.check_reachable(channel)
        client = self.poster.client
        root = await triggers.thread_root(client, channel=channel, ts=ts)
        messages = await triggers.read_thread(client, channel=channel, thread_ts=root)
        bot_id, _ = await self.directory.bot_identity()
        people = [m for m in messages if m.get("user") != bot_id and not m.get("bot_id")]
        context = [triggers.thread_document(people)]
        question = triggers.thread_question(people)
        link = None
        opening = kit.unescape(people[0].get("text") or "") if people else ""
        found = None
        if self.link_in(opening) is not None:
            found = await self.linked_adr(opening, settings)
        if found is not None:
            # The thread discusses a linked ADR: the ADR itself is the material first.
            link, fetched = found
            context = [*fetched.documents, *context]
            question = f"Should the team accept this architecture decision record: {fetched.title}?"
        spec = self._spec(settings, question, context=context)
        return await self._start(
            trigger_key=f"thread:{channel}:{root}",
            spec=spec,
            source=source,
            channel=channel,
            user=user,
            thread_ts=root,
            triage=triage,
            link=link.url if link else None,
        )

    async def start_from_assistant(
        self, *, channel: str, thread_ts: str, user: str, text: str, ts: str
    ) -> Started:
        """A message in an assistant thread debates itself there. Options are read from its
        first line only (pasted material may hold anything); an ADR is framed like an ADR
        post, other long text is the debate's material under its first line as the question.
        The review request goes to `--review-in`, else the workspace's review channel."""
        first, _, rest = text.partition("\n")
        parsed = parse_command(first, protocols=self.protocols)
        if not isinstance(parsed, DebateCommand):
            raise CommandError(
                "tell me what to debate: paste the decision, the design or the ADR (`/debate`'s"
                " options go on the first line)"
            )
        body = f"{parsed.question}\n{rest}".strip() if rest.strip() else parsed.question
        context: list[ContextDocument] = []
        question = parsed.question
        if is_adr(body):
            question = triggers.adr_question(body)
            context = [ContextDocument(title=adr_title(body), text=body)]
        elif rest.strip():
            context = [ContextDocument(title="Pasted in the assistant", text=body)]
        review_in = parsed.review_in or self.review_channel
        if review_in:
            await self.check_reachable(review_in)
        settings = await self.settings_of(channel)
        spec = self._command_spec(settings, parsed, question=question, context=context)
        return await self._start(
            trigger_key=f"assistant:{channel}:{ts}",
            spec=spec,
            source=DebateSource.ASSISTANT,
            channel=channel,
            user=user,
            thread_ts=thread_ts,
            review_channel_id=review_in,
        )

    # --- reviews -----------------------------------------------------------------------------

    async def _escalation(self, escalation_id: int) -> tuple[Escalation, Debate]:
        escalation = await self.db(lambda s: store.get_escalation(s, escalation_id=escalation_id))
        if escalation is None:
            raise CommandError(f"review request {escalation_id} does not exist")
        debate_id = escalation.debate_id
        debate = await self.db(lambda s: repository.get_debate(s, debate_id=debate_id))
        return escalation, debate

    async def deciders(self, debate: Debate) -> list[str]:
        """The people (user ids and user groups) who may decide `debate`'s review, as the
        server has it now: the reviewers configured for the channel chosen when the debate was
        queued (`reviewers_channel_id`), without the requester unless self-review is allowed.
        Empty means the workspace admins decide (then too without the requester)."""
        if debate.reviewers_channel_id is None:
            return []
        settings = await self.settings_of(debate.reviewers_channel_id)
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
        return await self.db(lambda s: store.review_of(s, escalation_id=escalation_id))

    async def decide(
        self, *, escalation_id: int, user: str, decision: EscalationState, note: str | None
    ) -> tuple[Review, bool]:
        """Record a reviewer's decision once, with the review request shown decided (an owed
        update, delivered like every other message)."""
        escalation, debate = await self.authorize_review(escalation_id=escalation_id, user=user)
        more = None
        if decision == EscalationState.ANOTHER_ROUND:
            more = await self._one_more_round(debate)
        review, created = await self.db(
            lambda s: store.record_review(
                s,
                escalation_id=escalation_id,
                reviewer=user,
                decision=decision,
                note=note,
                messages=lambda review, debate: self.notifier.decided(escalation, review, debate),
            )
        )
        if not created:
            return review, False
        self.notifier.wake()
        if self.metrics is not None:
            waited = (review.created_at - escalation.created_at).total_seconds()
            self.metrics.review_turnaround.observe(max(0.0, waited))
        if self.after_review is not None:
            await self.after_review(debate, review)
        if more is not None:
            await self._another_round(debate, escalation_id, *more)
        return review, True

    async def _one_more_round(self, debate: Debate) -> tuple[DebateSpec, int]:
        """The debate's spec forced to one round more than it ran, and that round's number."""
        assert debate.id is not None
        debate_id = debate.id
        record = await self.db(lambda s: repository.verdict_for(s, debate_id=debate_id))
        spec = DebateSpec.model_validate_json(debate.spec_json)
        if spec.protocol != "adversarial":
            # Other protocols end on their own rule (a vote, convergence, a judgment), so one
            # more round of them is a new debate, not a continuation.
            raise CommandError(
                f"another round continues adversarial debates only; this was `{spec.protocol}`."
                " Start a new debate with more --rounds instead"
            )
        rounds = 0
        if record is not None:
            rounds = len(StoredResult.read(record.result_json).rounds)
        more = spec.model_copy(update={"max_rounds": rounds + 1, "min_rounds": rounds + 1})
        try:
            checked_protocol(more)
        except SpecError as error:
            raise CommandError(f"another round is not possible: {error}") from error
        return more, rounds + 1

    async def _another_round(
        self, debate: Debate, escalation_id: int, more: DebateSpec, number: int
    ) -> None:
        assert debate.id is not None
        debate_id = debate.id
        fork, created = await self.db(
            lambda s: store.fork_debate(
                s, debate_id=debate_id, trigger_key=f"another_round:{escalation_id}", spec=more
            )
        )
        if created:
            self.wake_workers()
            text = f":repeat: Round {number} requested; it continues here as debate #{fork.id}."
            notice = posts.notice(text)
            await self.notifier.owe(
                debate,
                [
                    Draft(
                        key=f"notice:another_round:{fork.id}",
                        text=notice.text,
                        blocks=notice.blocks,
                    )
                ],
            )

    async def debate_anyway(self, *, debate_id: int, user: str) -> Started:
        """Start the debate a triage decided against, in the same thread, exactly once however
        often the button is clicked; it owes the answer message an update saying who did."""
        original = await self.db(lambda s: repository.get_debate(s, debate_id=debate_id))
        if original.triage != TriageState.ANSWERED or original.channel_id is None:
            raise CommandError(f"debate #{debate_id} was not answered without a debate")
        spec = DebateSpec.model_validate_json(original.spec_json)
        record = await self.db(lambda s: repository.verdict_for(s, debate_id=debate_id))
        assert record is not None
        answered = StoredResult.read(record.result_json)
        started = await self._start(
            trigger_key=f"anyway:{debate_id}",
            spec=spec,
            source=DebateSource.DEBATE_ANYWAY,
            channel=original.channel_id,
            user=user,
            thread_ts=original.thread_ts,
            parent_debate_id=debate_id,
        )
        if started.created:
            text = (
                f":speaking_head_in_silhouette: {kit.mention(user)} asked for the debate"
                f" anyway: debate #{started.debate.id}, in this thread."
            )
            await self.notifier.owe(
                original, [self.notifier.answer_taken(original, answered, text)]
            )
        return started

    # --- feedback --------------------------------------------------------------------------------

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
            lambda s: store.record_feedback(
                s, debate_id=debate_id, user_id=user, value=FeedbackValue(kind)
            )
        )
        return debate_id, changed

    # --- settings and home -------------------------------------------------------------------

    async def configure(
        self, *, channel: str, user: str, values: dict[str, Any]
    ) -> ChannelSettings:
        current = await self.settings_of(channel)
        if not await self.directory.may_configure(user, current.owners):
            raise NotAllowedError(
                "Only workspace admins and this channel's settings owners can change its debate"
                " settings. Nothing was changed."
            )
        return await self.db(
            lambda s: store.save_channel_settings(
                s, channel_id=channel, updated_by=user, values=values
            )
        )

    async def home(self, *, user: str) -> dict[str, Any]:
        channels = await self.directory.channels_of(user)
        now = datetime.now(UTC)
        month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        open_items = await self.db(store.open_escalations)
        pending: list[home_tab.HomeDebate] = []
        for _escalation, debate in open_items:
            reviewers = await self.deciders(debate)
            if reviewers and await self.directory.is_one_of(user, reviewers):
                pending.append(_home_item(debate))
        recent = await self.db(lambda s: store.recent_debates(s, channel_ids=channels))
        ids = [d.id for d in recent if d.id is not None]
        votes = await self.db(lambda s: store.feedback_counts(s, debate_ids=ids))
        stats = await self.db(store.protocol_stats)
        mine = await self.db(
            lambda s: operations.spend_since(s, since=month_start, requested_by=user)
        )
        everyone = await self.db(lambda s: operations.spend_since(s, since=month_start))
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
        )


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
