"""What a person or a program asks the web door for, checked before the intake sees it: the
fields of `POST /api/debates` and of the page's form, the documents pasted or uploaded (each at
most what Slack's uploads may be), and the models the page offers with their prices."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.fronts.web.guard import WebError
from bot.intake.request import Ask
from bot.providers import ProviderRegistry
from bot.settings import Settings, SettingsError
from bot.slackweb.files import MAX_UPLOAD_BYTES
from engine.catalog import Lifecycle
from engine.models import MAX_CONTEXT_CHARS, ContextDocument
from engine.protocols import protocol_names
from engine.readable import readable

MAX_BODY_BYTES = 2 * MAX_UPLOAD_BYTES + MAX_CONTEXT_CHARS * 4 // 3
"""The most a request may send: two uploads at Slack's size and the text a debate can read."""
MAX_FILES = 2
ASKED_AS = {
    "question": "question",
    "protocol": "protocol",
    "rounds": "rounds",
    "budget_usd": "budget_usd",
    "context": "context",
    "model": "model",
}


class DocumentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=300)
    text: str = Field(min_length=1, max_length=MAX_CONTEXT_CHARS)


class DebateIn(BaseModel):
    """The body of `POST /api/debates`, and what the page's form becomes."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=MAX_CONTEXT_CHARS)
    protocol: str | None = None
    rounds: int | None = Field(default=None, ge=1)
    budget_usd: float | None = Field(default=None, gt=0)
    context: list[DocumentIn] = Field(default_factory=list, max_length=20)
    model: str | None = Field(default=None, max_length=200)
    """`provider:model` for every role (the page's menu); none: the deployment's models."""

    def ask(self) -> Ask:
        provider, model = _model(self.model)
        return Ask(
            question=self.question,
            context=tuple(ContextDocument(title=d.title, text=d.text) for d in self.context),
            protocol=self.protocol,
            rounds=self.rounds,
            budget_usd=self.budget_usd,
            provider=provider,
            model=model,
        )


def _model(chosen: str | None) -> tuple[str | None, str | None]:
    if not chosen:
        return None, None
    provider, sep, model = chosen.partition(":")
    if not sep or not provider or not model:
        raise WebError(422, f"model {chosen!r} is not `provider:model`; pick one from the menu")
    return provider, model


def parsed(data: Any) -> DebateIn:
    """`data` as a request (422 naming the field and the fix when it is not one)."""
    if not isinstance(data, dict):
        raise WebError(400, 'send a JSON object, e.g. {"question": "Adopt ADR-7?"}')
    try:
        asked = DebateIn.model_validate(data)
    except ValidationError as error:
        raise WebError(422, f"cannot start this debate: {readable(error, ASKED_AS)}") from error
    if asked.protocol is not None and asked.protocol not in protocol_names():
        raise WebError(
            422,
            f"there is no protocol {asked.protocol!r}; the protocols are"
            f" {', '.join(protocol_names())}",
        )
    return asked


def upload_text(name: str, data: bytes) -> ContextDocument:
    """An uploaded document, at most Slack's upload size and text (UTF-8)."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise WebError(
            413,
            f"`{name}` is {len(data) // 1024:,} KB and I read at most"
            f" {MAX_UPLOAD_BYTES // 1024:,} KB: paste the relevant sections instead",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise WebError(
            422, f"`{name}` is not UTF-8 text; upload Markdown or plain text, or paste it"
        ) from error
    if not text.strip():
        raise WebError(422, f"`{name}` is empty")
    return ContextDocument(title=name[:300] or "upload", text=text)


@dataclass(frozen=True)
class ModelChoice:
    """One entry of the page's model menu: what the value asks for and what it costs."""

    value: str
    label: str
    usable: bool


def model_choices(settings: Settings, registry: ProviderRegistry, today: date) -> list[ModelChoice]:
    """The deployment's own models first, then each current catalogue model with its price
    (USD per million tokens in / out), usable only where its provider's key is set."""
    choices = [ModelChoice("", f"the deployment's models ({settings.provider})", True)]
    for entry in registry.catalog.entries:
        if entry.lifecycle(today) is not Lifecycle.CURRENT:
            continue
        try:
            settings.provider_key(entry.provider)
            usable = True
        except SettingsError:
            usable = False
        price = f"${entry.prices.input_per_mtok:g} / ${entry.prices.output_per_mtok:g} per MTok"
        note = "" if usable else " (no key set)"
        choices.append(ModelChoice(entry.key, f"{entry.key} · {price}{note}", usable))
    return choices
