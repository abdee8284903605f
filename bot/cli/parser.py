"""The `debatebot` command line's options and subcommands; each subcommand names the module of
`bot.cli` that runs it (`handler`, as `module:function`)."""

from __future__ import annotations

import argparse
import os
import re
from datetime import timedelta
from importlib import metadata

from bot.cli.manage_args import add_manage_commands
from bot.providers import PROVIDERS
from bot.settings import ROLE_SLOTS
from engine.evaluation.arms import all_arms
from engine.models import ADOPTABLE, DEFAULT_PROTOCOL, MAX_JUDGES, ThresholdSource
from engine.protocols import PROTOCOLS, protocol_names


def _team_option(command: argparse.ArgumentParser) -> None:
    """`--team`, for a command that reads records: one workspace's, or every workspace's."""
    command.add_argument(
        "--team",
        metavar="TEAM_ID",
        help="only this workspace's records (its Slack team id, T…); every workspace's when"
        " left out",
    )


def _duration(text: str) -> timedelta:
    match = re.fullmatch(r"\s*(\d+)\s*([dhm])\s*", text.lower())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"use a number of days, hours or minutes: 30d, 12h, 45m; got {text!r}"
        )
    unit = {"d": "days", "h": "hours", "m": "minutes"}[match.group(2)]
    return timedelta(**{unit: int(match.group(1))})


def _arms(text: str) -> list[str]:
    arms = [a.strip() for a in text.split(",") if a.strip()]
    known = all_arms()
    unknown = [a for a in arms if a not in known]
    if unknown or not arms:
        raise argparse.ArgumentTypeError(
            f"unknown arm(s) {', '.join(unknown) or '(none)'}; arms are {', '.join(known)}"
        )
    return arms


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _open_unit(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {value}")
    return value


def _judges(text: str) -> int:
    value = int(text)
    if not 0 <= value <= MAX_JUDGES:
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_JUDGES}, got {value}")
    return value


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", choices=PROVIDERS, help="model provider (default: local)")
    parser.add_argument("--model", help="model name for every role of --provider")
    for role in ROLE_SLOTS:
        parser.add_argument(
            f"--{role}",
            dest=f"role_{role}",
            metavar="PROVIDER:MODEL",
            help=f"the {role} model, e.g. anthropic:claude-opus-5-5 (see `debatebot models`)",
        )


