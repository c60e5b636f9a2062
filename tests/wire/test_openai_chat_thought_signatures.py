"""Gemini's thought signatures through its OpenAI-compatible endpoint: a tool call's
``extra_content.google.thought_signature`` (in a whole reply and on a streamed fragment) is kept
in the call's ``provider_raw`` as the Gemini stack keeps a ``thoughtSignature``, and goes back
on the same call only to the provider and model that made it (docs/contract.md §7). The
samples are written for these tests. Sans-IO."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import ProtocolError
from metis.model.content import Message, ProviderRaw, ToolResultBlock, ToolUseBlock
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.wire.builder import MessageBuilder
from metis.wire.openai_chat import codec
from tests.helpers import checked_final, make_call

PROVIDER, MODEL = "openai_compatible", "openai_compatible:gemini-3-pro-preview"
SIG_ONE, SIG_TWO = "c2lnbmVkIGJ5IHRoZSBsYW1w", "YW5vdGhlciBzdGVwJ3Mgc2lnbg=="


def signed(signature: str) -> dict[str, Any]:
    return {"extra_content": {"google": {"thought_signature": signature}}}


def whole_reply(*calls: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "tool_calls": list(calls)}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    return {"id": "r-1", "model": "gemini-3-pro-preview", "choices": [choice]}


def call(call_id: str, name: str, arguments: str, **extra: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {"id": call_id, "type": "function", "function": function, **extra}


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "r-2", "model": "gemini-3-pro-preview", "choices": [choice]}


def builder() -> MessageBuilder:
    return MessageBuilder(PROVIDER, MODEL)


def parsed(body: dict[str, Any]) -> list[Any]:
    return list(checked_final(list(codec.parse_body(body, builder()))).final_content)


def streamed(chunks: list[dict[str, Any]]) -> list[Any]:
    parser = codec.stream_parser(builder())
    events = [event for obj in chunks for event in parser.feed(obj)]
    return list(checked_final([*events, *parser.end()]).final_content)


def mine(signature: str | None) -> ProviderRaw | None:
    if signature is None:
        return None
    return ProviderRaw(provider=PROVIDER, model=MODEL, data={"thoughtSignature": signature})


def sent_calls(content: list[Any], provider: str = PROVIDER, model: str = MODEL) -> list[Any]:
    results = [ToolResultBlock(tool_use_id=b.id, content="ok") for b in content]
    history = [Message.user("look it up"), Message.assistant(*content), Message.tool(*results)]
    request = CanonicalRequest(model=model, messages=history, max_output_tokens=64)
    body = codec.encode(request, make_call(provider, model))
    return list(body["messages"][1]["tool_calls"])


def test_a_whole_replys_first_call_keeps_its_signature_and_the_parallel_one_has_none() -> None:
    body = whole_reply(
        call("fc-1", "search", '{"q":"tides"}', **signed(SIG_ONE)),
        call("fc-2", "search", '{"q":"moon"}'),
    )
    first, second = parsed(body)
    assert (first.id, first.input, first.provider_raw) == ("fc-1", {"q": "tides"}, mine(SIG_ONE))
    assert (second.id, second.provider_raw) == ("fc-2", None)


def test_a_streamed_fragments_signature_is_kept_even_while_the_call_waits() -> None:
    chunks = [
        chunk({"tool_calls": [{"index": 0, **call("fc-1", "search", '{"q":'), **signed(SIG_ONE)}]}),
        # the second call starts before the first is whole: it waits, its signature with it
        chunk({"tool_calls": [{"index": 1, **call("fc-2", "clock", "{}"), **signed(SIG_TWO)}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"tides"}'}}]}),
        chunk({}, "tool_calls"),
    ]
    first, second = streamed(chunks)
    assert (first.name, first.input, first.provider_raw) == (
        "search",
        {"q": "tides"},
        mine(SIG_ONE),
    )
    assert (second.name, second.provider_raw) == ("clock", mine(SIG_TWO))


def test_a_signature_on_a_later_fragment_of_a_told_call_is_kept() -> None:
    chunks = [
        chunk({"tool_calls": [{"index": 0, **call("fc-1", "search", "")}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}, **signed(SIG_ONE)}]}),
        chunk({}, "tool_calls"),
    ]
    (only,) = streamed(chunks)
    assert only.provider_raw == mine(SIG_ONE)


def test_the_signature_goes_back_on_its_call_to_the_model_that_made_it() -> None:
    body = whole_reply(
        call("fc-1", "search", '{"q":"tides"}', **signed(SIG_ONE)),
        call("fc-2", "search", '{"q":"moon"}'),
    )
    first, second = sent_calls(parsed(body))
    assert first["extra_content"] == {"google": {"thought_signature": SIG_ONE}}
    assert first["function"] == {"name": "search", "arguments": '{"q":"tides"}'}
    assert "extra_content" not in second


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", "openai:gpt-4o"),  # another provider
        (PROVIDER, "openai_compatible:gemini-3-flash-preview"),  # another model of the same
    ],
)
def test_the_signature_never_reaches_a_model_that_did_not_make_it(
    provider: str, model: str
) -> None:
    content = parsed(whole_reply(call("fc-1", "search", "{}", **signed(SIG_ONE))))
    (sent,) = sent_calls(content, provider, model)
    assert "extra_content" not in sent
    assert sent["function"] == {"name": "search", "arguments": "{}"}


def test_a_native_gemini_signature_is_not_sent_through_the_chat_wire() -> None:
    native = ProviderRaw(provider="gemini", model=MODEL, data={"thoughtSignature": SIG_ONE})
    (sent,) = sent_calls([ToolUseBlock(id="fc-1", name="search", input={}, provider_raw=native)])
    assert "extra_content" not in sent


@pytest.mark.parametrize(
    "extra",
    [
        {"extra_content": "signed"},
        {"extra_content": {"google": ["signed"]}},
        {"extra_content": {"google": {"thought_signature": 7}}},
    ],
)
def test_a_malformed_signature_is_a_protocol_error(extra: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError, match="extra_content"):
        parsed(whole_reply(call("fc-1", "search", "{}", **extra)))
    fragment = {"index": 0, **call("fc-1", "search", "{}"), **extra}
    with pytest.raises(ProtocolError, match="extra_content"):
        streamed([chunk({"tool_calls": [fragment]}), chunk({}, "tool_calls")])


def test_other_google_fields_and_a_call_without_a_signature_read_as_before() -> None:
    body = whole_reply(call("fc-1", "search", "{}", extra_content={"google": {}}))
    (only,) = parsed(body)
    assert only.provider_raw is None


@pytest.mark.anyio
async def test_an_adapters_history_sends_the_signature_back_through_its_stages() -> None:
    sent: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        reply = whole_reply(call("fc-1", "search", '{"q":"tides"}', **signed(SIG_ONE)))
        reply["usage"] = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
        return httpx.Response(200, json=reply)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    config = AdapterConfig(api_key="k", base_url="http://gemini.test", http_client=client)
    adapter = build_adapter(PROVIDER, config)
    search = ToolDefinition(name="search", description="Search", input_schema={"type": "object"})
    asked = [Message.user("look it up")]
    first = await adapter.complete(
        CanonicalRequest(model=MODEL, messages=asked, tools=[search], max_output_tokens=64)
    )
    (made,) = first.content
    assert isinstance(made, ToolUseBlock) and made.id != "fc-1"  # a canonical id
    history = [
        *asked,
        Message.assistant(made),
        Message.tool(ToolResultBlock(tool_use_id=made.id, content="high")),
    ]
    await adapter.complete(
        CanonicalRequest(model=MODEL, messages=history, tools=[search], max_output_tokens=64)
    )
    (back,) = sent[1]["messages"][1]["tool_calls"]
    assert back["function"] == {"name": "search", "arguments": '{"q":"tides"}'}
    assert back["extra_content"] == {"google": {"thought_signature": SIG_ONE}}
