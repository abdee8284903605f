"""The live plan: a debate streams one plan into its thread (`chat.startStream` to the person who
asked, `task_display_mode: plan`) whose tasks are its turns and checks, each going pending, in
progress, complete as the engine reports, and the stream stops with the verdict's summary and the
feedback buttons. A stream that cannot go on (Slack closed it, it was deleted, an append was
refused, the process died) becomes a normal message with the same content, once; where Slack
will not stream at all, the parent shows who is speaking, as before. Schema-filling fake models."""

from __future__ import annotations

import asyncio
import itertools
import json
from datetime import timedelta
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.settings import Settings
from bot.store import outbox, turns
from bot.store.db import session_scope
from bot.store.debate_tables import Debate
from bot.store.outbox_tables import Outbox
from bot.wiring import build_services, build_worker
from engine.models import DebateResult, utcnow
from tests.e2e.conftest import CHANNEL, Bot, BotFactory
from tests.e2e.driver import WORKSPACE
from tests.e2e.slack_emulator import STREAM_METHODS, Fault, SlackEmulator
from tests.e2e.test_assistant import DM, QUESTION, USER, ask, assistant_thread
from tests.e2e.test_protocol_threads import COMMANDS, fake, live_details, result_of

ASKED = "Should we move billing retries to a queue?"
HOSTILE = "<!channel> *bold* <https://x|y>"
RANK = {"pending": 0, "in_progress": 1, "complete": 2, "error": 2}
WRITES = frozenset({"chat.postMessage", "chat.update", *STREAM_METHODS})


def the_stream(bot: Bot, channel: str = CHANNEL) -> dict[str, Any]:
    [stream] = bot.emulator.streams(channel)
    return stream


def paths(stream: dict[str, Any]) -> dict[str, list[str]]:
    """Each task's statuses in the order Slack was sent them."""
    found: dict[str, list[str]] = {}
    for chunk in stream["chunks"]:
        if chunk.get("type") == "task_update":
            found.setdefault(chunk["id"], []).append(chunk["status"])
    return found


def turns_of(result: DebateResult) -> list[Any]:
    return [turn for turn in result.transcript if turn.role.value != "triage"]


def plan_messages(bot: Bot) -> list[dict[str, Any]]:
    """Normal messages that show the plan (what a stream that could not go on becomes)."""
    return [m for m in bot.emulator.posted(CHANNEL) if "Quality and citation checks" in str(m)]


def closed_properly(bot: Bot, stream: dict[str, Any], result: DebateResult) -> None:
    """The stream (or the message it became) ends with every task done and the verdict."""
    shown = json.dumps(stream["blocks"], ensure_ascii=False)
    assert f"`{result.verdict.decision.value}`" in shown
    assert "feedback_buttons" in shown
    assert not stream["streaming"], "no stream is left open"


@pytest.mark.parametrize("protocol", list(COMMANDS))
async def test_every_protocol_streams_its_plan_and_stops_with_the_verdict(
    start_bot: BotFactory, protocol: str
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.15))
    await bot.driver.command(f"{ASKED} {COMMANDS[protocol]}")
    [debate] = await bot.finished()
    result = result_of(bot)
    assert result.verdict.status.value == "COMPLETE", result.error

    # One streamed reply in the debate's thread, to the person who asked, shown as a plan.
    stream = the_stream(bot)
    [start] = bot.emulator.calls_of("chat.startStream")
    assert start.params["thread_ts"] == debate.thread_ts == stream["thread_ts"]
    assert (start.params["recipient_user_id"], start.params["recipient_team_id"]) == (
        "UALICE",
        "T1",
    )
    assert start.params["task_display_mode"] == "plan"
    assert len(bot.emulator.calls_of("chat.stopStream")) == 1
    closed_properly(bot, stream, result)

    # A task per turn the debate stored, then the checks; each complete, with its summary,
    # and none ever went back.
    tasks = list(bot.emulator.tasks(stream).values())
    assert len(tasks) == len(turns_of(result)) + 1
    assert tasks[-1]["title"] == "Quality and citation checks"
    assert all(task["status"] == "complete" and task.get("output") for task in tasks)
    for path in paths(stream).values():
        assert [RANK[s] for s in path] == sorted(RANK[s] for s in path), path
    plan_title = [c for c in stream["chunks"] if c["type"] == "plan_update"][-1]["title"]
    assert plan_title.startswith(f"Debate #{debate.id} \u00b7 done")
    # The independent judge's step reads as one, with its decision once the verdict is out.
    [check] = result.judgments
    [judge] = [task for task in tasks if task["title"].startswith("Independent judge")]
    assert judge["title"] == "Independent judge rereads the record, blind to the verdict"
    agrees = "agrees" if check.agrees else "disagrees"
    assert judge["output"].startswith(
        f"independent judge: {check.decision}, {agrees} with the verdict; verdict confidence "
    )

    # The rounds and the verdict are posted as before; the parent showed no live status while
    # the plan did, only the summary at the end.
    texts = [m["text"] for m in bot.emulator.in_thread(CHANNEL, debate.thread_ts or "")]
    assert len([t for t in texts if t.startswith("Verdict")]) == 1
    assert len(texts) >= 2, texts
    details = live_details(bot)
    assert len(details) == 1
    assert "*Done*" in details[0]


