"""The Slack front door's own admission checks (`bot.intake.doors.DoorChecks`): that Slack takes
the bot token, and that the bot can post in a channel. Slack's knowledge stays on Slack's side
of the intake: its token gate, its refusal codes, and which conversation ids are DMs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.intake.errors import NotAdmittedError, TokenRefusedNotAdmittedError
from bot.intake.request import Origin, OriginKind
from bot.slackweb.token import TokenGate, workspace_refusal
from bot.store import refusals
from bot.store.scoped import WorkspaceStore


class Reach(Protocol):
    """Whether the bot can post in a channel (Slack's directory, `bot.slackweb.people`)."""

    async def cannot_post_in(self, channel: str) -> str | None: ...

    async def bot_identity(self) -> tuple[str | None, str]: ...


def slack_origin(channel: str, thread: str | None = None) -> Origin:
    """Where a Slack request came from. Slack's conversation ids say their kind by their first
    letter; a `D` id is a direct message (the assistant pane is one), which has no reviewers
    of its own."""
    kind = OriginKind.SLACK_DM if channel[:1] == "D" else OriginKind.SLACK_CHANNEL
    return Origin(kind, place=channel, thread=thread)


@dataclass(kw_only=True, eq=False)
class SlackDoorChecks(WorkspaceStore):
    """The token and reach checks of one workspace's requests."""

    reach: Reach | None = None
    gate: TokenGate | None = None
    tokens_per_workspace: bool = False

    async def check_reachable(self, place: str) -> None:
        """Refuse (NotAdmittedError) when the bot cannot post in `place`, saying how to fix it."""
        if self.reach is None:
            return
        problem = await self.reach.cannot_post_in(place)
        if problem is None:
            return
        if problem == "is_archived":
            raise NotAdmittedError(
                f"this channel is archived, so I cannot post a debate in it ({problem})"
            )
        _, name = await self.reach.bot_identity()
        raise NotAdmittedError(
            f"I am not in this channel, so I could not post the debate here ({problem})."
            f" Run `/invite @{name}` and ask again"
        )

    async def check_token(self) -> None:
        """Refuse (TokenRefusedNotAdmittedError) while Slack refuses the bot token: the
        process's `gate`, or with OAuth installs (`tokens_per_workspace`) the workspace's, as
        the store has it."""
        if self.gate is not None and self.gate.code is not None:
            raise TokenRefusedNotAdmittedError(
                self.gate.refusal(), code=self.gate.code, scope=self.gate.needed
            )
        if not self.tokens_per_workspace:
            return
        refused = await self.db(lambda s: refusals.refusal_for(s, workspace=self.workspace))
        if refused is not None:
            raise TokenRefusedNotAdmittedError(
                workspace_refusal(refused.code, refused.scope),
                code=refused.code,
                scope=refused.scope,
            )
