"""`debatebot serve` as a real process: HTTP mode end to end, health, clean stop, bad secrets."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
from pydantic import SecretStr

from bot.serving import transport
from bot.settings import Settings
from tests.e2e.conftest import BOT_TOKEN, CHANNEL, SIGNING_SECRET
from tests.e2e.driver import SlackDriver
from tests.e2e.slack_emulator import SlackEmulator
from tests.migrated import upgrade

DEBATEBOT = str(Path(sys.executable).with_name("debatebot"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_env(emulator: SlackEmulator, database_url: str, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "DEBATEBOT_SLACK_BOT_TOKEN": BOT_TOKEN,
        "DEBATEBOT_SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "DEBATEBOT_SLACK_API_URL": emulator.api_url,
        "DEBATEBOT_DATABASE_URL": database_url,
        "DEBATEBOT_PROVIDER": "fake",
        "DEBATEBOT_HTTP_HOST": "127.0.0.1",
        "DEBATEBOT_HTTP_PORT": str(port),
        "DEBATEBOT_POST_INTERVAL_S": "0",
        "DEBATEBOT_WORKER_POLL_S": "0.1",
    }


async def test_serve_answers_health_and_runs_a_debate_over_http(tmp_path: Path) -> None:
    emulator = SlackEmulator()
    await emulator.start()
    url = f"sqlite:///{tmp_path / 'serve.sqlite3'}"
    upgrade(url)
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        DEBATEBOT,
        "serve",
        env=serve_env(emulator, url, port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            health = None
            for _ in range(300):
                try:
                    async with session.get(f"{base}/healthz") as response:
                        health = (response.status, await response.json())
                        break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.1)
            assert health == (200, {"ok": True, "database": "ok", "concurrency": 16})

            driver = SlackDriver(base, SIGNING_SECRET, f"{emulator.url}/response", session)
            reply = await driver.command("Should we adopt ADR-042?")
            assert reply.status == 200
            for _ in range(600):
                if any(m["text"].startswith("Verdict") for m in emulator.posted(CHANNEL)):
                    break
                await asyncio.sleep(0.1)
            texts = [m["text"] for m in emulator.posted(CHANNEL)]
            # The fake provider's independent judge reaches the canned `revise`.
            assert texts[1:3] == ["Round 1 of 1", "Verdict: revise (0.75)"]
            # The verdict names the key its receipt is signed with, which the public keys
            # file served beside /healthz lists.
            async with session.get(f"{base}/.well-known/debatebot-keys.json") as response:
                assert response.status == 200
                [key] = (await response.json(content_type=None))["keys"]
            verdict = json.dumps(emulator.posted(CHANNEL)[2]["blocks"])
            assert f"Receipt signed with key `{key['key_id']}`" in verdict
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
        await emulator.stop()
    assert process.returncode == 0, stderr.decode()
    assert b"serving over HTTP" in stderr
    assert b"INFO bot.jobs.delivery: delivering owed Slack messages" in stderr, "INFO logs"
    assert BOT_TOKEN.encode() not in stderr


async def test_serve_refuses_to_start_without_real_secrets(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
    env["DEBATEBOT_SLACK_BOT_TOKEN"] = "xoxb-your-token-here"
    process = await asyncio.create_subprocess_exec(
        DEBATEBOT,
        "serve",
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 60)

    assert process.returncode == 1
    assert "DEBATEBOT_SLACK_BOT_TOKEN holds a placeholder" in stderr.decode()


def test_an_app_token_selects_socket_mode() -> None:
    assert transport(Settings(slack_app_token=SecretStr("xapp-1-A1-123-abcdef"))) == "socket"
    assert transport(Settings()) == "http"
