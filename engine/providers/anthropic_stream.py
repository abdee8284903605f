"""An Anthropic Messages reply read as a stream, through the SDK's `messages.stream` helper.

Anthropic's streaming rules this follows (the Messages API's "Streaming Messages" page and the
installed SDK's `lib/streaming`): a streamed reply is a series of server-sent events,
`message_start`, then per content block `content_block_start`, its `content_block_delta`s
(`text_delta` for a text block, `input_json_delta` pieces of a tool's input JSON,
`thinking_delta`), `content_block_stop`, then `message_delta` with the `stop_reason` and the
usage so far (cumulative) and `message_stop`; `ping` events may come between, and an `error`
event (such as `overloaded_error`) may end a stream that began with 200. The SDK's helper
accumulates the events into the same `Message` a whole call returns (`get_final_message`),
usage included; what is told to `on_text` is the JSON so far of the answer's text block, or of
the forced tool's input.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2

from engine.errors import LLMError
from engine.llm import TextSink
from engine.providers.openai_refusals import stream_refused


def refuses_streaming(status: int, message: str) -> bool:
    """Whether a 400 to a streamed request refuses the streaming itself (a proxy or a server
    speaking the Messages API that cannot stream names `stream` in its message; Anthropic's
    errors carry no `param`, so the message is all there is)."""
    return status == 400 and stream_refused(status, None, message)


async def streamed(manager: Any, on_text: TextSink, *, what: str) -> tuple[Any, Any]:
    """The final `Message` of the stream `manager` opens (`messages.stream(...)`) and the
    answer's headers, telling `on_text` the answer's JSON so far. A stream cut off (the
    connection lost, an `error` event, no `stop_reason`) raises a retryable LLMError: the retry
    starts the text again. Error statuses before the stream began are the caller's to map."""
    async with manager as stream:
        tool_json = ""
        try:
            async for event in stream:
                if event.type == "text":
                    await on_text(event.snapshot)
                elif event.type == "input_json":
                    tool_json += event.partial_json
                    await on_text(tool_json)
            message = await stream.get_final_message()
        except (
            anthropic.APIConnectionError,
            anthropic.APIStatusError,
            httpx2.TransportError,
        ) as error:
            # The SDK's stream lets its HTTP client's errors through as they are (a connection
            # closed mid-body is `httpx2.RemoteProtocolError`); an `error` event is raised as
            # an APIStatusError.
            raise LLMError(
                f"{what}: the stream was cut off ({type(error).__name__}); asking again",
                retryable=True,
            ) from error
        if message.stop_reason is None:
            raise LLMError(
                f"{what}: the stream ended before the reply did; asking again", retryable=True
            )
        return message, stream.response
