"""A workspace whose bot token Slack refuses, as the store keeps it for every replica (OAuth
installs; bot.store.refusals), on SQLite and PostgreSQL: the mark on its bot, claims that skip
its debates and due lanes that leave out what it is owed while other workspaces go on, probes
each handed to one replica with a growing wait, and the mark cleared by a probe, by an install
again or a renewal, or gone with an uninstall; a probe's word on probation until a delivery
proves it; a refused lane handing back only its own messages while another lane's is at Slack;
and what `debatebot workspace list` tells the operator."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import Engine, update
from sqlmodel import col, select

from bot.cli import main
from bot.jobs.delivery import DeliveryConfig, OutboxDelivery
from bot.messages.kit import Message
from bot.slackweb.errors import TokenRefusedError
from bot.slackweb.installations import DatabaseInstallationStore
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import Posted, SlackPoster
from bot.store import installations, operations, outbox, outbox_claims, queue, refusals
from bot.store.cipher import TokenCipher
from bot.store.db import session_scope
from bot.store.debate_tables import DebateSource
from bot.store.installation_tables import SlackBot
from bot.store.installations import StoredBot
from bot.store.outbox import Draft
from bot.store.outbox_claims import Lane
from bot.store.outbox_tables import Outbox, OutboxAction, OutboxState, OutboxTarget
from bot.store.refusals import Backoff, Noted
from bot.store.tenancy import EVERY_WORKSPACE, Workspace
from engine.models import DebateSpec, ModelSettings, utcnow

KEY = b"5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d5a4b3c2d"
SPEC = DebateSpec(
    question="Adopt the new queue?",
    default_model=ModelSettings(provider="fake", model="fake-model"),
)
ACME = Workspace(team_id="TACME")
GLOBEX = Workspace(team_id="TGLOBEX")
ORG_A = Workspace(team_id="T5", enterprise_id="E1")
ORG_B = Workspace(team_id="T6", enterprise_id="E1")
BACKOFF = Backoff(first_s=2.0, max_s=15.0)


def install(engine: Engine, *, team: str | None, enterprise: str | None = None) -> None:
    bot = StoredBot(
        enterprise_id=enterprise,
        team_id=team,
        is_enterprise_install=team is None,
        bot_token=f"xoxb-{team or enterprise}",
        team_name=f"Team {team}" if team else None,
    )
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        installations.save_bot(session, bot=bot, cipher=TokenCipher(KEY))


def add(
    engine: Engine,
    workspace: Workspace,
    key: str,
    *,
    owed: bool = True,
    text: str = "q",
    target: OutboxTarget = OutboxTarget.THREAD,
) -> int:
    with session_scope(engine, workspace=workspace) as session:
        debate, _ = queue.add_debate(
            session,
            new=queue.NewDebate(
                trigger_key=key,
                spec=SPEC,
                source=DebateSource.COMMAND,
                channel_id="C1",
                requested_by="U1",
            ),
        )
        if owed:
            draft = Draft(key="parent", text=text, blocks=[], target=target)
            outbox.stage(session, debate=debate, drafts=[draft])
        session.commit()
        assert debate.id is not None
        return debate.id


def refuse(
    engine: Engine, workspace: Workspace, code: str = "invalid_auth", scope: str | None = None
) -> Noted | None:
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        return refusals.refuse(
            session, workspace=workspace, code=code, scope=scope, backoff=BACKOFF
        )


def claimed(engine: Engine) -> list[int]:
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        return [
            d.id or 0 for d in queue.claim_debates(session, worker_id="w", lease_s=600, limit=10)
        ]


def due_teams(engine: Engine) -> set[str]:
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        return {lane.team_id for lane in outbox_claims.due_lanes(session)}


def make_due(engine: Engine) -> None:
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        session.execute(update(SlackBot).values(probe_at=utcnow() - timedelta(seconds=1)))
        session.commit()


def test_a_refused_workspace_is_held_and_the_others_go_on(store: Engine) -> None:
    install(store, team=ACME.team_id)
    install(store, team=GLOBEX.team_id)
    acme = [add(store, ACME, f"acme:{n}") for n in range(3)]
    globex = add(store, GLOBEX, "globex:1")

    assert refuse(store, ACME) == Noted.NEW
    assert refuse(store, ACME) == Noted.KNOWN, "known already"
    assert refuse(store, ACME, "account_inactive") == Noted.NEW, "another code is news"
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.refused_count(session) == 1
        assert operations.queue_depth(session).waiting == 1, "ACME's wait for their token"
        [bot] = refusals.bots(session, refused_only=True)
    assert bot.team_id == ACME.team_id
    assert bot.refusal is not None
    assert bot.refusal.code == "account_inactive"
    with session_scope(store, workspace=ACME) as session:
        refusal = refusals.refusal_for(session, workspace=ACME)
    assert refusal is not None
    assert refusal.code == "account_inactive"

    assert due_teams(store) == {GLOBEX.team_id}
    assert claimed(store) == [globex]

    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.accept(session, installation=bot.installation) is True
        assert refusals.accept(session, installation=bot.installation) is False
        assert refusals.refused_count(session) == 0
    assert due_teams(store) == {ACME.team_id, GLOBEX.team_id}
    assert sorted(claimed(store)) == acme


def test_an_org_wide_bot_refused_holds_the_org_but_not_a_workspace_with_its_own(
    store: Engine,
) -> None:
    install(store, team=None, enterprise="E1")
    install(store, team=ORG_B.team_id, enterprise="E1")
    install(store, team=ACME.team_id)
    on_org = add(store, ORG_A, "t5:1")
    own = add(store, ORG_B, "t6:1")
    alone = add(store, ACME, "acme:1")

    # T5 acts with the org's bot: a refusal there is the org's.
    assert refuse(store, ORG_A) == Noted.NEW
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        [bot] = refusals.bots(session, refused_only=True)
    assert bot.installation == "E1:-"
    assert bot.acting_as == Workspace(team_id="-", enterprise_id="E1")
    assert due_teams(store) == {ORG_B.team_id, ACME.team_id}
    assert sorted(claimed(store)) == sorted([own, alone])

    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.accept(session, installation="E1:-")
    assert claimed(store) == [on_org]


def test_no_bot_no_mark(store: Engine) -> None:
    """An uninstalled workspace has no bot to mark (its owed messages were dropped)."""
    assert refuse(store, ACME) is None
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.refused_count(session) == 0


async def test_new_tokens_clear_the_mark_and_an_uninstall_takes_it_away(store: Engine) -> None:
    stores = DatabaseInstallationStore(engine=store, cipher=TokenCipher(KEY))
    install(store, team=ACME.team_id)
    refuse(store, ACME)
    # An install again: new tokens saved through the installation store.
    await stores.async_save(
        Installation(team_id=ACME.team_id, user_id="UADMIN", bot_token="xoxb-new", bot_id="B1")
    )
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.refused_count(session) == 0
        row = session.get(SlackBot, "-:TACME")
        assert row is not None
        assert (row.refused_since, row.probe_at, row.probe_wait_s) == (None, None, None)

    # A renewal (token rotation) saves the bot alone.
    refuse(store, ACME)
    await stores.async_save_bot(
        Bot(
            team_id=ACME.team_id,
            bot_token="xoxb-renewed",
            bot_id="B1",
            bot_user_id="UBOT",
            installed_at=time.time(),
        )
    )
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.refused_count(session) == 0

    refuse(store, ACME)
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        installations.delete_install(session, enterprise_id=None, team_id=ACME.team_id)
        assert refusals.refused_count(session) == 0


def test_what_was_held_gets_its_deadline_back(store: Engine) -> None:
    """Nothing was tried while the token was refused, so nothing is given up for the wait:
    each held message's deadline moves on by as long as it was held, and one written during
    the hold by as long as it existed (it was never owed the rest)."""
    install(store, team=ACME.team_id)
    held = add(store, ACME, "acme:1")
    other = add(store, GLOBEX, "globex:1")
    refuse(store, ACME)
    during = add(store, ACME, "acme:2")
    an_hour, twenty_minutes = timedelta(hours=1), timedelta(minutes=20)
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        session.execute(update(SlackBot).values(refused_since=utcnow() - an_hour))
        for debate_id, age in ((held, 2 * an_hour), (during, twenty_minutes)):
            session.execute(
                update(Outbox)
                .where(col(Outbox.debate_id) == debate_id)
                .values(created_at=utcnow() - age)
            )
        session.commit()
        before = {row.debate_id: row.deadline_at for row in session.exec(select(Outbox))}
        assert refusals.accept(session, installation="-:TACME")
        after = {row.debate_id: row.deadline_at for row in session.exec(select(Outbox))}
    assert an_hour <= after[held] - before[held] < an_hour + timedelta(minutes=1)
    assert twenty_minutes <= after[during] - before[during] < twenty_minutes + timedelta(minutes=1)
    assert after[other] == before[other]


def wait_of(engine: Engine, installation: str = "-:TACME") -> tuple[float | None, float | None]:
    """The bot's stored wait, and how far off its next probe is (seconds, None: none)."""
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        row = session.get(SlackBot, installation)
        assert row is not None
        ahead = None if row.probe_at is None else (row.probe_at - utcnow()).total_seconds()
        return row.probe_wait_s, ahead


