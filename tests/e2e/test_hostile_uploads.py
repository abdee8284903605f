"""Uploads read whole or refused, and the bot token only for Slack's file host: a files API that
gives a download address on another host, redirects the download, claims a size that is not the
file's, drips it, or cuts it short. Each case is answered in the thread, and nothing is
debated from part of a file (issue 30, items 2 and 5)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tests.e2e.conftest import BOT_TOKEN, CHANNEL, Bot, BotFactory
from tests.e2e.host_emulators import OtherHost
from tests.e2e.slack_emulator import Fault
from tests.e2e.test_triggers import ADR_TEXT, file_share, watch_adrs

ADR = ADR_TEXT.encode()


@pytest.fixture
async def other() -> AsyncIterator[OtherHost]:
    """Another host, serving an ADR that would be debated if the bot downloaded it there."""
    host = OtherHost(body=ADR, content_type="text/markdown")
    await host.start()
    yield host
    await host.stop()


async def share(bot: Bot, shared: dict[str, object], n: int) -> str:
    """Post a message sharing `shared`; its ts."""
    ts = bot.emulator.seed_message(CHANNEL, "")
    await bot.driver.event(file_share(bot, ts, "", shared), event_id=f"EvH{n}")
    return ts


async def answer_in(bot: Bot, ts: str) -> str:
    said = await bot.wait_for(lambda: bot.emulator.in_thread(CHANNEL, ts), "the answer")
    return str(said[-1]["text"])


async def test_an_upload_larger_than_one_read_is_debated_whole(start_bot: BotFactory) -> None:
    """150 KB arrives in many reads; all of it is the debate's document, not the first few."""
    bot = await start_bot()
    watch_adrs(bot)
    appendix = "".join(f"\n- measurement {n:06d}: p99 {n % 97} ms" for n in range(5_000))
    content = (ADR_TEXT + "\n\n## Appendix" + appendix).encode()
    assert len(content) > 150_000
    ts = await share(bot, bot.emulator.upload("0042-cache.md", content), 1)

    [debate] = await bot.finished()
    assert debate.thread_ts == ts
    [document] = [
        d for d in json.loads(debate.spec_json)["context"] if d["title"] == "0042-cache.md"
    ]
    assert document["text"].encode() == content
    assert [auth for _, auth in bot.emulator.downloads] == [f"Bearer {BOT_TOKEN}"]


async def test_a_download_address_on_another_host_or_a_redirect_gets_no_token(
    start_bot: BotFactory, other: OtherHost
) -> None:
    bot = await start_bot()
    watch_adrs(bot)
    elsewhere = other.url.removeprefix("http://")

    said = await answer_in(
        bot, await share(bot, bot.emulator.upload("adr.md", ADR, host=other.url), 1)
    )
    assert (
        f"Slack gave a download address for `adr.md` on another host ({elsewhere}); the bot"
        f" sends its token only to {bot.emulator.url}, so the file was not read."
    ) in said
    assert "DEBATEBOT_SLACK_FILES_URL" in said

    bot.emulator.fail("files.download", Fault(status=302, redirect=f"{other.url}/adr.md"))
    said = await answer_in(bot, await share(bot, bot.emulator.upload("adr2.md", ADR), 2))
    assert (
        f"Slack answered the download of `adr2.md` with a redirect to {elsewhere}; the bot never"
        " follows a redirect with its token, so the file was not read"
    ) in said

    assert other.requests == [], "nothing, and so no token, reached the other host"
    assert other.credentials() == []
    assert bot.debates() == []


async def test_a_file_larger_or_shorter_than_files_info_claims_is_refused(
    start_bot: BotFactory,
) -> None:
    bot = await start_bot()
    watch_adrs(bot)
    # files.info says 1 KB; the download is 3 MB: refused at the cap, with the cap named.
    huge = ADR + b"\n" + b"x" * 3_000_000
    said = await answer_in(bot, await share(bot, bot.emulator.upload("big.md", huge, size=1000), 1))
    assert (
        "`big.md` is larger than 500 KB and I read at most 500 KB: post the ADR's text, or"
        " link the file on GitHub or GitLab"
    ) in said
    # files.info says more than the download brings: the rest never came.
    short = bot.emulator.upload("short.md", ADR, size=len(ADR) + 4000)
    said = await answer_in(bot, await share(bot, short, 2))
    assert (
        f"Slack sent {len(ADR):,} of the {len(ADR) + 4000:,} bytes of `short.md`, so I debated"
        " none of it: upload it again"
    ) in said
    assert bot.debates() == []


async def test_a_dripped_or_cut_download_is_refused_not_debated_in_part(
    start_bot: BotFactory,
) -> None:
    """Each try has the Slack timeout (2 s here) to bring the whole file, three tries at most."""
    bot = await start_bot()
    watch_adrs(bot)
    bot.emulator.fail("files.download", *[Fault(drip_s=0.05)] * 3)
    said = await answer_in(bot, await share(bot, bot.emulator.upload("drip.md", ADR), 1))
    assert (
        "I could not download `drip.md` from Slack: it did not arrive whole within 2 s in 3"
        " tries; upload it again later"
    ) in said

    bot.emulator.fail("files.download", *[Fault(cut_at=64)] * 3)
    said = await answer_in(bot, await share(bot, bot.emulator.upload("cut.md", ADR), 2))
    assert (
        "I could not download `cut.md` from Slack: the download was cut off before the whole"
        " file arrived, in 3 tries; upload it again later"
    ) in said
    assert len(bot.emulator.downloads) == 6
    assert bot.debates() == []
