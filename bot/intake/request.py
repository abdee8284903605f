"""What a trigger asks for, as one frozen value the intake admits."""

from __future__ import annotations

from dataclasses import dataclass

from bot.store.debate_tables import Debate, DebateSource
from engine.models import ContextDocument, DebateSpec


@dataclass(frozen=True)
class Ask:
    """A new question, with the options the person gave; what they left out comes from the
    channel's settings and the deployment's (`bot.intake.policy`)."""

    question: str
    context: tuple[ContextDocument, ...] = ()
    protocol: str | None = None
    rounds: int | None = None
    budget_usd: float | None = None
    stances_for: tuple[str, ...] = ()
    stances_against: tuple[str, ...] = ()
    route: bool = False
    """Asked for the panel's fast-model router; the channel's `route` setting may turn it on."""


@dataclass(frozen=True)
class FollowUp:
    """A debate that follows an earlier one on its spec: *Debate anyway* after a triage, or
    *Another round* (`continues`: the earlier turns and thread messages are carried forward,
    and it runs to `rounds`)."""

    original: Debate
    spec: DebateSpec
    """The earlier debate's spec, as it ran."""
    continues: bool = False
    rounds: int | None = None


@dataclass(frozen=True)
class DebateRequest:
    """One request to debate, from any trigger. `trigger_key` makes it idempotent: a second
    request with the same key gets the debate the first one queued."""

    trigger_key: str
    source: DebateSource
    asked: Ask | FollowUp
    channel_id: str | None = None
    thread_ts: str | None = None
    requested_by: str | None = None
    review_in: str | None = None
    """Where the requester asked the review request to go (`--review-in`); never who decides."""
    link: str | None = None
    """The GitHub or GitLab page the material came from (its pull request gets a comment)."""
