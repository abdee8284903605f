"""`/debate help`: the options and which protocol suits which question."""

from __future__ import annotations

from collections.abc import Sequence

HELP = """*`/debate QUESTION [options]`* runs a structured debate in a thread and posts a verdict.
Options:
\u2022 `--protocol NAME` debate protocol (available: {protocols})
\u2022 `--rounds N` at most N rounds (adversarial: 1 to 3)
\u2022 `--for "STANCE"` / `--against "STANCE"` debater stances (stances protocol)
\u2022 `--budget USD` cost ceiling for this debate, e.g. `--budget 0.50`
\u2022 `--route` let a fast model answer first (panel protocol)
\u2022 `--review-in #channel` post the review request there instead of in the thread
\u2022 `--adr URL` debate the ADR a GitHub or GitLab link points to (a file or a pull request)
Other forms:
\u2022 `/debate` alone opens a form
\u2022 `/debate config` opens this channel's settings; `/debate config show`;\
 `/debate config set threshold 0.7` (owners and admins)
\u2022 `/debate config set monthly_budget 50`, `review_sla 24`, `digest 09:00`,\
 `timezone Europe/Berlin`: spending cap, review expiry, daily digest (`off` turns one off)
\u2022 React with :{reaction}: on a message to debate its thread
\u2022 In channels watching ADRs, a new top-level ADR post starts a debate in its thread
\u2022 In the assistant (the debatebot icon at the top of Slack), paste a decision or an ADR"""


PROTOCOL_ADVICE = "\n".join(
    [
        "*Which protocol should I use?*",
        "\u2022 `adversarial` (the default): a proposal against a critic that must disagree,"
        " judged by a moderator. For a yes/no decision such as an ADR.",
        "\u2022 `stances`: debaters defend stances you name (`--for`, `--against`), one judge"
        " decides. For choosing between known options.",
        "\u2022 `consensus`: three debaters propose, critique and revise, then vote; code counts"
        " the vote. For a team that needs agreement, not a winner.",
        "\u2022 `structured`: numbered PRO and CON arguments, cross-examination, closings, a judge"
        " who scores every argument. For a decision someone must audit argument by argument.",
        "\u2022 `panel`: independent answers from several perspectives, peer critique, measured"
        " convergence. For open questions; add `--route` to let a fast model answer the easy"
        " ones.",
        "Add the protocol to your message, e.g. `--protocol structured`.",
    ]
)


def help_text(*, protocols: Sequence[str], reaction: str) -> str:
    return HELP.format(protocols=", ".join(protocols), reaction=reaction)
