"""Every rule that reads text people type runs in bounded time and never crashes on it.

Each recogniser is fed texts of up to 40,000 characters (Slack's message limit) built to make a
backtracking regular expression take quadratic or exponential time: its own keywords and
delimiters repeated, unclosed quotes and mentions, long runs of whitespace or decoration before
a character that ends the match. The bound in the test (2 s a call) is generous on purpose: the
old Y-statement pattern took 88 s on 5,500 characters, and a linear rule takes milliseconds.
A seeded fuzz then feeds random Unicode, lone surrogates included, and checks that each rule
either answers or refuses with its own error; the payload checks and the HTTP front door get
random and deeply nested payloads, signed and not.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from pydantic import ValidationError

from bot import adr
from bot.hosts import links
from bot.messages import kit
from bot.slack import command_text, payloads, server, triggers
from bot.slack.errors import CommandError
from engine import citations, llm, quality
from engine.models import ContextDocument, Role, clean_text
from engine.protocols import protocol_names

MAX_CHARS = 40_000
BOUND_S = 2.0
"""The CPU seconds one recogniser may take on one text (`time.process_time`: what this process
spent, whatever else the machine runs at the time): a backtracking pattern takes minutes."""

FRAGMENTS = (
    # The Y-statement and the other ADR recognisers' keywords.
    "in the context of a facing b we decided c to achieve d ",
    "in the context of ",
    "facing we decided to achieve ",
    "we have  ",
    "we ",
    "*context:* ",
    "**Decision:**",
    "context ",
    "Decision Outcome\n",
    "---\n",
    "a:\n",
    "key: value\n",
    "1.",
    "1. ",
    "1)",
    "ADR",
    "ADR-1 ",
    "- 1",
    # Whitespace and decoration before a character that ends a match.
    " ",
    "\t",
    "\u3000",
    " \n",
    "*",
    "#",
    "_",
    "`",
    "~",
    "\u2022",
    "-",
    "> ",
    "* _",
    # Slack's markup, unclosed.
    "<@U1|",
    "<@U1234567 ",
    "<!subteam^S1|",
    "<#C1|",
    "<https://",
    "<",
    "|",
    # The command grammar's flags and quotes, unclosed.
    "--for \u201c ",
    '--for " ',
    "--for ' ",
    "--for=\u201c ",
    "--a=",
    "\u2014for ",
    "-- ",
    "--",
    # Links.
    "https://",
    "https://github.com/",
    "https://github.com/a/b/blob/",
    "https://gitlab.com/g/p/-/",
    "../",
    "%2e%2e/",
    "https://github.com/a/b/pull/\u00b2 ",
    "https://gitlab.com/g/p/-/merge_requests/\u0663 ",
    "https://github.com/[",
    # JSON and code fences, as a model might echo them.
    "{",
    "[",
    '"',
    "```",
    "```json ",
    ", ",
    ": ",
    '{"a":',
    "...",
)
TAILS = ("", "!", "x", "\n")


def adversarial_texts() -> list[str]:
    texts = []
    for fragment in FRAGMENTS:
        repeated = fragment * (MAX_CHARS // len(fragment))
        texts += [(repeated + tail)[:MAX_CHARS] for tail in TAILS]
    return texts


def _ignore(
    errors: tuple[type[Exception], ...], work: Callable[[str], Any]
) -> Callable[[str], Any]:
    def run(text: str) -> Any:
        try:
            return work(text)
        except errors:
            return None

    return run


CONFIG = links.HostConfig()
CHECKER_DOCS = [ContextDocument(title="case", text="we decided to cache sessions in redis " * 50)]
RECOGNISERS: dict[str, Callable[[str], Any]] = {
    "adr_format": adr.adr_format,
    "adr_format with a channel pattern": lambda text: adr.adr_format(text, r"(rfc|adr)-\d+"),
    "adr_title": adr.adr_title,
    "clean_line": adr.clean_line,
    "parse_command": _ignore(
        (CommandError,), lambda text: command_text.parse_command(text, protocols=protocol_names())
    ),
    "parse_people": _ignore((CommandError,), command_text.parse_people),
    "parse_channel": _ignore((CommandError,), command_text.parse_channel),
    "parse_link": _ignore((CommandError,), command_text.parse_link),
    "parse_title_pattern": _ignore((CommandError,), command_text.parse_title_pattern),
    "parse_clock": _ignore((CommandError,), command_text.parse_clock),
    # A link whose path could reach outside the repository is refused with LinkError.
    "find_link": _ignore((links.LinkError,), lambda text: links.find_link(text, CONFIG)),
    "is_adr_path": links.is_adr_path,
    "thread_question": lambda text: triggers.thread_question([{"text": text}]),
    "thread_document": lambda text: triggers.thread_document([{"text": text, "user": "U1"}]),
    "unescape and escape": lambda text: kit.escape(kit.unescape(text)),
    "split_text": kit.split_text,
    "clean_text": clean_text,
    "citation check": lambda text: citations.CitationChecker(CHECKER_DOCS, "q").check(
        text, round=1, role=Role.CRITIC
    ),
    # A text of nothing but control characters is refused as material, as it should be.
    "citation material": _ignore(
        (ValidationError,),
        lambda text: citations.CitationChecker([ContextDocument(title="t", text=text)], "q").check(
            "we decided to cache", round=1, role=Role.CRITIC
        ),
    ),
    "lenient JSON": _ignore((ValueError,), llm.parse_json_lenient),
    "repeats_itself": quality.repeats_itself,
    "bare_value": quality.bare_value,
    "echoes": lambda text: quality.echoes(text, text[:2000]),
}


@pytest.mark.parametrize("name", sorted(RECOGNISERS))
def test_every_recogniser_finishes_quickly_on_adversarial_text(name: str) -> None:
    recognise = RECOGNISERS[name]
    slowest = (0.0, "")
    for text in adversarial_texts():
        started = time.process_time()
        recognise(text)
        took = time.process_time() - started
        slowest = max(slowest, (took, text[:40]))
    assert slowest[0] < BOUND_S, f"{name} took {slowest[0]:.2f} s on {slowest[1]!r}…"


def test_the_reported_y_statement_is_recognised_or_refused_at_once() -> None:
    """The outside report's input (88 s before), and the same with the fifth part present."""
    reported = "in the context of a facing b we decided c to achieve d " * 100
    started = time.process_time()
    assert adr.adr_format(reported) is None
    assert adr.adr_format(reported + "accepting e") == "y-statement"
    assert adr.adr_format(reported * 7 + "accepting e") == "y-statement"
    assert time.process_time() - started < BOUND_S


