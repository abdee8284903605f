"""An operator's retry of a debate that FAILED or ran out of budget (issue 44): which debates may
be retried, and the spec the retry runs under. The retry itself is a follow-up the intake admits
like any other request (debates in flight, monthly caps) and queues carrying the stored turns
forward (bot.store.queue.fork_debate, as *Another round* does), so the worker replays them and
asks a model only for what was never stored. The original keeps its sealed ending; the retry is
a debate of its own (its `parent_debate_id` names the original), in the same thread."""

from __future__ import annotations

from sqlmodel import Session

from bot.store import queue
from bot.store.debate_tables import Debate, DebateState
from bot.store.errors import RetryRefusedError
from engine.models import DebateSpec, DebateStatus

RETRIED = (DebateStatus.FAILED, DebateStatus.TRUNCATED_BUDGET)


def retry_key(debate_id: int) -> str:
    """The retry's trigger key: one retry per debate, a second asks for the same one."""
    return f"retry:{debate_id}"


def retried_spec(
    session: Session, *, debate_id: int, budget_usd: float
) -> tuple[Debate, DebateSpec]:
    """Debate `debate_id` and the spec its retry runs under, with `budget_usd` as its whole
    budget (what was spent included). Raises DebateNotFoundError, and RetryRefusedError for a
    debate that did not fail or run out of budget, or a budget it has already spent."""
    debate = queue.get_debate(session, debate_id=debate_id)
    if debate.state != DebateState.FINISHED or debate.outcome not in RETRIED:
        now = (debate.outcome or debate.state).value.lower()
        raise RetryRefusedError(
            f"debate {debate_id} is {now}: only a failed debate, or one that ran out of budget,"
            " can be retried"
        )
    if budget_usd <= debate.cost_usd:
        raise RetryRefusedError(
            f"debate {debate_id} has already spent ${debate.cost_usd:.4f}; name a --budget"
            " above that (it is the whole budget, what was spent included)"
        )
    spec = DebateSpec.model_validate_json(debate.spec_json)
    return debate, spec.model_copy(update={"budget_usd": budget_usd})
