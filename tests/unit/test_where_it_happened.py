"""Which workspace a request from an org-wide install comes from, when Bolt names none."""

from __future__ import annotations

from bot.slack.middleware import where_it_happened


def test_an_event_names_the_workspace_it_occurred_in() -> None:
    event = {"team_id": "T6", "context_team_id": "T6", "enterprise_id": "E1"}
    assert where_it_happened(event, "E1") == "T6"
    # An org-level event names the org as its team: the org it is.
    assert where_it_happened({"team_id": "E1", "enterprise_id": "E1"}, "E1") == "E1"


def test_a_click_names_it_on_its_user_or_view() -> None:
    assert where_it_happened({"team": None, "user": {"id": "U1", "team_id": "T5"}}, "E1") == "T5"
    assert where_it_happened({"view": {"team_id": "T5"}}, "E1") == "T5"


def test_nothing_named_falls_back_to_the_org() -> None:
    assert where_it_happened({}, "E1") == "E1"
    assert where_it_happened({"user": "U1"}, None) is None
