"""`/debate help`: the options and which protocol suits which question, from each protocol's
definition (`engine.protocols`)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.models import DEFAULT_PROTOCOL
from engine.protocols import PROTOCOLS, flagged

HELP = """*`/debate QUESTION [options]`* runs a structured debate in a thread and posts a verdict.
Options:
\u2022 `--protocol NAME` debate protocol (available: {protocols})
\u2022 `--rounds N` at most N rounds ({rounds})
\u2022 `--for "STANCE"` / `--against "STANCE"` debater stances ({stances} protocol)
\u2022 `--budget USD` cost ceiling for this debate, e.g. `--budget 0.50`
\u2022 `--route` let a fast model answer first ({route} protocol)
\u2022 `--review-in #channel` post the review request there instead of in the thread
\u2022 `--adr URL` debate the ADR a GitHub or GitLab link points to (a file or a pull request)
Other forms:
\u2022 `/debate` alone opens a form
\u2022 `/debate cancel 42` stops debate #42 (its requester, the channel's reviewers, admins)
\u2022 `/debate config` opens this channel's settings; `/debate config show`;\
 `/debate config set threshold 0.7` (owners and admins)
\u2022 `/debate config set monthly_budget 50`, `review_sla 24`, `digest 09:00`,\
 `timezone Europe/Berlin`: spending cap, review expiry, daily digest (`off` turns one off)
\u2022 React with :{reaction}: on a message to debate its thread
\u2022 In channels watching ADRs, a new top-level ADR post starts a debate in its thread
\u2022 In the assistant (the debatebot icon at the top of Slack), paste a decision or an ADR"""


def protocol_advice() -> str:
    """Which protocol suits which question: each protocol's description and advice, the default
    marked, and how to ask for one (the first other than the default as the example)."""
    lines = ["*Which protocol should I use?*"]
    for d in PROTOCOLS.values():
        default = " (the default)" if d.name == DEFAULT_PROTOCOL else ""
        lines.append(f"\u2022 `{d.name}`{default}: {d.labels.description} {d.labels.advice}")
    example = next((name for name in PROTOCOLS if name != DEFAULT_PROTOCOL), DEFAULT_PROTOCOL)
    lines.append(f"Add the protocol to your message, e.g. `--protocol {example}`.")
    return "\n".join(lines)


def help_text(*, protocols: Sequence[str], reaction: str) -> str:
    rounds = ", ".join(
        f"{d.name}: 1 to {d.max_rounds}" for d in PROTOCOLS.values() if d.flags.configured_rounds
    )
    return HELP.format(
        protocols=", ".join(protocols),
        reaction=reaction,
        rounds=rounds,
        stances=" or ".join(flagged(lambda flags: flags.takes_stances)),
        route=" or ".join(flagged(lambda flags: flags.takes_route)),
    )
