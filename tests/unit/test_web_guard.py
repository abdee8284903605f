"""The web door's guards (issue 43): no token, no listening beyond this machine; a body larger
than the door takes is refused before it is read whole; tokens and CSRF compared as they should
be; the neutral views rendered with every text escaped."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr
from starlette.requests import Request

from bot.cli import main
from bot.fronts.web import html
from bot.fronts.web.guard import (
    CSRF_COOKIE,
    BodyLimit,
    BodyTooLargeError,
    Guard,
    WebError,
    check_csrf,
    web_token,
)
from bot.settings import Settings, SettingsError
from engine.views import Bullets, Note, Section, Table, code, line, strong


def test_listening_beyond_this_machine_needs_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert web_token(Settings(), "127.0.0.1") is None
    assert web_token(Settings(), "::1") is None
    with pytest.raises(SettingsError, match="DEBATEBOT_WEB_TOKEN is not set"):
        web_token(Settings(), "0.0.0.0")
    with pytest.raises(SettingsError, match="placeholder"):
        web_token(Settings(web_token=SecretStr("changeme")), "0.0.0.0")
    token = "a-long-random-secret-of-our-own"
    assert web_token(Settings(web_token=SecretStr(token)), "0.0.0.0") == token

    assert main(["web", "--host", "0.0.0.0"]) == 1
    said = capsys.readouterr().err
    assert "DEBATEBOT_WEB_TOKEN is not set" in said


def request(headers: dict[str, str] | None = None, cookies: str = "") -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    if cookies:
        raw.append((b"cookie", cookies.encode()))
    return Request({"type": "http", "headers": raw, "method": "GET", "path": "/"})


def test_the_token_is_a_bearer_for_the_api_and_a_session_for_the_page() -> None:
    guard = Guard("s3cret-token-value")
    assert not guard.bearer_ok(request())
    assert not guard.bearer_ok(request({"Authorization": "Bearer wrong"}))
    assert guard.bearer_ok(request({"Authorization": "Bearer s3cret-token-value"}))
    assert guard.login("wrong") is None
    session = guard.login("s3cret-token-value")
    assert session is not None
    assert "s3cret" not in session
    assert guard.page_ok(request(cookies=f"debatebot_session={session}"))
    assert not guard.page_ok(request(cookies="debatebot_session=forged"))
    assert Guard(None).page_ok(request())


def test_a_form_without_the_browsers_csrf_cookie_value_is_refused() -> None:
    with pytest.raises(WebError) as refused:
        check_csrf(request(cookies=f"{CSRF_COOKIE}=abc"), "other")
    assert refused.value.status == 403
    with pytest.raises(WebError):
        check_csrf(request(), "")
    check_csrf(request(cookies=f"{CSRF_COOKIE}=abc"), "abc")


async def test_a_body_past_the_limit_is_refused_before_it_is_read_whole() -> None:
    chunks = [b"x" * 100 for _ in range(50)]
    read: list[int] = []

    async def receive() -> dict[str, Any]:
        read.append(1)
        return {"type": "http.request", "body": chunks[len(read) - 1], "more_body": True}

    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def app(_scope: Any, receive: Any, _send: Any) -> None:
        while True:
            await receive()

    limited = BodyLimit(app, limit=250)
    with pytest.raises(BodyTooLargeError):
        await limited({"type": "http", "headers": []}, receive, send)
    assert len(read) == 3, "it stops at the first chunk past the limit, not at the 50th"

    await limited({"type": "http", "headers": [(b"content-length", b"5000")]}, receive, send)
    assert len(read) == 3, "a declared length past the limit is refused before any read"
    assert sent[0]["status"] == 413


def test_views_render_as_html_with_every_text_escaped() -> None:
    hostile = '<script>alert(1)</script><a href="javascript:x()">y</a>'
    rendered = str(
        html.blocks(
            [
                Section((line(strong(hostile), " ", code(hostile)), Bullets((hostile,)))),
                Section((Table(("h", hostile), ((hostile, "2"),)),)),
                Note((hostile,)),
            ]
        )
    )
    assert "<script>" not in rendered
    assert "<a " not in rendered
    assert rendered.count("&lt;script&gt;") == 6
    assert "<strong>" in rendered
    assert "<code>" in rendered
    assert "<table>" in rendered