async def test_a_slack_without_streaming_gets_the_parents_status_and_is_asked_once(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.1))
    bot.emulator.streaming = False
    await bot.driver.command(f"{ASKED} --protocol consensus", user="UALICE")
    await bot.finished()
    await bot.driver.command(f"{ASKED} --protocol structured", user="UBOB")
    await bot.finished(count=2)

    assert bot.emulator.streams(CHANNEL) == []
    assert len(bot.emulator.calls_of("chat.startStream", ok_only=False)) == 1, (
        "unknown_method is remembered"
    )
    for debate in bot.debates():
        statuses = [
            c
            for c in bot.emulator.calls_of("chat.update")
            if c.params.get("ts") == debate.thread_ts and "*Debating*" in json.dumps(c.params)
        ]
        assert statuses, f"debate {debate.id}'s parent showed who was speaking"


@pytest.mark.parametrize(
    "fault",
    [
        Fault(error="not_allowed_token_type"),
        Fault(error="feature_not_enabled"),
        Fault(error="invalid_arguments"),
        Fault(error="missing_scope", needed="assistant:write"),
    ],
    ids=lambda fault: fault.error,
)
async def test_a_refused_start_falls_back_to_the_parents_status(
    start_bot: BotFactory, fault: Fault
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.1))
    bot.emulator.fail_for("chat.startStream", fault, 120)
    await bot.driver.command(f"{ASKED} --protocol structured")
    [debate] = await bot.finished()

    assert bot.emulator.streams(CHANNEL) == []
    details = live_details(bot)
    assert any("*Debating*" in line for line in details), details
    assert "*Done*" in details[-1]
    # Nothing else was held back: a refused stream is no token problem.
    assert any(m["text"].startswith("Verdict") for m in bot.emulator.posted(CHANNEL))
    status, _report = await bot.driver.health()
    assert status == 200
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        row = session.get(Outbox, stream_row_id(bot, debate.id or 0))
        assert row is not None
        assert (row.state, row.stream_state) == ("failed", "refused")


def stream_row_id(bot: Bot, debate_id: int) -> int:
    [row] = [r for r in rows_of(bot, debate_id) if r.key == "stream"]
    assert row.id is not None
    return row.id


def rows_of(bot: Bot, debate_id: int) -> list[Outbox]:
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        return outbox.rows_of(session, debate_id=debate_id)


async def test_a_stream_slack_closes_mid_debate_becomes_a_message_in_its_place(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.15))
    bot.emulator.stream_lifetime_s = 0.5
    await bot.driver.command(f"{ASKED} --protocol structured")
    await bot.finished()
    result = result_of(bot)

    stream = the_stream(bot)
    refused = [
        c
        for c in bot.emulator.calls
        if c.method in STREAM_METHODS and c.status != 200 and c.method != "chat.startStream"
    ]
    assert refused, "Slack closed the stream while the debate ran"
    assert stream["edited"], "the streamed message itself shows the plan from then on"
    assert plan_messages(bot) == [], "no second copy of the plan"
    closed_properly(bot, stream, result)
    shown = json.dumps(stream["blocks"], ensure_ascii=False)
    assert shown.count(":white_check_mark:") == len(turns_of(result)) + 1
    assert "Judge rules" in shown


