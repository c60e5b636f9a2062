"""Server tools beside function tools in one request (issue 22), where the provider allows it.

Gemini: from Gemini 3 on, built-in tools and function declarations go together and the request
asks the model to show its own calls (``toolConfig.includeServerSideToolInvocations``, which the
reply's ``toolCall``/``toolResponse`` parts need: ai.google.dev/gemini-api/docs/tool-combination);
before Gemini 3 the API refuses the mix, so metis refuses it first with a CapabilityError. Vertex
does not take that field ("This field is not supported in Vertex AI": python-genai / js-genai
``ToolConfig``), so the Vertex stack leaves it out.

Claude on Bedrock: AWS runs none of Anthropic's server tools (web search, fetch, code execution),
so they are refused before sending; Anthropic's own tool types that Bedrock takes (tool search,
bash, text editor) go beside the function tools.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import CapabilityError
from metis.model import CanonicalRequest, Message, ToolDefinition
from metis.model.server_tools import ProviderTool, WebFetch, WebSearch
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stacks.loader import load_stack
from metis.wire.codec import get_codec
from tests.helpers import recording_call
from tests.stacks.test_vertex import Peer, valid_credentials

WEATHER = ToolDefinition(
    name="getWeather",
    description="Gets the weather for a requested city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
gemini = get_codec("schema", load_stack("gemini").codec_settings)


def request(model: str, **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=model,
        messages=[Message.user("Weather in the northernmost US city?")],
        max_output_tokens=64,
        **fields,
    )


def test_gemini_3_takes_search_beside_functions_and_shows_its_calls() -> None:
    model = "gemini:gemini-3-flash-preview"
    body = gemini.encode(
        request(model, tools=[WEATHER], server_tools=[WebSearch(), WebFetch()]),
        recording_call("gemini", model),
    )
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "getWeather"
    assert body["tools"][1:] == [{"googleSearch": {}}, {"urlContext": {}}]
    assert body["toolConfig"] == {"includeServerSideToolInvocations": True}
    named = request(
        model,
        tools=[WEATHER],
        server_tools=[WebSearch()],
        tool_choice={"type": "tool", "name": "getWeather"},
    )
    config = gemini.encode(named, recording_call("gemini", model))["toolConfig"]
    assert config == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["getWeather"]},
        "includeServerSideToolInvocations": True,
    }


def test_gemini_3_with_server_tools_alone_asks_for_nothing_more() -> None:
    model = "gemini:gemini-3-pro-preview"
    body = gemini.encode(
        request(model, server_tools=[WebSearch()]), recording_call("gemini", model)
    )
    assert body["tools"] == [{"googleSearch": {}}]
    assert "includeServerSideToolInvocations" not in json.dumps(body)


@pytest.mark.parametrize("model", ["gemini:gemini-2.5-flash", "gemini:gemini-2.0-flash"])
def test_before_gemini_3_the_mix_is_refused_before_sending(model: str) -> None:
    with pytest.raises(CapabilityError, match="beside function tools from Gemini 3 on"):
        gemini.encode(
            request(model, tools=[WEATHER], server_tools=[WebSearch()]),
            recording_call("gemini", model),
        )
    alone = gemini.encode(
        request(model, server_tools=[WebSearch()]), recording_call("gemini", model)
    )
    assert alone["tools"] == [{"googleSearch": {}}]  # without functions it is served


@pytest.mark.anyio
async def test_vertex_sends_the_mix_without_the_field_it_does_not_take() -> None:
    peer = Peer()
    options = {
        "project": "my-project",
        "location": "global",
        "google_credentials": valid_credentials(),
    }
    config = AdapterConfig(http_client=peer.client(), settings=options)
    adapter = build_adapter("vertex", config, tool_id_store=InMemoryToolIdStore())
    model = "vertex:gemini-3-pro-preview"
    await adapter.complete(request(model, tools=[WEATHER], server_tools=[WebSearch()]))
    sent = json.loads(peer.requests[-1].content)
    assert sent["tools"][1:] == [{"googleSearch": {}}]
    assert "includeServerSideToolInvocations" not in json.dumps(sent)
    assert sent["toolConfig"] == {}


BEDROCK_REPLY = {
    "id": "msg_bdrk_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Hi."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 5, "output_tokens": 2},
}


def _bedrock_claude(sent: list[httpx.Request]) -> Any:
    def reply(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=BEDROCK_REPLY)

    config = AdapterConfig(
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(reply)),
        api_key="ABSKkey",
        settings={"region": "us-east-1"},
        max_retries=0,
    )
    return build_adapter("bedrock_anthropic", config, tool_id_store=InMemoryToolIdStore())


@pytest.mark.anyio
async def test_claude_on_bedrock_refuses_anthropic_server_tools_before_sending() -> None:
    sent: list[httpx.Request] = []
    adapter = _bedrock_claude(sent)
    model = "bedrock_anthropic:anthropic.claude-sonnet-4-5-20250929-v1:0"
    with pytest.raises(CapabilityError, match="web_search"):
        await adapter.complete(request(model, tools=[WEATHER], server_tools=[WebSearch()]))
    assert sent == []


@pytest.mark.anyio
async def test_claude_on_bedrock_takes_a_provider_tool_beside_functions() -> None:
    sent: list[httpx.Request] = []
    adapter = _bedrock_claude(sent)
    model = "bedrock_anthropic:anthropic.claude-sonnet-4-5-20250929-v1:0"
    search = ProviderTool(
        dialect="anthropic", type="tool_search_tool_regex_20251119", name="tool_search_tool_regex"
    )
    await adapter.complete(request(model, tools=[WEATHER], server_tools=[search]))
    body = json.loads(sent[-1].content)
    assert [t.get("type", "function") for t in body["tools"]] == [
        "function",
        "tool_search_tool_regex_20251119",
    ]
