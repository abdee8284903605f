"""Each channel's debate settings, stored or the defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from bot.store.channel_tables import ChannelSettings
from bot.store.tenancy import workspace_of
from engine.models import utcnow

CHANNEL_SETTING_FIELDS = (
    "protocol",
    "rounds",
    "threshold",
    "reviewers",
    "owners",
    "budget_usd",
    "adr_watch",
    "trigger_reaction",
    "triage",
    "route",
    "monthly_budget_usd",
    "review_sla_h",
    "digest_time",
    "timezone",
    "adr_pattern",
    "pr_comment",
)


@dataclass(frozen=True)
class ChannelDefaults:
    """What a channel's unset rounds and threshold stand for: the deployment's settings
    (DEBATEBOT_ROUNDS, DEBATEBOT_ESCALATION_THRESHOLD), shown beside them so people see the
    value that applies."""

    rounds: int
    threshold: float


def channel_settings(session: Session, *, channel_id: str) -> ChannelSettings:
    """The channel's stored settings, or the defaults (not stored) when it has none."""
    team = workspace_of(session).team_id
    stored = session.get(ChannelSettings, (team, channel_id))
    return stored if stored is not None else ChannelSettings(team_id=team, channel_id=channel_id)


def save_channel_settings(
    session: Session, *, channel_id: str, updated_by: str, values: dict[str, Any]
) -> ChannelSettings:
    """Create or update the channel's settings with `values` (only known fields)."""
    unknown = set(values) - set(CHANNEL_SETTING_FIELDS)
    if unknown:
        raise ValueError(f"unknown channel settings: {', '.join(sorted(unknown))}")
    workspace = workspace_of(session)
    row = session.get(ChannelSettings, (workspace.team_id, channel_id)) or ChannelSettings(
        team_id=workspace.team_id, enterprise_id=workspace.enterprise_id, channel_id=channel_id
    )
    for name, value in values.items():
        setattr(row, name, value)
    row.updated_by = updated_by
    row.updated_at = utcnow()
    session.add(row)
    session.commit()
    session.refresh(row)
    return row
