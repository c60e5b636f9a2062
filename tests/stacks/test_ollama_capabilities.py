"""Ollama: init() takes the model's capabilities from /api/show, and tool schemas are sent
the way the server reads them ($ref inlined, ignored keywords removed with a WARN). The server
is an httpx mock; asyncio and trio."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import CapabilityError
from metis.model.content import Base64ImageSource, ImageBlock, Message, TextBlock
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.stages.edits import schema_cleanup

pytestmark = pytest.mark.anyio

MODEL = "ollama:qwen3:8b"
DONE = {
    "model": "qwen3:8b",
    "created_at": "2026-11-23T10:00:00Z",
    "message": {"role": "assistant", "content": "ok"},
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 10,
    "eval_count": 1,
}
# POST /api/show for qwen3:8b, trimmed (docs/api.md "Show Model Information"; the
# capabilities list since Ollama 0.6).
SHOWN = {
    "details": {"family": "qwen3", "parameter_size": "8.2B"},
    "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960},
    "capabilities": ["completion", "tools", "thinking"],
}


class Server:
    def __init__(self, shown: dict[str, Any]) -> None:
        self.shown = shown
        self.chats: list[dict[str, Any]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/version":
            return httpx.Response(200, json={"version": "0.12.3"})
        if path == "/api/show":
            return httpx.Response(200, json=self.shown)
        self.chats.append(json.loads(request.content))
        return httpx.Response(200, json=DONE)


def adapter(server: Server, **capabilities: Any) -> Any:
    client = httpx.AsyncClient(transport=httpx.MockTransport(server.handle))
    config = AdapterConfig(
        http_client=client,
        settings={"model": MODEL},
        capabilities=capabilities,
        max_retries=0,
    )
    return build_adapter("ollama", config)


def request(*content: Any, **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODEL,
        messages=[Message(role="user", content=list(content) or [TextBlock(text="hi")])],
        max_output_tokens=100,
        stream=False,
        **fields,
    )


WEATHER = ToolDefinition(name="get_weather", input_schema={"type": "object", "properties": {}})


async def test_init_takes_tools_and_thinking_from_the_server() -> None:
    server = Server(SHOWN)
    ollama = adapter(server)  # the stack declares neither
    with pytest.raises(CapabilityError):
        await ollama.complete(request(tools=[WEATHER]))
    await ollama.init()
    caps = ollama.capabilities
    assert caps.supports_tools and caps.supports_thinking and not caps.supports_images
    await ollama.complete(request(tools=[WEATHER]))
    assert server.chats[-1]["tools"][0]["function"]["name"] == "get_weather"


async def test_init_withdraws_what_the_server_does_not_list(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server(SHOWN)
    ollama = adapter(server, supports_images=True, max_context_tokens=131072)
    caplog.set_level(logging.WARNING, logger="metis")
    await ollama.init()
    assert not ollama.capabilities.supports_images
    assert ollama.capabilities.max_context_tokens == 40960  # capped at the trained length
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
    with pytest.raises(CapabilityError):
        await ollama.complete(request(TextBlock(text="what is this?"), image))
    assert server.chats == []  # refused before anything was sent
    flags = [getattr(r, "capability", None) for r in caplog.records]
    assert flags == ["supports_images", "max_context_tokens"]


async def test_a_small_trained_window_caps_the_output_limit_too() -> None:
    tiny = {"capabilities": ["completion"], "model_info": {"llama.context_length": 2048}}
    ollama = adapter(Server(tiny), max_context_tokens=8192, max_output_tokens=4096)
    await ollama.init()
    caps = ollama.capabilities
    assert (caps.max_context_tokens, caps.max_output_tokens) == (2048, 2048)


async def test_init_never_raises_the_declared_context_window() -> None:
    ollama = adapter(Server(SHOWN), max_context_tokens=8192)
    await ollama.init()
    assert ollama.capabilities.max_context_tokens == 8192  # num_ctx the user chose


async def test_a_server_without_a_capabilities_list_changes_nothing() -> None:
    ollama = adapter(Server({"details": {}, "model_info": {}}), supports_tools=True)
    before = ollama.capabilities
    await ollama.init()
    assert ollama.capabilities == before


ADDRESS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Ship",
    "type": "object",
    "properties": {
        "to": {"$ref": "#/$defs/Address"},
        "speed": {"type": "string", "enum": ["slow", "fast"], "default": "slow"},
    },
    "required": ["to"],
    "additionalProperties": False,
    "$defs": {
        "Address": {
            "title": "Address",
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 1}},
            "required": ["city"],
        }
    },
}


async def test_tool_schemas_are_inlined_and_cleaned_with_a_warning_per_keyword(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server(SHOWN)
    ollama = adapter(server, supports_tools=True)
    tool = ToolDefinition(name="ship", description="Ship a parcel", input_schema=ADDRESS_SCHEMA)
    schema_cleanup._warned.clear()  # warned of once per process
    caplog.set_level(logging.WARNING, logger="metis")
    await ollama.complete(request(tools=[tool]))
    sent = server.chats[-1]["tools"][0]["function"]["parameters"]
    assert sent == {
        "type": "object",
        "properties": {
            "to": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
            "speed": {"type": "string", "enum": ["slow", "fast"]},
        },
        "required": ["to"],
    }
    keywords = sorted(
        r.keyword for r in caplog.records if getattr(r, "event", None) == "metis.schema_cleanup"
    )
    # a closed object (additionalProperties: false, which every @metis.tool declares) is
    # opened quietly: a new user's typed tools each gave a WARN of what metis itself wrote
    assert keywords == ["$schema", "default", "minLength", "title"]


async def test_an_open_object_schema_taken_out_is_still_warned_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """additionalProperties as a schema (a dict[str, int] parameter's value type) is a loss
    the model would not see: its WARN stays."""
    server = Server(SHOWN)
    ollama = adapter(server, supports_tools=True)
    schema = {
        "type": "object",
        "properties": {"counts": {"type": "object", "additionalProperties": {"type": "integer"}}},
        "additionalProperties": False,
    }
    tool = ToolDefinition(name="tally", description="Tally", input_schema=schema)
    schema_cleanup._warned.clear()
    caplog.set_level(logging.WARNING, logger="metis")
    await ollama.complete(request(tools=[tool]))
    said = [r for r in caplog.records if getattr(r, "event", None) == "metis.schema_cleanup"]
    assert [(r.keyword, r.paths) for r in said] == [("additionalProperties", ["properties.counts"])]
