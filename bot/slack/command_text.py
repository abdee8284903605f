"""Parsing `/debate` text, the debate and settings forms, and channel-settings values. Pure: no
Slack calls, no database.

Grammar: `/debate [help | cancel ID | config [show | set KEY VALUE...] | QUESTION [--flag V]...]`.
Flags may appear anywhere; everything that is not a flag is the question, kept verbatim (so
apostrophes and quotes in a question need no escaping). Flag values with spaces take quotes,
straight or the curly ones Slack clients type. An em or en dash stands for `--`, because some
clients turn `--` into one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.adr import TitlePatternError, compile_title_pattern
from bot.slack.errors import CommandError, FormError
from engine.models import DEFAULT_PROTOCOL, clean_text
from engine.protocols import PROTOCOLS, definition_for, flagged
from engine.protocols.definition import Flags

FLAGS = ("protocol", "rounds", "for", "against", "budget", "route", "review-in", "adr")
SWITCHES = ("route",)
"""Flags that take no value."""
MAX_BUDGET_USD = 100.0

# A curly-quoted value stops at the next opening quote too, so unclosed quotes are not each
# scanned to the end of the text.
_FLAG = re.compile(
    r"""(?<!\S)(?:--|\u2014|\u2013)(?P<name>[A-Za-z][\w-]*)
        (?:=(?P<eq>"[^"]*"|\u201c[^\u201c\u201d]*\u201d|'[^']*'|\S+)
          |\s+(?P<value>"[^"]*"|\u201c[^\u201c\u201d]*\u201d|'[^']*'
                         |(?!(?:--|\u2014|\u2013)[A-Za-z])\S+)
        )?""",
    re.VERBOSE,
)
# A label never holds `<` (Slack escapes it), so a scan for the closing `>` stops where the next
# mention could start: linear, however many unclosed mentions a text holds.
_USER = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^<>]*)?>|\b([UW][A-Z0-9]{6,})\b")
_GROUP = re.compile(r"<!subteam\^(S[A-Z0-9]+)(?:\|[^<>]*)?>|\b(S[A-Z0-9]{6,})\b")


@dataclass(frozen=True)
class HelpCommand:
    pass


@dataclass(frozen=True)
class OpenDebateModal:
    pass


@dataclass(frozen=True)
class ConfigCommand:
    """`config` alone opens the settings modal; `show` prints them; `set` changes some."""

    action: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DebateCommand:
    question: str | None
    """None when the command names only an ADR link (`--adr`): the ADR's title makes it."""
    protocol: str | None = None
    rounds: int | None = None
    stances_for: tuple[str, ...] = ()
    stances_against: tuple[str, ...] = ()
    budget_usd: float | None = None
    route: bool = False
    """Panel only: let a fast model answer first and skip the panel when it is sure."""
    review_in: str | None = None
    """The channel the review request goes to, instead of the debate's thread."""
    adr_url: str | None = None
    """A GitHub or GitLab link to the ADR file or the pull request that proposes it."""


@dataclass(frozen=True)
class CancelCommand:
    """`cancel ID`: stop debate ID (issue 44)."""

    debate_id: int


Command = HelpCommand | OpenDebateModal | ConfigCommand | DebateCommand | CancelCommand

_DEBATE_ID = re.compile(r"#?([0-9]{1,12})")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] + value[-1] in ('""', "''", "\u201c\u201d"):
        return value[1:-1].strip()
    return value


def parse_rounds(raw: str) -> int:
    try:
        rounds = int(raw)
    except ValueError:
        raise CommandError(
            f"--rounds takes a whole number, e.g. `--rounds 2`; got `{raw}`"
        ) from None
    if rounds < 1:
        raise CommandError(f"--rounds must be at least 1; got {rounds}")
    if rounds > max(d.max_rounds for d in PROTOCOLS.values()):
        caps = ", ".join(f"{d.name} {d.max_rounds}" for d in PROTOCOLS.values())
        raise CommandError(f"--rounds is too many; each protocol has its maximum ({caps})")
    return rounds


