"""A tool's schema is one object shared by every call that sends it, and what the steps derive
from it is made once (metis/model/schema_forms.py); an application's own stage that edits a
schema in place, before ``encode`` (the canonical tool) or after it (the body's copy), edits
its own call's alone (docs/stages.md)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import build_adapter
from metis.model import CanonicalRequest, Message, ToolDefinition
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.stage import Transform

REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


class MarkSentSchema(Transform[WireRequest, WireRequest]):
    """Changes the body's tool schema in place (what docs/stages.md asks stages not to do)."""

    name = "mark_sent_schema"

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        request.body["tools"][0]["function"]["parameters"]["properties"]["marks"] = {"x": 1}
        request.body["tools"][0]["function"]["parameters"].setdefault("seen", []).append(1)
        return request


class MarkToolSchema(Transform[CanonicalRequest, CanonicalRequest]):
    """Changes the canonical tool's schema in place."""

    name = "mark_tool_schema"

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        request.tools[0].input_schema.setdefault("seen", []).append(1)
        return request


async def _calls(where: str, stage: Any, tool: ToolDefinition) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=REPLY)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    adapter = build_adapter("openai", api_key="k", http_client=client)
    if where == "after":
        adapter.pipeline.insert_after("strict_schema", stage)
    else:
        adapter.pipeline.insert_before("encode", stage)
    request = CanonicalRequest(
        model="openai:gpt-4o", messages=[Message.user("hi")], tools=[tool], max_output_tokens=8
    )
    for _ in range(3):
        await adapter.complete(request)
    await adapter.aclose()
    return sent


@pytest.mark.anyio
async def test_an_own_stage_after_encode_edits_only_its_own_calls_schema() -> None:
    tool = ToolDefinition(name="get", input_schema=json.loads(json.dumps(SCHEMA)))
    sent = await _calls("after", MarkSentSchema(), tool)
    assert [body["tools"][0]["function"]["parameters"]["seen"] for body in sent] == [[1]] * 3
    assert tool.input_schema == SCHEMA  # the application's tool as it made it


@pytest.mark.anyio
async def test_an_own_stage_before_encode_is_given_its_calls_own_schemas() -> None:
    tool = ToolDefinition(name="get", input_schema=json.loads(json.dumps(SCHEMA)))
    sent = await _calls("before", MarkToolSchema(), tool)
    assert [body["tools"][0]["function"]["parameters"]["seen"] for body in sent] == [[1]] * 3
    assert tool.input_schema == SCHEMA


@pytest.mark.anyio
async def test_a_schema_the_application_changes_between_calls_is_sent_as_it_is_now() -> None:
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=REPLY)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    adapter = build_adapter("openai", api_key="k", http_client=client)
    tool = ToolDefinition(name="get", input_schema=json.loads(json.dumps(SCHEMA)))
    request = CanonicalRequest(
        model="openai:gpt-4o", messages=[Message.user("hi")], tools=[tool], max_output_tokens=8
    )
    await adapter.complete(request)
    tool.input_schema["properties"]["units"] = {"type": "string"}  # in place, between calls
    await adapter.complete(request)
    await adapter.aclose()
    first, second = (body["tools"][0]["function"] for body in sent)
    assert first["strict"] is True and "units" not in first["parameters"]["properties"]
    assert second["parameters"]["properties"]["units"] == {"type": ["string", "null"]}
    assert second["parameters"]["required"] == ["city", "units"]  # strict form made anew


@pytest.mark.anyio
async def test_a_request_prepared_without_a_call_gives_an_own_stage_its_own_schemas() -> None:
    """Batches, token counts and the gateway's probes run the stages up to ``encode`` alone
    (``Pipeline.prepare``): an application's stage there is given its own copies too."""
    from tests.helpers import make_call

    adapter = build_adapter("openai", api_key="k")
    adapter.pipeline.insert_before("encode", MarkToolSchema())
    assert adapter.pipeline.own_sees_request
    tool = ToolDefinition(name="get", input_schema=json.loads(json.dumps(SCHEMA)))
    request = CanonicalRequest(
        model="openai:gpt-4o", messages=[Message.user("hi")], tools=[tool], max_output_tokens=8
    )
    encode = adapter.pipeline["encode"]
    call = make_call("openai", "openai:gpt-4o")
    bodies = [(await adapter.pipeline.prepare(request, call, through=encode)).body for _ in "ab"]
    assert [body["tools"][0]["function"]["parameters"]["seen"] for body in bodies] == [[1]] * 2
    assert tool.input_schema == SCHEMA
    await adapter.aclose()


def test_only_a_stage_of_the_applications_makes_copies() -> None:
    adapter = build_adapter("openai", api_key="k")
    assert not adapter.pipeline.own_sees_request
    adapter.pipeline.insert_after("strict_schema", MarkSentSchema())
    assert not adapter.pipeline.own_sees_request  # after encode: its bodies made anew instead
    assert adapter.pipeline["encode"].fresh_wire  # type: ignore[attr-defined]
    assert adapter.pipeline["strict_schema"].fresh_wire  # type: ignore[attr-defined]
