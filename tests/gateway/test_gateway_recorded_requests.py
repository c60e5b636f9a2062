"""Requests of the shapes real clients sent (seen in recorded traffic), through the gateway to
the emulator: a request the provider answered is answered, what the routed model can take
reaches it, and the rest is left out and named in ``x-metis-dropped``, never refused."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio
HEADERS = {"x-api-key": GATEWAY_KEY, "anthropic-version": "2023-06-01"}
PICTURE_BY_ID = {"type": "image", "source": {"type": "file", "file_id": "file_0aPictureOfAPlot"}}


async def asked(emulator: Emulator, path: str, body: dict[str, Any]) -> httpx.Response:
    app = create_app(gateway_config(emulator))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as gw:
        return await gw.post(path, json=body, headers=HEADERS)


def messages(model: str, *content: dict[str, Any]) -> dict[str, Any]:
    said = [{"type": "text", "text": "What does the plot show?"}, *content]
    return {"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": said}]}


async def test_an_image_by_file_id_goes_to_claude_as_sent_and_is_refused_elsewhere() -> None:
    """An Anthropic image given by its Files API id (crewAIInc/crewAI's
    test_image_upload_anthropic sends one; Anthropic answered 200): before, the reader
    refused it (400, "expected a base64 or url image source") on every route, and the
    emulator did too. Elsewhere the id names no file: in the turn being sent that is refused
    with what to do, as a document by another provider's file id is (docs/contract.md §9)."""
    emulator = Emulator()
    passed = await asked(emulator, "/v1/messages", messages("sonnet", PICTURE_BY_ID))
    assert passed.status_code == 200, passed.text
    assert emulator.bodies("anthropic")[-1]["messages"][0]["content"][1] == PICTURE_BY_ID
    for model in ("gpt", "flash"):
        other = await asked(emulator, "/v1/messages", messages(model, PICTURE_BY_ID))
        assert other.status_code == 400, other.text
        said = other.json()["error"]["message"]
        assert "an image it cannot read: its file id was issued by anthropic" in said, model
        assert "Files API, or give it inline" in said, model
    async with emulator.client() as direct:
        body = messages("claude-sonnet-4-5", PICTURE_BY_ID)
        reply = await direct.post("http://emulator/v1/messages", json=body, headers=HEADERS)
    assert reply.status_code == 200, reply.text


async def test_minus_one_for_top_p_and_top_k_is_anthropics_unset() -> None:
    """DataDog/dd-trace-js's Anthropic cassettes send ``top_p: -1, top_k: -1`` (the old
    default), which Anthropic answered 200: before, the gateway and the emulator refused
    them as out of range."""
    emulator = Emulator()
    body = {**messages("sonnet"), "temperature": 1, "top_p": -1, "top_k": -1}
    for model in ("sonnet", "gpt", "flash"):
        reply = await asked(emulator, "/v1/messages", {**body, "model": model})
        assert reply.status_code == 200, reply.text
        assert "top_" not in reply.headers.get("x-metis-dropped", ""), model
    assert emulator.bodies("anthropic")[-1]["top_k"] == -1  # passed through as sent
    assert "topP" not in str(emulator.bodies("gemini")[-1])
    out_of_range = await asked(emulator, "/v1/messages", {**body, "top_p": -0.5})
    assert out_of_range.status_code == 400, out_of_range.text
    assert "top_p" in out_of_range.json()["error"]["message"]


def sums_asked(model: str) -> dict[str, Any]:
    call = {
        "id": "call_sum1",
        "type": "function",
        "function": {"name": "calc", "arguments": "7 * 6"},
    }
    calc = {
        "type": "function",
        "function": {"name": "calc", "parameters": {"type": "object", "properties": {}}},
    }
    return {
        "model": model,
        "tools": [calc],
        "messages": [
            {"role": "user", "content": "What is seven times six?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_sum1", "content": "42"},
        ],
    }


