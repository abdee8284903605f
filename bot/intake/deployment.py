"""The intake under the deployment's settings: its limits on debates in flight, its monthly cap
and its review channels, the same for every front door."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine

from bot.intake.doors import DoorChecks
from bot.intake.intake import Intake
from bot.intake.policy import SpecPolicy
from bot.settings import Settings
from bot.store.queue import InFlightLimits, SpendCaps
from bot.store.tenancy import Workspace


def deployment_intake(
    settings: Settings,
    policy: SpecPolicy,
    engine: Engine,
    *,
    workspace: Workspace,
    wake: Callable[[], None] = lambda: None,
    checks: DoorChecks | None = None,
) -> Intake:
    """The one intake, with the deployment's limits, caps and review channels; `checks` are the
    front door's own (Slack's token and reach), `wake` tells the workers of a new debate."""
    return Intake(
        engine=engine,
        policy=policy,
        limits=InFlightLimits(
            per_user=settings.max_debates_per_user,
            per_channel=settings.max_debates_per_channel,
        ),
        caps=SpendCaps(workspace_usd=settings.workspace_monthly_budget_usd),
        review_channel=settings.review_channel,
        agents_review_channel=settings.mcp_review_channel,
        wake=wake,
        checks=checks,
        workspace=workspace,
    )