def probe_takes_it(engine: Engine, *, new_tokens: bool = False) -> None:
    """A probe falls due and is claimed, and Slack's `auth.test` takes the token."""
    make_due(engine)
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        assert [bot.installation for bot in refusals.claim_probes(session, backoff=BACKOFF)] == [
            "-:TACME"
        ]
        assert refusals.accept(session, installation="-:TACME", new_tokens=new_tokens)


def test_refused_again_after_a_probe_took_the_token_the_wait_grows_and_it_is_no_news(
    store: Engine,
) -> None:
    """`auth.test` can take a token a method still refuses (a `missing_scope` it cannot see,
    a workspace an org-wide install was not granted). A probe's word keeps the wait it reached
    until a delivery proves it: each refusal right after resumes at the wait after it, up to
    the cap, and is no news (no second ERROR), so the workspace's debates are not claimed every
    first wait. After a delivery, or with new tokens, a refusal is news from the first wait."""
    install(store, team=ACME.team_id)
    install(store, team=GLOBEX.team_id)
    debate = add(store, ACME, "acme:1")
    noted, waits = [], []
    for _ in range(4):
        noted.append(refuse(store, ACME, "missing_scope", "chat:write"))
        wait, ahead = wait_of(store)
        assert wait is not None
        assert ahead is not None
        assert wait - 1 < ahead <= wait
        waits.append(wait)
        assert claimed(store) == [], "held"
        probe_takes_it(store)
    assert noted == [Noted.NEW, Noted.AGAIN, Noted.AGAIN, Noted.AGAIN]
    assert waits == [2.0, 8.0, 15.0, 15.0]

    # A delivery to the workspace proves the token (to another, nothing).
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert [bot.installation for bot in refusals.on_probation(session)] == ["-:TACME"]
        assert refusals.delivered(session, workspace=GLOBEX) is False
        assert refusals.delivered(session, workspace=ACME) is True
        assert refusals.on_probation(session) == []
    assert claimed(store) == [debate]
    assert refuse(store, ACME, "missing_scope", "chat:write") == Noted.NEW
    assert wait_of(store)[0] == 2.0

    # New tokens start afresh too.
    probe_takes_it(store, new_tokens=True)
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.on_probation(session) == []
    assert refuse(store, ACME) == Noted.NEW
    assert wait_of(store)[0] == 2.0


