"""Scheduled jobs of `serve` and `worker`, each fired once per slot across any number of replicas.

Every job runs on an interval aligned to the epoch, so all replicas fire at the same instants
and agree on the slot (the fire time). A run first takes the job's lock, a PostgreSQL advisory
lock (SQLite serves one process, so an in-process lock does), then records the slot in
`scheduled_run`; a replica that finds the lock taken or the slot recorded skips it. The row also
tells operators when each job last ran and how (`debatebot stats`). What the jobs change is
idempotent besides (a conditional update, a keyed message), so a crash mid-run loses nothing
that the next slot does not redo.

- review SLA: open reviews past their channel's SLA expire, announced in the thread and sent to
  the channel's owners;
- digest: channels that opted in get one message a local day, at their set time;
- retention (opt-in): ended debates older than N days are exported, the file read back and
  verified, and only then removed;
- stale leases: debates whose worker stopped renewing go back to the queue, and outbox rows a
  dead delivery loop held are released;
- queue depth: warns when a debate has waited longer than `DEBATEBOT_QUEUE_WARN_S`;
- review reminders;
- pull request comments: a verdict comment a code host refused is synced again, for a day
  after it fell behind.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session

from bot.jobs.notifier import DebateNotifier
from bot.jobs.reminders import remind_reviewers
from bot.messages import kit, owed, posts
from bot.metrics import Metrics
from bot.settings import Settings
from bot.slackweb.errors import PostError
from bot.store import operations, outbox, refusals
from bot.store.db import in_session
from bot.store.errors import StoreError
from bot.store.export import export_record, verify_export
from bot.store.job_locks import JobLock
from bot.store.outbox import Draft
from bot.store.tenancy import EVERY_WORKSPACE, owner_of
from engine.models import utcnow

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from bot.jobs.pr_comments import PullRequestComments
    from bot.slackweb.poster import SlackPoster

log = logging.getLogger(__name__)
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
RETENTION_BATCH = 100
NOTICE_DEADLINE_S = 6 * 3600.0
PR_COMMENT_GRACE_S = 30.0
"""A comment this fresh is still the ending's (or review's) own sync to make."""
PR_COMMENT_RETRY_FOR = timedelta(days=1)


def slot_of(now: datetime, period_s: float) -> str:
    """The aligned fire time `now` belongs to: the same on every replica."""
    elapsed = (now - EPOCH).total_seconds()
    start = EPOCH + timedelta(seconds=(elapsed // period_s) * period_s)
    return start.strftime("%Y-%m-%dT%H:%M:%S")


Job = Callable[[], Awaitable[str]]
R = TypeVar("R")


@dataclass
class ScheduledJobs:
    """The jobs of one process, and the once-per-slot rule they run under."""

    engine: Engine
    settings: Settings
    notifier: DebateNotifier
    runner: str
    poster: SlackPoster | None = None
    metrics: Metrics | None = None
    pr_comments: PullRequestComments | None = None
    clock: Callable[[], datetime] = utcnow
    lock: JobLock = field(init=False)

    def __post_init__(self) -> None:
        self.lock = JobLock(self.engine)

    async def _db(self, work: Callable[[Session], R]) -> R:
        """Run `work` on the store for every workspace: the jobs are the deployment's."""
        return await in_session(self.engine, work, workspace=EVERY_WORKSPACE)

    def periods(self) -> dict[str, float]:
        """Each job's period in seconds; the digest only where Slack can be written to."""
        s = self.settings
        periods = {
            "review-sla": 600.0,
            "stale-leases": 60.0,
            "queue-depth": 60.0,
            "review-reminders": min(s.review_reminder_h * 3600, 3600.0),
        }
        if self.poster is not None:
            periods["digest"] = 300.0
        if s.retention_days is not None:
            periods["retention"] = 3600.0
        if self.pr_comments is not None:
            periods["pr-comments"] = 60.0
        return periods

    def jobs(self) -> dict[str, Job]:
        return {
            "review-sla": self.review_sla,
            "stale-leases": self.stale_leases,
            "queue-depth": self.queue_depth,
            "review-reminders": self.review_reminders,
            "digest": self.digest,
            "retention": self.retention,
            "pr-comments": self.retry_pr_comments,
        }

    def schedule(self, scheduler: AsyncIOScheduler) -> None:
        """Add every job to `scheduler` on an epoch-aligned interval, plus (with metrics) a
        refresh of the queue gauges that every replica runs for its own scrape."""
        from apscheduler.triggers.interval import IntervalTrigger

        jobs = self.jobs()
        for name, period in self.periods().items():
            scheduler.add_job(
                self.fire,
                IntervalTrigger(seconds=period, start_date=EPOCH),
                args=[name, jobs[name], period],
                id=name,
                coalesce=True,
                max_instances=1,
                misfire_grace_time=int(period),
            )
        if self.metrics is not None:
            scheduler.add_job(
                self.refresh_gauges,
                IntervalTrigger(seconds=15, start_date=EPOCH),
                id="metrics-refresh",
                coalesce=True,
                max_instances=1,
            )

    async def fire(self, name: str, job: Job, period_s: float) -> str | None:
        """Run `job` for the current slot unless another replica holds or has done it; returns
        its outcome detail, or None when skipped."""
        slot = slot_of(self.clock(), period_s)
        try:
            token = await self.lock.acquire(name)
        except SQLAlchemyError as error:
            log.warning("job %s: lock unavailable (%s); skipped this slot", name, error)
            return None
        if token is False:
            return None
        try:
            claimed = await self._db(
                lambda s: operations.claim_slot(s, job=name, slot=slot, runner=self.runner)
            )
            if not claimed:
                return None
            try:
                detail = await job()
                outcome = "ok"
            except (StoreError, PostError, OSError, ValueError) as error:
                detail, outcome = f"{type(error).__name__}: {error}", "failed"
                log.error("job %s failed for slot %s: %s", name, slot, detail)
            await self._db(
                lambda s: operations.finish_slot(
                    s, job=name, slot=slot, outcome=outcome, detail=detail
                )
            )
            if self.metrics is not None:
                self.metrics.jobs.labels(name, outcome).inc()
            return detail
        except StoreError as error:
            log.warning("job %s: the store failed (%s); the next slot retries", name, error)
            return None
        finally:
            await self.lock.release(name, token)

    # --- the jobs ------------------------------------------------------------------------------

    async def review_sla(self) -> str:
        now = self.clock()
        overdue = await self._db(
            lambda s: operations.overdue_reviews(
                s, default_sla_h=self.settings.review_sla_h, now=now
            )
        )
        expired = 0
        for escalation, debate, channel, sla_h in overdue:
            owners = list(channel.owners) if channel is not None else []
            drafts = owed.expired(escalation, debate, owners, sla_h)
            escalation_id = escalation.id or 0
            if await self._db(
                partial(operations.expire_review, escalation_id=escalation_id, drafts=drafts)
            ):
                expired += 1
                log.info(
                    "review %s of debate %s expired after %g h", escalation.id, debate.id, sla_h
                )
        if expired:
            self.notifier.wake()
        return f"{expired} review(s) expired"

    async def digest(self) -> str:
        if self.poster is None:
            return "no Slack token: digests are sent by a process that has one"
        now = self.clock()
        channels = await self._db(operations.digest_channels)
        owed = 0
        for channel in channels:
            local_day = due_day(channel.digest_time, channel.timezone, now)
            if local_day is None:
                continue
            # A channel's digest counts and is owed in its own workspace only.
            workspace = owner_of(channel)
            day = await in_session(
                self.engine,
                partial(
                    operations.channel_day, channel=channel, since=now - timedelta(days=1), now=now
                ),
                workspace=workspace,
            )
            message = digest_message(channel.channel_id, local_day, day)
            key = f"digest:{channel.channel_id}:{local_day}"
            draft = Draft(key=key, text=message.text, blocks=message.blocks)
            if await in_session(
                self.engine,
                partial(
                    outbox.owe_channel,
                    channel_id=channel.channel_id,
                    draft=draft,
                    deadline_s=NOTICE_DEADLINE_S,
                ),
                workspace=workspace,
            ):
                owed += 1
        if owed:
            self.notifier.wake()
        return f"{owed} digest(s) owed"

    async def retention(self) -> str:
        days, folder = self.settings.retention_days, self.settings.retention_dir
        if days is None or folder is None:
            return "retention is off"
        before = self.clock() - timedelta(days=days)
        ids = await self._db(
            lambda s: operations.expired_debates(s, before=before, limit=RETENTION_BATCH)
        )
        key = self.settings.audit_key_bytes()
        removed, kept = 0, []
        for debate_id in ids:
            problem = await self._db(partial(archive, debate_id=debate_id, folder=folder, key=key))
            if problem is not None:
                kept.append(debate_id)
                log.error("debate %s kept: %s", debate_id, problem)
                continue
            await self._db(partial(operations.remove_debate, debate_id=debate_id))
            removed += 1
        detail = f"{removed} debate(s) archived to {folder} and removed"
        return detail + (f"; kept {kept} (archive not verified)" if kept else "")

    async def stale_leases(self) -> str:
        now = self.clock()
        older_than = now - timedelta(seconds=self.settings.worker_lease_s)
        requeued = await self._db(lambda s: operations.requeue_stale(s, older_than=older_than))
        for debate_id, owner in requeued:
            log.warning(
                "debate %s: worker %s stopped renewing its lease; back in the queue",
                debate_id,
                owner,
            )
        released = await self._db(lambda s: operations.release_stale_sends(s, now=now))
        return f"{len(requeued)} debate(s) requeued, {released} message(s) released"

    async def queue_depth(self) -> str:
        depth, refused = await self._db(self._depth)
        self._set_gauges(depth, refused)
        if depth.oldest_wait_s > self.settings.queue_warn_s:
            log.warning(
                "%d debate(s) waiting for a worker, the oldest for %.0f s (over"
                " DEBATEBOT_QUEUE_WARN_S=%g): add workers or raise DEBATEBOT_WORKER_CONCURRENCY",
                depth.waiting,
                depth.oldest_wait_s,
                self.settings.queue_warn_s,
            )
        return f"{depth.waiting} waiting, oldest {depth.oldest_wait_s:.0f} s"

    async def review_reminders(self) -> str:
        period_s = self.settings.review_reminder_h * 3600
        due = await remind_reviewers(engine=self.engine, notifier=self.notifier, period_s=period_s)
        return f"{due} reminder(s) due"

    async def retry_pr_comments(self) -> str:
        if self.pr_comments is None:
            return "no code host configured"
        now = self.clock()
        due = await self._db(
            lambda s: operations.pr_comments_due(
                s,
                since=now - PR_COMMENT_RETRY_FOR,
                until=now - timedelta(seconds=PR_COMMENT_GRACE_S),
            )
        )
        posted = [await self.pr_comments.sync(debate_id) for debate_id in due]
        done = sum(1 for comment_id in posted if comment_id is not None)
        return f"{done} comment(s) synced of {len(due)} due"

    async def refresh_gauges(self) -> None:
        try:
            depth, refused = await self._db(self._depth)
        except StoreError as error:
            log.warning("queue gauges not refreshed: %s", error)
            return
        self._set_gauges(depth, refused)

    def _depth(self, session: Session) -> tuple[operations.QueueDepth, int]:
        """The queue, and how many installs' bot tokens Slack refuses."""
        return operations.queue_depth(session, now=self.clock()), refusals.refused_count(session)

    def _set_gauges(self, depth: operations.QueueDepth, refused: int) -> None:
        if self.metrics is not None:
            self.metrics.queue_depth.set(depth.waiting)
            self.metrics.queue_oldest.set(depth.oldest_wait_s)
            self.metrics.installs_refused.set(refused)


