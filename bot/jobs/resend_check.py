"""Posting an owed message effectively once: a post whose fate at Slack is unknown is looked for
in Slack before it is sent again.

Every post of an outbox row carries its key in Slack's message metadata (`event_type`
`debatebot_outbox`, `event_payload` the row's id and key: "a JSON object with event_type and
event_payload fields", stored with the message and unseen by people). Just before a post is
handed to Slack the row is marked in doubt (bot.store.post_doubt); Slack's ts clears it by
recording the message, and so does an answer that shows Slack did not take it. A row still in
doubt when it is sent again (the process was killed while Slack held the answer, or the call
timed out or met a 5xx after Slack took it) is first looked for: in its thread
(`conversations.replies`), or at the top of its channel or DM (`conversations.history`), among
the bot's messages from a little before the mark to a while after it, with
`include_all_metadata` (without it, Slack returns no metadata). A copy found is recorded as the
delivery and nothing is posted.

When the lookup itself fails:
- Slack does not answer, answers 5xx, or rate limits it (outside the Slack Marketplace, these
  methods allow one call a minute): the row is retried later, honouring `Retry-After`, and not
  sent blind. Its deadline still bounds it.
- Slack refuses the bot token: delivery pauses, as for any call (bot.slackweb.token).
- `missing_scope` (no `*:history` scope), `not_in_channel` (the bot may post in a public
  channel it is not in, with `chat:write.public`, but not read it), `channel_not_found`,
  `thread_not_found` or any other refusal: Slack will not say, so the message is posted and its
  answer decides (the post meets the same channel or thread refusal and is handled as one). A
  copy may then repeat; the log says so.

A request Slack is still handling when the lookup is made (a timed-out call Slack carries out
later than the retry's backoff) is not seen by it: the one repeat left.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from bot.messages.kit import Message
from bot.slackweb.errors import PostError, TokenRefusedError
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import Posted, SlackPoster
from bot.store import post_doubt
from bot.store.db import in_session
from bot.store.errors import DatabaseUnavailableError
from bot.store.outbox_tables import Outbox
from bot.store.tenancy import EVERY_WORKSPACE
from engine.models import utcnow

log = logging.getLogger(__name__)
R = TypeVar("R")

EVENT_TYPE = "debatebot_outbox"
"""The metadata `event_type` of every owed message ("alphanumeric ... human readable")."""
BEFORE_S = 120.0
"""How long before the mark a copy may carry Slack's ts: the two clocks may differ."""
AFTER_S = 600.0
"""How long after the mark Slack may have stored it: a request sent just before the process died
or gave up waiting is still handled."""


def metadata_of(row: Outbox) -> dict[str, Any]:
    """The metadata every post of `row` carries: which outbox row it delivers."""
    return {"event_type": EVENT_TYPE, "event_payload": {"outbox_id": row.id, "key": row.key}}


class SendOnce:
    """Posts outbox rows through `poster`, looking first for a copy of one whose last post's
    fate is unknown (see the module's rules)."""

    def __init__(
        self, *, engine: Engine, poster: SlackPoster, directory: SlackDirectory, owner: str
    ) -> None:
        self.engine = engine
        self.poster = poster
        self.directory = directory
        self.owner = owner

    async def post(
        self, row: Outbox, *, channel: str, message: Message, thread_ts: str | None = None
    ) -> Posted:
        """Where Slack holds `row`'s message in `channel` (in `thread_ts`): a copy an earlier
        post left, else a new post. Raises PostError as the post does (a retryable one also
        when the lookup must wait, or when another process now holds the row), and
        TokenRefusedError."""
        row_id = row.id or 0
        if row.in_doubt_at is not None:
            found = await self._find(row, channel, thread_ts, row.in_doubt_at)
            if found is not None:
                return found
        marked = await self._db(
            lambda s: post_doubt.sending(s, row_id=row_id, owner=self.owner, at=utcnow())
        )
        if not marked:
            raise PostError(
                f"{row.key} not posted: another process holds it now",
                code="claim_lost",
                retryable=True,
            )
        try:
            return await self.poster.post(
                channel=channel,
                message=message,
                thread_ts=thread_ts,
                attempts=1,
                metadata=metadata_of(row),
            )
        except TokenRefusedError:
            await self._not_taken(row_id)
            raise
        except PostError as error:
            # A refusal, or a 429 ("rate limited": the request was not carried out), leaves no
            # copy; a timeout, a 5xx or a lost connection may have.
            if not error.retryable or error.code == "ratelimited":
                await self._not_taken(row_id)
            raise

    async def _find(
        self, row: Outbox, channel: str, thread_ts: str | None, since: datetime
    ) -> Posted | None:
        """The copy of `row` Slack took from a post whose answer was lost, or None (none, or
        Slack will not say: the module's rules)."""
        try:
            found = await self.directory.bot_messages(
                channel,
                thread_ts=thread_ts,
                oldest=_ts(since - timedelta(seconds=BEFORE_S)),
                latest=_ts(since + timedelta(seconds=AFTER_S)),
            )
        except TokenRefusedError as refused:
            if refused.code != "missing_scope":
                raise
            log.warning("%s: cannot look for an earlier copy (%s); posting it", _what(row), refused)
            return None
        except PostError as error:
            if error.retryable:
                raise
            log.warning("%s: cannot look for an earlier copy (%s); posting it", _what(row), error)
            return None
        for ts, metadata in found.messages:
            if _delivers(metadata, row):
                log.info(
                    "%s was posted before (%s in %s): recorded, not posted again",
                    _what(row),
                    ts,
                    channel,
                )
                return Posted(channel=channel, ts=ts)
        if not found.complete:
            log.warning(
                "%s: the earlier post was not among the messages read; posting it", _what(row)
            )
        return None

    async def _not_taken(self, row_id: int) -> None:
        # Left set when the store does not answer: the next send only looks once more.
        with contextlib.suppress(DatabaseUnavailableError):
            await self._db(lambda s: post_doubt.not_taken(s, row_id=row_id, owner=self.owner))

    async def _db(self, work: Callable[[Session], R]) -> R:
        return await in_session(self.engine, work, workspace=EVERY_WORKSPACE)


def _delivers(metadata: dict[str, Any] | None, row: Outbox) -> bool:
    """Whether a message's metadata says it delivers `row` (Slack hands the payload back as the
    JSON it was given)."""
    if metadata is None or metadata.get("event_type") != EVENT_TYPE:
        return False
    payload = metadata.get("event_payload")
    return (
        isinstance(payload, dict)
        and str(payload.get("outbox_id")) == str(row.id)
        and payload.get("key") == row.key
    )


def _what(row: Outbox) -> str:
    """The row for the log: its debate's (or channel's) message and key."""
    owner = f"channel {row.channel_id}" if row.debate_id is None else f"debate {row.debate_id}"
    return f"{owner}: {row.key}"


def _ts(moment: datetime) -> str:
    """A moment as a Slack ts bound (seconds since the epoch, to the microsecond)."""
    return f"{moment.timestamp():.6f}"
