"""The acknowledgement's wrapper asks Bolt for its documented `args` and calls the listener with
the arguments the listener names: no signature is faked for Bolt to read."""

from __future__ import annotations

import pytest
from slack_bolt.util.utils import get_arg_names_of_callable

from bot.slack.acknowledgement import acknowledging
from bot.slack.listeners.commands import on_debate_command
from bot.slack.surface import Surface


def test_bolt_reads_the_wrappers_own_signature() -> None:
    """What Bolt reads (`get_arg_names_of_callable` unwraps first) is the wrapper's real
    parameter, under the listener's name for Bolt's logs."""
    wrapped = acknowledging(on_debate_command)
    assert get_arg_names_of_callable(wrapped) == ["args"]
    assert not hasattr(wrapped, "__wrapped__")
    assert wrapped.__name__ == "on_debate_command"


def test_a_parameter_no_one_provides_is_refused_when_registered() -> None:
    async def on_typo(ack: object, surfce: Surface) -> None:
        """Names `surfce`, which neither Bolt nor the middleware provides."""

    with pytest.raises(TypeError, match="on_typo takes surfce, which neither Bolt nor the"):
        acknowledging(on_typo)
