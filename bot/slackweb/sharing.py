"""Files the bot shares in a thread (a debate's receipt), by Slack's three upload steps
(docs.slack.dev, files.getUploadURLExternal and files.completeUploadExternal; the app needs the
`files:write` scope, "allows your app to upload files"):

1. `files.getUploadURLExternal` with the file's name and length, with the bot token: a file id
   and an upload address (`SlackPoster.upload_address`).
2. The bytes are POSTed to that address ("files can be sent as raw bytes"; Slack answers HTTP
   200 when it took them). This request carries NO token: the address itself is the
   permission. It goes through `bot.outbound`, so only to Slack's file host (`files_origin`:
   files.slack.com for Slack's own API, the API's origin for a proxy or the tests' emulator),
   never along a redirect, within a deadline. slack_sdk's `files_upload_v2` does steps 1-3 in
   one call, posting wherever step 1's answer points; it is not used, so that the address is
   checked first and each step's failure is its own.
3. `files.completeUploadExternal` shares the file in the channel's thread with an
   `initial_comment` (`SlackPoster.complete_upload`).

Every failure is a `PostError` read by the delivery's one ladder: a 5xx, a 429, a timeout or
a connection error may be retried (the three steps again: an upload never completed is not
shown); a refusal is for good. An upload address off Slack's file host is refused before
anything is sent to it (`upload_off_origin`), as a sign that something rewrites Slack's answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.outbound import Origin, Outbound, OutboundError
from bot.slackweb.errors import PostError
from bot.slackweb.files import files_origin
from bot.slackweb.poster import SlackPoster, classify

UPLOAD_ANSWER_BYTES = 4096
"""The upload address answers a short text ("OK - 7649"); more is not read."""
OFF_ORIGIN = "upload_off_origin"


@dataclass(frozen=True)
class SharedFile:
    """One file to share: its name, bytes, title and the message introducing it."""

    filename: str
    content: bytes
    title: str
    comment: str


@dataclass(frozen=True)
class FileShares:
    """Shares files in threads with `poster`'s client (its token goes only to the Web API),
    posting the bytes tokenless through `http` to addresses on `origin` only."""

    poster: SlackPoster
    http: Outbound
    origin: Origin

    @classmethod
    def of(cls, poster: SlackPoster, files_url: str | None = None) -> FileShares:
        """Shares on `poster`'s client: its session (which follows no redirect), its deadline,
        and Slack's file host as its Web API address implies (`files_url` when set)."""
        client = poster.client
        http = Outbound(timeout_s=float(client.timeout), session=client.session)
        return cls(poster=poster, http=http, origin=files_origin(client.base_url, files_url))

    async def share(self, file: SharedFile, *, channel: str, thread_ts: str) -> str:
        """Upload `file` and share it in `channel`'s thread `thread_ts`; Slack's file id.
        PostError for any step Slack (or the way to it) did not take."""
        file_id, url = await self.poster.upload_address(
            channel=channel, filename=file.filename, length=len(file.content), attempts=1
        )
        if not self.origin.admits(url):
            # Slack hands out addresses on its file host; any other is not Slack's answer.
            raise PostError(
                f"Slack's upload address for {file.filename} is not on {self.origin.address}"
                " (Slack's file host): nothing was sent to it; check DEBATEBOT_SLACK_API_URL,"
                " DEBATEBOT_SLACK_FILES_URL and any proxy on the way",
                code=OFF_ORIGIN,
            )
        try:
            answer = await self.http.send(
                self.origin,
                "POST",
                url,
                credential={},
                max_bytes=UPLOAD_ANSWER_BYTES,
                headers={"Content-Type": "application/octet-stream"},
                data=file.content,
            )
        except OutboundError as error:
            raise classify(error, "the file upload", channel) from error
        if answer.status != 200:
            # "Slack will return HTTP 200 if the upload is successful"; a 5xx may pass, a 4xx
            # (an address expired or refused) will not, however often it is tried.
            raise PostError(
                f"Slack's file host answered the upload of {file.filename} with HTTP"
                f" {answer.status}",
                code=f"http_{answer.status}",
                retryable=answer.status >= 500 or answer.status == 429,
            )
        await self.poster.complete_upload(
            channel=channel,
            thread_ts=thread_ts,
            file_id=file_id,
            title=file.title,
            comment=file.comment,
            attempts=1,
        )
        return file_id
