"""What the MCP tools read from the store: a debate as an agent follows it (state, turns so far,
and once finished the verdict, confidence, flags, cost and how to verify the record), recent
debates, and audit checks of a stored debate or an uploaded export."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Engine, false, func, or_
from sqlmodel import col, select

from bot.store import overview, reviews, verify
from bot.store.audit import ChainReport
from bot.store.db import session_scope
from bot.store.debate_tables import Debate, DebateSource, DebateState, Turn
from bot.store.errors import DebateNotFoundError
from bot.store.export import export_record, verify_export
from bot.store.tenancy import EVERY_WORKSPACE, PENDING_WORKSPACE, Workspace

EXPORT_PARTS = ("debate", "spec", "turn_rows", "verdict_row")


class UnknownDebateError(Exception):
    """No debate has the id an agent gave; the message says how to find one."""


def no_such_debate(debate_id: int) -> str:
    """What an agent is told for an id no debate has."""
    return f"there is no debate {debate_id}; `list_debates` shows the ids there are"


class Progress(NamedTuple):
    """How far a debate is, as `debate://ID` listeners are told it changed."""

    state: str
    turns: int
    ended: bool


class Reader:
    """Reads of one workspace's debates (the deployment's own: `PENDING_WORKSPACE` until a
    single-workspace bot learns its id, as for `debatebot run`)."""

    def __init__(
        self, engine: Engine, *, key: bytes | None, workspace: Workspace = PENDING_WORKSPACE
    ) -> None:
        self.engine = engine
        self.key = key
        self.workspace = workspace

    def debate(self, debate_id: int) -> dict[str, Any]:
        """The debate as `get_debate` answers it; UnknownDebateError when there is none."""
        with session_scope(self.engine, workspace=self.workspace) as session:
            try:
                record = export_record(session, debate_id=debate_id, key=self.key)
            except DebateNotFoundError:
                raise UnknownDebateError(no_such_debate(debate_id)) from None
        if record["escalation"] is not None and not record["reviews"]:
            record["reviews"] = self._decisions(debate_id)
        return summary(record)

    def _decisions(self, debate_id: int) -> list[dict[str, Any]]:
        """The decisions on this debate's review wherever they are stamped: a debate asked
        before the deployment knew its workspace's id stays `pending` (bot.store.tenancy),
        while a Slack reviewer's decision is stamped with the workspace the click came from.
        A debate's id is unique in the database, so this reads nothing of another debate."""
        with session_scope(self.engine, workspace=EVERY_WORKSPACE) as session:
            return [
                review.model_dump(mode="json")
                for review in reviews.reviews_for(session, debate_id=debate_id)
            ]

    def progress(self, debate_id: int) -> tuple[bool, int]:
        """Whether the debate finished, and how many turns it has recorded so far."""
        with session_scope(self.engine, workspace=self.workspace) as session:
            debate = session.get(Debate, debate_id)
            if debate is None:
                raise UnknownDebateError(no_such_debate(debate_id))
            recorded = session.exec(
                select(func.count()).select_from(Turn).where(Turn.debate_id == debate_id)
            ).one()
            return debate.state is DebateState.FINISHED, int(recorded)

    def recent(self, *, limit: int, source: DebateSource | None) -> list[dict[str, Any]]:
        """The newest `limit` debates (only those from `source`, when given), newest first."""
        query = select(Debate).order_by(col(Debate.id).desc()).limit(limit)
        if source is not None:
            query = query.where(Debate.source == source)
        with session_scope(self.engine, workspace=self.workspace) as session:
            return [
                {
                    "id": debate.id,
                    "state": debate.state.value,
                    "source": debate.source.value,
                    "protocol": debate.protocol,
                    "question": debate.question[:200],
                    "decision": debate.decision.value if debate.decision else None,
                    "cost_usd": round(debate.cost_usd, 6),
                }
                for debate in session.exec(query)
            ]

    def typical_costs(self, protocols: Sequence[str]) -> dict[str, tuple[float, int]]:
        """The median cost of each protocol's last finished debates here, and of how many."""
        with session_scope(self.engine, workspace=self.workspace) as session:
            return overview.typical_costs(session, protocols=protocols)

    def open_progress(self, also: set[int]) -> dict[int, Progress]:
        """The state and stored turns of every queued or running debate, and of the debates in
        `also` (those followed until they were seen to end)."""
        turns = (
            select(func.count())
            .select_from(Turn)
            .where(col(Turn.debate_id) == col(Debate.id))
            .scalar_subquery()
        )
        followed = col(Debate.id).in_(sorted(also)) if also else false()
        open_now = col(Debate.state).in_([DebateState.QUEUED, DebateState.RUNNING])
        query = select(Debate.id, Debate.state, turns).where(or_(open_now, followed))
        with session_scope(self.engine, workspace=self.workspace) as session:
            return {
                debate_id: Progress(
                    state=DebateState(state).value,
                    turns=count,
                    ended=DebateState(state) is DebateState.FINISHED,
                )
                for debate_id, state, count in session.exec(query)
                if debate_id is not None
            }

    def verify_stored(self, debate_id: int) -> dict[str, Any]:
        """The audit check of a stored debate (`debatebot audit verify ID`)."""
        with session_scope(self.engine, workspace=self.workspace) as session:
            if session.get(Debate, debate_id) is None:
                raise UnknownDebateError(no_such_debate(debate_id))
            return report(verify.verify_chain(session, debate_id=debate_id, key=self.key))

    def verify_upload(self, record: dict[str, Any]) -> dict[str, Any]:
        """The audit check of an exported record an agent sent (`audit verify-export`);
        ValueError saying what is missing when it is not a whole export."""
        missing = [part for part in EXPORT_PARTS if part not in record]
        if missing:
            raise ValueError(
                f"`export` is not a debatebot export: it has no {', '.join(missing)}; pass the"
                " JSON `debatebot export ID` writes"
            )
        try:
            return report(verify_export(record, key=self.key))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(
                f"`export` is not a whole debatebot export ({error}); export the debate again"
            ) from None


