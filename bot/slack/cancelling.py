"""Stopping a debate from Slack (issue 44): `/debate cancel <id>`, the Stop button on its
parent, and Slack's own Stop on its agent session (`agent_session_stopped`), all through
`stop_debate`. Who may stop is the server's decision, made here: the person who asked for the
debate, the reviewers of its channel (as reviews decide them, bot.slack.reviews) and workspace
admins."""

from __future__ import annotations

from bot.messages import kit
from bot.slack.errors import CommandError, NotAllowedError
from bot.slack.surface import Surface
from bot.store import cancels, queue
from bot.store.debate_tables import CancelSource, Debate
from bot.store.errors import CancelRefusedError, DebateNotFoundError


async def may_stop(surface: Surface, debate: Debate, user: str) -> bool:
    """Whether `user` may stop `debate`: its requester, one of the people who may decide its
    review (its channel's reviewers; the admins where it has none), or a workspace admin."""
    if user == debate.requested_by:
        return True
    deciders = await surface.reviews.deciders(debate)
    if await surface.directory.may_review(user, deciders):
        return True
    return await surface.directory.is_admin(user)


async def stop_debate(surface: Surface, *, debate_id: int, user: str, source: CancelSource) -> str:
    """Ask to stop debate `debate_id` for `user`, and say what happened, for `user` alone.
    Raises CommandError for an unknown or finished debate and NotAllowedError for a person who
    may not stop it; nothing is changed then."""
    try:
        debate = await surface.db(lambda s: queue.get_debate(s, debate_id=debate_id))
    except DebateNotFoundError as error:
        raise CommandError(
            f"there is no debate #{debate_id} in this workspace; the number is in the"
            " debate's first message"
        ) from error
    if not await may_stop(surface, debate, user):
        raise NotAllowedError(
            f"Only the person who asked for debate #{debate_id}"
            f" ({kit.mention(debate.requested_by) if debate.requested_by else 'unknown'}),"
            " the reviewers of its channel or a workspace admin can stop it. Nothing was"
            " changed.",
            plain="Only the requester, the channel's reviewers or an admin can stop this debate.",
        )
    try:
        asked = await surface.db(
            lambda s: cancels.request_cancel(s, debate_id=debate_id, by=user, source=source)
        )
    except CancelRefusedError as error:
        raise CommandError(str(error)) from error
    if not asked.new:
        already = cancels.cancel_reason(asked.debate)
        return f":octagonal_sign: Debate #{debate_id} is already being stopped ({already})."
    return (
        f":octagonal_sign: Debate #{debate_id} is stopping: the call in flight is abandoned,"
        " no new one starts, and its thread will say it was stopped."
    )


async def stop_in_thread(surface: Surface, *, channel: str, thread_ts: str, user: str) -> str:
    """Slack's Stop on the agent session of thread `thread_ts`: stop the debate that session
    stands for, as `stop_debate` does (same errors), or raise CommandError when the thread
    holds no debate of this bot."""
    debate = await surface.db(
        lambda s: cancels.debate_in_thread(s, channel_id=channel, thread_ts=thread_ts)
    )
    if debate is None or debate.id is None:
        raise CommandError("there is no debate in this thread to stop")
    return await stop_debate(
        surface, debate_id=debate.id, user=user, source=CancelSource.SLACK_STOP
    )
