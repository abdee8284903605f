"""The triggers that start debates, each turned into one `DebateRequest` for the intake: a
`/debate` command or its form, a top-level ADR post (pasted, linked on GitHub or GitLab, or
uploaded) in a watching channel, the review reaction or the message shortcut on a thread, and a
message in the assistant pane. What each reads first (a linked ADR, an upload, the thread) is
read here; what the debate becomes is the intake's policy."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import Engine

from bot.adr import adr_title, is_adr
from bot.hosts.clients import HostClients
from bot.hosts.fetch import Fetched, fetch
from bot.hosts.links import HostLink, LinkError, NoAdrError, find_link, is_adr_path
from bot.intake.errors import NotAdmittedError, TokenRefusedNotAdmittedError
from bot.intake.intake import Intake, Started
from bot.intake.request import Ask, DebateRequest
from bot.messages import kit
from bot.slack import triggers
from bot.slack.admission import slack_origin
from bot.slack.channel_config import channel_settings_of
from bot.slack.command_text import DebateCommand, parse_command
from bot.slack.errors import CommandError, RefusedTokenError
from bot.slackweb.errors import TokenRefusedError
from bot.slackweb.files import UploadRefusedError, Uploads, is_document_upload, read_upload
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import token_refusal
from bot.slackweb.token import workspace_refusal
from bot.store.channel_tables import ChannelSettings
from bot.store.debate_tables import DebateSource
from bot.store.tenancy import Workspace
from engine.models import DEFAULT_PROTOCOL, ContextDocument
from engine.protocols import protocol_names


@dataclass(kw_only=True, eq=False)
class DebateStarts:
    """Builds each trigger's request and submits it; CommandError says why nothing started."""

    engine: Engine
    intake: Intake
    client: AsyncWebClient
    directory: SlackDirectory
    hosts: HostClients | None = None
    uploads: Uploads = field(default_factory=Uploads)
    protocols: tuple[str, ...] = field(default_factory=protocol_names)
    workspace: Workspace

    async def _settings(self, channel: str) -> ChannelSettings:
        return await channel_settings_of(self.engine, self.workspace, channel)

    async def submit(self, request: DebateRequest) -> Started:
        try:
            return await self.intake.submit(request)
        except TokenRefusedNotAdmittedError as error:
            raise RefusedTokenError(str(error), code=error.code, scope=error.scope) from error
        except NotAdmittedError as error:
            raise CommandError(str(error)) from error

    async def check_token(self) -> None:
        """Refuse (RefusedTokenError) while Slack refuses the workspace's bot token, as it is
        known: a trigger that reads Slack before it asks the intake checks this first."""
        try:
            await self.intake.check_token()
        except TokenRefusedNotAdmittedError as error:
            raise RefusedTokenError(str(error), code=error.code, scope=error.scope) from error

    async def _refused(self, refused: TokenRefusedError) -> RefusedTokenError:
        """Slack refused the token while a trigger read what it needs, before the refusal was
        known: in the words the intake uses once it is (with one workspace, the client has
        told the process's gate by now)."""
        try:
            await self.check_token()
        except RefusedTokenError as known:
            return known
        text = workspace_refusal(refused.code, refused.needed)
        return RefusedTokenError(text, code=refused.code, scope=refused.needed)

    async def check_reachable(self, channel: str) -> None:
        """Refuse (CommandError) before anything is read or queued when the bot cannot post in
        `channel`, saying how to fix it."""
        try:
            await self.intake.check_reachable(channel)
        except NotAdmittedError as error:
            raise CommandError(str(error)) from error

    # --- /debate and its form ----------------------------------------------------------------

    async def start_from_command(
        self,
        *,
        command: DebateCommand,
        channel: str,
        user: str,
        trigger_key: str,
        source: DebateSource,
        thread_ts: str | None = None,
        context: tuple[ContextDocument, ...] = (),
    ) -> Started:
        """Queue the debate a command or the assistant asks for (with `context` pasted beside
        it); with `--adr`, the linked ADR is fetched first and is the material."""
        question, link = command.question, None
        if command.adr_url:
            found, fetched = await self.linked(command.adr_url)
            link = found.url
            context = (*fetched.documents, *context)
            question = question or triggers.titled_adr_question(fetched.title)
        request = _command_request(
            command, question, context, channel, user, trigger_key, source, thread_ts, link
        )
        return await self.submit(request)

    def form_request(
        self, *, command: DebateCommand, channel: str, user: str, trigger_key: str
    ) -> DebateRequest:
        """The form's request, built from what was typed alone (no store, no Slack), so the
        form can be answered at once; CommandError (shown under its question) when it asks for
        nothing. `submit` admits and queues it after."""
        return _command_request(
            command, command.question, (), channel, user, trigger_key, DebateSource.MODAL
        )

    # --- ADR posts, pasted, linked or uploaded -----------------------------------------------

    async def start_from_adr(
        self, *, channel: str, ts: str, user: str | None, text: str
    ) -> Started | None:
        """A top-level ADR post in a watching channel debates itself in its thread."""
        settings = await self._settings(channel)
        if not settings.adr_watch:
            return None
        if self.link_in(text) is not None:
            return await self._start_linked(settings, channel=channel, ts=ts, user=user, text=text)
        if not is_adr(text, settings.adr_pattern):
            return None
        document = ContextDocument(title=adr_title(text), text=text)
        return await self._start_adr(
            triggers.adr_question(text), (document,), DebateSource.ADR, channel, ts, user
        )

    async def _start_adr(
        self,
        question: str,
        context: tuple[ContextDocument, ...],
        source: DebateSource,
        channel: str,
        ts: str,
        user: str | None,
        link: str | None = None,
    ) -> Started:
        return await self.submit(
            DebateRequest(
                trigger_key=f"adr:{channel}:{ts}",
                source=source,
                asked=Ask(question=question, context=context, protocol=DEFAULT_PROTOCOL),
                origin=slack_origin(channel, ts),
                requested_by=user,
                link=link,
            )
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
        question = triggers.titled_adr_question(fetched.title)
        return await self._start_adr(
            question, tuple(documents), DebateSource.LINK, channel, ts, user, link=link.url
        )

    async def start_from_upload(
        self, *, channel: str, ts: str, user: str | None, text: str, files: list[dict[str, Any]]
    ) -> Started | None:
        """A top-level post with an uploaded ADR (a Markdown file or a snippet) in a watching
        channel: the file is read with the bot token and debated as the context. A file that
        cannot be read raises CommandError saying why (too large, binary, no access)."""
        settings = await self._settings(channel)
        uploads = [f for f in files if is_document_upload(f)]
        if not settings.adr_watch or not uploads:
            return None
        await self.check_token()
        documents = []
        for file in uploads:
            try:
                documents.append(
                    await read_upload(
                        self.client,
                        str(file.get("id")),
                        files_url=self.uploads.files_url,
                        timeout_s=self.uploads.timeout_s,
                        http=self.uploads.http,
                    )
                )
            except UploadRefusedError as error:
                cause = error.__cause__
                refused = (
                    token_refusal(cause, "files.info") if isinstance(cause, Exception) else None
                )
                if refused is not None and refused.code not in triggers.ONE_METHOD:
                    raise await self._refused(refused) from error
                raise CommandError(str(error)) from error
        pattern = settings.adr_pattern
        adr = next((d for d in documents if is_adr(d.text, pattern)), None)
        if adr is None and not is_adr(text, pattern):
            return None
        lead = adr or documents[0]
        context = [lead, *(d for d in documents if d is not lead)]
        if text.strip():
            context.append(ContextDocument(title="The message the file came with", text=text))
        question = triggers.adr_question(lead.text)
        return await self._start_adr(
            question, tuple(context), DebateSource.UPLOAD, channel, ts, user
        )

    # --- linked ADRs ---------------------------------------------------------------------------

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

    # --- threads -----------------------------------------------------------------------------

    async def start_from_reaction(
        self, *, channel: str, ts: str, user: str, reaction: str
    ) -> Started | None:
        """The channel's review reaction debates the thread the message belongs to."""
        settings = await self._settings(channel)
        if reaction != settings.trigger_reaction:
            return None
        return await self.start_from_thread(
            channel=channel, ts=ts, user=user, source=DebateSource.REACTION
        )

    async def start_from_thread(
        self, *, channel: str, ts: str, user: str, source: DebateSource
    ) -> Started:
        """Debate the whole thread `ts` belongs to, read from Slack, in that thread."""
        settings = await self._settings(channel)
        await self.check_token()
        await self.check_reachable(channel)
        try:
            root = await triggers.thread_root(self.client, channel=channel, ts=ts)
            messages = await triggers.read_thread(self.client, channel=channel, thread_ts=root)
        except TokenRefusedError as refused:
            raise await self._refused(refused) from refused
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
            question = triggers.titled_adr_question(fetched.title)
        return await self.submit(
            DebateRequest(
                trigger_key=f"thread:{channel}:{root}",
                source=source,
                asked=Ask(question=question, context=tuple(context)),
                origin=slack_origin(channel, root),
                requested_by=user,
                link=link.url if link else None,
            )
        )

    # --- the assistant pane ------------------------------------------------------------------

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
        head = parsed.question or ""
        body = f"{head}\n{rest}".strip() if rest.strip() else head
        context: tuple[ContextDocument, ...] = ()
        question = parsed.question
        if body and is_adr(body):
            question = triggers.adr_question(body)
            context = (ContextDocument(title=adr_title(body), text=body),)
        elif rest.strip():
            context = (ContextDocument(title="Pasted in the assistant", text=body),)
        command = replace(parsed, question=question)
        return await self.start_from_command(
            command=command,
            channel=channel,
            user=user,
            trigger_key=f"assistant:{channel}:{ts}",
            source=DebateSource.ASSISTANT,
            thread_ts=thread_ts,
            context=context,
        )


def _command_request(
    command: DebateCommand,
    question: str | None,
    context: tuple[ContextDocument, ...],
    channel: str,
    user: str,
    trigger_key: str,
    source: DebateSource,
    thread_ts: str | None = None,
    link: str | None = None,
) -> DebateRequest:
    """The request of a `/debate`-style command: its question (or the linked ADR's) and its
    options."""
    if question is None:
        raise CommandError("write the question the debate should decide, or link an ADR")
    ask = Ask(
        question=question,
        context=context,
        protocol=command.protocol,
        rounds=command.rounds,
        budget_usd=command.budget_usd,
        stances_for=command.stances_for,
        stances_against=command.stances_against,
        route=command.route,
    )
    return DebateRequest(
        trigger_key=trigger_key,
        source=source,
        asked=ask,
        origin=slack_origin(channel, thread_ts),
        requested_by=user,
        review_in=command.review_in,
        link=link,
    )
