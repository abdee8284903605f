"""Review reminders, one of the scheduled jobs (`bot.jobs.scheduled`).

They need no cross-replica lock: each reminder is an outbox message keyed by how
many reminder periods have passed, so however many replicas fire, the debate owes it once, and
the delivery loop sends it (by DM, like the review request, when the thread cannot be reached).
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine

from bot.jobs.notifier import DebateNotifier
from bot.messages import owed
from bot.store import reviews
from bot.store.db import in_session
from bot.store.tenancy import EVERY_WORKSPACE
from engine.models import utcnow

log = logging.getLogger(__name__)


async def remind_reviewers(*, engine: Engine, notifier: DebateNotifier, period_s: float) -> int:
    """Owe one reminder per elapsed period on every open review; returns how many were due."""
    due = 0
    for escalation, debate in await in_session(
        engine, reviews.open_escalations, workspace=EVERY_WORKSPACE
    ):
        age = (utcnow() - escalation.created_at).total_seconds()
        periods = int(age // period_s)
        if periods < 1:
            continue
        due += 1
        await notifier.owe(debate, [owed.reminder(escalation, debate, periods, age / 3600)])
    return due
