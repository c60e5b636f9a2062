"""Where the emulator cuts a reply at the prompt's stop sequences: as a provider generating it
would, at the first place the text so far ends with one of them (the sequence itself left
out, the stop ``stop_sequence`` naming it)."""

from __future__ import annotations

import pytest

from metis.testing.emulator import Prompt, Reply
from metis.testing.emulator.model import measured


def cut(text: str, *stops: str) -> tuple[str, str, str | None]:
    reply = measured(Prompt(model="m", turns=[], stop_sequences=list(stops)), Reply(text=text))
    return reply.text, reply.stop, reply.stop_sequence


@pytest.mark.parametrize(
    ("stops", "expected"),
    [
        (("said",), ("You ", "stop_sequence", "said")),
        (("You",), ("", "stop_sequence", "You")),  # at the very start: nothing is said
        (("é!",), ("Ça va ", "stop_sequence", "é!")),
        (("Hi", "said"), ("You ", "stop_sequence", "said")),  # the one reached first
        # ends first though it starts later: the model has written "You sa" before the
        # whole of "You said: Hi"
        (("You said: Hi", "sa"), ("You ", "stop_sequence", "sa")),
        (("none",), ("You said: Hi", "end_turn", None)),
    ],
)
def test_a_reply_is_cut_where_the_first_stop_sequence_is_complete(
    stops: tuple[str, ...], expected: tuple[str, str, str | None]
) -> None:
    text = "Ça va é!" if stops == ("é!",) else "You said: Hi"
    assert cut(text, *stops) == expected