def test_a_channel_pattern_that_backtracks_in_python_runs_in_linear_time() -> None:
    """`(a+)+$` takes exponential time in Python's engine on "aaa…!"; RE2 answers at once."""
    title = "a" * (adr.MAX_TITLE_CHARS - 1) + "!"
    started = time.process_time()
    assert adr.adr_format(title, "(a+)+$") is None
    assert adr.adr_format(title, "(a|aa)+!") == "channel"
    assert time.process_time() - started < BOUND_S


def test_patterns_re2_refuses_are_named_when_set_and_match_nothing_when_stored() -> None:
    with pytest.raises(CommandError, match="backreferences and lookarounds"):
        command_text.parse_title_pattern(r"(rfc)-\1")
    assert adr.adr_format("RFC-12: caching", r"(?=RFC)RFC-\d+") is None
    assert adr.adr_format("RFC-12: caching", r"RFC-\d+") == "channel"


def _random_text(rng: random.Random, size: int) -> str:
    """Random code points from every plane, lone surrogates and controls included, mixed with
    the fragments above so the rules' own keywords occur."""
    pieces: list[str] = []
    while sum(map(len, pieces)) < size:
        roll = rng.random()
        if roll < 0.3:
            pieces.append(rng.choice(FRAGMENTS))
        elif roll < 0.4:
            pieces.append(chr(rng.randint(0xD800, 0xDFFF)))
        elif roll < 0.5:
            pieces.append(chr(rng.randint(0, 0x1F)))
        else:
            pieces.append(chr(rng.randint(0x20, 0x10FFFF)))
    return "".join(pieces)[:size]