def test_an_org_wide_bot_on_probation_is_proven_by_its_workspaces_not_by_one_with_its_own(
    store: Engine,
) -> None:
    install(store, team=None, enterprise="E1")
    install(store, team=ORG_B.team_id, enterprise="E1")
    assert refuse(store, ORG_A, "team_access_not_granted") == Noted.NEW
    make_due(store)
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.claim_probes(session, backoff=BACKOFF)
        assert refusals.accept(session, installation="E1:-")
        assert refusals.delivered(session, workspace=ORG_B) is False, "T6 acts with its own"
        assert refusals.delivered(session, workspace=ORG_A) is True
    assert refuse(store, ORG_A, "team_access_not_granted") == Noted.NEW


def test_a_probe_is_due_after_its_wait_and_handed_to_one_replica(store: Engine) -> None:
    install(store, team=ACME.team_id)
    refuse(store, ACME)
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.claim_probes(session, backoff=BACKOFF) == [], "not due yet"
        row = session.get(SlackBot, "-:TACME")
        assert row is not None
        assert row.probe_wait_s == 2.0
        assert row.probe_at is not None

    waits = []
    for _ in range(4):
        make_due(store)

        def claim() -> list[refusals.BotState]:
            with session_scope(store, workspace=EVERY_WORKSPACE) as session:
                return refusals.claim_probes(session, backoff=BACKOFF)

        with ThreadPoolExecutor(4) as pool:
            takers = [pool.submit(claim) for _ in range(4)]
            taken = [bot.installation for future in takers for bot in future.result()]
        assert taken == ["-:TACME"], "one replica asks Slack"
        with session_scope(store, workspace=EVERY_WORKSPACE) as session:
            row = session.get(SlackBot, "-:TACME")
            assert row is not None
            assert row.probe_at is not None
            assert row.probe_at > utcnow()
            waits.append(row.probe_wait_s)
    assert waits == [4.0, 8.0, 15.0, 15.0]