def report(chain: ChainReport) -> dict[str, Any]:
    return {
        "debate_id": chain.debate_id,
        "ok": chain.ok,
        "turns_checked": chain.turns_checked,
        "problem": chain.problem,
        "kind": chain.kind,
        "sealed": chain.sealed,
        "signature": chain.signature,
        "note": chain.note,
    }


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """An export cut to what an agent acts on: no transcript text, the verdict when finished."""
    debate = record["debate"]
    debate_id = debate["id"]
    answer: dict[str, Any] = {
        "id": debate_id,
        "state": debate["state"],
        "source": debate["source"],
        "protocol": debate["protocol"],
        "question": debate["question"],
        "turns_so_far": len(record["turns"]),
        "cost_usd": debate["cost_usd"],
        "resource": f"debate://{debate_id}",
    }
    result = record["result"]
    if debate["state"] != DebateState.FINISHED.value or result is None:
        answer["next"] = "call wait_for_debate with this id to wait for the verdict"
        return answer
    verdict = result["verdict"]
    answer.update(
        outcome=verdict["status"],
        decision=verdict["decision"],
        synthesis=verdict["synthesis"],
        confidence=verdict["confidence"],
        level=verdict["level"],
        confidence_components=verdict.get("components"),
        unresolved_points=verdict.get("unresolved_points", []),
        escalate=verdict["escalate"],
        escalation_reasons=verdict.get("escalation_reasons", []),
        flags=result.get("flags", []),
        error=result.get("error"),
        audit={"chain_ok": record["audit"]["chain_ok"], "kind": record["audit"]["kind"]},
        verify=(
            f"call verify_record with id {debate_id}, or run `debatebot audit verify {debate_id}`"
        ),
    )
    review = _review(record)
    if review is not None:
        answer["review"] = review
    return answer


def _review(record: dict[str, Any]) -> dict[str, Any] | None:
    """Whether people are deciding the verdict, where, and once they have, their decision;
    None when nobody reviews it."""
    escalation = record["escalation"]
    if escalation is None:
        return None
    channel = record["debate"].get("review_channel_id") or record["debate"].get("channel_id")
    where = (
        f"the review request is in Slack channel {channel}, whose reviewers decide"
        if channel
        else "no Slack channel is asked (DEBATEBOT_MCP_REVIEW_CHANNEL is not set): a person"
        " decides on the debatebot web page"
    )
    answer: dict[str, Any] = {
        "state": escalation["state"],
        "sample": escalation["sample"],
        "reasons": escalation["reasons"],
        "channel": channel,
    }
    decided = record["reviews"][-1] if record["reviews"] else None
    if decided is None:
        answer["people_deciding"] = (
            f"people are deciding this verdict: {where}. Do not act on the verdict alone;"
            " call get_debate again later for their decision"
            if not escalation["sample"]
            else f"drawn at random for a calibration review ({where}); the verdict stands"
        )
        return answer
    answer.update(
        decision=decided["decision"],
        reviewer=decided["reviewer"],
        note=decided["note"],
        decided_at=decided["created_at"],
        people_decided=f"{decided['reviewer']} decided: {decided['decision']}",
    )
    return answer