async def test_a_deleted_stream_is_posted_again_as_a_message_once(start_bot: BotFactory) -> None:
    bot = await start_bot(llm=fake(delay_s=0.15))
    await bot.driver.command(f"{ASKED} --protocol structured")
    stream = await bot.wait_for(lambda: bot.emulator.streams(CHANNEL), "the stream")
    bot.emulator.delete_message(CHANNEL, stream[0]["ts"])
    await bot.finished()
    result = result_of(bot)

    assert bot.emulator.streams(CHANNEL) == []
    [message] = plan_messages(bot)
    [debate] = bot.debates()
    assert message["thread_ts"] == debate.thread_ts
    shown = json.dumps(message["blocks"], ensure_ascii=False)
    assert f"`{result.verdict.decision.value}`" in shown
    assert "feedback_buttons" in shown
    assert shown.count(":white_check_mark:") == len(turns_of(result)) + 1


async def test_a_refused_append_ends_the_stream_and_the_plan_goes_on_in_it(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.15))
    bot.emulator.fail("chat.appendStream", None, Fault(error="invalid_chunks"))
    await bot.driver.command(f"{ASKED} --protocol structured")
    await bot.finished()
    result = result_of(bot)

    stream = the_stream(bot)
    stops = bot.emulator.calls_of("chat.stopStream")
    assert len(stops) == 1
    assert "blocks" not in stops[0].params, "the refused stream was stopped as it stood"
    assert stream["edited"]
    assert plan_messages(bot) == []
    closed_properly(bot, stream, result)


async def test_a_start_slack_took_without_answering_is_continued_not_doubled(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.15))
    # Slack starts the stream, and its answer never arrives (the process could as well have
    # died before writing it down).
    bot.emulator.fail("chat.startStream", Fault(applied=True, hang_s=3.0))
    await bot.driver.command(f"{ASKED} --protocol structured")
    await bot.finished()
    result = result_of(bot)

    assert len(bot.emulator.calls_of("chat.startStream", ok_only=False)) == 1
    assert bot.emulator.calls_of("conversations.replies"), "the thread was looked at"
    stream = the_stream(bot)
    closed_properly(bot, stream, result)
    assert all(task["status"] == "complete" for task in bot.emulator.tasks(stream).values())
    assert plan_messages(bot) == []


async def test_a_worker_killed_mid_stream_leaves_one_plan_finished_and_nothing_twice(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.3), worker_concurrency=0)
    await bot.driver.command(f"{ASKED} --protocol consensus")
    await bot.wait_for(bot.debates, "the queued debate")
    services = build_services(Settings(provider="fake"), resolve_llm=lambda _model: bot.llm)
    first = build_worker(services, bot.engine, worker_id="first", reporter=bot.runtime.notifier)
    running = asyncio.create_task(first.run_once())

    def turns_stored() -> int:
        with session_scope(bot.engine, workspace=WORKSPACE) as session:
            return len(turns.turn_rows(session, debate_id=1))

    await bot.wait_for(lambda: turns_stored() >= 2, "two stored turns")
    await bot.wait_for(lambda: bot.emulator.calls_of("chat.appendStream"), "an append")
    running.cancel()  # the worker dies with a turn in progress in the stream
    await asyncio.gather(running, return_exceptions=True)
    with session_scope(bot.engine, workspace=WORKSPACE) as session:
        row = session.get(Debate, 1)
        assert row is not None
        assert row.state != "finished"
        row.lease_expires_at = utcnow() - timedelta(seconds=1)
        session.add(row)
        session.commit()
    second = build_worker(services, bot.engine, worker_id="second", reporter=bot.runtime.notifier)
    assert await second.run_once()
    await bot.finished()
    result = result_of(bot)

    stream = the_stream(bot)
    closed_properly(bot, stream, result)
    tasks = list(bot.emulator.tasks(stream).values())
    titles = [task["title"] for task in tasks]
    assert len(titles) == len(set(titles)) == len(turns_of(result)) + 1, titles
    assert all(task["status"] == "complete" for task in tasks)
    assert plan_messages(bot) == []
    assert len(bot.emulator.calls_of("chat.startStream")) == 1


