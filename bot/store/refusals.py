"""Workspaces whose bot token Slack refuses (OAuth installs) though no uninstall was heard of:
Slack's `app_uninstalled` and `tokens_revoked` can be lost, and a token can be refused without
them (`invalid_auth`, `account_inactive`, `token_revoked`, a `token_expired` that renewing
could not fix, `team_access_not_granted`, …).

The mark is on the install's bot row, so every `serve` and `worker` replica sees it: claims
skip the workspace's debates (`token_refused` in `queue.claim_debates`), no lane is due for
what it is owed (`outbox_claims.due_lanes`: held, neither retried nor dropped), and the intake
refuses its new requests. One replica at a time asks Slack again (`claim_probes`), less and
less often; the one that finds the token taken clears the mark (`accept`), and so does saving
new tokens (an install again, a renewal: the installation store accepts them as it saves them).
An uninstall deletes the row, and the mark with it (its debates are then suspended:
bot.store.workspaces).

`auth.test` can take a token that a method still refuses (a scope it lacks, if Slack's scopes
header is not there to tell; a workspace an org-wide install was not granted): until a message
to the workspace is delivered (`delivered`), a probe's acceptance keeps the wait it reached, so
a refusal right after resumes at the doubled wait and is no news (`Noted.AGAIN`), rather than
starting over at the first wait with another ERROR, claiming the workspace's debates in between.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, update
from sqlalchemy import select as sql_select
from sqlalchemy.orm import Mapped
from sqlmodel import Session, col, select

from bot.store.installation_tables import SlackBot
from bot.store.installations import NONE, bot_row
from bot.store.outbox_tables import Outbox, OutboxState
from bot.store.sql import rows_changed
from bot.store.tenancy import Workspace
from engine.models import utcnow


@dataclass(frozen=True)
class Backoff:
    """How long a refused token waits before `auth.test` is asked again: `first_s`, then twice
    as long each time, up to `max_s`."""

    first_s: float = 2.0
    max_s: float = 15.0

    def after(self, wait_s: float | None) -> float:
        """The wait that follows a wait of `wait_s` (None: the first)."""
        if wait_s is None:
            return min(self.first_s, self.max_s)
        return min(max(wait_s, self.first_s) * 2, self.max_s)


class Noted(StrEnum):
    """What a refusal was to the store (`refuse`)."""

    NEW = "new"
    """News: the token was taken, or is now refused with another code or scope."""
    AGAIN = "again"
    """Refused again after a probe found it taken, with nothing delivered since: the probe was
    wrong, and the wait goes on growing."""
    KNOWN = "known"
    """Marked so already (another lane or replica met it first)."""


@dataclass(frozen=True)
class Refusal:
    """What Slack answered the token (`code`; `scope`: the one a `missing_scope` names), since
    when, and when it is asked again."""

    code: str
    scope: str | None
    since: datetime
    probe_at: datetime | None


@dataclass(frozen=True)
class BotState:
    """An install's bot as the operator sees it (no token): whose, and whether Slack refuses
    its token."""

    installation: str
    enterprise_id: str | None
    team_id: str | None
    enterprise_name: str | None
    team_name: str | None
    refusal: Refusal | None

    @property
    def acting_as(self) -> Workspace:
        """The workspace a call is made for to use this bot's token: its team's, or for an
        org-wide install (no team) the org's own key, which finds the org's bot."""
        return Workspace(team_id=self.team_id or NONE, enterprise_id=self.enterprise_id)


def _refusal(row: SlackBot) -> Refusal | None:
    if row.refused_code is None:
        return None
    return Refusal(
        code=row.refused_code,
        scope=row.refused_scope,
        since=row.refused_since or row.updated_at,
        probe_at=row.probe_at,
    )


def _state(row: SlackBot) -> BotState:
    return BotState(
        installation=row.installation,
        enterprise_id=row.enterprise_id,
        team_id=row.team_id,
        enterprise_name=row.enterprise_name,
        team_name=row.team_name,
        refusal=_refusal(row),
    )


def _acting_bot(session: Session, workspace: Workspace) -> SlackBot | None:
    """The bot row `workspace` acts with (its own install's, or its org's org-wide one); None,
    the unit of work ended, when there is none (uninstalled)."""
    row = bot_row(
        session,
        enterprise_id=workspace.enterprise_id,
        team_id=workspace.team_id,
        is_enterprise_install=None,
    )
    if row is None:
        session.rollback()
    return row


def refuse(
    session: Session,
    *,
    workspace: Workspace,
    code: str,
    scope: str | None = None,
    backoff: Backoff,
) -> Noted | None:
    """Slack refused the token of the bot `workspace` acts with: mark it, the first probe after
    `backoff`'s first wait, or, refused again after a probe took it and before anything was
    delivered (`Noted.AGAIN`), after the wait that follows the one it reached. None when there
    is no bot (the app was uninstalled: nothing to hold, its owed messages were dropped).
    Committed."""
    row = _acting_bot(session, workspace)
    if row is None:
        return None
    if row.refused_code is not None:
        noted = Noted.KNOWN if (row.refused_code, row.refused_scope) == (code, scope) else Noted.NEW
    else:
        noted = Noted.NEW if row.probe_wait_s is None else Noted.AGAIN
        now = utcnow()
        wait = backoff.after(row.probe_wait_s)
        row.refused_since = now
        row.probe_wait_s = wait
        row.probe_at = now + timedelta(seconds=wait)
    row.refused_code, row.refused_scope = code, scope
    session.add(row)
    session.commit()
    return noted


def accept(session: Session, *, installation: str, new_tokens: bool = False) -> bool:
    """Slack takes the install's token again (a probe found it so, or `new_tokens` were saved):
    clear its mark, and give each message held meanwhile its deadline back by as long as it
    was held, or as it existed if it was written during the hold (nothing was tried, so nothing
    is given up for the wait). A probe's word keeps the wait it reached until a delivery proves
    it (`delivered`); new tokens start afresh. False when it was not marked (cleared already, by
    a probe elsewhere or an install again). Committed."""
    now = utcnow()
    row = session.get(SlackBot, installation)
    since = row.refused_since if row is not None else None
    cleared = session.execute(
        update(SlackBot)
        .where(
            col(SlackBot.installation) == installation,
            col(SlackBot.refused_code).is_not(None),
        )
        .values(refused_code=None, refused_scope=None, refused_since=None, probe_at=None)
        .execution_options(synchronize_session=False)
    )
    if new_tokens:
        session.execute(
            update(SlackBot)
            .where(col(SlackBot.installation) == installation)
            .values(probe_wait_s=None)
            .execution_options(synchronize_session=False)
        )
    if rows_changed(cleared) != 1 or row is None:
        session.commit()
        return False
    held = now - (since or now)
    if held > timedelta(0):
        waiting = select(Outbox).where(
            col(Outbox.state).in_((OutboxState.PENDING, OutboxState.SENDING)),
            _served_by(row, col(Outbox.team_id), col(Outbox.enterprise_id)),
        )
        for owed in session.exec(waiting).all():
            waited = min(held, now - owed.created_at)
            if waited > timedelta(0):
                owed.deadline_at = owed.deadline_at + waited
                session.add(owed)
    session.commit()
    return True


def delivered(session: Session, *, workspace: Workspace) -> bool:
    """A message to `workspace` was delivered: the bot it acts with is proven taken, so a
    later refusal is news again, waiting from the first wait. False when there was nothing to
    forget (no probe's word pending, or a mark meanwhile). Committed."""
    row = _acting_bot(session, workspace)
    if row is None:
        return False
    forgot = session.execute(
        update(SlackBot)
        .where(
            col(SlackBot.installation) == row.installation,
            col(SlackBot.refused_code).is_(None),
            col(SlackBot.probe_wait_s).is_not(None),
        )
        .values(probe_wait_s=None)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return rows_changed(forgot) == 1


def on_probation(session: Session) -> list[BotState]:
    """The bots a probe found taken with nothing delivered since (see `delivered`): few, and
    asked for with the due lanes, so a delivery knows whether its success is news."""
    query = select(SlackBot).where(
        col(SlackBot.refused_code).is_(None), col(SlackBot.probe_wait_s).is_not(None)
    )
    return [_state(row) for row in session.exec(query).all()]


def _served_by(
    row: SlackBot, team_id: Mapped[str | None], enterprise_id: Mapped[str | None]
) -> ColumnElement[bool]:
    """Whether the workspace of a row (its `team_id` and `enterprise_id` columns) acts with
    the bot of `row`: its own install's, or the org's org-wide one when it has none."""
    if row.team_id is not None:
        return team_id == row.team_id
    teams = sql_select(col(SlackBot.team_id)).where(col(SlackBot.team_id).is_not(None))
    return and_(enterprise_id == row.enterprise_id, team_id.not_in(teams))


def claim_probes(session: Session, *, backoff: Backoff) -> list[BotState]:
    """The refused bots whose probe is due, each taken by this caller alone: its next probe is
    moved on by the next wait in the same conditional update, so a replica that read it too
    finds it no longer due and leaves it. Committed."""
    now = utcnow()
    due = session.exec(
        select(SlackBot).where(
            col(SlackBot.refused_code).is_not(None),
            col(SlackBot.probe_at) <= now,
        )
    ).all()
    waits = {row.installation: backoff.after(row.probe_wait_s) for row in due}
    taken: list[str] = []
    for installation, wait in waits.items():
        moved = session.execute(
            update(SlackBot)
            .where(
                col(SlackBot.installation) == installation,
                col(SlackBot.refused_code).is_not(None),
                col(SlackBot.probe_at) <= now,
            )
            .values(probe_at=now + timedelta(seconds=wait), probe_wait_s=wait)
        )
        session.commit()
        if rows_changed(moved) == 1:
            taken.append(installation)
    if not taken:
        return []
    rows = session.exec(select(SlackBot).where(col(SlackBot.installation).in_(taken))).all()
    return [_state(row) for row in rows]


def refusal_for(session: Session, *, workspace: Workspace) -> Refusal | None:
    """Whether Slack refuses the token of the bot `workspace` acts with (None: it does not, or
    there is no bot)."""
    row = bot_row(
        session,
        enterprise_id=workspace.enterprise_id,
        team_id=workspace.team_id,
        is_enterprise_install=None,
    )
    return None if row is None else _refusal(row)


def refused_count(session: Session) -> int:
    """How many installs' bot tokens Slack refuses (for `/healthz` and the metrics: a count,
    no names). An install, not a workspace: a refused org-wide install holds every workspace
    of its org with no install of its own, and counts once."""
    query = select(func.count()).select_from(SlackBot)
    return int(session.exec(query.where(col(SlackBot.refused_code).is_not(None))).one())


def bots(session: Session, *, refused_only: bool = False) -> list[BotState]:
    """Every install's bot (only those whose token Slack refuses, with `refused_only`), by
    install key: for the operator."""
    query = select(SlackBot).order_by(col(SlackBot.installation))
    if refused_only:
        query = query.where(col(SlackBot.refused_code).is_not(None))
    return [_state(row) for row in session.exec(query).all()]


def token_refused(team_id: Any, enterprise_id: Any) -> ColumnElement[bool]:
    """Whether the workspace of a row (its `team_id` and `enterprise_id` columns) acts with a
    bot whose token Slack refuses: its own install's, or, having none of its own, its org's
    org-wide install's (the bot `installations.find_bot` finds). Never NULL, so its negation
    keeps every other row (a workspace with no org has no `enterprise_id`)."""
    refused = col(SlackBot.refused_code).is_not(None)
    teams = sql_select(col(SlackBot.team_id)).where(col(SlackBot.team_id).is_not(None))
    orgs_refused = sql_select(col(SlackBot.enterprise_id)).where(
        refused, col(SlackBot.is_enterprise_install), col(SlackBot.team_id).is_(None)
    )
    return or_(
        team_id.in_(teams.where(refused)),
        and_(
            enterprise_id.is_not(None),
            enterprise_id.in_(orgs_refused),
            team_id.not_in(teams),
        ),
    )
