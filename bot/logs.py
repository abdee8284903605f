"""Logging of the long-running commands: text for people, JSON lines for log pipelines.

Every record carries the debate and the worker it concerns when there is one: the worker sets
them in context variables around a debate's run, so a line logged deep in a provider's retry
loop still says which debate it was for.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

from bot.settings import Settings, SettingsError

debate_id_var: ContextVar[int | None] = ContextVar("debate_id", default=None)
worker_id_var: ContextVar[str | None] = ContextVar("worker_id", default=None)

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s%(where)s: %(message)s"


@contextmanager
def debate_context(debate_id: int | None, worker_id: str | None) -> Iterator[None]:
    """Tag every record logged inside the block (and in tasks it starts) with these ids."""
    debate_token = debate_id_var.set(debate_id)
    worker_token = worker_id_var.set(worker_id)
    try:
        yield
    finally:
        debate_id_var.reset(debate_token)
        worker_id_var.reset(worker_token)


class ContextFilter(logging.Filter):
    """Copies the context's debate and worker ids onto each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        debate_id, worker_id = debate_id_var.get(), worker_id_var.get()
        parts = [f"debate={debate_id}"] if debate_id is not None else []
        if worker_id is not None:
            parts.append(f"worker={worker_id}")
        record.__dict__.update(
            debate_id=debate_id, worker_id=worker_id, where=f" [{' '.join(parts)}]" if parts else ""
        )
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, ids, error."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("debate_id", "worker_id"):
            value = getattr(record, key, None)
            if value is not None:
                line[key] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(settings: Settings) -> None:
    """Logs of `serve` and `worker`: INFO by default (`DEBATEBOT_LOG_LEVEL`), as text or as
    JSON lines (`DEBATEBOT_LOG_FORMAT=json`); warns when seals will go unsigned."""
    level = logging.getLevelName(settings.log_level.upper())
    if not isinstance(level, int):
        raise SettingsError(
            f"DEBATEBOT_LOG_LEVEL={settings.log_level!r} is not a level: use DEBUG, INFO,"
            " WARNING or ERROR"
        )
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter())
    handler.setFormatter(
        JsonFormatter() if settings.log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    logging.basicConfig(level=level, handlers=[handler], force=True)
    if settings.audit_key_bytes() is None:
        logging.getLogger("bot.audit").warning(
            "DEBATEBOT_AUDIT_KEY is not set: finished debates are sealed but not signed, so"
            " someone who can write to the database could rewrite a debate and re-hash it"
            " unnoticed. Set a long random secret (and keep it out of the database)."
        )
