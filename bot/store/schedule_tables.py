"""The table of scheduled jobs' runs (`scheduled_run`): one per job and slot, so a job
fires once per slot across replicas (bot.store.operations)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import Column, Text
from sqlmodel import Field, SQLModel

from bot.store.columns import enum_column
from engine.models import utcnow


class RunOutcome(StrEnum):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"


class ScheduledRun(SQLModel, table=True):
    """One run of a scheduled job per slot (its aligned fire time): the row makes a job fire
    once per slot across replicas, and tells operators when each job last ran and how."""

    __tablename__ = "scheduled_run"

    job: str = Field(primary_key=True, max_length=40)
    slot: str = Field(primary_key=True, max_length=40)
    runner: str = Field(max_length=120)
    outcome: RunOutcome = Field(
        default=RunOutcome.RUNNING,
        sa_column=enum_column(RunOutcome, name="ck_scheduled_run_outcome", length=20),
    )
    detail: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
