"""What keeps the web door safe by default: the token (a bearer for the API, a login for the
page; compared in constant time), CSRF on every form (a double-submit cookie), a body refused
before it is read whole when it is larger than the door takes, and the headers that keep the
page's own scripts the only ones that run."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.datastructures import FormData
from starlette.requests import Request

from bot.fronts.asgi import Message, Receive, Scope, Send, SizeCap, send_json_refusal
from bot.fronts.listening import is_loopback
from bot.secrets import secret_value
from bot.settings import Settings, SettingsError

SESSION_COOKIE = "debatebot_session"
CSRF_COOKIE = "debatebot_csrf"
CSRF_FIELD = "csrf"
TOKEN_VARIABLE = "DEBATEBOT_WEB_TOKEN"

SECURITY_HEADERS = {
    # Only the page's own script and style run: an injected <script> or a javascript: URL
    # would be refused by the browser even if it reached the page unescaped.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
        " connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


class WebError(Exception):
    """A request the web door refuses: `status` and a sentence saying what to change."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BodyTooLargeError(WebError):
    def __init__(self, limit: int) -> None:
        super().__init__(
            413, f"the request is larger than the {limit // 1024:,} KB this server reads"
        )


def web_token(settings: Settings, host: str) -> str | None:
    """The token the door requires: DEBATEBOT_WEB_TOKEN when set (a placeholder refused);
    none on a loopback address without it; SettingsError on any other address without it, so
    the page and API are never open to a network by accident."""
    if settings.web_token is not None:
        return secret_value(
            settings.web_token,
            TOKEN_VARIABLE,
            prefix="",
            where="a secret of your own (e.g. `openssl rand -hex 32`)",
        )
    if is_loopback(host):
        return None
    raise SettingsError(
        f"`debatebot web` listens on {host}, which other machines can reach, and"
        f" {TOKEN_VARIABLE} is not set: set it to a long random secret (e.g. `openssl rand"
        " -hex 32`), or listen on 127.0.0.1 (DEBATEBOT_WEB_HOST, --host)"
    )


class Guard:
    """The token checks and CSRF of one server; `token` None: open (loopback only)."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self._session = (
            hmac.new(token.encode(), b"debatebot web page session", hashlib.sha256).hexdigest()
            if token is not None
            else None
        )

    def bearer_ok(self, request: Request) -> bool:
        if self.token is None:
            return True
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.token.encode()
        )

    def page_ok(self, request: Request) -> bool:
        """The page's session cookie (set by the login form) or the API's bearer."""
        if self._session is None or self.bearer_ok(request):
            return True
        return hmac.compare_digest(
            request.cookies.get(SESSION_COOKIE, "").encode(), self._session.encode()
        )

    def login(self, given: str) -> str | None:
        """The session cookie's value for the right token, else None."""
        if self.token is None or self._session is None:
            return None
        if hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return self._session
        return None

    def require_api(self, request: Request) -> None:
        if not self.bearer_ok(request):
            raise WebError(
                401,
                f"send the server's token as `Authorization: Bearer <{TOKEN_VARIABLE}>`",
            )


def csrf_value(request: Request) -> str:
    """The form token of this browser: its CSRF cookie, or a new one (set by the page)."""
    return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)


def check_csrf(request: Request, given: object) -> None:
    """Refuse a form whose CSRF field does not match the browser's cookie: another site can
    make a browser post a form here, but cannot read or set this site's cookie."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not (
        isinstance(given, str) and cookie and hmac.compare_digest(given.encode(), cookie.encode())
    ):
        raise WebError(
            403, "this form is out of date or came from another site; reload the page and retry"
        )


async def posted_form(request: Request, *, max_files: int, max_fields: int) -> FormData:
    """The form a page posted, read within its file and field limits; refused (`check_csrf`)
    unless it carries this browser's CSRF token."""
    form = await request.form(max_files=max_files, max_fields=max_fields)
    check_csrf(request, form.get(CSRF_FIELD))
    return form


class BodyLimit(SizeCap):
    """ASGI middleware: a body larger than `limit` bytes is refused by its Content-Length
    before anything is read, and one that streams past it (chunked, or lying about its length)
    is cut off with BodyTooLargeError as soon as it does."""

    async def admit(self, scope: Scope, receive: Receive, send: Send) -> None:
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLargeError(self.limit)
            return message

        await self.app(scope, counted, send)

    async def refuse(self, send: Send) -> None:
        error = BodyTooLargeError(self.limit)
        await send_json_refusal(send, error.status, {"error": str(error)})