def due_day(digest_time: str | None, timezone: str, now: datetime) -> str | None:
    """The channel's local date when its digest time has passed today, else None."""
    if not digest_time:
        return None
    try:
        local = now.astimezone(ZoneInfo(timezone))
    except (ZoneInfoNotFoundError, ValueError):
        local = now
    hour, minute = (int(part) for part in digest_time.split(":"))
    if (local.hour, local.minute) < (hour, minute):
        return None
    return local.date().isoformat()


def digest_message(channel_id: str, day: str, figures: operations.ChannelDay) -> kit.Message:
    """The digest as people read it."""
    decided = ", ".join(f"{n} {decision}" for decision, n in sorted(figures.decisions.items()))
    budget = (
        f" of the ${figures.budget_usd:,.2f} monthly budget"
        if figures.budget_usd is not None
        else " (no monthly budget set)"
    )
    text = (
        f":bar_chart: Debate digest for <#{channel_id}>, {day} (last 24 h)\n"
        f"• Debates started: {figures.debates}\n"
        f"• Verdicts: {decided or 'none'}\n"
        f"• Sent to review: {figures.escalated} · open reviews now: {figures.open_reviews}\n"
        f"• Spend this month: ${figures.month_spend_usd:,.2f}{budget}"
    )
    return posts.notice(text)


def archive(session: Session, *, debate_id: int, folder: Path, key: bytes | None) -> str | None:
    """Export the debate to `folder`, read the file back and verify its chain and seal; None
    when the archive is good (the debate may then be removed), else what is wrong."""
    record = export_record(session, debate_id=debate_id, key=key)
    if not record["audit"]["chain_ok"]:
        return f"its audit chain does not verify ({record['audit']['problem']})"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"debate-{debate_id}.json"
    partial = path.with_suffix(".json.partial")
    with partial.open("w", encoding="utf-8") as out:
        json.dump(record, out, ensure_ascii=False, indent=1, default=str)
        out.flush()
        os.fsync(out.fileno())
    partial.replace(path)
    written = json.loads(path.read_text(encoding="utf-8"))
    report = verify_export(written, key=key)
    if not report.ok:
        return f"the archive {path} does not verify ({report.problem})"
    if report.turns_checked != len(record.get("turn_rows") or []):
        return f"the archive {path} holds {report.turns_checked} verified turns, not all"
    return None
