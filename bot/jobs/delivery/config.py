"""How the delivery loop paces itself: polling, claims, backoff, and the token probes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DeliveryConfig:
    poll_s: float = 1.0
    claim_s: float = 30.0
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    status_interval_s: float = 2.0
    """Updates of one debate go at most this often: a status per turn is coalesced to the
    newest, and the channel's write budget (one a second) stays free for the rounds."""
    stream_interval_s: float = 1.0
    """A debate's stream is written at most this often: the plan's versions in between are
    coalesced into one append, within the channel's write budget."""
    per_workspace: bool = False
    """OAuth installs: a refused token holds only its workspace's messages (each has its own
    token); with one workspace's token from the environment, it pauses all delivery."""
    token_probe_s: float = 2.0
    token_probe_max_s: float = 15.0
    """While Slack refuses the bot token (with OAuth installs, a workspace's), `auth.test` is
    asked after `token_probe_s`, then twice as long each time up to `token_probe_max_s`."""
