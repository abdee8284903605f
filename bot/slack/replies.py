"""`respond()` on the process's pooled Slack session: the answers sent through a request's
`response_url` after its acknowledgement.

Bolt's own `AsyncRespond` makes an `AsyncWebhookClient` with no session for every answer, and
slack_sdk then opens (and closes) a session, so a connection and a TLS handshake, per answer.
Bolt reads `respond` from the request's context when one is there (`AsyncBoltContext.respond`),
so the listeners' middleware puts this one there; slack_sdk uses a session it is given and
never closes it (`AsyncWebhookClient`: "use_running_session"). The pooled session follows no
redirect (`bot.outbound.refuse_redirects`), and no answer is sent once it is closed: slack_sdk
would open a plain session of its own, which does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aiohttp
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackRequestError
from slack_sdk.models.attachments import Attachment
from slack_sdk.models.blocks import Block
from slack_sdk.webhook.async_client import AsyncWebhookClient
from slack_sdk.webhook.webhook_response import WebhookResponse


class PooledRespond(AsyncRespond):
    """Bolt's `respond()`, sent on `session`."""

    def __init__(self, *, response_url: str | None, session: aiohttp.ClientSession) -> None:
        super().__init__(response_url=response_url)
        self.session = session

    async def __call__(
        self,
        text: str | dict[str, Any] = "",
        blocks: Sequence[dict[str, Any] | Block] | None = None,
        attachments: Sequence[dict[str, Any] | Attachment] | None = None,
        response_type: str | None = None,
        replace_original: bool | None = None,
        delete_original: bool | None = None,
        unfurl_links: bool | None = None,
        unfurl_media: bool | None = None,
        thread_ts: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> WebhookResponse:
        if self.response_url is None:
            raise ValueError("respond is unsupported here as there is no response_url")
        if self.session.closed:
            raise SlackRequestError(
                "no answer through response_url: the pooled Slack session is closed (the"
                " process is stopping)"
            )
        # As Bolt builds it; slack_sdk drops the fields left None and turns blocks into dicts.
        message = (
            text
            if isinstance(text, dict)
            else {
                "text": text,
                "blocks": blocks or None,
                "attachments": attachments or None,
                "response_type": response_type,
                "replace_original": replace_original,
                "delete_original": delete_original,
                "unfurl_links": unfurl_links,
                "unfurl_media": unfurl_media,
                "thread_ts": thread_ts,
                "metadata": metadata,
            }
        )
        client = AsyncWebhookClient(url=self.response_url, session=self.session)
        return await client.send_dict(message)
