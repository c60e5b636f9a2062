"""The emulator's Mistral and OpenRouter paths as the services behave
(metis/testing/emulator/formats/chat_services.py): a stream carries its usage whatever
``stream_options`` says (Mistral's on the chunk with the ``finish_reason``, OpenRouter's in a
last chunk of its own), and Mistral issues and takes back only tool call ids of exactly 9 of
``[a-zA-Z0-9]``; OpenAI's path is as before."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, CanonicalRequest, Message, ToolDefinition, build_adapter
from metis.model import MessageComplete, ToolResultBlock, ToolUseBlock
from metis.testing.emulator import Emulator, text, tools

MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
WEATHER = ToolDefinition(
    name="weather",
    description="Current weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    emulator = Emulator(model=[tools(("weather", {"city": "Oslo"}))] * 4, models="any")
    with httpx.Client(transport=emulator.transport(), base_url="http://emulator") as client:
        yield client


def chunks(response: httpx.Response) -> list[dict[str, Any]]:
    lines = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def streamed(http: httpx.Client, path: str, model: str) -> list[dict[str, Any]]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    response = http.post(path, json=body, headers={"authorization": "Bearer k"})
    assert response.status_code == 200, response.text
    return chunks(response)


def test_mistral_streams_its_usage_on_the_chunk_with_the_finish_reason(
    http: httpx.Client,
) -> None:
    got = streamed(http, "/v1/chat/completions", "mistral-large-latest")
    last = got[-1]
    assert last["choices"][0]["finish_reason"] == "tool_calls"
    assert last["usage"]["prompt_tokens"] > 0 and last["usage"]["completion_tokens"] > 0
    assert all("usage" not in chunk for chunk in got[:-1])


def test_openrouter_streams_a_usage_chunk_without_being_asked(http: httpx.Client) -> None:
    got = streamed(http, "/api/v1/chat/completions", "openai/gpt-4o")
    assert got[-1]["choices"] == [] and got[-1]["usage"]["prompt_tokens"] > 0


def test_openai_streams_no_usage_unless_asked(http: httpx.Client) -> None:
    got = streamed(http, "/v1/chat/completions", "gpt-4o")
    assert all(chunk.get("usage") is None for chunk in got) and got[-1]["choices"]


def test_mistral_issues_tool_call_ids_of_nine_letters_and_digits(http: httpx.Client) -> None:
    body = {"model": "mistral-large-latest", "messages": [{"role": "user", "content": "hi"}]}
    reply = http.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})
    [call] = reply.json()["choices"][0]["message"]["tool_calls"]
    assert MISTRAL_ID.fullmatch(call["id"])
    other = http.post(
        "/v1/chat/completions",
        json={**body, "model": "gpt-4o"},
        headers={"authorization": "Bearer k"},
    )
    assert other.json()["choices"][0]["message"]["tool_calls"][0]["id"].startswith("call_")


def answered(tool_id: Any, model: str) -> dict[str, Any]:
    call = {"id": tool_id, "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    return {
        "model": model,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": tool_id, "content": "sunny"},
        ],
    }


@pytest.mark.parametrize("tool_id", ["call_abc123", "abc12345", "abc123456x", "abc-12345", 7])
def test_mistral_refuses_a_tool_call_id_that_is_not_nine_letters_and_digits(
    http: httpx.Client, tool_id: Any
) -> None:
    auth = {"authorization": "Bearer k"}
    refused = http.post(
        "/v1/chat/completions", json=answered(tool_id, "mistral-large-latest"), headers=auth
    )
    assert refused.status_code == 400
    said = f"Tool call id was {tool_id} but must be a-z, A-Z, 0-9, with a length of 9."
    assert refused.json()["error"]["message"] == said
    if isinstance(tool_id, str):  # OpenAI's path takes any string
        taken = http.post("/v1/chat/completions", json=answered(tool_id, "gpt-4o"), headers=auth)
        assert taken.status_code == 200, taken.text
    nine = http.post(
        "/v1/chat/completions", json=answered("aB3xK9mP2", "mistral-large-latest"), headers=auth
    )
    assert nine.status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stack", "model"),
    [("mistral", "mistral:mistral-large-latest"), ("openrouter", "openrouter:openai/gpt-4o")],
)
async def test_metis_reads_the_usage_the_service_sent_and_answers_its_tool_calls(
    stack: str, model: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Over the stacks, the usage is the service's (never estimated, no log saying it was),
    and a conversation with a tool call goes on: the ids sent back are ones Mistral takes."""
    emulator = Emulator(model=[tools(("weather", {"city": "Oslo"})), text("Sunny.")], models="any")
    config = AdapterConfig(api_key="k", max_retries=0, base_url=emulator.url)
    config = config.model_copy(update={"http_client": emulator.client()})
    history = [Message.user("Weather in Oslo?")]
    async with build_adapter(stack, config) as adapter:
        with caplog.at_level(logging.DEBUG, logger="metis"):
            request = CanonicalRequest(
                model=model, messages=history, tools=[WEATHER], max_output_tokens=200
            )
            events = [event async for event in adapter.stream(request)]
        final = events[-1]
        assert isinstance(final, MessageComplete)
        assert final.usage.input_tokens > 0 and not final.usage.estimated
        assert not [r for r in caplog.records if "estimat" in r.getMessage().lower()]
        [call] = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
        history += [
            Message.assistant(*final.final_content),
            Message.tool(ToolResultBlock(tool_use_id=call.id, content="sunny")),
        ]
        request = CanonicalRequest(
            model=model, messages=history, tools=[WEATHER], max_output_tokens=200
        )
        await adapter.complete(request)
    assert [r.status for r in emulator.requests] == [200, 200]
