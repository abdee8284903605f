"""The review of an escalated verdict, decided in the page or the API: recorded as Slack's
reviews are (`bot.store.reviews.record_review`: the decision once, the escalation decided, its
calibration label, the signed decision joined to the debate's receipt). The page has no
identities of its own: whoever holds the server's token decides, recorded as `web`."""

from __future__ import annotations

from sqlalchemy import Engine

from bot.fronts.web.guard import WebError
from bot.fronts.web.reading import ReviewOut, review_out
from bot.store import reviews
from bot.store.db import in_session
from bot.store.receipts import ReceiptIssuer
from bot.store.review_tables import EscalationState
from bot.store.tenancy import Workspace

DECISIONS = {"approve": EscalationState.APPROVED, "reject": EscalationState.REJECTED}
REVIEWER = "web"
"""Who a decision made through the web door is recorded as."""


class WebReviews:
    def __init__(
        self, engine: Engine, *, workspace: Workspace, receipts: ReceiptIssuer | None
    ) -> None:
        self.engine = engine
        self.workspace = workspace
        self.receipts = receipts

    async def decide(self, debate_id: int, decision: str, note: str | None) -> ReviewOut:
        """Approve or reject debate `debate_id`'s open review; 404 without one, 409 once it is
        decided (the first decision stands), 422 for another decision."""
        chosen = DECISIONS.get(decision)
        if chosen is None:
            raise WebError(422, "a review decision is `approve` or `reject`")
        escalation = await in_session(
            self.engine,
            lambda s: reviews.escalation_for(s, debate_id=debate_id),
            workspace=self.workspace,
        )
        if escalation is None or escalation.id is None:
            raise WebError(404, f"debate {debate_id} has no review request")
        escalation_id = escalation.id
        if escalation.state is not EscalationState.OPEN:
            raise WebError(
                409, f"debate {debate_id}'s review was already decided ({escalation.state.value})"
            )
        review, created = await in_session(
            self.engine,
            lambda s: reviews.record_review(
                s,
                escalation_id=escalation_id,
                reviewer=REVIEWER,
                decision=chosen,
                note=note,
                receipts=self.receipts,
            ),
            workspace=self.workspace,
        )
        if not created:
            raise WebError(
                409, f"debate {debate_id}'s review was already decided ({review.decision})"
            )
        decided = await in_session(
            self.engine,
            lambda s: review_out(s, reviews.get_escalation(s, escalation_id=escalation_id)),
            workspace=self.workspace,
        )
        assert decided is not None
        return decided
