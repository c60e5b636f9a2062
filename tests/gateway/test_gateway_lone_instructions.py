"""A Chat or Responses request of instructions alone reaches Claude and Gemini with them as its
user message (docs/gateway.md, Projection): OpenAI answered each 200 (pydantic/pydantic-ai's
test_openai_model_without_system_prompt: a system message alone; openai/openai-go's
chat-detailed-usage: a developer message alone; pydantic-ai's
test_openai_responses_runs_with_instructions_only: instructions and an empty user message),
where Anthropic refuses an empty messages list and Gemini empty contents."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

HEADERS = {"authorization": f"Bearer {GATEWAY_KEY}"}
POTATO = "You are a potato."


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[httpx.Client, Emulator]]:
    emulator = Emulator()
    with gateway_url(emulator) as url, httpx.Client(base_url=url, headers=HEADERS) as client:
        yield client, emulator


def _user_text(path: str, sent: dict[str, Any]) -> tuple[str, bool]:
    """The one user turn's text the provider was sent, and whether a system prompt went too."""
    if path == "/v1/messages":
        (turn,) = sent["messages"]
        assert turn["role"] == "user"
        content = turn["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        return text, "system" in sent
    (turn,) = sent["contents"]
    assert turn["role"] == "user"
    return turn["parts"][0]["text"], "systemInstruction" in sent


@pytest.mark.parametrize("model", ["sonnet", "flash"])
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "system", "content": POTATO}]}),
        ("/v1/chat/completions", {"messages": [{"role": "developer", "content": POTATO}]}),
        ("/v1/responses", {"instructions": POTATO, "input": [{"role": "user", "content": ""}]}),
    ],
)
def test_instructions_alone_go_as_the_user_message(
    served: tuple[httpx.Client, Emulator], model: str, path: str, body: dict[str, Any]
) -> None:
    client, emulator = served
    reply = client.post(path, json={"model": model, **body})
    assert reply.status_code == 200, reply.text
    assert "system prompt (sent as the user message" in reply.headers["x-metis-dropped"]
    upstream = emulator.requests[-1]
    text, system_too = _user_text(upstream.path, json.loads(upstream.body))
    assert text == POTATO and not system_too


@pytest.mark.parametrize("model", ["sonnet", "flash"])
def test_an_empty_user_message_alone_is_a_400_naming_why(
    served: tuple[httpx.Client, Emulator], model: str
) -> None:
    client, _ = served
    body = {"model": model, "messages": [{"role": "user", "content": ""}]}
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 400
    assert "a user message has nothing to send" in reply.json()["error"]["message"]


def test_a_conversation_keeps_its_system_prompt(served: tuple[httpx.Client, Emulator]) -> None:
    client, emulator = served
    messages = [{"role": "system", "content": POTATO}, {"role": "user", "content": "Hi"}]
    reply = client.post("/v1/chat/completions", json={"model": "sonnet", "messages": messages})
    assert reply.status_code == 200 and "x-metis-dropped" not in reply.headers
    sent = json.loads(emulator.requests[-1].body)
    assert POTATO in json.dumps(sent["system"]) and len(sent["messages"]) == 1
