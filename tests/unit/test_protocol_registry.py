"""One definition per protocol: `bot/` never names a protocol, everything it knows of one comes
from the registry, and a protocol nobody registered fails loudly instead of rendering as
another."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from bot.cli.parser import build_parser
from bot.intake.policy import default_debaters, rounds_for
from bot.messages import helptext, plan, transcript
from engine.errors import SpecError
from engine.models import DebateSpec, Role
from engine.protocols import PROTOCOLS, definition_for, protocol_names
from engine.protocols.definition import UnknownRecordError
from engine.rounds import StancesRound
from tests.unit.test_block_kit import adversarial_round, result

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("adversarial", "stances", "consensus", "structured", "panel")


def named_literals(source: str, where: str) -> list[str]:
    """Every string literal in `source` that is exactly a shipped protocol's name, with its
    line."""
    return [
        f"{where}:{node.lineno}: {node.value!r}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and node.value in SHIPPED
    ]


def test_no_bot_module_names_a_protocol() -> None:
    found = [
        hit
        for path in sorted((ROOT / "bot").rglob("*.py"))
        for hit in named_literals(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert found == [], "read the protocol's definition (engine.protocols) instead:\n" + "\n".join(
        found
    )


def test_the_scanner_sees_a_name_in_a_comparison_and_a_mapping() -> None:
    source = 'def f(p: str) -> bool:\n    return p == "panel" or p in {"stances": 1}\n'
    assert named_literals(source, "m.py") == ["m.py:2: 'panel'", "m.py:2: 'stances'"]


def test_every_shipped_protocol_is_registered_and_declared_whole() -> None:
    assert set(SHIPPED) <= set(protocol_names())
    for name, found in PROTOCOLS.items():
        assert found.name == name
        assert 1 <= found.default_rounds <= found.max_rounds
        assert all((found.labels.display_name, found.labels.description, found.labels.advice))
        assert all((found.confidence.unanswered, found.confidence.declared))
        assert found.calls_per_run >= 1
        if found.options is not None:
            found.options.model_validate({})  # every option has a default
        assert found.engine() is not None


def test_an_unknown_protocol_fails_loudly_where_it_would_have_rendered_as_a_panel() -> None:
    stray = adversarial_round().model_copy(update={"kind": "sixth"})
    with pytest.raises(SpecError, match="unknown protocol 'sixth'; choose one of: adversarial"):
        transcript.round_messages(stray, max_rounds=3)
    with pytest.raises(SpecError, match="unknown protocol 'sixth'"):
        transcript.outcome_sections(result("sixth", lines=["x"]))
    spec = DebateSpec(question="q", protocol="sixth")
    with pytest.raises(SpecError, match="unknown protocol 'sixth'"):
        plan.title(spec, (1, Role.DEBATER, "ana", "", 1))
    with pytest.raises(SpecError, match="unknown protocol 'sixth'"):
        rounds_for("sixth", None, 2)


def test_a_record_of_another_protocol_is_refused_by_name() -> None:
    other = StancesRound(round=1, max_rounds=1, arguments=[])
    with pytest.raises(UnknownRecordError, match="adversarial protocol's view renders"):
        definition_for("adversarial").view.round(other, 1)


def test_the_bot_reads_a_new_protocol_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    panel = PROTOCOLS["panel"]
    seventh = dataclasses.replace(panel, name="seventh", default_rounds=4, max_rounds=4)
    monkeypatch.setitem(PROTOCOLS, "seventh", seventh)

    args = build_parser().parse_args(["run", "q", "--protocol", "seventh", "--route"])
    assert args.protocol == "seventh"
    assert build_parser().parse_args(["eval", "--cases", "c", "--arms", "seventh"]).arms == [
        "seventh"
    ]
    assert rounds_for("seventh", None, 2) == 4
    assert [name for name, _, _ in default_debaters("seventh", (), ())] == [
        "architect",
        "security",
        "operator",
    ]
    advice = helptext.protocol_advice()
    assert f"\u2022 `seventh`: {panel.labels.description}" in advice
    assert "(panel or seventh protocol)" in helptext.help_text(protocols=("x",), reaction="y")
