"""Prometheus metrics of a `serve` or `worker` process (`/metrics`).

Counters and histograms follow what the process does (turns, endings, reviews, Slack errors);
the queue gauges are refreshed by the queue-depth job, so a scrape never waits on the database.
Each runtime owns a registry of its own: two runtimes in one process (tests) never share counts.
`debatebot stats` computes the same figures from the database, over any period.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
        self.turn_latency.labels(turn.provider, turn.model).observe(turn.latency_s)
        role = turn.role.value
        usage = turn.usage
        self.tokens.labels(role, "input").inc(usage.input_tokens)
        self.tokens.labels(role, "cached_input").inc(usage.cached_input_tokens)
        self.tokens.labels(role, "output").inc(usage.output_tokens)
        self.cost.labels(role).inc(turn.cost_usd)
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
