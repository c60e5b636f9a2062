"""The emulator's Mistral and OpenRouter paths as the services behave
(metis/testing/emulator/formats/chat_services.py): a stream carries its usage whatever
``stream_options`` says (Mistral's on the chunk with the ``finish_reason``, OpenRouter's in a
last chunk of its own), and Mistral issues and takes back only tool call ids of exactly 9 of
``[a-zA-Z0-9]``, on its own path and on OpenRouter's for ``mistralai/`` models; OpenAI's path
is as before."""

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
from metis.pipeline.stores import InMemoryToolIdStore
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


def test_openrouter_holds_a_mistral_model_to_mistrals_tool_call_ids(http: httpx.Client) -> None:
    """OpenRouter passes Mistral's rule through for its models (openclaw/openclaw#57672): the ids
    issued are Mistral's, another one given back is Mistral's 400; other models take any id."""
    auth, path = {"authorization": "Bearer k"}, "/api/v1/chat/completions"
    body = {"model": "mistralai/mistral-large", "messages": [{"role": "user", "content": "hi"}]}
    [call] = http.post(path, json=body, headers=auth).json()["choices"][0]["message"]["tool_calls"]
    assert MISTRAL_ID.fullmatch(call["id"])
    refused = http.post(path, json=answered("call_abc123", "mistralai/mistral-large"), headers=auth)
    assert refused.status_code == 400
    said = "Tool call id was call_abc123 but must be a-z, A-Z, 0-9, with a length of 9."
    assert refused.json()["error"]["message"] == said
    taken = http.post(path, json=answered("call_abc123", "openai/gpt-4o"), headers=auth)
    assert taken.status_code == 200, taken.text
    nine = http.post(path, json=answered("aB3xK9mP2", "mistralai/mistral-large"), headers=auth)
    assert nine.status_code == 200, nine.text


def asked(model: str, history: list[Message]) -> CanonicalRequest:
    return CanonicalRequest(
        model=model, messages=history, tools=[WEATHER], max_output_tokens=200, session_id="s1"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("earlier", ["openrouter:openai/gpt-4o", "anthropic:claude-sonnet-4-5"])
async def test_a_conversation_swapped_to_a_mistral_model_on_openrouter_goes_on(
    earlier: str,
) -> None:
    """Earlier turns with another provider's tool ids (an OpenAI model's on OpenRouter, remembered
    for the session; a Claude's), then ``openrouter:mistralai/mistral-large``: the ids sent are
    ones Mistral takes, and the reply's calls come back with canonical ids."""
    emulator = Emulator(
        model=[tools(("weather", {"city": "Oslo"})), text("Sunny."), tools(("weather", {}))],
        models="any",
    )
    config = AdapterConfig(api_key="k", max_retries=0, base_url=emulator.url)
    config = config.model_copy(update={"http_client": emulator.client()})
    history = [Message.user("Weather in Oslo?")]
    store = InMemoryToolIdStore()
    async with build_adapter(earlier.split(":")[0], config, tool_id_store=store) as first:
        final = await first.complete(asked(earlier, history))
    [call] = [b for b in final.content if isinstance(b, ToolUseBlock)]
    history += [
        Message.assistant(*final.content),
        Message.tool(ToolResultBlock(tool_use_id=call.id, content="sunny")),
    ]
    async with build_adapter("openrouter", config, tool_id_store=store) as adapter:
        model = "openrouter:mistralai/mistral-large"
        reply = await adapter.complete(asked(model, history))
    assert [r.status for r in emulator.requests] == [200, 200]
    sent = emulator.requests[-1].json()["messages"]
    given = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    assert given and all(MISTRAL_ID.fullmatch(i) for i in given)
    assert all(b.id.startswith("tu_") for b in reply.content if isinstance(b, ToolUseBlock))


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
