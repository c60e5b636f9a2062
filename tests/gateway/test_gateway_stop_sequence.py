"""Which stop sequence ended a reply, from the provider to the canonical reply and back out of
the gateway's Messages API (docs/contract.md §3): the official anthropic SDK asks with
``stop_sequences`` and reads ``stop_sequence``, streamed and not, over a model whose provider
says which (Anthropic; Bedrock, asked through ``additionalModelResponseFieldPaths``) and one
whose provider does not (OpenAI Chat)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.testing.emulator import Emulator

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")

SAID = [{"role": "user", "content": "Hi"}]  # the emulator answers "You said: Hi"
STOPS = ["Hi", "said"]


@pytest.mark.parametrize("model", ["sonnet", "haiku"])
def test_the_matched_stop_sequence_comes_back_streamed_and_not(model: str, claude: Any) -> None:
    message = claude.messages.create(
        model=model, max_tokens=200, messages=SAID, stop_sequences=STOPS
    )
    assert [b.text for b in message.content] == ["You "]
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "said")
    with claude.messages.stream(
        model=model, max_tokens=200, messages=SAID, stop_sequences=STOPS
    ) as stream:
        final = stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "said")


def test_bedrock_is_asked_for_the_sequence_only_with_stop_sequences(
    claude: Any, emulator: Emulator
) -> None:
    claude.messages.create(model="haiku", max_tokens=200, messages=SAID, stop_sequences=STOPS)
    claude.messages.create(
        model="haiku", max_tokens=200, messages=[{"role": "user", "content": "Yo"}]
    )
    bodies = [json.loads(r.body) for r in emulator.requests if "/converse" in r.path]
    asked = {
        b["messages"][-1]["content"][0]["text"]: b.get("additionalModelResponseFieldPaths")
        for b in bodies
    }
    assert asked["Hi"] == ["/stop_sequence"] and asked["Yo"] is None


def test_a_provider_that_does_not_say_which_leaves_it_null(claude: Any) -> None:
    message = claude.messages.create(
        model="gpt", max_tokens=200, messages=SAID, stop_sequences=STOPS
    )
    assert [b.text for b in message.content] == ["You "]
    assert message.stop_sequence is None
    plain = claude.messages.create(model="sonnet", max_tokens=200, messages=SAID)
    assert (plain.stop_reason, plain.stop_sequence) == ("end_turn", None)


def test_chats_stop_as_a_string_stops_a_gemini_model(oai: Any, emulator: Emulator) -> None:
    """Chat's ``stop`` given as one string (not a list) reaches Gemini as its
    ``stopSequences``, and the emulator's Gemini stops there, as Gemini does (it read none)."""
    reply = oai.chat.completions.create(model="flash", messages=SAID, stop="said")
    assert emulator.bodies("gemini")[-1]["generationConfig"]["stopSequences"] == ["said"]
    assert reply.choices[0].message.content == "You "
    assert reply.choices[0].finish_reason == "stop"
