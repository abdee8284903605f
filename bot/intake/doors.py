"""What a front door checks before the intake queues its requests, that only the door knows how
to: the Slack door (`bot.slack.admission`) that Slack takes the bot token and that the bot can
post in the channel. A door with nothing of its own to check (the web page, the HTTP API, a
terminal) passes none; the intake's own checks (the spec, debates in flight, monthly spend) run
for every door alike."""

from __future__ import annotations

from typing import Protocol


class DoorChecks(Protocol):
    """A front door's own admission checks; each raises `NotAdmittedError` saying what to fix."""

    async def check_token(self) -> None:
        """Refuse while the door cannot deliver anything it would queue (a refused token)."""
        ...

    async def check_reachable(self, place: str) -> None:
        """Refuse when the bot cannot post in `place`, saying how to fix it."""
        ...
