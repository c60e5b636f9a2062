"""Function calls that open a history reach Gemini after a short user turn (Gemini refuses
them otherwise; metis/wire/schema/gemini_turns.py). OpenAI answered 200 to each history:
0xPlaygrounds/rig's openai chat_history_roundtrip_matrix cassettes and Arize-ai/phoenix's
test_tool_calls open with the assistant's tool calls."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from metis.testing.emulator import Emulator
from metis.wire.schema.gemini_turns import OPENING
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_color", "arguments": "{}"}}
TOOLS = [{"type": "function", "function": {"name": "get_color", "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[httpx.Client, Emulator]]:
    emulator = Emulator()
    headers = {"authorization": f"Bearer {GATEWAY_KEY}"}
    with gateway_url(emulator) as url, httpx.Client(base_url=url, headers=headers) as client:
        yield client, emulator


@pytest.mark.parametrize("system", [[], [{"role": "system", "content": "Be brief."}]])
def test_a_history_opening_with_calls_reaches_gemini_after_a_user_turn(
    served: tuple[httpx.Client, Emulator], system: list[dict[str, str]]
) -> None:
    client, emulator = served
    messages = [
        *system,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "red"},
        {"role": "user", "content": "Which color was returned?"},
    ]
    body = {"model": "flash", "messages": messages, "tools": TOOLS}
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    assert "turn order" in reply.headers["x-metis-dropped"]
    contents = json.loads(emulator.requests[-1].body)["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]  # result and question
    assert contents[0]["parts"] == [{"text": OPENING}]
    assert "functionCall" in contents[1]["parts"][0]


def test_a_history_opening_with_the_user_is_sent_as_it_is(
    served: tuple[httpx.Client, Emulator],
) -> None:
    client, emulator = served
    messages = [
        {"role": "user", "content": "Pick a color."},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "red"},
    ]
    body = {"model": "flash", "messages": messages, "tools": TOOLS}
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200 and "x-metis-dropped" not in reply.headers
    contents = json.loads(emulator.requests[-1].body)["contents"]
    assert contents[0]["parts"] == [{"text": "Pick a color."}] and len(contents) == 3