async def test_a_calls_arguments_that_are_not_json_are_taken_back() -> None:
    """An assistant's call in a Chat history whose arguments are text, not a JSON object, as a
    model wrote them (tmc/langchaingo's TestOpenAIFunctionsAgentWithHTTPRR sends ``15 * 4``
    back, and OpenAI answered 200): before, the gateway and the emulator refused the history
    ("expected a JSON object"). OpenAI gets them back as they came."""
    emulator = Emulator()
    for model in ("gpt", "sonnet", "flash"):
        reply = await asked(emulator, "/v1/chat/completions", sums_asked(model))
        assert reply.status_code == 200, reply.text
    sent = emulator.bodies("openai")[-1]["messages"][1]["tool_calls"][0]
    assert sent["function"]["arguments"] == "7 * 6"
    assert "42" in str(emulator.bodies("anthropic")[-1]["messages"])


async def test_a_responses_calls_arguments_that_are_not_an_object_are_taken_back() -> None:
    """tidyverse/ellmer's chat-tools-dangling cassette sends a function_call whose arguments
    are ``[]`` (a tool of no arguments, as R writes an empty list), and OpenAI answered 200:
    before, the gateway and the emulator refused it ("expected a JSON object, got list")."""
    emulator = Emulator()
    items = [
        {"role": "user", "content": "What day is it?"},
        {"type": "function_call", "call_id": "c1", "name": "today", "arguments": "[]"},
        {"type": "function_call_output", "call_id": "c1", "output": "Tuesday"},
    ]
    today = {"type": "function", "name": "today", "parameters": {"type": "object"}}
    for model in ("gpt5", "sonnet", "flash"):
        body = {"model": model, "input": items, "tools": [today]}
        reply = await asked(emulator, "/v1/responses", body)
        assert reply.status_code == 200, reply.text
    sent = [i for i in emulator.bodies("openai_responses")[-1]["input"] if "arguments" in i]
    assert sent[0]["arguments"] == "[]"


async def test_a_history_opening_with_the_assistant_goes_to_claude() -> None:
    """A conversation whose first turn is the assistant's (a greeting the app wrote): OpenAI
    and Anthropic both take it (pydantic/pydantic-ai's test_anthropic_model_empty_message_on
    _history, activeagents/activeagent's text_messages_object, 0xPlaygrounds/rig's
    empty_end_turn followup: 200). Before, the library's check before sending refused it for
    Claude ("the first message must use the user role"), so the gateway did on every route
    to an Anthropic model; and an assistant's blank text, as Claude writes one before its
    calls, is not refused either."""
    emulator = Emulator()
    said = [
        {"role": "system", "content": "You run a bakery's front desk."},
        {"role": "assistant", "content": "Hello! What can I bake for you?"},
        {"role": "user", "content": "A loaf of rye, please."},
    ]
    reply = await asked(emulator, "/v1/chat/completions", {"model": "sonnet", "messages": said})
    assert reply.status_code == 200, reply.text
    sent = emulator.bodies("anthropic")[-1]["messages"]
    assert [m["role"] for m in sent] == ["assistant", "user"]


AGE = {"type": "integer", "minimum": 1, "description": "Age in years"}


async def test_a_numbers_limits_reach_claude_as_words() -> None:
    """OpenAI clients' schemas with a number's limits (Chat's response_format and strict
    tools: Mirascope/mirascope's, pydantic/pydantic-ai's and others' cassettes, 79 of the
    recorded requests that OpenAI answered): Anthropic's grammar takes none (vkryukov/req_llm's
    anthropic object_basic fixture: 400 "For 'integer' type, property 'minimum' is not
    supported"), so the limits go to Claude as words of the description."""
    emulator = Emulator()
    schema = {
        "type": "object",
        "properties": {"age": AGE},
        "required": ["age"],
        "additionalProperties": False,
    }
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "person", "strict": True, "schema": schema},
    }
    tool = {
        "type": "function",
        "function": {"name": "record", "strict": True, "parameters": schema},
    }
    said = [{"role": "user", "content": "Jane is 28."}]
    for extra in ({"response_format": fmt}, {"tools": [tool]}):
        body = {"model": "sonnet", "messages": said, **extra}
        reply = await asked(emulator, "/v1/chat/completions", body)
        assert reply.status_code == 200, reply.text
    sent = emulator.bodies("anthropic")
    age = sent[0]["output_config"]["format"]["schema"]["properties"]["age"]
    assert age == {"type": "integer", "description": "Age in years (minimum: 1)"}
    assert sent[1]["tools"][0]["input_schema"]["properties"]["age"] == age
