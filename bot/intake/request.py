"""What a front door asks for, as one frozen value the intake admits: where it came from (a typed
`Origin`), what was asked (`Ask` or `FollowUp`), and ids, never store rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.settings import RoleModel
from bot.store.debate_tables import DebateSource
from engine.models import ContextDocument, DebateSpec


class OriginKind(StrEnum):
    """Which front door a request came through. A new front door adds a kind here and says,
    through the properties below, what the intake should do with it."""

    SLACK_CHANNEL = "slack_channel"
    SLACK_DM = "slack_dm"
    WEB = "web"
    API = "api"
    TERMINAL = "terminal"
    MCP = "mcp"
    """A coding agent, through the MCP server (`bot/fronts/mcp/`)."""

    @property
    def has_reviewers(self) -> bool:
        """Whether the place itself has reviewers (a Slack channel's settings name them)."""
        return self is OriginKind.SLACK_CHANNEL

    @property
    def borrows_review_channel(self) -> bool:
        """A place with no reviewers of its own beside the conversation (a DM): its review
        request goes to the deployment's review channel."""
        return self is OriginKind.SLACK_DM

    @property
    def borrows_agents_review_channel(self) -> bool:
        """A coding agent's request, with no conversation of its own: when the deployment names
        one (DEBATEBOT_MCP_REVIEW_CHANNEL), its review request goes to that channel, whose
        reviewers decide."""
        return self is OriginKind.MCP


@dataclass(frozen=True)
class Origin:
    """Where a request came from: its front door, and (for a conversation the bot posts in)
    the place and thread its debate lives in. Ids only."""

    kind: OriginKind
    place: str | None = None
    """The conversation's id (a Slack channel or DM); None for a door with no conversation."""
    thread: str | None = None


@dataclass(frozen=True)
class Ask:
    """A new question, with the options the person gave; what they left out comes from the
    place's settings and the deployment's (`bot.intake.policy`)."""

    question: str
    context: tuple[ContextDocument, ...] = ()
    protocol: str | None = None
    rounds: int | None = None
    budget_usd: float | None = None
    stances_for: tuple[str, ...] = ()
    stances_against: tuple[str, ...] = ()
    route: bool = False
    """Asked for the panel's fast-model router; the channel's `route` setting may turn it on."""
    provider: str | None = None
    model: str | None = None
    """Every role's provider and model (`--provider`, `--model`; the web page's model menu)."""
    overrides: Mapping[str, RoleModel] = field(default_factory=dict)
    """One role slot's model (`--moderator anthropic:…`)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    judges: int | None = None


@dataclass(frozen=True)
class FollowUp:
    """A debate that follows an earlier one on its spec: *Debate anyway* after a triage, or
    *Another round* (`continues`: the earlier turns and thread messages are carried forward,
    and it runs to `rounds`)."""

    original_id: int
    spec: DebateSpec
    """The earlier debate's spec, as it ran."""
    continues: bool = False
    rounds: int | None = None
    reviewers_place: str | None = None
    """Whose reviewers decided the earlier debate (its `reviewers_channel_id`): a continued
    debate stays with them."""


@dataclass(frozen=True)
class DebateRequest:
    """One request to debate, from any front door. `trigger_key` makes it idempotent: a second
    request with the same key gets the debate the first one queued."""

    trigger_key: str
    source: DebateSource
    asked: Ask | FollowUp
    origin: Origin
    requested_by: str | None = None
    review_in: str | None = None
    """Where the requester asked the review request to go (`--review-in`); never who decides."""
    link: str | None = None
    """The GitHub or GitLab page the material came from (its pull request gets a comment)."""

    @property
    def place(self) -> str | None:
        """The conversation the debate lives in, if any."""
        return self.origin.place