@pytest.mark.parametrize("seed", range(3))
def test_random_unicode_and_lone_surrogates_never_crash_a_recogniser(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        text = _random_text(rng, rng.choice((1, 10, 300, 5_000)))
        for name, recognise in RECOGNISERS.items():
            try:
                recognise(text)
            except Exception as error:  # noqa: BLE001 - the failure is the finding
                pytest.fail(f"{name} raised {error!r} on {text[:60]!r}")


def test_clean_text_replaces_lone_surrogates_so_the_text_can_be_stored_and_sent() -> None:
    cleaned = clean_text("a\ud800b\udfffc \U0001f600")
    assert cleaned == "a\ufffdb\ufffdc \U0001f600"
    cleaned.encode("utf-8")


def _random_payload(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON-shaped value: objects and lists (sometimes shaped like Slack's payloads),
    strings of random Unicode with lone surrogates, numbers, booleans, null."""
    roll = rng.random()
    if depth < 6 and roll < 0.35:
        keys = ("type", "event", "user", "id", "actions", "value", "view", "channel", "ts", "text")
        return {
            rng.choice(keys) if rng.random() < 0.7 else _random_text(rng, 5): _random_payload(
                rng, depth + 1
            )
            for _ in range(rng.randint(0, 5))
        }
    if depth < 6 and roll < 0.5:
        return [_random_payload(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if roll < 0.8:
        return _random_text(rng, rng.choice((0, 1, 8, 40)))
    return rng.choice((0, -1, 2**70, 1.5, True, False, None, "event_callback", "block_actions"))


@pytest.mark.parametrize("seed", range(3))
def test_the_payload_checks_never_crash_on_random_or_deeply_nested_payloads(seed: int) -> None:
    rng = random.Random(seed)
    samples = [_random_payload(rng) for _ in range(300)]
    deep: Any = "x"
    for _ in range(5_000):
        deep = {"event": deep} if rng.random() < 0.5 else [deep]
    samples += [deep, {"type": "event_callback", "event": deep}]
    for index, payload in enumerate(samples):
        why = payloads.problem(payload)
        assert why is None or isinstance(why, str)
        payloads.scrub(payload)
        if index < 300:  # (the deep ones are too deep for json.dumps itself)
            json.dumps(payload).encode("utf-8")  # no lone surrogate is left to fail an encoder
    assert payloads.problem({"type": "event_callback", "event": deep}) is not None


@pytest.mark.parametrize("seed", range(2))
def test_the_front_door_answers_every_random_body_without_raising(seed: int) -> None:
    """Random bodies, signed and unsigned, through the HTTP front door's checks."""
    rng = random.Random(seed)
    secret = b"front-door-test-secret"
    bodies = [
        json.dumps(_random_payload(rng)).encode()
        if rng.random() < 0.5
        else urlencode({"payload": json.dumps(_random_payload(rng))}).encode()
        for _ in range(150)
    ]
    bodies += [rng.randbytes(rng.randint(0, 200)) for _ in range(50)]
    bodies += [b"[" * 100_000 + b"]" * 100_000, b"payload=" + b"%5B" * 60_000]
    for body in bodies:
        for signed in (True, False):
            now = str(int(time.time()))
            mac = hmac.new(secret, b"v0:" + now.encode() + b":" + body, hashlib.sha256)
            signature = "v0=" + (mac.hexdigest() if signed else "0" * 64)
            kind = b"application/json" if body[:1] in (b"{", b"[") else b"x-www-form-urlencoded"
            headers = [
                (b"x-slack-request-timestamp", now.encode()),
                (b"x-slack-signature", signature.encode()),
                (b"content-type", kind),
            ]
            _, refusal = asyncio.run(_front_door(body, headers, secret))
            if not signed:
                assert refusal is not None
                assert refusal[0] == 401
            elif refusal is not None:
                assert 400 <= refusal[0] < 500


async def _front_door(
    body: bytes, headers: list[tuple[bytes, bytes]], secret: bytes
) -> tuple[bytes, tuple[int, str] | None]:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    return await server._read_checked({"headers": headers}, receive, secret)