async def test_hostile_text_is_escaped_in_the_plans_titles_and_summaries(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.05))
    await bot.driver.command(
        f'Adopt {HOSTILE}? --protocol stances --for "{HOSTILE}" --against "wait {HOSTILE}"'
    )
    await bot.finished()

    sent = json.dumps(
        [c.params for c in bot.emulator.calls if c.method in STREAM_METHODS], ensure_ascii=False
    )
    for raw in ("<!channel>", "<https://x|y>", "&amp;lt;"):
        assert raw not in sent, raw
    stream = the_stream(bot)
    plan_title = next(c for c in stream["chunks"] if c["type"] == "plan_update")["title"]
    assert "&lt;!channel&gt; *bold* &lt;https://x|y&gt;" in plan_title
    escaped = [t for t in bot.emulator.tasks(stream).values() if "&lt;!channel&gt;" in t["title"]]
    assert escaped, "the stances' text is in the task titles, escaped once"


async def test_hostile_text_is_escaped_once_in_the_plan_become_a_message(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.15))
    bot.emulator.stream_lifetime_s = 0.3
    await bot.driver.command(
        f'Adopt {HOSTILE}? --protocol stances --for "{HOSTILE}" --against "wait"'
    )
    await bot.finished()

    stream = the_stream(bot)
    assert stream["edited"]
    shown = json.dumps(stream["blocks"], ensure_ascii=False)
    assert "&lt;!channel&gt;" in shown
    for raw in ("<!channel>", "<https://x|y>", "&amp;lt;"):
        assert raw not in shown, raw


async def test_stream_writes_keep_the_channels_pace(start_bot: BotFactory) -> None:
    bot = await start_bot(llm=fake(delay_s=0.3), post_interval_s=0.3, worker_concurrency=2)
    await bot.driver.command(f"{ASKED} --protocol structured", user="UALICE")
    await bot.driver.command(f"{ASKED} --protocol panel", user="UBOB")
    await bot.finished(count=2)

    writes = [
        c for c in bot.emulator.calls if c.method in WRITES and c.params.get("channel") == CHANNEL
    ]
    assert any(c.method == "chat.appendStream" for c in writes)
    gaps = [b.at - a.at for a, b in itertools.pairwise(writes)]
    assert min(gaps) >= 0.25, "one write at a time per channel, appends included"


async def test_an_assistant_debate_streams_its_plan_and_shows_loading_messages(
    start_bot: BotFactory,
) -> None:
    """Where agent sessions are not available (the app not declared an agent), the assistant
    thread's status shows who speaks, with loading messages, as before them."""
    bot = await start_bot(llm=fake(delay_s=0.15))
    bot.emulator.agent_sessions.declared = False
    root = assistant_thread(bot)
    await ask(bot, f"{QUESTION} --protocol structured", root)
    await bot.finished()

    stream = the_stream(bot, DM)
    assert stream["thread_ts"] == root
    assert (stream["recipient_user_id"], stream["recipient_team_id"]) == (USER, "T1")
    assert not stream["streaming"]
    statuses = bot.emulator.assistant_calls("assistant.threads.setStatus")
    generating = [c for c in statuses if c["status"]]
    assert generating
    assert all(1 <= len(c["loading_messages"]) <= 10 for c in generating)
    assert statuses[-1]["status"] == ""
    assert "loading_messages" not in statuses[-1]