def test_a_refused_lanes_claims_are_handed_back_with_no_attempt_counted(
    store: Engine,
) -> None:
    """Only the refused lane's: the workspace's other lanes may have theirs at Slack."""
    refused = add(store, ACME, "acme:1")
    other_lane = add(store, ACME, "acme:2")
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        for debate_id in (refused, other_lane):
            assert outbox_claims.claim_head(session, debate_id=debate_id, owner="p1", claim_s=30)
        lane = Lane(refused, "", OutboxAction.POST, ACME.team_id)
        assert outbox_claims.release_lane(session, owner="p2", lane=lane) == 0, "not p2's"
        assert outbox_claims.release_lane(session, owner="p1", lane=lane) == 1
        rows = {
            row.debate_id: (row.state, row.attempts, row.claimed_by)
            for row in session.exec(select(Outbox).where(col(Outbox.key) == "parent"))
        }
    assert rows == {
        refused: (OutboxState.PENDING, 0, None),
        other_lane: (OutboxState.SENDING, 0, "p1"),
    }


class Slack(SlackPoster):
    """Slack as two lanes of one workspace meet it: the post `FLYING` is at Slack, not yet
    answered, when the post `REFUSED` is refused for the token; Slack takes `FLYING` once told
    to (`answer`). Records what it took."""

    def __init__(self) -> None:
        super().__init__(AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:9/api/"))
        self.refusing = True
        self.at_slack = asyncio.Event()
        self.answer = asyncio.Event()
        self.taken: list[str] = []

    async def post(
        self,
        *,
        channel: str,
        message: Message,
        thread_ts: str | None = None,
        attempts: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Posted:
        if message.text == REFUSED and self.refusing:
            await self.at_slack.wait()
            raise TokenRefusedError("refused", code="invalid_auth")
        if message.text == FLYING and not self.answer.is_set():
            self.at_slack.set()
            await self.answer.wait()
        self.taken.append(message.text)
        return Posted(channel=channel, ts=f"{len(self.taken)}.000100")


REFUSED = "Refused for the token"
FLYING = "At Slack as the other is refused"


async def until(check: Callable[[], bool], what: str) -> None:
    """Poll `check` (30 s at most): the database signals nothing."""

    async def poll() -> None:
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), 30)
    except TimeoutError:
        pytest.fail(f"never: {what}")


