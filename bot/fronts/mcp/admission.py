"""The one place the MCP front submits a debate: through the intake's admission (`Intake.submit`),
so an agent's request passes the same spec check, in-flight limits and monthly budget as a
Slack trigger's. Kept to this one function so the front can move to another intake entry point
without touching the tools."""

from __future__ import annotations

import uuid

from bot.intake.intake import Intake
from bot.intake.request import Ask, DebateRequest, Origin, OriginKind
from bot.store.debate_tables import DebateSource
from engine.models import ContextDocument


async def submit_debate(
    intake: Intake,
    *,
    question: str,
    context: tuple[ContextDocument, ...],
    protocol: str | None,
    rounds: int | None,
    budget_usd: float | None,
    stances: tuple[tuple[str, ...], tuple[str, ...]],
    requested_by: str,
    link: str | None = None,
) -> int:
    """Admit and queue one debate for `requested_by` (an `mcp:` identity, so the per-person
    in-flight limit counts an agent's debates), with `stances` (for, against) for the stances
    protocol, and the GitHub or GitLab `link` the context came from (its pull request gets the
    verdict, as for a link posted in Slack); its id. NotAdmittedError says why not."""
    started = await intake.submit(
        DebateRequest(
            trigger_key=f"mcp:{uuid.uuid4()}",
            source=DebateSource.MCP,
            asked=Ask(
                question=question,
                context=context,
                protocol=protocol,
                rounds=rounds,
                budget_usd=budget_usd,
                stances_for=stances[0],
                stances_against=stances[1],
            ),
            origin=Origin(OriginKind.MCP),
            requested_by=requested_by,
            link=link,
        )
    )
    assert started.debate.id is not None
    return started.debate.id
