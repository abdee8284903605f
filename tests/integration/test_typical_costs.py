"""What `list_protocols` tells an agent a debate typically costs: the median cost of each
protocol's last finished debates in the store, on SQLite and PostgreSQL; nothing for a
protocol none of whose debates has finished (a running debate's spend so far is no cost of a
debate)."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import select

from bot.store import overview, queue
from bot.store.db import session_scope
from bot.store.debate_tables import Debate, DebateSource, DebateState
from bot.store.tenancy import PENDING_WORKSPACE
from engine.models import DebateSpec, ModelSettings


def debate(engine: Engine, key: str, *, state: DebateState, cost: float) -> None:
    spec = DebateSpec(
        question="Adopt ADR-7?",
        protocol="adversarial",
        default_model=ModelSettings(provider="fake"),
    )
    with session_scope(engine, workspace=PENDING_WORKSPACE) as session:
        queue.enqueue_debate(
            session, new=queue.NewDebate(trigger_key=key, spec=spec, source=DebateSource.MCP)
        )
        row = session.exec(select(Debate).where(Debate.trigger_key == key)).one()
        row.state = state
        row.cost_usd = cost
        session.add(row)
        session.commit()


def test_the_typical_cost_is_the_median_of_finished_debates_only(store: Engine) -> None:
    debate(store, "a", state=DebateState.FINISHED, cost=0.01)
    debate(store, "b", state=DebateState.FINISHED, cost=0.04)
    debate(store, "c", state=DebateState.FINISHED, cost=0.02)
    debate(store, "d", state=DebateState.RUNNING, cost=9.0)
    with session_scope(store, workspace=PENDING_WORKSPACE) as session:
        costs = overview.typical_costs(session, protocols=["adversarial", "panel"])
        newest_two = overview.typical_costs(session, protocols=["adversarial"], last=2)
    assert costs == {"adversarial": (0.02, 3)}
    assert newest_two == {"adversarial": (0.03, 2)}
