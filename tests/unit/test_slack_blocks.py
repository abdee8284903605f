"""Block Kit builders against Slack's limits: split, never cut or rejected."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.messages import home_tab, kit, modals, posts, transcript
from bot.store.channel_tables import ChannelSettings
from bot.store.channels import ChannelDefaults
from engine.calibration.labels import Label, LabelKind
from engine.calibration.report import calibrate
from engine.confidence import DEFAULT_WEIGHTS
from engine.models import (
    AdversarialRound,
    ConfidenceLevel,
    CriticTurn,
    DebateResult,
    DebateSpec,
    DebateStatus,
    Decision,
    ModeratorTurn,
    ProposerTurn,
    RebuttalTurn,
    ThresholdSource,
    Verdict,
)
from tests.helpers import reply_for


def within_limits(message: kit.Message) -> None:
    assert len(message.blocks) <= kit.MAX_BLOCKS
    assert len(message.text) <= kit.MAX_FALLBACK_CHARS
    assert kit.block_chars(message.blocks) <= kit.MAX_MESSAGE_CHARS
    for block in message.blocks:
        if block["type"] == "section":
            assert 0 < len(block["text"]["text"]) <= kit.MAX_SECTION_CHARS
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= kit.MAX_HEADER_CHARS
        if block["type"] == "context":
            assert all(len(e["text"]) <= 2000 for e in block["elements"])


def section_text(messages: list[kit.Message]) -> str:
    return "".join(b["text"]["text"] for m in messages for b in m.blocks if b["type"] == "section")


@pytest.mark.parametrize("size", [0, 1, 2_999, 3_000, 3_001, 40_000, 200_000])
def test_material_of_any_size_is_split_into_valid_messages_losing_nothing(size: int) -> None:
    words = ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size] or "x"

    messages = posts.material_messages("The full question", words)

    for message in messages:
        within_limits(message)
    assert section_text(messages).replace(" ", "") == words.strip().replace(" ", "")


def test_a_single_unbroken_word_longer_than_a_section_is_cut_hard() -> None:
    pieces = kit.split_text("a" * 7_000)
    assert [len(p) for p in pieces] == [3_000, 3_000, 1_000]


def test_splitting_never_breaks_an_escape_sequence() -> None:
    text = kit.escape("&" * 5_000)
    for piece in kit.split_text(text):
        assert piece.replace("&amp;", "") == ""


def test_escape_stops_mentions_and_links_from_model_text() -> None:
    assert kit.escape("<!channel> <@U1> <http://x|y> & co") == (
        "&lt;!channel&gt; &lt;@U1&gt; &lt;http://x|y&gt; &amp; co"
    )


def huge_round() -> AdversarialRound:
    long = "An argument that goes on and on. " * 120
    return AdversarialRound(
        round=1,
        proposer=ProposerTurn.model_validate(
            reply_for("proposer", thesis=long[:1900], supporting_arguments=[long[:1900]] * 6)
        ),
        critic=CriticTurn.model_validate(
            reply_for("critic", thesis=long[:1900], counter_arguments=[long[:1900]] * 6)
        ),
        critic_attempts=2,
        rebuttal=RebuttalTurn.model_validate(
            reply_for("rebuttal", thesis=long[:1900], rebuttals=[long[:1900]] * 6)
        ),
        moderator=ModeratorTurn.model_validate(
            reply_for("moderator", synthesis=long[:1900], unresolved_points=["open"] * 8)
        ),
        usage_by_role={},
        cost_usd=0.0123,
    )


def test_a_huge_round_fits_the_limits_across_messages() -> None:
    messages = transcript.round_messages(huge_round(), max_rounds=3)
    for message in messages:
        within_limits(message)
    assert messages[0].text == "Round 1 of 3"
    assert "asked 2\u00d7" in section_text(messages)


def test_pagination_splits_past_fifty_blocks() -> None:
    many = [kit.divider() for _ in range(120)]
    pages = kit.paginate("title", many)
    assert [len(p.blocks) for p in pages] == [50, 50, 20]
    assert pages[1].text == "title (part 2 of 3)"


def verdict(**changes: object) -> Verdict:
    values: dict[str, object] = {
        "status": DebateStatus.COMPLETE,
        "decision": Decision.REVISE,
        "synthesis": "s" * 10_000,
        "confidence": 0.42,
        "level": ConfidenceLevel.LOW,
        "unresolved_points": ["u" * 500] * 20,
        "escalate": True,
        "escalation_reasons": ["r" * 400] * 10,
    }
    values.update(changes)
    return Verdict.model_validate(values)


def test_verdict_and_parent_fit_the_limits() -> None:
    now = datetime.now(UTC)
    result = DebateResult(
        spec=DebateSpec(question="q?"), verdict=verdict(), started_at=now, finished_at=now
    )
    for message in posts.verdict_messages(result, debate_id=7):
        within_limits(message)
    parent = posts.parent_message(
        debate_id=7,
        question="q" * 40_000,
        requested_by="U1",
        protocol="adversarial",
        max_rounds=3,
        status="COMPLETE",
        verdict=result.verdict,
        cost_usd=0.5,
    )
    within_limits(parent)
    assert "the full text is in the thread" in section_text([parent])


def test_escalation_message_carries_three_buttons_and_mentions() -> None:
    message = posts.escalation_message(
        escalation_id=3, debate_id=9, reasons=["low"] * 40, reviewers=["U1", "S2"], confidence=0.3
    )
    within_limits(message)
    text = section_text([message])
    assert "<@U1>" in text
    assert "<!subteam^S2>" in text
    actions = [b for b in message.blocks if b["type"] == "actions"]
    assert [e["value"] for e in actions[0]["elements"]] == ["3", "3", "3"]


def test_decided_escalation_has_no_buttons() -> None:
    message = posts.escalation_decided_message(
        debate_id=9,
        reasons=["low"],
        decision="rejected",
        reviewer="U1",
        note="<!here> no",
        decided_at="2026-11-21 10:00 UTC",
    )
    assert not [b for b in message.blocks if b["type"] == "actions"]
    assert "&lt;!here&gt;" in section_text([message])


def test_modals_and_home_fit_view_limits() -> None:
    modal = modals.config_modal(
        settings=ChannelSettings(channel_id="C1", reviewers=["U1"], adr_watch=True),
        defaults=ChannelDefaults(rounds=2, threshold=0.75),
        protocols=("adversarial",),
    )
    assert len(modal["title"]["text"]) <= kit.MAX_MODAL_TITLE_CHARS
    by_id = {block["block_id"]: block for block in modal["blocks"]}
    assert [o["value"] for o in by_id["adr"]["element"]["initial_options"]] == ["on"]
    # Unset rounds and threshold show the deployment's values and stay unset when saved empty.
    for block_id, shown in (("rounds", "2"), ("threshold", "0.75")):
        element = by_id[block_id]["element"]
        assert "initial_value" not in element
        assert element["placeholder"]["text"] == f"deployment default: {shown}"
        assert by_id[block_id]["optional"] is True
    items = [
        home_tab.HomeDebate(i, "C1", "q" * 5000, "finished", "COMPLETE", 0.7) for i in range(80)
    ]
    home = home_tab.home_view(pending=items, recent=items, spend_mine=1, spend_all=2, month="May")
    assert len(home["blocks"]) <= kit.MAX_VIEW_BLOCKS
    assert all(
        len(b["text"]["text"]) <= kit.MAX_SECTION_CHARS
        for b in home["blocks"]
        if b["type"] == "section"
    )


def test_block_text_is_counted_wherever_it_is_nested() -> None:
    message = [
        kit.header("12345"),
        *kit.sections("abc"),
        kit.context("xy"),
        {"type": "actions", "elements": [{"type": "button", "text": kit.plain("Go")}]},
    ]
    assert kit.block_chars(message) == 5 + 3 + 2 + 2


@pytest.mark.parametrize("size", [14_000, 45_000])
def test_a_long_question_never_makes_a_message_over_slacks_block_text(size: int) -> None:
    text = ("word " * size)[:size]

    messages = posts.material_messages("The full question", text)

    assert len(messages) >= size // kit.MAX_MESSAGE_CHARS
    for message in messages:
        within_limits(message)
    assert section_text(messages).replace(" ", "") == text.replace(" ", "")


def test_a_refused_message_is_resplit_smaller_losing_nothing() -> None:
    [message] = posts.material_messages("T", "lorem ipsum " * 900)
    assert kit.block_chars(message.blocks) > 6_000

    parts = kit.resplit(message)

    assert len(parts) >= 2
    for part in parts:
        assert kit.block_chars(part.blocks) <= kit.MAX_MESSAGE_CHARS // 2
        assert len(part.blocks) <= kit.MAX_BLOCKS // 2
        assert all(
            len(b["text"]["text"]) <= kit.MAX_SECTION_CHARS // 2
            for b in part.blocks
            if b["type"] == "section"
        )
    assert section_text(parts).replace(" ", "") == section_text([message]).replace(" ", "")


def test_part_labels_stay_unique_after_any_re_split() -> None:
    """A later page re-split keeps its label and numbers its pieces; an unlabelled message's
    pieces are pieces, never a second "(part 2 of 2)"."""
    long = posts.material_messages("T", "lorem ipsum dolor " * 2_400)
    assert len(long) >= 2
    labels = [m.text for m in long]
    pieces = [piece.text for page in long for piece in kit.resplit(page)]

    assert len(pieces) > len(long)
    assert len(set(pieces)) == len(pieces), pieces
    assert not any(text.count("(part ") > 1 for text in pieces)
    second = kit.resplit(long[1])
    assert [m.text.rsplit(" (", 1)[1] for m in second] == [
        f"{labels[1].rsplit(' (', 1)[1][:-1]}, piece {n} of {len(second)})"
        for n in range(1, len(second) + 1)
    ]
    first = kit.resplit(long[0])
    assert "(piece" not in first[0].text
    assert "(part" not in first[0].text
    assert [m.text.endswith(f"(piece {n} of {len(first)})") for n, m in enumerate(first, 1)][
        1:
    ] == [True] * (len(first) - 1)


def test_slack_escaping_is_undone_once_on_the_way_in_and_redone_once_on_the_way_out() -> None:
    typed = "R&amp;D &lt;legacy&gt; <!here> <@U1> <https://x|y> &amp;lt;"
    stored = kit.unescape(typed)

    assert stored == "R&D <legacy> <!here> <@U1> <https://x|y> &lt;"
    assert kit.escape(stored) == (
        "R&amp;D &lt;legacy&gt; &lt;!here&gt; &lt;@U1&gt; &lt;https://x|y&gt; &amp;lt;"
    )


def test_the_parents_notification_text_is_escaped_too() -> None:
    message = posts.parent_message(
        debate_id=1,
        question="Ping <!channel> <@U1>?",
        requested_by="UALICE",
        protocol="adversarial",
        max_rounds=1,
        status="queued",
    )
    assert "<!channel>" not in message.text
    assert "&lt;!channel&gt;" in message.text


def test_a_direct_copy_says_why_and_keeps_the_buttons() -> None:
    request = posts.escalation_message(
        escalation_id=3, debate_id=1, reasons=["low"], reviewers=["U1"], confidence=0.4
    )
    direct = posts.direct(request, channel_id="C1", reason="cannot post in <#C1> (is_archived)")

    assert "cannot post there" in direct.blocks[0]["text"]["text"]
    assert "&lt;#C1&gt;" in direct.blocks[0]["text"]["text"]
    assert direct.blocks[1:] == request.blocks


def test_the_confidence_line_says_which_threshold_applied() -> None:
    now = datetime.now(UTC)
    shown = {}
    for source in ThresholdSource:
        result = DebateResult(
            spec=DebateSpec(question="q?"),
            verdict=verdict(threshold=0.69, threshold_source=source),
            started_at=now,
            finished_at=now,
        )
        shown[source] = str(posts.verdict_messages(result, debate_id=7)[0].blocks)
    assert (
        "threshold 0.69: the guaranteed threshold adopted with the weights"
        in shown[ThresholdSource.GUARANTEED]
    )
    assert "threshold 0.69: the channel's threshold" in shown[ThresholdSource.CHANNEL]
    assert "threshold 0.69: the deployment's fixed threshold" in shown[ThresholdSource.FIXED]
    assert "recommended threshold" in shown[ThresholdSource.RECOMMENDED]


def test_app_home_says_when_the_sampled_share_is_raised() -> None:
    labels = [
        Label(kind=LabelKind.EVAL, task_type="adr", correct=n % 5 != 0, confidence=n / 100)
        for n in range(100)
    ]
    report = calibrate(labels, current=DEFAULT_WEIGHTS)
    note = "Sampling raised: 20% of the verdicts that do not escalate are sent for review"
    home = home_tab.home_view(
        pending=[],
        recent=[],
        spend_mine=0,
        spend_all=0,
        month="May",
        calibration=report,
        sampling=note,
    )
    text = str(home["blocks"])
    assert note in text
    assert "guaranteed threshold (at most 5% of the verdicts not escalated are wrong)" in text
    plain = home_tab.home_view(
        pending=[], recent=[], spend_mine=0, spend_all=0, month="May", calibration=report
    )
    assert "Sampling raised" not in str(plain["blocks"])
