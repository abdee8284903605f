"""A turn records the model that answered, as the provider's completion names it (the local
provider names its file and hash), not only the name the spec asked for: a debate queued under
the bundled model's old name is recorded with the file that answered."""

from __future__ import annotations

from engine.events import discard_events
from engine.ledger import TurnLedger
from engine.llm import Completion, LLMRequest, Message
from engine.models import CriticTurn, DebateSpec, Role, Usage
from engine.pricing import FREE, Pricing
from tests.helpers import shipped_prompts


class AnsweringAs:
    """A model that answers as `model`, whatever it was asked for (a provider whose answer
    names the model that really served it)."""

    def __init__(self, model: str) -> None:
        self.model = model

    @property
    def provider(self) -> str:
        return "local"

    def price_of(self, model: str) -> Pricing:
        return FREE

    async def complete(self, request: LLMRequest) -> Completion:
        return Completion(
            text=CriticTurn(
                thesis="x", counter_arguments=["y"], evidence_cited=[], challenge_strength=5
            ).model_dump_json(),
            usage=Usage(input_tokens=1, output_tokens=1),
            provider="local",
            model=self.model,
        )


async def test_a_turn_records_the_model_that_answered() -> None:
    answered = "SmolLM2-135M-Instruct.Q4_1.gguf@sha256:0123456789ab"
    ledger = TurnLedger(
        spec=DebateSpec(question="Adopt ADR-9?"),
        resolve_llm=lambda _s: AnsweringAs(answered),
        sink=discard_events,
    )
    prompts = shipped_prompts()

    await ledger.call(
        round=1,
        role=Role.CRITIC,
        template=prompts.get("adversarial/critic.md"),
        messages=[Message(role="user", content="Criticise ADR-9.")],
        output_type=CriticTurn,
    )

    assert ledger.spec.default_model.model == "smollm2-135m-instruct"
    assert ledger.transcript[0].model == answered
