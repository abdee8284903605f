"""The web door's routes on one Starlette app: the HTTP API under /api (JSON in and out, errors
as `{"error": …}` with their status), the playground's pages (server-rendered, escaped by
Jinja2's autoescape), the live event stream both use, and the OpenAPI description."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from bot.fronts.asgi import ASGIApp
from bot.fronts.web import html
from bot.fronts.web.asking import (
    MAX_BODY_BYTES,
    MAX_FILES,
    DebateIn,
    ModelChoice,
    parsed,
    upload_text,
)
from bot.fronts.web.feeds import Feeds, last_event_id
from bot.fronts.web.guard import (
    CSRF_COOKIE,
    CSRF_FIELD,
    SECURITY_HEADERS,
    SESSION_COOKIE,
    BodyLimit,
    Guard,
    WebError,
    csrf_value,
    posted_form,
)
from bot.fronts.web.openapi import OPENAPI
from bot.fronts.web.reading import (
    DebateOut,
    debate_lines,
    debate_out,
    outcome_view,
    round_views,
    stored_result,
)
from bot.fronts.web.reviewing import WebReviews
from bot.fronts.web.stopping import cancel_debate
from bot.intake.errors import LimitNotAdmittedError, NotAdmittedError
from bot.intake.intake import Intake
from bot.intake.request import DebateRequest, Origin, OriginKind
from bot.store import verify
from bot.store.db import in_session
from bot.store.debate_tables import DebateSource
from bot.store.errors import DebateNotFoundError, StoreError
from bot.store.export import export_record
from bot.store.tenancy import Workspace

HERE = Path(__file__).parent


@dataclass(frozen=True)
class WebDoor:
    """What the routes use: the intake every door shares, the store, the feeds of live turns,
    the reviews, the audit key, and the page's model menu."""

    intake: Intake
    workspace: Workspace
    feeds: Feeds
    reviews: WebReviews
    guard: Guard
    audit_key: bytes | None
    models: Callable[[], list[ModelChoice]]
    protocols: tuple[str, ...]
    today: Callable[[], date] = date.today
    public_keys: Callable[[], bytes | None] = lambda: None
    """The receipt keys' public file, read at each request (None: there are none), served at
    `/.well-known/debatebot-keys.json` as `serve` serves it: auditors need no token for it."""


def _json_error(error: WebError) -> JSONResponse:
    return JSONResponse({"error": str(error)}, status_code=error.status)