def _number(text: str, wrong: str) -> float:
    """`text` as a number, or the CommandError that says what is `wrong` with it."""
    try:
        return float(text)
    except ValueError:
        raise CommandError(wrong) from None


def parse_budget(raw: str) -> float:
    wrong = f"--budget takes an amount in US dollars, e.g. `--budget 0.50`; got `{raw}`"
    budget = _number(raw.strip().lstrip("$"), wrong)
    if not 0 < budget <= MAX_BUDGET_USD:
        raise CommandError(f"--budget must be above $0 and at most ${MAX_BUDGET_USD:.0f}")
    return budget


def parse_threshold(raw: str) -> float:
    value = _number(
        raw.strip().rstrip("%"), f"the threshold is a number from 0 to 1, e.g. 0.6; got `{raw}`"
    )
    if raw.strip().endswith("%") or value > 1:
        value /= 100
    if not 0 <= value <= 1:
        raise CommandError(f"the threshold must be between 0 and 1 (or 0% and 100%); got `{raw}`")
    return value


def parse_people(raw: str) -> list[str]:
    """Slack user and user-group ids from mentions (`<@U1>`, `<!subteam^S1>`) or bare ids."""
    people = [a or b for a, b in _USER.findall(raw)] + [a or b for a, b in _GROUP.findall(raw)]
    leftover = _GROUP.sub("", _USER.sub("", raw)).replace(",", " ").strip()
    if leftover and leftover.lower() != "none":
        raise CommandError(
            f"could not read `{leftover}` as people: mention users (@alice) or a user group"
            " (@reviewers), or give their ids (U…, S…)"
        )
    return list(dict.fromkeys(people))


