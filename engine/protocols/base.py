"""What every protocol provides, and the untrusted-material framing they share."""

from __future__ import annotations

from typing import Protocol

from engine.ledger import TurnLedger
from engine.models import ContextDocument, DebateResult, DebateSpec
from engine.prompts import PromptLibrary

MATERIAL_OPEN = "<<<MATERIAL"
MATERIAL_CLOSE = "MATERIAL>>>"


class DebateProtocol(Protocol):
    name: str

    def validate(self, spec: DebateSpec) -> None:
        """Raise SpecError when `spec` cannot run under this protocol; called before any call."""

    async def run(
        self, spec: DebateSpec, *, ledger: TurnLedger, prompts: PromptLibrary
    ) -> DebateResult:
        """Run the debate; model failures and the budget end it with a status, not an error."""
        ...


def _defang(text: str) -> str:
    # User material must not be able to close the data block and speak as the system.
    return text.replace(MATERIAL_OPEN, "<<MATERIAL").replace(MATERIAL_CLOSE, "MATERIAL>>")


def render_context(documents: list[ContextDocument]) -> str:
    """The context documents as delimited, defanged text (or a note that there are none)."""
    if not documents:
        return "(no documents were supplied; argue from the question alone and cite nothing)"
    return "\n\n".join(
        f"--- document: {_defang(doc.title)} ---\n{_defang(doc.text)}" for doc in documents
    )


def render_material(prompts: PromptLibrary, spec: DebateSpec) -> str:
    """The system preamble: rules, then question and context as untrusted data.

    It is identical for every turn of a debate, so it forms the cacheable prompt prefix.
    """
    return prompts.get("common/preamble.md").render(
        question=_defang(spec.question),
        context=render_context(spec.context),
        material_open=MATERIAL_OPEN,
        material_close=MATERIAL_CLOSE,
    )
