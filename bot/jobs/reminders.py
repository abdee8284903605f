"""Periodic jobs of `debatebot serve`, run by APScheduler in every replica.

Review reminders need no cross-replica lock: each reminder is a message of the debate's
`slack_post` ledger keyed by how many reminder periods have passed, so however many replicas fire,
one of them reserves the key and posts it once.
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine

from bot.slack import blocks
from bot.slack.errors import PostError
from bot.slack.notifier import DebateNotifier
from bot.store import slack as store
from bot.store.db import in_session
from engine.models import utcnow

log = logging.getLogger(__name__)


async def remind_reviewers(*, engine: Engine, notifier: DebateNotifier, period_s: float) -> int:
    """Post one reminder per elapsed period on every open review; returns how many were due."""

    due = 0
    for escalation, debate in await in_session(engine, store.open_escalations):
        age = (utcnow() - escalation.created_at).total_seconds()
        periods = int(age // period_s)
        if periods < 1 or debate.thread_ts is None:
            continue
        due += 1
        who = " ".join(blocks.mention(p) for p in escalation.reviewers)
        text = (
            f":bell: Debate #{debate.id} has waited {age / 3600:.1f} h for a review."
            f" {who or 'A workspace admin'} can decide with the buttons above."
        )
        try:
            await notifier.post_once(
                debate,
                f"reminder:{periods}",
                blocks.notice(text),
                thread_ts=debate.thread_ts,
            )
        except PostError as error:
            log.error("review reminder for debate %s not posted: %s", debate.id, error)
    return due
