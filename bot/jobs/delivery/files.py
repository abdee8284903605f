"""A debate's receipt file, shared in its thread from the post lane (bot.jobs.delivery.posts),
in its turn after the verdict (bot.messages.receipt_file), by Slack's upload steps
(bot.slackweb.sharing).

What Slack may answer, and what each answer does here:
- ok: the file is in the thread; the row is sent.
- a 5xx, a 429 (`ratelimited`, Retry-After honoured), a timeout, a connection error, a
  redirect not followed: the one error ladder retries the row (`Outcomes.answered`), all three
  steps again (an upload that was never completed is not shown, so the file appears once).
- `missing_scope` (the app was installed without `files:write`, "allows your app to upload
  files"): the thread gets the command that downloads the receipt instead, and the workspace is
  remembered as unable to upload for as long as the process runs; one WARNING names the scope.
  Not a refusal of the bot token (bot.slackweb.poster.UPLOAD_METHODS): every other message
  goes on.
- anything else (`not_in_channel`, `channel_not_found`, `is_archived`, `invalid_arguments`,
  `file_uploads_disabled`, an upload address off Slack's file host...) will not change by
  trying again: the file is given up with an ERROR saying where the receipt still is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from bot.jobs.delivery.outcomes import Outcomes
from bot.messages.receipt_file import ReceiptFile
from bot.slackweb.errors import PostError
from bot.slackweb.poster import SlackPoster
from bot.slackweb.sharing import FileShares, SharedFile
from bot.store.debate_tables import Debate
from bot.store.outbox_tables import Outbox

log = logging.getLogger(__name__)

NO_SCOPE = "missing_scope"
SCOPE = "files:write"


@dataclass(kw_only=True)
class ReceiptFiles:
    """Shares receipt files; remembers, per workspace, that Slack refused the upload scope."""

    outcomes: Outcomes
    poster: SlackPoster
    shares: FileShares
    without: set[str] = field(default_factory=set)
    """Workspaces (team ids) whose app lacks `files:write`: they get the command instead."""

    async def send(self, row: Outbox, debate: Debate) -> bool:
        """Deliver `row`, a receipt file, in the debate's thread; True when the lane may go on."""
        assert row.debate_id is not None
        receipt = ReceiptFile.of_row(row.debate_id, row.text, row.blocks)
        thread_ts = debate.thread_ts
        if thread_ts is None or debate.halt_reason is not None:
            why = debate.halt_reason or "the debate's thread was never posted"
            await self.outcomes.fail(row, f"no thread to attach the receipt to: {why}")
            return True
        team = row.team_id or ""
        if team in self.without:
            return await self._fallback(row, receipt, thread_ts)
        file = SharedFile(receipt.filename, receipt.content, receipt.filename, receipt.comment)
        try:
            file_id = await self.shares.share(file, channel=row.channel_id, thread_ts=thread_ts)
        except PostError as error:
            return await self._refused(row, receipt, thread_ts, error)
        await self.outcomes.sent(row, [], f"file {file_id}")
        return True

    async def _refused(
        self, row: Outbox, receipt: ReceiptFile, thread_ts: str, error: PostError
    ) -> bool:
        if error.code == NO_SCOPE:
            self.without.add(row.team_id or "")
            log.warning(
                "workspace %s: Slack refused to upload debate %s's receipt (missing_scope): the"
                " app lacks the `%s` scope, so threads get the command that downloads the"
                " receipt instead. Add `%s` to the app's bot scopes (slack/manifest.yml lists"
                " it) and reinstall the app, then restart.",
                row.team_id,
                row.debate_id,
                SCOPE,
                SCOPE,
            )
            return await self._fallback(row, receipt, thread_ts)
        code = await self.outcomes.answered(row, error)
        if code is None:
            return False
        log.error(
            "debate %s: Slack refused the receipt file %s for good (%s): %s; the receipt is"
            " still in the store (`debatebot export %s --format receipt`)",
            row.debate_id,
            receipt.filename,
            code,
            error,
            row.debate_id,
        )
        await self.outcomes.refuse(row, code)
        return True

    async def _fallback(self, row: Outbox, receipt: ReceiptFile, thread_ts: str) -> bool:
        """The command that downloads the receipt, posted in the thread in the file's place."""
        try:
            posted = await self.poster.post(
                channel=row.channel_id, message=receipt.fallback(), thread_ts=thread_ts, attempts=1
            )
        except PostError as error:
            code = await self.outcomes.answered(row, error)
            if code is None:
                return False
            await self.outcomes.refuse(row, code)
            return True
        await self.outcomes.sent(row, [posted], f"thread, without {SCOPE}")
        return True
