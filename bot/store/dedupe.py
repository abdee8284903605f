"""Trigger keys already handled, and short windows that absorb a double click.

A key built from Slack's ids (`greeted:<user id>`, `note-form:<escalation>:<user id>`) is its
workspace's: Slack does not promise user, trigger or channel ids unique across workspaces, and a
channel shared by two workspaces has one id and one message ts in both. So these functions work
in the session's workspace (bot.store.tenancy filters and stamps the rows), and the same key in
another workspace is another trigger, never "already handled".

Slack's event ids are read across workspaces (`event_seen`). Slack makes an event id unique
across all workspaces (the Events API's event wrapper), and an event several installs of the app
can see (a channel shared by two workspaces, an org-wide Enterprise Grid install) is sent to the
app once, its `authorizations` naming one install (`apps.event.authorizations.list` has the
rest): never once per workspace, with equal ids or distinct ones. An event id stored by any
workspace is therefore that same event sent again, so reading it across workspaces drops no
other workspace's event, and it keeps a resend that named another install (Slack does not
promise which one it names) from being handled twice. The id is stored in the workspace that
handled it, and goes with that workspace's rows.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.dedupe_tables import ProcessedTrigger
from bot.store.errors import WorkspaceScopeError
from bot.store.sql import insert_once, rows_changed
from bot.store.tenancy import EVERY_WORKSPACE, scope_of, workspace_of
from engine.models import utcnow


def event_key(event_id: str) -> str:
    """The processed-trigger key of Slack's event `event_id`."""
    return f"event:{event_id}"


def event_seen(session: Session, *, event_id: str) -> bool:
    """Whether Slack's event `event_id` was handled, in any workspace. Run for every workspace
    (see the module's docstring for why an event id may be)."""
    if scope_of(session) is not EVERY_WORKSPACE:
        raise WorkspaceScopeError("an event id is looked up across workspaces: run it for every")
    return _held(session, event_key(event_id))


def was_processed(session: Session, *, key: str) -> bool:
    """Whether the session's workspace handled `key`."""
    workspace_of(session)
    return _held(session, key)


def _held(session: Session, key: str) -> bool:
    """Whether a processed trigger `key` is stored where the session's scope reads."""
    query = select(ProcessedTrigger.key).where(ProcessedTrigger.key == key)
    return session.exec(query.limit(1)).first() is not None


def mark_processed(session: Session, *, key: str, debate_id: int | None = None) -> bool:
    """Remember a Slack event id (or other trigger key) in the session's workspace; False when
    it was seen there before."""
    workspace_of(session)
    return insert_once(session, ProcessedTrigger(key=key, debate_id=debate_id))


def open_window(session: Session, *, key: str, window_s: float) -> bool:
    """True unless the session's workspace opened `key` within the last `window_s` seconds (a
    double click)."""
    workspace_of(session)
    now = utcnow()
    session.add(ProcessedTrigger(key=key, created_at=now))
    try:
        session.commit()
        return True
    except IntegrityError:
        session.rollback()
    # The store's filter keeps this to the workspace's own key (bot.store.tenancy).
    reopened = session.execute(
        update(ProcessedTrigger)
        .where(
            col(ProcessedTrigger.key) == key,
            col(ProcessedTrigger.created_at) < now - timedelta(seconds=window_s),
        )
        .values(created_at=now)
    )
    session.commit()
    return bool(rows_changed(reopened))