def parent_state(engine: Engine, debate_id: int) -> OutboxState:
    with session_scope(engine, workspace=EVERY_WORKSPACE) as session:
        row = outbox.row_for(session, debate_id=debate_id, key="parent")
        assert row is not None
        return row.state


@pytest.mark.parametrize("per_workspace", [True, False], ids=["oauth installs", "one token"])
async def test_a_message_at_slack_when_another_lane_is_refused_is_sent_once(
    store: Engine, per_workspace: bool
) -> None:
    """Two lanes of one workspace: one's post is refused for the token while the other's is at
    Slack. Handing back only the refused lane's message, the other's is recorded as sent when
    Slack takes it, and is not sent again once the token is taken (a probe's word, proven by
    that delivery)."""
    install(store, team=ACME.team_id)
    refused = add(store, ACME, "acme:1", text=REFUSED, target=OutboxTarget.CHANNEL)
    flying = add(store, ACME, "acme:2", text=FLYING, target=OutboxTarget.CHANNEL)
    slack = Slack()
    delivery = OutboxDelivery(
        engine=store,
        poster=slack,
        directory=SlackDirectory(slack.client),
        owner="p1",
        config=DeliveryConfig(per_workspace=per_workspace),
    )
    try:
        assert await delivery.start_due() == 2

        def held() -> bool:
            if per_workspace:
                with session_scope(store, workspace=EVERY_WORKSPACE) as session:
                    if refusals.refused_count(session) != 1:
                        return False
            elif not delivery.gate.refused:
                return False
            return parent_state(store, refused) == OutboxState.PENDING

        await until(held, "the refused lane's message handed back")
        slack.answer.set()
        await until(lambda: parent_state(store, flying) != OutboxState.SENDING, "Slack's answer")
        assert parent_state(store, flying) == OutboxState.SENT

        # Slack takes the token again.
        slack.refusing = False
        if per_workspace:
            with session_scope(store, workspace=EVERY_WORKSPACE) as session:
                assert refusals.accept(session, installation="-:TACME")
        else:
            delivery.gate.accept()
        await delivery.drain()
    finally:
        await delivery.cancel_lanes()
    assert sorted(slack.taken) == sorted([FLYING, REFUSED])
    assert parent_state(store, refused) == OutboxState.SENT
    with session_scope(store, workspace=EVERY_WORKSPACE) as session:
        assert refusals.on_probation(session) == [], "the delivery proved the token"
        bot = session.get(SlackBot, "-:TACME")
        assert bot is not None
        assert (bot.refused_code, bot.probe_wait_s) == (None, None)


def test_the_operator_sees_which_workspaces_slack_refuses_and_why(
    store: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DEBATEBOT_DATABASE_URL", database_url)
    assert main(["workspace", "list"]) == 0
    assert "no OAuth installs" in capsys.readouterr().out

    install(store, team=ACME.team_id)
    install(store, team=GLOBEX.team_id)
    add(store, ACME, "acme:1")
    refuse(store, ACME, "team_access_not_granted")
    assert main(["workspace", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("-:TACME  Team TACME: Slack refuses its bot token")
    assert "(team_access_not_granted) since " in lines[0]
    assert "grant the app access to this workspace" in lines[0]
    assert lines[1] == "-:TGLOBEX  Team TGLOBEX: Slack takes its bot token"
    assert lines[2] == "2 install(s), 1 whose bot token Slack refuses"

    assert main(["workspace", "list", "TACME"]) == 0
    one = capsys.readouterr().out.splitlines()
    assert one[0] == "workspace TACME: 1 debate(s)"
    assert "(team_access_not_granted)" in one[1]
    assert main(["workspace", "delete"]) == 2
