"""Each workspace's `Surface` (bot.slack.surface): the use cases Slack's listeners reach (its
intake, debate starts, reviews, App Home, channel settings), built the first time a request of
that workspace arrives, on the client Bolt authorized for the request (OAuth installs) or the
bot's. It imports the Slack surface, so only `build_bot` imports it, once it runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import Engine

from bot.intake.deployment import deployment_intake
from bot.intake.intake import Intake
from bot.jobs.notifier import DebateNotifier
from bot.jobs.pr_comments import PullRequestComments
from bot.metrics import Metrics
from bot.outbound import Outbound
from bot.receipting import receipt_issuer
from bot.settings import Settings
from bot.slack.admission import Reach, SlackDoorChecks
from bot.slack.after_ack import AfterAck
from bot.slack.channel_config import ChannelConfig
from bot.slack.held import HeldEvents
from bot.slack.home import AppHome
from bot.slack.reviews import Reviews
from bot.slack.starts import DebateStarts
from bot.slack.surface import Surface
from bot.slackweb.files import Uploads
from bot.slackweb.people import SlackDirectory
from bot.slackweb.poster import SlackPoster
from bot.slackweb.token import TokenGate
from bot.store.channels import ChannelDefaults
from bot.store.tenancy import Workspace
from bot.wiring.services import DebateServices
from engine.protocols import protocol_names


@dataclass
class WorkspaceSurfaces:
    """What every workspace's surface shares: the process's store, services, Slack session,
    delivery loop, notifier and after-ack work; `build` makes one workspace's."""

    settings: Settings
    services: DebateServices
    engine: Engine
    metrics: Metrics
    http: aiohttp.ClientSession
    client: AsyncWebClient
    """The bot's client (with OAuth installs the delivery loop's, acting per workspace)."""
    directory: SlackDirectory
    poster: SlackPoster
    notifier: DebateNotifier
    gate: TokenGate | None
    per_workspace: bool
    """OAuth installs: each workspace's token, each refused alone."""
    wake: Callable[[], None]
    after_ack: AfterAck
    held: HeldEvents

    def build(self, workspace: Workspace, request_client: AsyncWebClient | None) -> Surface:
        """The use cases of one workspace, on its own token's client (OAuth installs: the one
        Bolt authorized for the request) or the bot's."""
        settings, engine = self.settings, self.engine
        web = request_client or self.client
        people = self.directory if request_client is None else SlackDirectory(web)
        intake = build_intake(
            settings,
            self.services,
            engine,
            workspace=workspace,
            reach=people,
            wake=self.wake,
            gate=self.gate,
            tokens_per_workspace=self.per_workspace,
        )
        reviews = Reviews(
            engine=engine,
            intake=intake,
            notifier=self.notifier,
            directory=people,
            allow_self_review=settings.allow_self_review,
            metrics=self.metrics,
            after_review=PullRequestComments(engine, self.services.hosts).after_review,
            workspace=workspace,
            receipts=receipt_issuer(settings, self.services.registry),
        )
        return Surface(
            engine=engine,
            poster=(
                self.poster
                if request_client is None
                else SlackPoster(web, interval_s=settings.post_interval_s)
            ),
            directory=people,
            starts=DebateStarts(
                engine=engine,
                intake=intake,
                client=web,
                directory=people,
                hosts=self.services.hosts,
                uploads=Uploads(
                    files_url=settings.slack_files_url,
                    timeout_s=settings.slack_timeout_s,
                    http=Outbound(timeout_s=settings.slack_timeout_s, session=self.http),
                ),
                workspace=workspace,
            ),
            reviews=reviews,
            home=AppHome(
                engine=engine,
                directory=people,
                reviews=reviews,
                settings=settings,
                workspace=workspace,
            ),
            channels=ChannelConfig(
                engine=engine,
                directory=people,
                workspace=workspace,
                defaults=ChannelDefaults(
                    rounds=settings.rounds, threshold=settings.escalation_threshold
                ),
            ),
            protocols=protocol_names(),
            workspace=workspace,
            slack_http=self.http,
            after_ack=self.after_ack,
            held=self.held,
        )


def build_intake(
    settings: Settings,
    services: DebateServices,
    engine: Engine,
    *,
    workspace: Workspace,
    reach: Reach | None = None,
    wake: Callable[[], None] = lambda: None,
    gate: TokenGate | None = None,
    tokens_per_workspace: bool = False,
) -> Intake:
    """The one intake, with the deployment's limits, caps and review channel; with `gate`, it
    refuses new debates while Slack refuses the bot token, and with `tokens_per_workspace`
    (OAuth installs) while the store says Slack refuses the workspace's."""
    checks = SlackDoorChecks(
        engine=engine,
        workspace=workspace,
        reach=reach,
        gate=gate,
        tokens_per_workspace=tokens_per_workspace,
    )
    return deployment_intake(
        settings, services.policy, engine, workspace=workspace, wake=wake, checks=checks
    )
