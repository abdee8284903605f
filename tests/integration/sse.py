"""Whole answers sent back as the vendors stream them, for the loopback servers: Chat
Completions chunks (OpenAI's reference for `stream` and `stream_options`) and the Messages API's
events (Anthropic's "Streaming Messages"). `cut` closes the connection after that many content
pieces, mid-body, as a dropped stream does (no usage, no end)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

PIECE_CHARS = 24
REPLY_HEADERS = "reply_headers"
"""A request's key for headers a server in front (the rate-limited one) wants on the answer: a
stream's headers are sent before its body, so they cannot be added once it is answered."""


def _pieces(text: str) -> list[str]:
    return [text[i : i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)]


async def _opened(request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
    extra = request.get(REPLY_HEADERS, {})
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **extra, **headers})
    await response.prepare(request)
    return response


def _drop(request: web.Request) -> None:
    assert request.transport is not None
    request.transport.close()


async def openai_stream(
    request: web.Request,
    body: dict[str, Any],
    answer: dict[str, Any],
    *,
    cut: int | None = None,
    usage: bool = True,
) -> web.StreamResponse:
    """A `chat.completion` `answer` as `chat.completion.chunk` events; with
    `stream_options.include_usage`, every chunk carries `usage: null` and one last chunk with
    no choices carries the usage, before `[DONE]`. Without `usage`, the option is ignored, as
    servers that speak the API without it do (the stream ends whole, with no usage)."""
    response = await _opened(request, {})
    with_usage = usage and bool((body.get("stream_options") or {}).get("include_usage"))
    head = {k: answer[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    async def send(choices: list[dict[str, Any]], usage: Any = None) -> None:
        chunk = {**head, "choices": choices} | ({"usage": usage} if with_usage else {})
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

    [choice] = answer["choices"]
    await send([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
    for number, piece in enumerate(_pieces(choice["message"]["content"])):
        if number == cut:
            _drop(request)
            return response
        await send([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
    await send([{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}])
    if with_usage:
        await send([], answer["usage"])
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _block_events(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A content block as `content_block_start` shows it, and its deltas."""
    if block["type"] == "text":
        return {"type": "text", "text": ""}, [
            {"type": "text_delta", "text": piece} for piece in _pieces(block["text"])
        ]
    if block["type"] == "tool_use":
        return {**block, "input": {}}, [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in _pieces(json.dumps(block["input"]))
        ]
    return {**block, "thinking": "", "signature": ""}, [
        {"type": "signature_delta", "signature": block["signature"]}
    ]


async def anthropic_stream(
    request: web.Request,
    answer: dict[str, Any],
    *,
    headers: dict[str, str],
    cut: int | None = None,
) -> web.StreamResponse:
    """A Messages API `answer` as its events: `message_start` (no content, usage so far),
    each block's start, deltas and stop, a `ping`, `message_delta` (the stop reason and the
    cumulative usage), `message_stop`."""
    response = await _opened(request, headers)

    async def send(kind: str, data: dict[str, Any]) -> None:
        event = json.dumps({"type": kind, **data})
        await response.write(f"event: {kind}\ndata: {event}\n\n".encode())

    usage = answer["usage"]
    start = answer | {"content": [], "stop_reason": None, "usage": usage | {"output_tokens": 1}}
    await send("message_start", {"message": start})
    sent = 0
    for index, block in enumerate(answer["content"]):
        empty, deltas = _block_events(block)
        await send("content_block_start", {"index": index, "content_block": empty})
        for delta in deltas:
            if sent == cut:
                _drop(request)
                return response
            sent += 1
            await send("content_block_delta", {"index": index, "delta": delta})
        await send("content_block_stop", {"index": index})
    await send("ping", {})
    stop = {"stop_reason": answer["stop_reason"], "stop_sequence": None}
    await send("message_delta", {"delta": stop, "usage": usage})
    await send("message_stop", {})
    await response.write_eof()
    return response