@pytest.mark.parametrize("when", ["before the plan starts", "while it streams"])
async def test_a_deleted_parent_moves_the_plan_to_the_new_thread_once(
    start_bot: BotFactory, when: str
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.2))
    await bot.driver.command(f"{ASKED} --protocol structured")
    parent = await bot.wait_for(lambda: bot.emulator.posted(CHANNEL), "the parent")
    if when == "while it streams":
        await bot.wait_for(lambda: bot.emulator.calls_of("chat.appendStream"), "an append")
    bot.emulator.delete_message(CHANNEL, parent[0]["ts"])
    [debate] = await bot.finished()
    if when == "while it streams":
        [left] = [m for m in bot.emulator.removed if "chunks" in m]
        assert left["thread_ts"] == parent[0]["ts"], "the plan in the old thread was removed"

    tops = [m for m in bot.emulator.posted(CHANNEL) if "thread_ts" not in m]
    assert [m["ts"] for m in tops] == [debate.thread_ts], "the parent is posted again once"
    stream = the_stream(bot)
    assert stream["thread_ts"] == debate.thread_ts
    closed_properly(bot, stream, result_of(bot))


async def test_a_refused_token_mid_stream_pauses_the_plan_and_it_ends_once_the_token_works(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.2))
    await bot.driver.command(f"{ASKED} --protocol structured")
    await bot.wait_for(lambda: bot.emulator.calls_of("chat.appendStream"), "an append")
    bot.emulator.fail_for("*", Fault(error="token_revoked"), seconds=3)
    await bot.wait_for(lambda: all(d.state == "finished" for d in bot.debates()), "the end")
    await bot.wait_for_health(503)

    await bot.finished()
    stream = the_stream(bot)
    closed_properly(bot, stream, result_of(bot))
    assert all(t["status"] == "complete" for t in bot.emulator.tasks(stream).values())
    assert plan_messages(bot) == []
    assert len(bot.emulator.calls_of("chat.startStream")) == 1


async def test_a_long_question_and_stances_stay_within_the_streams_limits(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot(llm=fake(delay_s=0.05))
    long = "word&<> " * 4_000
    await bot.driver.command(
        f'{long}? --protocol stances --for "{"a&<b " * 110}" --against "{"c " * 280}"'
    )
    await bot.finished()

    assert all(c.status == 200 for c in bot.emulator.calls if c.method in STREAM_METHODS)
    stream = the_stream(bot)
    titles = [c["title"] for c in stream["chunks"] if c["type"] == "plan_update"]
    assert all(len(t) <= 150 for t in titles)
    for task in bot.emulator.tasks(stream).values():
        assert len(task["title"]) <= 256
        assert len(task.get("output", "")) <= 256
    closed_properly(bot, stream, result_of(bot))


async def test_the_emulator_refuses_streams_as_slack_does() -> None:
    emulator = SlackEmulator()
    await emulator.start()
    client = AsyncWebClient(token="xoxb-test", base_url=emulator.api_url)
    task = {"type": "task_update", "id": "t1", "title": "Framing", "status": "in_progress"}
    thread = emulator.seed_message(CHANNEL, "root")

    async def refusal(method: str, **arguments: Any) -> str:
        with pytest.raises(SlackApiError) as raised:
            await getattr(client, method)(channel=CHANNEL, **arguments)
        return str(raised.value.response["error"])

    def start(**arguments: Any) -> dict[str, Any]:
        to = {"recipient_user_id": "UALICE", "recipient_team_id": "T1"}
        return {"thread_ts": thread, **to, **arguments}

    try:
        unaddressed = {"thread_ts": thread, "chunks": [task]}
        assert await refusal("chat_startStream", **unaddressed) == "missing_recipient_user_id"
        too_long = start(markdown_text="x" * 12_001)
        assert await refusal("chat_startStream", **too_long) == "msg_too_long"
        unknown_field = start(chunks=[{**task, "colour": "red"}])
        assert await refusal("chat_startStream", **unknown_field) == "invalid_chunks"
        started = await client.chat_startStream(channel=CHANNEL, **start(chunks=[task]))
        ts = str(started["ts"])
        await client.chat_stopStream(channel=CHANNEL, ts=ts)
        after_stop = {"ts": ts, "chunks": [task]}
        assert await refusal("chat_appendStream", **after_stop) == "message_not_in_streaming_state"
        emulator.streaming = False
        assert await refusal("chat_startStream", **start(chunks=[task])) == "unknown_method"
    finally:
        await emulator.stop()