def templates() -> Environment:
    """Every template escaped (autoescape on for every file, whatever its name)."""
    return Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def build_app(door: WebDoor, *, mcp: ASGIApp | None = None) -> Starlette:
    """The page and API over `door`; with `mcp`, MCP over Streamable HTTP at `/mcp` too (its
    own bearer gate, bot.fronts.mcp.auth; this app's body limit and headers around it)."""
    env = templates()
    env.globals["views"] = html.blocks

    async def db(work: Callable[[Any], Any]) -> Any:
        return await in_session(door.intake.engine, work, workspace=door.workspace)

    def page(request: Request, name: str, status: int = 200, **values: Any) -> Response:
        csrf = csrf_value(request)
        body = env.get_template(name).render(csrf=csrf, csrf_field=CSRF_FIELD, **values)
        response = Response(body, status_code=status, media_type="text/html; charset=utf-8")
        response.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict", path="/")
        return response

    def page_guard(request: Request) -> Response | None:
        if door.guard.page_ok(request):
            return None
        return RedirectResponse("/login", status_code=303)

    async def one(debate_id: int) -> DebateOut:
        try:
            found: DebateOut = await db(lambda s: debate_out(s, debate_id=debate_id))
        except DebateNotFoundError as error:
            raise WebError(404, f"there is no debate {debate_id}") from error
        return found

    async def submit(asked: DebateIn, source: DebateSource, key: str) -> tuple[int, bool]:
        kind = OriginKind.API if source is DebateSource.API else OriginKind.WEB
        request = DebateRequest(
            trigger_key=key, source=source, asked=asked.ask(), origin=Origin(kind)
        )
        try:
            started = await door.intake.submit(request)
        except LimitNotAdmittedError as error:
            raise WebError(429, str(error)) from error
        except NotAdmittedError as error:
            raise WebError(422, str(error)) from error
        debate = started.debate
        assert debate.id is not None
        if not started.created and debate.question != asked.question:
            raise WebError(
                409,
                f"this Idempotency-Key already asked debate {debate.id}, with another question;"
                " use a new key for a new debate",
            )
        return debate.id, started.created

    # --- the API -----------------------------------------------------------------------------

    async def api_create(request: Request) -> Response:
        door.guard.require_api(request)
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise WebError(415, "send the request as JSON (Content-Type: application/json)")
        try:
            data = json.loads(await request.body())
        except ValueError as error:
            raise WebError(400, f"the body is not JSON: {error}") from error
        asked = parsed(data)
        given = request.headers.get("idempotency-key")
        if given is not None and not 1 <= len(given) <= 200:
            raise WebError(400, "an Idempotency-Key has 1 to 200 characters")
        key = (
            f"api:{hashlib.sha256(given.encode()).hexdigest()[:40]}"
            if given
            else f"api:{uuid.uuid4()}"
        )
        debate_id, created = await submit(asked, DebateSource.API, key)
        found = await one(debate_id)
        return JSONResponse(
            {**found.model_dump(mode="json"), "url": f"/debates/{debate_id}"},
            status_code=201 if created else 200,
            headers={"location": f"/api/debates/{debate_id}"},
        )

    async def api_list(request: Request) -> Response:
        door.guard.require_api(request)
        lines = await db(lambda s: debate_lines(s))
        return JSONResponse({"debates": [line.model_dump(mode="json") for line in lines]})

    async def api_one(request: Request) -> Response:
        door.guard.require_api(request)
        found = await one(_id(request))
        return JSONResponse(found.model_dump(mode="json"))

    async def api_events(request: Request) -> Response:
        if not door.guard.page_ok(request):
            raise WebError(401, "send the server's token as `Authorization: Bearer …`")
        debate_id = _id(request)
        await one(debate_id)
        after = last_event_id(
            request.headers.get("last-event-id"), request.query_params.get("after")
        )
        return StreamingResponse(
            door.feeds.follow(debate_id, after=after),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    async def api_review(request: Request) -> Response:
        door.guard.require_api(request)
        try:
            data = json.loads(await request.body())
        except ValueError as error:
            raise WebError(400, f"the body is not JSON: {error}") from error
        if not isinstance(data, dict):
            raise WebError(400, 'send {"decision": "approve" or "reject", "note": "…"}')
        review = await door.reviews.decide(
            _id(request), str(data.get("decision", "")), _note(data.get("note"))
        )
        return JSONResponse(review.model_dump(mode="json"))

    async def api_cancel(request: Request) -> Response:
        door.guard.require_api(request)
        stopped = await cancel_debate(
            door.intake.engine, workspace=door.workspace, debate_id=_id(request)
        )
        # 202: asked, and the debate ends when its worker sees the request (or at its claim).
        return JSONResponse(stopped.model_dump(mode="json"), status_code=202)

    async def api_audit(request: Request) -> Response:
        door.guard.require_api(request)
        return JSONResponse(await audit(_id(request)))

    async def api_export(request: Request) -> Response:
        door.guard.require_api(request)
        return await export(request)

    async def audit(debate_id: int) -> dict[str, Any]:
        await one(debate_id)
        report = await db(lambda s: verify.verify_chain(s, debate_id=debate_id, key=door.audit_key))
        return {
            "ok": report.ok,
            "turns_checked": report.turns_checked,
            "problem": report.problem,
            "kind": report.kind,
            "sealed": report.sealed,
            "signature": report.signature,
            "head": report.head,
        }

    async def export(request: Request) -> Response:
        debate_id = _id(request)
        await one(debate_id)
        record = await db(lambda s: export_record(s, debate_id=debate_id, key=door.audit_key))
        receipt = request.query_params.get("format") == "receipt"
        if receipt and record.get("receipt") is None:
            raise WebError(404, f"debate {debate_id} has no receipt yet (it is not finished)")
        body = json.dumps(record["receipt"] if receipt else record, indent=2, ensure_ascii=False)
        name = f"debate-{debate_id}{'-receipt' if receipt else ''}.json"
        return Response(
            body,
            media_type="application/json",
            headers={"content-disposition": f'attachment; filename="{name}"'},
        )

    async def openapi(_request: Request) -> Response:
        return JSONResponse(OPENAPI)

    # --- the pages ---------------------------------------------------------------------------

    async def index(request: Request) -> Response:
        if (refused := page_guard(request)) is not None:
            return refused
        return await home(request)

    async def home(
        request: Request, *, status: int = 200, error: str | None = None, asked: Any = None
    ) -> Response:
        lines = await db(lambda s: debate_lines(s))
        return page(
            request,
            "index.html",
            status=status,
            debates=lines,
            models=door.models(),
            protocols=door.protocols,
            error=error,
            asked=asked or {},
            nonce=uuid.uuid4().hex,
        )

    async def page_create(request: Request) -> Response:
        if (refused := page_guard(request)) is not None:
            return refused
        form = await posted_form(request, max_files=MAX_FILES + 1, max_fields=20)
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        try:
            data = _form_request(fields)
            uploads = [await _upload(f) for f in form.getlist("documents") if _named(f)]
            if len(uploads) > MAX_FILES:
                raise WebError(413, f"upload at most {MAX_FILES} documents at a time")
            data["context"] = [*data.get("context", []), *uploads]
            asked = parsed(data)
            nonce = fields.get("nonce") or uuid.uuid4().hex
            debate_id, _ = await submit(asked, DebateSource.WEB, f"web:{nonce[:64]}")
        except WebError as error:
            return await home(request, status=error.status, error=str(error), asked=fields)
        return RedirectResponse(f"/debates/{debate_id}", status_code=303)

    async def page_debate(request: Request) -> Response:
        if (refused := page_guard(request)) is not None:
            return refused
        debate_id = _id(request)
        try:
            found = await one(debate_id)
        except WebError as error:
            return page(request, "error.html", status=error.status, error=str(error))
        return await debate_page(request, found, audit=None)

    async def debate_page(request: Request, found: DebateOut, *, audit: Any) -> Response:
        """A debate's page: its rounds and outcome from the stored result, and `audit`'s report
        when the page was asked to verify the chain."""
        debate_id = found.id
        result = await db(lambda s: stored_result(s, debate_id=debate_id))
        return page(
            request,
            "debate.html",
            debate=found,
            rounds=round_views(result) if result is not None else [],
            outcome=outcome_view(result) if result is not None else [],
            audit=audit,
            after=found.turns[-1].seq if found.turns else -1,
        )

    async def page_review(request: Request) -> Response:
        if (refused := page_guard(request)) is not None:
            return refused
        form = await posted_form(request, max_files=0, max_fields=10)
        debate_id = _id(request)
        decision = form.get("decision")
        await door.reviews.decide(
            debate_id, decision if isinstance(decision, str) else "", _note(form.get("note"))
        )
        return RedirectResponse(f"/debates/{debate_id}#review", status_code=303)

    async def page_cancel(request: Request) -> Response:
        if (refused := page_guard(request)) is not None:
            return refused
        await posted_form(request, max_files=0, max_fields=5)
        debate_id = _id(request)
        await cancel_debate(door.intake.engine, workspace=door.workspace, debate_id=debate_id)
        return RedirectResponse(f"/debates/{debate_id}", status_code=303)

    async def page_audit(request: Request) -> Response:
        if (refused := page_guard(request)) is not None:
            return refused
        debate_id = _id(request)
        report = await audit(debate_id)
        found = await one(debate_id)
        return await debate_page(request, found, audit=report)

    async def page_export(request: Request) -> Response:
        if (refused := page_guard(request)) is not None:
            return refused
        return await export(request)

    async def public_keys(request: Request) -> Response:
        document = await asyncio.to_thread(door.public_keys)
        if document is None:
            return _json_error(
                WebError(404, "this deployment has no receipt keys (DEBATEBOT_RECEIPT_KEYS_DIR)")
            )
        return Response(document, media_type="application/json")

    async def login_form(request: Request) -> Response:
        return page(request, "login.html", error=None)

    async def login(request: Request) -> Response:
        form = await posted_form(request, max_files=0, max_fields=5)
        given = form.get("token")
        session = door.guard.login(given if isinstance(given, str) else "")
        if session is None:
            return page(request, "login.html", status=401, error="that is not the token")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict", path="/")
        return response

    async def on_web_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, WebError)
        if request.url.path.startswith("/api/") or request.url.path == "/openapi.json":
            return _json_error(error)
        return page(request, "error.html", status=error.status, error=str(error))

    async def on_store_error(request: Request, error: Exception) -> Response:
        return await on_web_error(
            request, WebError(503, f"the database did not answer ({type(error).__name__}); retry")
        )

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/login", login_form, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            Route("/debates", page_create, methods=["POST"]),
            Route("/debates/{debate_id:int}", page_debate),
            Route("/debates/{debate_id:int}/review", page_review, methods=["POST"]),
            Route("/debates/{debate_id:int}/cancel", page_cancel, methods=["POST"]),
            Route("/debates/{debate_id:int}/audit", page_audit),
            Route("/debates/{debate_id:int}/export.json", page_export),
            Route("/api/debates", api_create, methods=["POST"]),
            Route("/api/debates", api_list, methods=["GET"]),
            Route("/api/debates/{debate_id:int}", api_one),
            Route("/api/debates/{debate_id:int}/events", api_events),
            Route("/api/debates/{debate_id:int}/review", api_review, methods=["POST"]),
            Route("/api/debates/{debate_id:int}/cancel", api_cancel, methods=["POST"]),
            Route("/api/debates/{debate_id:int}/audit", api_audit),
            Route("/api/debates/{debate_id:int}/export", api_export),
            Route("/openapi.json", openapi),
            Route("/.well-known/debatebot-keys.json", public_keys),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
            *([Route("/mcp", mcp)] if mcp is not None else []),
        ],
        exception_handlers={WebError: on_web_error, StoreError: on_store_error},
    )
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(SecurityHeaders)
    return app


