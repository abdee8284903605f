"""The composition root: the one place that turns settings into working objects.

Nothing here runs at import time: the CLI calls these builders, and tests pass their own fakes
instead. Slack, uvicorn and APScheduler are imported by the functions that build them, so a
command that needs none of them (`run`, `audit`, `--help`) starts without paying for them.
The builders of Slack's side (`build_bot`, `build_worker_runtime`) run inside the event loop:
they make the process's one pooled Slack session, which the runtime closes when it stops.

By what they build: `services` (prompts, providers, code hosts, the spec policy, the store),
`slack_access` (the pooled Slack session, the bot's client or OAuth installs), `work` (the
worker, notifier, delivery loop, scheduled jobs and `debatebot worker`'s runtime), `surfaces`
(each workspace's use cases) and `slack_app` (`build_bot`: what `debatebot serve` runs).
"""

from bot.wiring.services import DebateServices, build_services, check_configured_models, open_store
from bot.wiring.slack_access import build_installs, slack_client, slack_session
from bot.wiring.slack_app import build_bot
from bot.wiring.work import build_delivery, build_worker, build_worker_runtime

__all__ = [
    "DebateServices",
    "build_bot",
    "build_delivery",
    "build_installs",
    "build_services",
    "build_worker",
    "build_worker_runtime",
    "check_configured_models",
    "open_store",
    "slack_client",
    "slack_session",
]
