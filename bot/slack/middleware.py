"""The middleware every Slack request passes before its listener: what is cross-cutting.

Lone surrogates are scrubbed from the payload, a malformed payload is refused with a 400, the
request's client is made the bot's kind, and the use cases of the request's own workspace are
put in its context as `surface` (listeners name it as an argument, as they name Bolt's `ack` or
`client`: Bolt injects a context key by its name), with a `respond` on the process's pooled
Slack session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncBoltContext
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import payloads
from bot.slack.replies import PooledRespond
from bot.slack.surface import Surface, Surfaces
from bot.slackweb.poster import MeteredWebClient
from bot.store.tenancy import PENDING_TEAM, Workspace

log = logging.getLogger(__name__)

Next = Callable[[], Awaitable[None]]
Middleware = Callable[[dict[str, Any], AsyncBoltContext, Next], Awaitable[BoltResponse | None]]


def preparing(app_client: AsyncWebClient, surfaces: Surfaces, *, installs: bool) -> Middleware:
    """The app's one middleware: each request scrubbed, checked, and given the surface of its
    own workspace; with OAuth `installs`, on the client Bolt authorized for it (that
    workspace's token), else on the bot's."""

    async def prepare(
        body: dict[str, Any], context: AsyncBoltContext, next: Next
    ) -> BoltResponse | None:
        # One middleware, not three: Bolt builds every argument it could inject (some thirty,
        # the payload parsed several ways) anew for each middleware it calls.
        scrub_text(body)
        refusal = reject_malformed(body)
        if refusal is not None:
            return refusal
        bot_client(context, app_client)
        team = context.team_id or where_it_happened(body, context.enterprise_id) or PENDING_TEAM
        # One workspace owns the rows still waiting for its id too (bot.store.tenancy).
        workspace = Workspace(
            team_id=team, enterprise_id=context.enterprise_id, with_pending=not installs
        )
        provide_surface(context, surfaces.get(workspace, context.client if installs else None))
        await next()
        return None

    return prepare


def where_it_happened(body: dict[str, Any], enterprise_id: str | None) -> str | None:
    """The workspace a request from an org-wide install comes from when Bolt's `extract_team_id`
    named none, else the org's id. Each place is read in turn, a value equal to the org's id
    passed over:

    - `context_team_id`, then `team_id`: an event. Bolt reads its team from `authorizations[0]`
      alone, where an org-wide install has none; Slack's wrapper names "the workspace where the
      event occurred".
    - `user.team_id`: an interactivity payload whose `team` is null. Bolt reads it there too,
      so this finds one only when Bolt stopped at an earlier null (a `team_id` key, an
      `authorizations` entry).
    - `view.team_id`: a form. Bolt reads it only when there is no `user` object; here also when
      the user's `team_id` is missing.

    So an event, a click and a command in one of the org's workspaces are scoped to that
    workspace alike, not the events to the org and the commands to the workspace."""
    user, view = body.get("user"), body.get("view")
    for found in (
        body.get("context_team_id"),
        body.get("team_id"),
        user.get("team_id") if isinstance(user, dict) else None,
        view.get("team_id") if isinstance(view, dict) else None,
    ):
        if isinstance(found, str) and found and found != enterprise_id:
            return found
    return enterprise_id


def scrub_text(body: dict[str, Any]) -> None:
    """Lone surrogates in any string of the payload become U+FFFD before anything reads it, on
    both transports: a review note or an ADR holding one would otherwise fail at the database
    or at Slack, after the person was told nothing or thanked."""
    if payloads.scrub(body):
        log.info("replaced lone surrogates in a Slack payload with U+FFFD")


def reject_malformed(body: dict[str, Any]) -> BoltResponse | None:
    """A payload without the fields its kind must have gets a 400, not a listener crash."""
    why = payloads.problem(body)
    if why is None:
        return None
    log.warning("malformed Slack request refused: %s", why)
    return BoltResponse(status=400, body=f"malformed request: {why}")


def bot_client(context: AsyncBoltContext, app_client: AsyncWebClient) -> None:
    """The request's client (what listeners, `say` and, with OAuth installs, the surface call
    Slack with) made the bot's kind, when the app's is (`MeteredWebClient`): its failures
    counted, and no call once the pooled session is closed. Bolt's own is a plain slack_sdk
    client on that session, which would then open a session of its own, following redirects
    with the token. Bolt builds it before any middleware and sets its token in authorization,
    both before this one; `say` (and a workflow step's `complete` and `fail`), which Bolt made
    on it to offer this middleware, are left to be made again on the new one."""
    if not isinstance(app_client, MeteredWebClient):
        return
    context["client"] = app_client.for_request(context.client)
    for made in ("say", "complete", "fail"):
        context.pop(made, None)


def provide_surface(context: AsyncBoltContext, surface: Surface) -> None:
    """The use cases in the request's context, and a `respond` on the pooled Slack session
    (Bolt's own would open a session, so a connection, for each answer)."""
    context["surface"] = surface
    if surface.slack_http is not None and context.response_url:
        context["respond"] = PooledRespond(
            response_url=context.response_url, session=surface.slack_http
        )
