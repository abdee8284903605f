"""A debate's Slack agent session, sent from the update lane (bot.jobs.delivery.updates).

Slack's agent sessions (docs.slack.dev/ai/agent-sessions) show a thread as a session with a
status, a title and, while `processing`, a native Stop button; Slack then sends
`agent_session_stopped`, and "the session status does not update automatically when the user
clicks stop": the debate's ending moves it out of `processing` (bot.messages.sessions.ENDED).

What Slack may answer, and what each answer does here:
- ok: the status is set. A `warning` of `missing_agent_session_stopped_event_subscription`
  ("while your app is not subscribed, [...] the user sees a non-interactive loading indicator")
  is logged once per process, with the fix.
- `not_authorized` ("only apps declared as agents [...] can create sessions") or
  `unknown_method` (a Slack without the method): the workspace is remembered as having no
  agent sessions, so they are not asked again by this process, and the debate gets today's
  `assistant.threads.setStatus` instead (in the assistant pane; elsewhere the Stop button on the
  parent stands in for Slack's). Logged at WARNING, counted.
- `invalid_arguments` ("acceptable values: active processing suspended closed"): cannot happen
  with `SessionStatus`, so it says Slack changed its rules: logged at WARNING, counted, and the
  row given up (no retry would change the answer).
- anything else goes up the one error ladder (`Outcomes.answered`): retried if Slack may take
  it later, else given up without a notice (a status is a nicety).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from bot.jobs.delivery.outcomes import Outcomes
from bot.messages import owed
from bot.messages.sessions import SessionStatus, SessionUpdate
from bot.metrics import Metrics
from bot.slackweb.errors import PostError
from bot.slackweb.poster import SlackPoster
from bot.store.debate_tables import Debate, DebateSource
from bot.store.outbox_tables import Outbox

log = logging.getLogger(__name__)

NO_SESSIONS = frozenset({"not_authorized", "unknown_method"})
"""Slack's refusals of `agents.sessions.*` that mean this workspace has none for the app."""
NOT_SUBSCRIBED = "missing_agent_session_stopped_event_subscription"
SUBSCRIBE_FIX = (
    "Slack answered agents.sessions.setStatus with the warning"
    f" {NOT_SUBSCRIBED}: people see a spinner they cannot stop. Subscribe the app to the bot"
    " event agent_session_stopped (slack/manifest.yml lists it under"
    " settings.event_subscriptions.bot_events; reinstall the app after changing it)."
)


@dataclass(kw_only=True)
class AgentSessions:
    """Sends session statuses; remembers, per workspace, that Slack has no sessions for the
    app there (for as long as the process runs: a reinstall as an agent is found on restart)."""

    outcomes: Outcomes
    poster: SlackPoster
    metrics: Metrics | None = None
    without: set[str] = field(default_factory=set)
    """Workspaces (team ids) whose Slack refused agent sessions: they get the fallback."""
    warned: bool = False

    async def send(self, row: Outbox, debate: Debate) -> None:
        """Deliver `row`, a session status (or an assistant status owed before sessions)."""
        if row.key == owed.ASSISTANT_STATUS:
            await self._assistant(row, debate, row.text)
            return
        update = SessionUpdate.of_row(row.text, row.blocks)
        if update.status is not SessionStatus.PROCESSING and row.version == 1:
            # The debate ended before any turn started: no session was opened to end.
            await self.outcomes.sent(row, [], "no agent session was opened")
            return
        team = row.team_id or ""
        if team not in self.without:
            try:
                warning = await self.poster.session_status(
                    channel=row.channel_id,
                    thread_ts=debate.thread_ts or "",
                    status=update.status,
                    title=update.title,
                    attempts=1,
                )
            except PostError as error:
                if not await self._refused(row, update, error):
                    return
            else:
                if warning == NOT_SUBSCRIBED and not self.warned:
                    self.warned = True
                    log.warning(SUBSCRIBE_FIX)
                await self.outcomes.sent(row, [], f"agent session {update.status.value}")
                return
        line = update.line if update.status is SessionStatus.PROCESSING else ""
        await self._assistant(row, debate, line)

    async def _refused(self, row: Outbox, update: SessionUpdate, error: PostError) -> bool:
        """Slack refused the status: whether the fallback should be sent instead."""
        counted = error.code in NO_SESSIONS or error.code == "invalid_arguments"
        if counted and self.metrics is not None:
            self.metrics.session_refusals.labels(update.status.value, error.code).inc()
        if error.code in NO_SESSIONS:
            self.without.add(row.team_id or "")
            log.warning(
                "workspace %s: Slack refused agents.sessions.setStatus (%s): debates there run"
                " without agent sessions, with assistant.threads.setStatus in the assistant"
                " pane and the Stop button on each parent. To have Slack's own Stop button,"
                " declare the app an agent in its settings (Agents & AI Apps) and restart.",
                row.team_id,
                error.code,
            )
            return True
        if error.code == "invalid_arguments":
            log.warning(
                "debate %s: Slack refused the agent session status %r (invalid_arguments);"
                " its accepted statuses may have changed: check agents.sessions.setStatus",
                row.debate_id,
                update.status.value,
            )
            await self.outcomes.refuse(row, error.code)
            return False
        code = await self.outcomes.answered(row, error)
        if code is not None:
            await self.outcomes.refuse(row, code)
        return False

    async def _assistant(self, row: Outbox, debate: Debate, line: str) -> None:
        """Today's assistant status, for a debate in the assistant pane (a status line "" clears
        it); other debates have no status line where sessions are not available."""
        if debate.source != DebateSource.ASSISTANT:
            await self.outcomes.sent(row, [], "no agent session in this workspace")
            return
        try:
            await self.poster.assistant_status(
                channel=row.channel_id,
                thread_ts=debate.thread_ts or "",
                status=line,
                attempts=1,
                loading_messages=list(owed.LOADING_MESSAGES) if line else None,
            )
        except PostError as error:
            code = await self.outcomes.answered(row, error)
            if code is not None:
                await self.outcomes.refuse(row, code)
            return
        await self.outcomes.sent(row, [], "assistant status")
