"""Token holds: a bot token Slack refuses (`token_revoked`, `invalid_auth`, `missing_scope`, …;
see `bot.slackweb.token`) is no message's fault, so delivery holds what is owed instead of
giving anything up, and asks `auth.test` now and then until Slack takes the token.

With one workspace's token from the environment, all delivery pauses (`TokenGate`) and the
refused lane's held messages are handed back. With OAuth installs (`per_workspace`) only that
workspace's delivery pauses: the refusal is marked in the store (bot.store.refusals), so no
replica claims its debates or sends what it is owed, and one replica at a time asks
`auth.test` with its token, less and less often, until Slack takes it (for a `missing_scope`:
grants the scope) or the app is installed there again. A refusal right after a probe took the
token, before anything was delivered there, waits on from the wait it reached, with no second
ERROR. Only the refused lane's messages are handed back: the workspace's other lanes may have
theirs at Slack.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from dataclasses import dataclass, field

from bot.jobs.delivery.config import DeliveryConfig
from bot.jobs.delivery.outcomes import Outcomes
from bot.slackweb.acting import acting_for
from bot.slackweb.errors import PostError, TokenRefusedError
from bot.slackweb.people import SlackDirectory
from bot.slackweb.token import TokenGate, workspace_token_fix
from bot.store import outbox_claims, refusals
from bot.store.errors import DatabaseUnavailableError
from bot.store.outbox_claims import Lane
from bot.store.tenancy import Workspace

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class TokenHolds:
    """Holds delivery while Slack refuses a bot token, and probes it until Slack takes it."""

    outcomes: Outcomes
    directory: SlackDirectory
    gate: TokenGate
    _probe_at: float = field(default=0.0, init=False)
    _probe_wait: float = field(init=False)
    _probe_backoff: refusals.Backoff = field(init=False)
    _probes: dict[str, asyncio.Task[None]] = field(default_factory=dict, init=False)
    _probes_looked_at: float = field(default=-math.inf, init=False)

    def __post_init__(self) -> None:
        self._probe_wait = self.config.token_probe_s
        self._probe_backoff = refusals.Backoff(
            first_s=self.config.token_probe_s, max_s=self.config.token_probe_max_s
        )

    @property
    def config(self) -> DeliveryConfig:
        return self.outcomes.config

    async def may_deliver(self) -> bool:
        """Whether lanes may start now: with OAuth installs always (each refused workspace's
        probe is started here, its lanes are not due); else not while Slack refuses the bot
        token (until a probe finds it taken again)."""
        if self.config.per_workspace:
            await self._probe_refused()
            return True
        return not self.gate.refused or await self._token_taken()

    async def refused(self, lane: Lane, workspace: Workspace, error: TokenRefusedError) -> None:
        """Slack refused the token `lane` was delivered with: hold its workspace (OAuth
        installs) or all delivery, and hand back what the lane holds."""
        if self.config.per_workspace:
            await self._hold(lane, workspace, error)
            return
        self.gate.refuse(error)
        self._probe_at = asyncio.get_running_loop().time() + self._probe_wait
        owner = self.outcomes.owner
        await self.outcomes.db(lambda s: outbox_claims.release_lane(s, owner=owner, lane=lane))

    def cancel_probes(self) -> list[asyncio.Task[None]]:
        """Cancel the probes under way; returned for the caller to wait for."""
        tasks = list(self._probes.values())
        for task in tasks:
            task.cancel()
        self._probes.clear()
        return tasks

    async def _token_taken(self) -> bool:
        """Whether Slack takes the bot token again, asked at most every so often."""
        loop = asyncio.get_running_loop()
        if loop.time() < self._probe_at:
            return False
        try:
            refused = await self.directory.check_token()
        except PostError as error:
            # Slack did not answer: no news about the token; ask again later.
            log.warning("cannot ask Slack about the bot token yet: %s", error)
            refused = self.gate.refused_error()
        if refused is not None:
            self.gate.refuse(refused)
            self._probe_at = loop.time() + self._probe_wait
            self._probe_wait = min(self._probe_wait * 2, self.config.token_probe_max_s)
            return False
        self.gate.accept()
        self._probe_wait = self.config.token_probe_s
        await self.outcomes.db(outbox_claims.pull_in_retries)
        return True

    async def _probe_refused(self) -> None:
        """Start asking Slack about each workspace token it refuses whose probe is due, in the
        background (the store hands each due probe to one replica); looked for at most every
        half `token_probe_s`."""
        now = asyncio.get_running_loop().time()
        if now < self._probes_looked_at + self.config.token_probe_s / 2:
            return
        self._probes_looked_at = now
        self._probes = {bot: task for bot, task in self._probes.items() if not task.done()}
        due = await self.outcomes.db(
            lambda s: refusals.claim_probes(s, backoff=self._probe_backoff)
        )
        for bot in due:
            if bot.installation not in self._probes:
                self._probes[bot.installation] = asyncio.create_task(self._probe(bot))

    async def _probe(self, bot: refusals.BotState) -> None:
        """Ask `auth.test` with the bot's token (for a `missing_scope`, whether it now has the
        scope): taken, its mark is cleared (every replica then claims its debates and sends what
        it is owed); refused, the code is kept up to date."""
        where = bot.installation
        refusal = bot.refusal
        scope = refusal.scope if refusal is not None and refusal.code == "missing_scope" else None
        try:
            with acting_for(bot.acting_as):
                refused = await self.directory.check_token(scope=scope)
        except TokenRefusedError as error:
            refused = error  # refused before Slack was asked (its renewal was refused)
        except PostError as error:
            log.warning("cannot ask Slack about the bot token of %s yet: %s", where, error)
            return
        try:
            if refused is not None:
                await self._note_refused(bot.acting_as, refused)
                return
            if await self.outcomes.db(lambda s: refusals.accept(s, installation=where)):
                log.warning(
                    "Slack takes the bot token of %s again: delivering what it is owed, and"
                    " claiming its debates",
                    where,
                )
        except DatabaseUnavailableError as error:
            log.error("the bot token of %s was asked about, but not noted: %s", where, error)
            return
        self.outcomes.wake()

    async def _hold(self, lane: Lane, workspace: Workspace, error: TokenRefusedError) -> None:
        """One workspace's token is refused: marked in the store for every replica (its debates
        are not claimed, none of its lanes is due), and what this lane holds handed back with no
        attempt counted (the workspace's other lanes hand back theirs as they meet the refusal,
        or record what Slack took). With no bot stored for it (uninstalled: an uninstall drops
        what the workspace is owed, bot.slack.installs), or none noted (the database did not
        answer), the claimed message waits out its claim."""
        try:
            noted = await self._note_refused(workspace, error)
        except DatabaseUnavailableError as failure:
            log.error("delivery to workspace %s held, not noted: %s", workspace.team_id, failure)
            return
        if noted is None:
            log.warning("delivery to workspace %s held: %s", workspace.team_id, error)
            return
        fix = workspace_token_fix(error.code, error.needed)
        if noted == refusals.Noted.NEW:
            log.error(
                "Slack refused the bot token of workspace %s (%s): what it is owed is held (none"
                " is given up) and none of its debates is claimed until the token works; to fix"
                " it, %s",
                workspace.team_id,
                error.code,
                fix,
            )
        elif noted == refusals.Noted.AGAIN:
            log.warning(
                "Slack refused the bot token of workspace %s again (%s) though auth.test took"
                " it: held again, asked less often; to fix it, %s",
                workspace.team_id,
                error.code,
                fix,
            )
        owner = self.outcomes.owner
        with contextlib.suppress(DatabaseUnavailableError):  # else they lapse in `claim_s`
            await self.outcomes.db(lambda s: outbox_claims.release_lane(s, owner=owner, lane=lane))

    async def _note_refused(
        self, workspace: Workspace, error: TokenRefusedError
    ) -> refusals.Noted | None:
        """Mark in the store that Slack refuses the token `workspace` acts with (`refuse`)."""
        return await self.outcomes.db(
            lambda s: refusals.refuse(
                s,
                workspace=workspace,
                code=error.code,
                scope=error.needed,
                backoff=self._probe_backoff,
            )
        )
