"""`debatebot db`: migrate the database to the current schema."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from bot.settings import Settings
from bot.store.db import redacted, upgrade

if TYPE_CHECKING:
    pass


def database(args: argparse.Namespace) -> int:
    settings = Settings()
    revision = upgrade(settings.database_url)
    print(f"database {redacted(settings.database_url)} is at schema {revision}")
    return 0