class SecurityHeaders:
    """Adds `SECURITY_HEADERS` to every answer."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def _id(request: Request) -> int:
    return int(request.path_params["debate_id"])


def _note(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 2000:
        raise WebError(422, "a review note is text of at most 2,000 characters")
    return value


def _named(value: object) -> bool:
    return isinstance(value, UploadFile) and bool(value.filename)


async def _upload(value: object) -> dict[str, str]:
    assert isinstance(value, UploadFile)
    name = value.filename or "upload"
    document = upload_text(name, await value.read())
    return {"title": document.title, "text": document.text}


def _form_request(fields: dict[str, str]) -> dict[str, Any]:
    """The page's form as the API's JSON body: empty fields left out, a pasted document kept
    as one document titled by its first line."""
    data: dict[str, Any] = {"question": fields.get("question", "").strip()}
    for name in ("protocol", "model"):
        if fields.get(name):
            data[name] = fields[name]
    for name, kind in (("rounds", int), ("budget_usd", float)):
        raw = fields.get(name, "").strip().lstrip("$")
        if raw:
            try:
                data[name] = kind(raw)
            except ValueError as error:
                raise WebError(422, f"{name.replace('_usd', '')} must be a number") from error
    pasted = fields.get("context", "").strip()
    if pasted:
        title = pasted.splitlines()[0].strip("# ")[:120] or "Pasted document"
        data["context"] = [{"title": title, "text": pasted}]
    return data