def _version() -> str:
    """The installed package's version (a source checkout run without installing says so)."""
    try:
        return metadata.version("debatebot")
    except metadata.PackageNotFoundError:
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="debatebot", description="Structured multi-agent debates on contested decisions."
    )
    parser.add_argument("--version", action="version", version=f"debatebot {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_manage_commands(commands, duration=_duration, team_option=_team_option)

    run = commands.add_parser("run", help="run one debate in the terminal")
    run.add_argument(
        "question",
        nargs="?",
        help="the decision to debate, e.g. 'Should we adopt ADR-42?'; '-' reads it from stdin",
    )
    run.add_argument(
        "--question-file",
        metavar="FILE",
        help="read the question from FILE (for one longer than a command line takes)",
    )
    run.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="FILE",
        help="a document the debate may cite (repeatable; '-' reads stdin)",
    )
    run.add_argument(
        "--rounds",
        type=int,
        help="maximum rounds (by protocol, its default and most: "
        + ", ".join(f"{d.name} {d.default_rounds}/{d.max_rounds}" for d in PROTOCOLS.values())
        + ")",
    )
    run.add_argument(
        "--protocol",
        choices=protocol_names(),
        default=DEFAULT_PROTOCOL,
        help=" ".join(f"{d.name}: {d.labels.description}" for d in PROTOCOLS.values()),
    )
    run.add_argument(
        "--for",
        dest="stance_for",
        action="append",
        default=[],
        metavar="STANCE",
        help="stances protocol: a debater arguing this stance (repeatable)",
    )
    run.add_argument(
        "--against",
        dest="stance_against",
        action="append",
        default=[],
        metavar="STANCE",
        help="stances protocol: a debater arguing against, with this stance (repeatable)",
    )
    run.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a protocol option, e.g. threshold=2, aggregation=weighted, seed=7 (repeatable)",
    )
    _model_options(run)
    run.add_argument("--budget", type=float, metavar="USD", help="cost ceiling in USD")
    run.add_argument(
        "--judges",
        type=_judges,
        metavar="N",
        help=f"independent judges who judge the record again, blind to the verdict (0 to"
        f" {MAX_JUDGES}; default DEBATEBOT_JUDGES, 1); 0 leaves the confidence unverified",
    )
    run.add_argument(
        "--route",
        action="store_true",
        help="panel protocol: a fast model (the framing model) answers first; when it is sure,"
        " no panel is convened",
    )
    run.add_argument(
        "--json",
        metavar="OUT",
        help="write the debate's export to OUT, as `debatebot export ID` writes it (`debatebot"
        " audit verify-export OUT` checks it)",
    )
    run.set_defaults(handler="run:run", is_async=True)

    models = commands.add_parser(
        "models", help="list each role's model, its price and whether its key is present"
    )
    _model_options(models)
    models.set_defaults(handler="models:models", is_async=False)

    worker = commands.add_parser("worker", help="run debate workers against the database")
    worker.add_argument(
        "--concurrency",
        type=_positive,
        help="debates run at once (default: DEBATEBOT_WORKER_CONCURRENCY, 16)",
    )
    worker.add_argument("--name", default=f"worker:{os.getpid()}", help="worker id prefix")
    worker.add_argument(
        "--metrics-port",
        type=_positive,
        help="serve Prometheus /metrics on this port (default: DEBATEBOT_METRICS_PORT, none)",
    )
    worker.add_argument(
        "--exit-when-idle", action="store_true", help="stop once no debate is waiting"
    )
    worker.set_defaults(handler="processes:worker", is_async=True)

    serve_cmd = commands.add_parser(
        "serve", help="run the Slack bot (Socket Mode with an app token, else HTTP)"
    )
    serve_cmd.set_defaults(handler="processes:serve", is_async=True)

    web = commands.add_parser(
        "web", help="the playground page and HTTP API (http://127.0.0.1:8088 by default)"
    )
    web.add_argument("--port", type=_positive, help="default: DEBATEBOT_WEB_PORT, 8088")
    web.add_argument("--host", help="default: DEBATEBOT_WEB_HOST, 127.0.0.1")
    web.add_argument(
        "--no-worker", action="store_true", help="leave the debates to `worker` or `serve`"
    )
    web.set_defaults(handler="web:web", is_async=True)

    mcp = commands.add_parser("mcp", help="serve MCP over stdio, for coding agents")
    mcp.add_argument(
        "--allow-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory start_debate may read context files from (repeatable)",
    )
    mcp.add_argument(
        "--no-run", action="store_true", help="leave admitted debates to `debatebot worker`"
    )
    mcp.set_defaults(handler="mcp:mcp", is_async=True)

    db = commands.add_parser("db", help="database schema")
    db.add_argument("action", choices=("upgrade",))
    db.set_defaults(handler="database:database", is_async=False)

    audit = commands.add_parser(
        "audit",
        help="verify debates' audit chains, seals and signatures (or an exported file); sign"
        " seals made before DEBATEBOT_AUDIT_KEY was set; reseal signed v2 seals as v3, which"
        " cover the workspace",
    )
    audit.add_argument("action", choices=("verify", "verify-export", "sign", "reseal"))
    audit.add_argument(
        "target",
        nargs="?",
        metavar="DEBATE_ID|FILE",
        help="a debate id (verify, sign, reseal: every debate when left out), or an export file",
    )
    _team_option(audit)
    audit.add_argument(
        "--keys",
        metavar="KEYS.json",
        help="verify-export: the public keys file the export's receipt is checked with"
        " (default: this deployment's, `debatebot keys list --public --json`)",
    )
    audit.set_defaults(handler="audit:audit", is_async=False)

    keys = commands.add_parser(
        "keys",
        help="the keys that sign decision receipts: make one (new), list them (--public --json"
        " prints the public keys file auditors verify with), rotate (a new key signs, the others"
        " retire), retire one",
    )
    keys.add_argument("action", choices=("new", "list", "rotate", "retire"))
    keys.add_argument("key_id", nargs="?", metavar="KEY_ID", help="retire: the key to retire")
    keys.add_argument("--public", action="store_true", help="list: public information only")
    keys.add_argument("--json", action="store_true", help="list: print the public keys file")
    keys.set_defaults(handler="keys:keys", is_async=False)

    export = commands.add_parser(
        "export", help="export a whole debate record (json, md), or its signed receipt alone"
    )
    export.add_argument("debate_id", type=int)
    export.add_argument("--format", choices=("json", "md", "receipt"), default="json")
    export.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    _team_option(export)
    export.set_defaults(handler="audit:export", is_async=False)

    workspace = commands.add_parser(
        "workspace",
        help="the installed workspaces and whether Slack takes each one's bot token (list), or"
        " one workspace's records: count them (list TEAM_ID), or delete them (each debate"
        " archived and verified first, as retention does); rekey re-encrypts every stored"
        " Slack token with the first key of DEBATEBOT_TOKEN_ENCRYPTION_KEY",
    )
    workspace.add_argument("action", choices=("list", "delete", "rekey"))
    workspace.add_argument(
        "team",
        metavar="TEAM_ID",
        nargs="?",
        help="the workspace's Slack team id (T…); list without it lists every install",
    )
    workspace.add_argument(
        "--archive", metavar="DIR", help="delete: where each debate's export is written first"
    )
    workspace.set_defaults(handler="workspaces:workspace", is_async=False)

    stats = commands.add_parser(
        "stats",
        help="outcomes, escalations, confidence, critic strength, tokens, cost, latency,"
        " reviews and feedback, from the database",
    )
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    stats.add_argument(
        "--since", type=_duration, help="only debates started this long ago or later: 30d, 12h"
    )
    stats.add_argument("--channel", help="only debates of this channel id (C…)")
    _team_option(stats)
    stats.set_defaults(handler="stats:stats", is_async=False)

    calibration = commands.add_parser(
        "calibration",
        help="how well the confidence predicted reviewers' decisions (Brier, ECE, AUROC, the"
        " escalation threshold, a reliability diagram), fitted weights to adopt, eval labels",
    )
    calibration.add_argument(
        "action",
        nargs="?",
        default="show",
        choices=("show", "adopt", "import-eval"),
        help="show (default): the figures, the PNG and proposed weights; adopt VERSION: make a"
        " proposed version score new verdicts; import-eval DIR|FILE: an eval's results as"
        " labels",
    )
    calibration.add_argument(
        "target",
        nargs="?",
        metavar="VERSION|PATH",
        help="adopt: a version `calibration` proposed (fit-…) or the defaults' (default-1);"
        " import-eval: an eval's --out folder or its results.jsonl",
    )
    calibration.add_argument(
        "--team",
        metavar="TEAM_ID",
        help="show: only this workspace's labels (its Slack team id, T…), every workspace's when"
        " left out; adopt and import-eval: the workspace the adoption or the labels belong to,"
        " when left out the deployment's own (an adoption of its own scores every workspace"
        " that has made none since)",
    )
    calibration.add_argument(
        "--force",
        action="store_true",
        help="import-eval: import the labels of results from the fake provider, or that record"
        " no provider, too (they are set aside otherwise: fake verdicts say nothing about the"
        " confidence)",
    )
    calibration.add_argument(
        "--png",
        default="calibration.png",
        metavar="FILE",
        help="where the reliability diagram goes (default: calibration.png)",
    )
    calibration.add_argument(
        "--alpha",
        type=_open_unit,
        help="the risk the guaranteed thresholds allow (default DEBATEBOT_CALIBRATION_ALPHA)",
    )
    calibration.add_argument(
        "--delta",
        type=_open_unit,
        help="the chance a guarantee fails over the labels (default DEBATEBOT_CALIBRATION_DELTA)",
    )
    calibration.add_argument(
        "--threshold",
        choices=[source.value for source in ADOPTABLE],
        default=ThresholdSource.FIXED.value,
        help="adopt: the escalation threshold the workspace adopts with the version: guaranteed"
        " (its guaranteed threshold), recommended (the labels' recommended one) or fixed"
        " (default: DEBATEBOT_ESCALATION_THRESHOLD); a channel's own threshold still wins",
    )
    calibration.set_defaults(handler="calibration:calibration", is_async=False)

    evaluation = commands.add_parser(
        "eval",
        help="compare the debate protocols with a single answer, a majority vote and best-of-n"
        " on cases with planted flaws, at the same budget",
    )
    evaluation.add_argument(
        "--cases", required=True, metavar="FILE.jsonl", help="decision cases (examples/README.md)"
    )
    evaluation.add_argument(
        "--arms",
        type=_arms,
        default=list(all_arms()),
        help=f"comma-separated, of {','.join(all_arms())} (default: all)",
    )
    _model_options(evaluation)
    evaluation.add_argument("--concurrency", type=_positive, default=2, help="cases at once")
    evaluation.add_argument(
        "--out", default="eval-out", metavar="DIR", help="results, report and chart (resumable)"
    )
    evaluation.add_argument(
        "--max-cost", type=float, metavar="USD", help="stop before the spend would pass this"
    )
    evaluation.add_argument(
        "--yes", action="store_true", help="run on hosted providers without asking (paid)"
    )
    evaluation.add_argument(
        "--vote-k", type=_positive, help="samples of vote and best_of_n (default: matched tokens)"
    )
    evaluation.add_argument(
        "--no-controls", action="store_true", help="skip the clean control documents"
    )
    evaluation.add_argument("--limit", type=_positive, help="only the first N cases")
    evaluation.set_defaults(handler="evaluate:evaluate", is_async=True)

    prompts = commands.add_parser("prompts", help="pin or verify the prompt files")
    prompts.add_argument("action", choices=("lock", "verify"))
    prompts.add_argument("--dir", help="prompt directory (default: the shipped prompts/)")
    prompts.set_defaults(handler="prompt_lock:lock_prompts", is_async=False)

    settings = commands.add_parser(
        "settings", help="every setting with its variable, default and meaning"
    )
    settings.add_argument(
        "--markdown",
        action="store_true",
        help="as docs/configuration.md: debatebot settings --markdown > docs/configuration.md",
    )
    settings.set_defaults(handler="settings_doc:settings", is_async=False)
    return parser