def parse_switch(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("on", "yes", "true", "1"):
        return True
    if value in ("off", "no", "false", "0"):
        return False
    raise CommandError(f"use on or off; got `{raw}`")


def parse_reaction(raw: str) -> str:
    name = raw.strip().strip(":")
    if not re.fullmatch(r"[a-z0-9_+'-]{1,80}", name):
        raise CommandError(f"`{raw}` is not an emoji name; use one like `scales` or `:scales:`")
    return name


def parse_setting(key: str, raw: str, *, protocols: tuple[str, ...]) -> tuple[str, Any]:
    """One channel setting from text; the key names are the ones `/debate config show` prints."""
    key = key.lower().replace("-", "_")
    if key == "protocol":
        return "protocol", parse_protocol(raw, protocols)
    # `default`: the deployment's DEBATEBOT_ROUNDS / DEBATEBOT_ESCALATION_THRESHOLD again.
    default = raw.strip().lower() == "default"
    if key == "rounds":
        return "rounds", None if default else parse_rounds(raw)
    if key == "threshold":
        return "threshold", None if default else parse_threshold(raw)
    if key in ("reviewers", "owners"):
        return key, parse_people(raw)
    if key == "budget":
        return "budget_usd", None if raw.strip().lower() in ("none", "off") else parse_budget(raw)
    if key in ("adr", "adr_watch"):
        return "adr_watch", parse_switch(raw)
    if key in ("reaction", "trigger_reaction"):
        return "trigger_reaction", parse_reaction(raw)
    if key in ("triage", "route", "pr_comment"):
        return key, parse_switch(raw)
    off = raw.strip().lower() in ("none", "off")
    if key in ("monthly_budget", "monthly_budget_usd"):
        return "monthly_budget_usd", None if off else parse_money(raw, "monthly_budget")
    if key in ("review_sla", "review_sla_h"):
        return "review_sla_h", None if off else parse_hours(raw)
    if key in ("digest", "digest_time"):
        return "digest_time", None if off else parse_clock(raw)
    if key in ("timezone", "tz"):
        return "timezone", parse_timezone(raw)
    if key in ("adr_pattern", "adr_title"):
        return "adr_pattern", None if off else parse_title_pattern(raw)
    raise CommandError(
        f"unknown setting `{key}`; settings are protocol, rounds, threshold, reviewers, owners,"
        " budget, adr, reaction, triage, route, monthly_budget, review_sla, digest, timezone,"
        " adr_pattern, pr_comment"
    )


def parse_money(raw: str, name: str) -> float:
    wrong = f"{name} is in US dollars, like `50` or `$12.50`; got `{raw}`"
    value = _number(raw.strip().lstrip("$"), wrong)
    if not 0 < value <= 1_000_000:
        raise CommandError(f"{name} must be more than $0 and at most $1,000,000; got `{raw}`")
    return value


def parse_hours(raw: str) -> float:
    text = raw.strip().lower().removesuffix("h").strip()
    value = _number(text, f"review_sla is in hours, like `48` or `24h`; got `{raw}`")
    if not 1 <= value <= 24 * 90:
        raise CommandError(f"review_sla must be between 1 and 2160 hours; got `{raw}`")
    return value


def parse_clock(raw: str) -> str:
    match = re.fullmatch(r"([01]?\d|2[0-3]):([0-5]\d)", raw.strip())
    if match is None:
        raise CommandError(f"digest takes a local time like `09:00` (24-hour), or off; got `{raw}`")
    return f"{int(match.group(1)):02d}:{match.group(2)}"


def parse_title_pattern(raw: str) -> str:
    pattern = raw.strip().strip("`")
    try:
        compile_title_pattern(pattern)
    except TitlePatternError as error:
        raise CommandError(f"{error}; for example `RFC-\\d+`") from None
    return pattern


def parse_timezone(raw: str) -> str:
    name = raw.strip()
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CommandError(
            f"`{raw}` is not a time zone; use an IANA name like `Europe/Berlin` or `UTC`"
        ) from None
    return name


def _stances(flags: Flags) -> bool:
    return flags.takes_stances


def _route(flags: Flags) -> bool:
    return flags.takes_route


def _takes(protocol: str | None, flag: Callable[[Flags], bool]) -> bool:
    """Whether the protocol asked for takes an option (`flag` of its definition's flags); no
    protocol asked takes none."""
    return protocol is not None and flag(definition_for(protocol).flags)


def _flagged(flag: Callable[[Flags], bool], each: str = "{}") -> str:
    """The protocols that take an option, as a help text names them."""
    return " or ".join(each.format(name) for name in flagged(flag))


def parse_protocol(raw: str, protocols: tuple[str, ...]) -> str:
    name = raw.strip().lower()
    if name not in protocols:
        raise CommandError(f"unknown protocol `{raw}`; available: {', '.join(protocols)}")
    return name


def _parse_config(rest: str, protocols: tuple[str, ...]) -> ConfigCommand:
    words = rest.split(maxsplit=1)
    if not words:
        return ConfigCommand("modal")
    if words[0] == "show" and len(words) == 1:
        return ConfigCommand("show")
    if words[0] != "set" or len(words) == 1:
        raise CommandError(
            "use `/debate config` (opens the settings), `/debate config show`, or"
            " `/debate config set KEY VALUE`, e.g. `/debate config set threshold 0.7`"
        )
    key, _, raw = words[1].partition(" ")
    if not raw.strip():
        raise CommandError(f"`/debate config set {key}` needs a value")
    name, value = parse_setting(key, raw.strip(), protocols=protocols)
    return ConfigCommand("set", {name: value})


def parse_command(text: str, *, protocols: tuple[str, ...]) -> Command:
    """What the user asked for; raises CommandError (meant for the user) on anything unusable."""
    stripped = (text or "").strip()
    if not stripped:
        return OpenDebateModal()
    first, _, rest = stripped.partition(" ")
    if first.lower() == "help" and not rest.strip():
        return HelpCommand()
    if first.lower() == "cancel" and len(rest.split()) <= 1:
        number = _DEBATE_ID.fullmatch(rest.strip())
        if number is None:
            raise CommandError(
                "`/debate cancel` needs the number of the debate to stop, e.g. `/debate cancel 42`"
                " (the number is in the debate's first message)"
            )
        return CancelCommand(int(number[1]))
    if first.lower() == "config" and (not rest.strip() or rest.split()[0] in ("show", "set")):
        return _parse_config(rest.strip(), protocols)

    values: dict[str, list[str]] = {}
    for match in _FLAG.finditer(stripped):
        name = match["name"].lower()
        if name not in FLAGS:
            raise CommandError(
                f"unknown option `--{name}`; options are "
                + ", ".join(f"--{flag}" for flag in FLAGS)
                + ". `/debate help` explains them"
            )
        if name in SWITCHES:
            if match["eq"]:
                raise CommandError(f"--{name} takes no value; write just `--{name}`")
            values.setdefault(name, []).append("on")
            continue
        raw = match["eq"] or match["value"]
        if raw is None or not _unquote(raw):
            raise CommandError(f"--{name} needs a value, e.g. `{_example(name)}`")
        values.setdefault(name, []).append(_unquote(raw))
    question = re.sub(r"[ \t]{2,}", " ", _strip_flags(stripped)).strip()
    for name in ("protocol", "rounds", "budget", "review-in", "adr"):
        if len(values.get(name, [])) > 1:
            raise CommandError(f"--{name} is given more than once")
    adr_url = parse_link(values["adr"][0]) if "adr" in values else None
    if not question and not adr_url:
        raise CommandError(
            "there is no question: write it after /debate, e.g."
            " `/debate Should we move sessions to Redis? --rounds 2`"
        )
    protocol = parse_protocol(values["protocol"][0], protocols) if "protocol" in values else None
    stances_for = tuple(values.get("for", []))
    stances_against = tuple(values.get("against", []))
    if (stances_for or stances_against) and not _takes(protocol, _stances):
        raise CommandError(
            "--for and --against give debaters their stances; they need"
            f" {_flagged(_stances, '`--protocol {}`')}"
        )
    route = "route" in values
    if route and not _takes(protocol, _route):
        raise CommandError(
            "--route lets a fast model answer before a panel; add"
            f" {_flagged(_route, '`--protocol {}`')}"
        )
    return DebateCommand(
        question=question or None,
        protocol=protocol,
        rounds=parse_rounds(values["rounds"][0]) if "rounds" in values else None,
        stances_for=stances_for,
        stances_against=stances_against,
        budget_usd=parse_budget(values["budget"][0]) if "budget" in values else None,
        route=route,
        review_in=parse_channel(values["review-in"][0]) if "review-in" in values else None,
        adr_url=adr_url,
    )


def parse_link(raw: str) -> str:
    """A URL as typed, or as Slack escapes it (`<https://…>` or `<https://…|label>`)."""
    url = raw.strip().strip("<>").split("|", 1)[0]
    if not re.match(r"^https?://\S+$", url):
        raise CommandError(
            "--adr takes a link to the ADR on GitHub or GitLab (a file or a pull request);"
            f" got `{raw}`"
        )
    return url


_CHANNEL = re.compile(r"^(?:<#([CG][A-Z0-9]+)(?:\|[^>]*)?>|([CG][A-Z0-9]{6,}))$")


def parse_channel(raw: str) -> str:
    """A channel id from a channel mention (`<#C123|name>`, as Slack escapes `#name`) or an id."""
    match = _CHANNEL.match(raw.strip())
    if match is None:
        raise CommandError(
            f"`{raw}` is not a channel: write it as #channel-name (Slack turns it into a link)"
        )
    return match.group(1) or match.group(2)


def _strip_flags(text: str) -> str:
    """`text` without its flags; a switch keeps the word after it, which is the question's."""

    def drop(match: re.Match[str]) -> str:
        if match["name"].lower() in SWITCHES and match["value"]:
            return f" {match['value']} "
        return " "

    return _FLAG.sub(drop, text)


# --- forms --------------------------------------------------------------------------------------


def form_value(view: dict[str, Any], block_id: str) -> Any:
    """One input of a submitted form: the selected value, the checked values, or clean text."""
    action = view["state"]["values"].get(block_id, {}).get("value", {})
    if action.get("type") == "static_select":
        return (action.get("selected_option") or {}).get("value")
    if action.get("type") == "checkboxes":
        return [o["value"] for o in action.get("selected_options") or []]
    return clean_text(action.get("value") or "").strip()


def _lines(text: str) -> tuple[str, ...]:
    """The non-blank lines of a multi-line input (one stance per line)."""
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def parse_debate_form(view: dict[str, Any], *, protocols: tuple[str, ...]) -> DebateCommand:
    """The debate the form asks for; FormError names every field to fix."""
    errors: dict[str, str] = {}

    def read(block_id: str, parse: Any, default: str = "") -> Any:
        raw = form_value(view, block_id) or default
        if not raw:
            return None
        try:
            return parse(raw)
        except CommandError as error:
            errors[block_id] = str(error)
            return None

    question = form_value(view, "question")
    protocol = read("protocol", lambda raw: parse_protocol(raw, protocols))
    rounds = read("rounds", parse_rounds, "1")
    budget = read("budget", parse_budget)
    stances_for = _lines(form_value(view, "stances_for"))
    stances_against = _lines(form_value(view, "stances_against"))
    route = "on" in (form_value(view, "route") or [])
    if (stances_for or stances_against) and not _takes(protocol, _stances):
        errors["stances_for"] = f"stances need the {_flagged(_stances)} protocol"
    if route and not _takes(protocol, _route):
        errors["route"] = f"the fast-model router works with the {_flagged(_route)} protocol"
    if not question:
        errors["question"] = "write the question the debate should decide"
    if errors:
        raise FormError(errors)
    return DebateCommand(
        question=question,
        protocol=protocol,
        rounds=rounds,
        budget_usd=budget,
        stances_for=stances_for,
        stances_against=stances_against,
        route=route,
    )


def parse_config_form(view: dict[str, Any], *, protocols: tuple[str, ...]) -> dict[str, Any]:
    """The channel settings the form sets; FormError names every field to fix."""
    readers: dict[str, tuple[str, Any]] = {
        "protocol": ("protocol", lambda raw: parse_protocol(raw, protocols)),
        "rounds": ("rounds", lambda raw: parse_rounds(raw) if raw else None),
        "threshold": ("threshold", lambda raw: parse_threshold(raw) if raw else None),
        "reviewers": ("reviewers", parse_people),
        "owners": ("owners", parse_people),
        "budget": ("budget_usd", lambda raw: parse_budget(raw) if raw else None),
        "reaction": ("trigger_reaction", parse_reaction),
        "monthly_budget": (
            "monthly_budget_usd",
            lambda raw: parse_money(raw, "monthly_budget") if raw else None,
        ),
        "review_sla": ("review_sla_h", lambda raw: parse_hours(raw) if raw else None),
        "digest": ("digest_time", lambda raw: parse_clock(raw) if raw else None),
        "timezone": ("timezone", lambda raw: parse_timezone(raw) if raw else "UTC"),
        "adr_pattern": ("adr_pattern", lambda raw: parse_title_pattern(raw) if raw else None),
    }
    errors: dict[str, str] = {}
    values: dict[str, Any] = {}
    for block_id, (name, read) in readers.items():
        try:
            values[name] = read(form_value(view, block_id) or "")
        except CommandError as error:
            errors[block_id] = str(error)
    switches = form_value(view, "adr") or []
    values["adr_watch"] = "on" in switches
    values["triage"] = "triage" in switches
    values["route"] = "route" in switches
    values["pr_comment"] = "pr_comment" in switches
    if errors:
        raise FormError(errors)
    return values


def _example(name: str) -> str:
    return {
        "protocol": f"--protocol {DEFAULT_PROTOCOL}",
        "rounds": "--rounds 2",
        "for": '--for "keep Postgres"',
        "against": '--against "move to DynamoDB"',
        "budget": "--budget 0.50",
        "route": "--route",
        "review-in": "--review-in #arch-reviews",
        "adr": "--adr https://github.com/acme/app/pull/42",
    }[name]
