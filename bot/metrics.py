"""Prometheus metrics of a `serve` or `worker` process (`/metrics`).

Counters and histograms follow what the process does (turns, endings, reviews, Slack errors);
the queue gauges (and the count of workspaces whose bot token Slack refuses) are refreshed by the
queue-depth job, so a scrape never waits on the database.
Each runtime owns a registry of its own: two runtimes in one process (tests) never share counts.
`debatebot stats` computes the same figures from the database, over any period.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.events import DebateEvent, TurnFinished
from engine.models import DebateResult, Role, TurnRecord

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

LATENCY_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320)
TURNAROUND_BUCKETS = tuple(h * 3600 for h in (0.25, 1, 4, 8, 24, 48, 96, 168))
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """Every metric debatebot exports, on its own registry."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry: CollectorRegistry = CollectorRegistry()
        r = self.registry
        # Every turn counts into five labelled series; `labels()` validates and locks on each
        # call, so the children a turn needs are looked up once per model and role.
        self._latency_by_model: dict[tuple[str, str], Any] = {}
        self._by_role: dict[Role, tuple[Any, Any, Any, Any]] = {}
        self.debates = Counter(
            "debatebot_debates",
            "Debates ended, by protocol and status",
            ["protocol", "status"],
            registry=r,
        )
        self.turn_latency = Histogram(
            "debatebot_turn_latency_seconds",
            "Model time of one turn (re-asks included), by provider and model",
            ["provider", "model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "debatebot_tokens",
            "Tokens by role and kind (input, cached_input, output)",
            ["role", "kind"],
            registry=r,
        )
        self.cost = Counter(
            "debatebot_cost_usd", "Model spend by role, in USD", ["role"], registry=r
        )
        self.challenge = Histogram(
            "debatebot_critic_challenge_strength",
            "The critic's own rating of its challenge, 1 (weak) to 10",
            buckets=tuple(range(1, 11)),
            registry=r,
        )
        self.verdicts = Counter(
            "debatebot_verdicts", "Verdicts by confidence level", ["level"], registry=r
        )
        self.escalations = Counter(
            "debatebot_escalations", "Verdicts sent to human review", registry=r
        )
        self.review_turnaround = Histogram(
            "debatebot_review_turnaround_seconds",
            "From a review request to its decision",
            buckets=TURNAROUND_BUCKETS,
            registry=r,
        )
        self.slack_errors = Counter(
            "debatebot_slack_api_errors",
            "Failed Slack Web API calls by method and code",
            ["method", "code"],
            registry=r,
        )
        self.session_refusals = Counter(
            "debatebot_agent_session_refusals",
            "Agent session statuses Slack refused (agents.sessions.setStatus), by status and"
            " code: not_authorized and unknown_method fall back to assistant.threads.setStatus",
            ["status", "code"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "debatebot_queue_depth",
            "Debates waiting for a worker (queued or lease expired)",
            registry=r,
        )
        self.queue_oldest = Gauge(
            "debatebot_queue_oldest_wait_seconds",
            "How long the longest-waiting debate has waited",
            registry=r,
        )
        self.installs_refused = Gauge(
            "debatebot_installs_token_refused",
            "OAuth installs whose bot token Slack refuses (an org-wide install counts once and"
            " holds every workspace of its org without one of its own): their workspaces'"
            " deliveries and debates wait until it is taken again",
            registry=r,
        )
        self.lease_losses = Counter(
            "debatebot_lease_losses",
            "Debates a worker stopped because another took its lease",
            registry=r,
        )
        self.jobs = Counter(
            "debatebot_scheduled_jobs",
            "Scheduled job runs by job and outcome",
            ["job", "outcome"],
            registry=r,
        )

    async def observe(self, event: DebateEvent) -> None:
        """An event sink: turns this process paid for (replayed ones were counted when run)."""
        if isinstance(event, TurnFinished) and not event.replayed:
            self.turn(event.turn)

    def turn(self, turn: TurnRecord) -> None:
        latency = self._latency_by_model.get((turn.provider, turn.model))
        if latency is None:
            latency = self.turn_latency.labels(turn.provider, turn.model)
            self._latency_by_model[(turn.provider, turn.model)] = latency
        latency.observe(turn.latency_s)
        counters = self._by_role.get(turn.role)
        if counters is None:
            role = turn.role.value
            counters = (
                self.tokens.labels(role, "input"),
                self.tokens.labels(role, "cached_input"),
                self.tokens.labels(role, "output"),
                self.cost.labels(role),
            )
            self._by_role[turn.role] = counters
        usage = turn.usage
        counters[0].inc(usage.input_tokens)
        counters[1].inc(usage.cached_input_tokens)
        counters[2].inc(usage.output_tokens)
        counters[3].inc(turn.cost_usd)
        strength = (turn.parsed or {}).get("challenge_strength")
        if turn.role == Role.CRITIC and isinstance(strength, int | float):
            self.challenge.observe(strength)

    def debate_ended(self, result: DebateResult) -> None:
        verdict = result.verdict
        self.debates.labels(result.spec.protocol, verdict.status.value).inc()
        self.verdicts.labels(verdict.level.value).inc()
        if verdict.escalate:
            self.escalations.inc()

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)
