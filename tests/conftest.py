"""What every test shares: the root logger's level as it was before the test.

A command under test configures logging as a process would (`bot.logs.configure_logging` sets
the root logger's level); without this, the next test on the same worker would log at that
level, and what it captures would depend on the order the tests ran in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _root_logger_level_restored() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)
