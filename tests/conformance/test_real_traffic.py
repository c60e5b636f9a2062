"""Every recorded exchange in ../shared/real-traffic, replayed through the full adapter of the
stack that speaks its API: no exception, the stream invariants hold, and the text, reasoning,
tool calls, usage, stop reason and dropped items are what the recording says; a recorded
failure raises the classified error it should. Expectations are read from the recordings by
``tests/recorded_expectations.py``, independently of the codecs; the per-API differences are
the rows of ``APIS``. Skipped when the folder is absent (a fresh clone).

Two more properties where a recording shows them: a Gemini reply sent back in the next turn
gives what the recording's client sent, and the Converse encoder writes the recorded requests.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, AdapterError, build_adapter
from metis.adapter import Adapter
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    OpaqueBlock,
    Role,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stacks.loader import EndpointSpec, StackSpec, load_stack
from metis.stages.policy.invariants import StreamChecker
from metis.wire.bedrock_converse import codec as converse_codec
from tests import recorded_expectations as rec
from tests.helpers import make_call
from tests.recordings import GEMINI_URI, ROOT, Exchange, exchanges, recorded_request_bodies

pytestmark = [
    pytest.mark.real_traffic,
    pytest.mark.backend_independent,  # bytes in, events out: the replay has no timing
    pytest.mark.skipif(not ROOT.is_dir(), reason=f"no recorded traffic at {ROOT}"),
]


# The per-API differences ---------------------------------------------------------------------


@dataclass(frozen=True)
class Api:
    """How one API's recordings replay and what their replies must give."""

    expected: Callable[[Exchange], rec.Expected]
    observed: Callable[[MessageComplete], rec.Blocks]
    error: Callable[[Exchange], rec.ExpectedError]
    request: Callable[[Exchange], dict[str, Any]] = lambda exchange: {}  # request changes
    api_key: str | None = "k"
    options: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    chunk_size: int = 97  # the recorded body is served in pieces this long
    chunk_sizes: tuple[int, ...] = ()  # and, for each streamed reply, also in these
    chunked_sources: tuple[str, ...] = ()  # only these replies, if any are named
    routed_as_recorded: bool = False  # the request goes to the recorded URL
    auth_header: tuple[str, str] | None = None  # the request carries this credential
    tool_ids_issued: bool = False  # every tool call gets a fresh metis id ("tu_...")
    raw_item_ids: tuple[str, ...] = ()  # every block keeps the id of the item it came from


def _gemini_request(exchange: Exchange) -> dict[str, Any]:
    match = GEMINI_URI.match(exchange.uri)
    assert match is not None
    return {"model": f"gemini:{match['model']}"}


def _bedrock_request(exchange: Exchange) -> dict[str, Any]:
    """The model from the recorded URL, with a tool declared (a recorded call is allowed)."""
    model = exchange.uri.split("/model/", 1)[1].rsplit("/", 1)[0].replace("%3A", ":")
    tools = [ToolDefinition(name="any_tool")]
    return {
        "model": f"bedrock:{model}",
        "max_output_tokens": 1024,
        "session_id": None,
        "tools": tools,
    }


def _ollama_request(exchange: Exchange) -> dict[str, Any]:
    """The recorded request itself: its messages, tools and limits."""
    recorded = exchange.request
    options = recorded.get("options") or {}
    tools = [
        ToolDefinition(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            input_schema=t["function"].get("parameters") or {},
        )
        for t in recorded.get("tools") or []
    ]
    messages = [Message.user(m["content"]) for m in recorded.get("messages") or []]
    return {
        "messages": messages or [Message.user("replayed")],
        "tools": tools,
        "max_output_tokens": options.get("num_predict") or 1000,
        "temperature": options.get("temperature"),
    }


APIS: dict[str, Api] = {
    "anthropic": Api(rec.expected_anthropic, rec.observed_anthropic, rec.error_recorded),
    "openai": Api(rec.expected_openai, rec.observed_anthropic, rec.error_recorded),
    "openai_responses": Api(
        rec.expected_responses,
        rec.observed_responses,
        rec.error_responses,
        request=lambda exchange: {"model": "openai_responses:recorded"},
        chunk_sizes=(7,),
        raw_item_ids=("msg_", "fc_", "rs_", "ws_", "ci_"),
    ),
    "gemini": Api(
        rec.expected_gemini,
        rec.observed_gemini,
        rec.error_gemini,
        request=_gemini_request,
        routed_as_recorded=True,
        auth_header=("x-goog-api-key", "k"),
        tool_ids_issued=True,
    ),
    "ollama": Api(
        rec.expected_ollama,
        rec.observed_ollama,
        rec.error_ollama,
        request=_ollama_request,
        api_key=None,
        capabilities={"supports_tools": True, "supports_thinking": True},
        chunk_sizes=(1, 4096),
        chunked_sources=("ollama/langchaingo__ollama__TestClient_GenerateChatStream.httprr#0",),
    ),
    "bedrock": Api(
        rec.expected_bedrock,
        rec.observed_bedrock,
        rec.error_bedrock,
        request=_bedrock_request,
        api_key="bedrock-api-key-test",
        options={"region": "us-east-1"},
        chunk_size=7,  # event-stream frames arrive split at every place
        routed_as_recorded=True,
        auth_header=("authorization", "Bearer bedrock-api-key-test"),
        tool_ids_issued=True,
    ),
}


def stack_for(exchange: Exchange) -> str | StackSpec:
    """The API's stack; for Gemini on Vertex AI, the gemini stack at Vertex's URL (YAML only)."""
    match = GEMINI_URI.match(exchange.uri)
    if match is None or match["host"] != "aiplatform":
        return exchange.api
    prefix = match["prefix"]
    endpoint = EndpointSpec(
        base_url="https://aiplatform.googleapis.com",
        path=f"{prefix}/models/{{model}}:generateContent",
        stream_path=f"{prefix}/models/{{model}}:streamGenerateContent?alt=sse",
    )
    return load_stack("gemini").model_copy(update={"endpoint": endpoint, "name": "gemini"})


def request_for(exchange: Exchange) -> CanonicalRequest:
    """What the replay asks: a one-line prompt to the recorded model, as each API's row
    changes it."""
    request = CanonicalRequest(
        model=f"{exchange.api}:{exchange.request.get('model', 'recorded')}",
        messages=[Message.user("replayed")],
        max_output_tokens=1000,
        session_id="replay",
        stream=exchange.streamed,
    )
    return request.model_copy(update=APIS[exchange.api].request(exchange))


# Replaying -----------------------------------------------------------------------------------


class _Stream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for chunk in self.chunks:
            yield chunk


def adapter_for(exchange: Exchange, chunk_size: int, sent: list[httpx.Request]) -> Adapter:
    api = APIS[exchange.api]
    body = exchange.body

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        chunks = [body[i : i + chunk_size] for i in range(0, len(body), chunk_size)]
        headers = {"content-type": exchange.content_type}
        return httpx.Response(exchange.status, headers=headers, stream=_Stream(chunks))

    config = AdapterConfig(
        api_key=api.api_key,
        settings=api.options,
        capabilities=api.capabilities,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        max_retries=0,
    )
    return build_adapter(stack_for(exchange), config, tool_id_store=InMemoryToolIdStore())


async def replay(
    exchange: Exchange, chunk_size: int | None = None, sent: list[httpx.Request] | None = None
) -> list[StreamEvent]:
    """The reply's events; a non-streamed reply as the one event it amounts to."""
    sent = [] if sent is None else sent
    adapter = adapter_for(exchange, chunk_size or APIS[exchange.api].chunk_size, sent)
    request = request_for(exchange)
    try:
        if exchange.streamed:
            return [event async for event in adapter.stream(request)]
        response = await adapter.complete(request)
        final = MessageComplete(
            response.content, response.stop_reason, response.usage, response.message_id
        )
        return [final]
    finally:
        await adapter.aclose()
        check_sent(exchange, sent)


def check_sent(exchange: Exchange, sent: list[httpx.Request]) -> None:
    api = APIS[exchange.api]
    (request,) = sent
    if api.routed_as_recorded:
        assert str(request.url) == exchange.uri
    if api.auth_header:
        name, value = api.auth_header
        assert request.headers[name] == value


# The replays ---------------------------------------------------------------------------------


EXCHANGES = exchanges()
SUCCESSES = [e for e in EXCHANGES if e.status == 200]
FAILURES = [e for e in EXCHANGES if e.status != 200]


def text_stream(exchange: Exchange) -> bool:
    """A streamed reply of SSE events or NDJSON lines, from an endpoint the replay speaks
    (the fuzz and reliability tests cut and mutate these)."""
    chat = exchange.api != "ollama" or exchange.uri == "/api/chat"
    return exchange.streamed and chat and exchange.api != "bedrock"


def param(exchange: Exchange, *more: Any) -> Any:
    """One test case; an Ollama exchange off the chat endpoint shows as skipped."""
    ident = "-".join([str(exchange), *map(str, more)])
    if exchange.api != "ollama" or exchange.uri == "/api/chat":
        return pytest.param(exchange, *more, id=ident)
    reason = f"{exchange.uri} is not the chat endpoint this adapter speaks"
    return pytest.param(exchange, *more, id=ident, marks=pytest.mark.skip(reason=reason))


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", [param(e) for e in SUCCESSES])
async def test_a_recorded_reply_reads_as_the_recording_says(
    exchange: Exchange, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    api = APIS[exchange.api]
    events = await replay(exchange)
    want = api.expected(exchange)

    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert api.observed(final) == want.blocks
    usage = final.usage.model_dump()
    assert {key: usage[key] for key in want.usage} == want.usage
    assert not final.usage.estimated
    assert final.stop_reason.raw == want.stop_raw
    if want.stop_kind is not None:
        assert final.stop_reason.kind is want.stop_kind
    if want.message_id is not None:
        assert final.message_id == want.message_id
    warned = [r for r in caplog.records if getattr(r, "event", None) == "metis.lossy_projection"]
    if want.dropped is not None:
        assert len(warned) == want.dropped, [r.getMessage() for r in warned]
    if want.dropped_types is not None:
        assert [r.__dict__["block_type"] for r in warned] == want.dropped_types
    calls = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    if api.tool_ids_issued:
        assert all(c.id.startswith("tu_") for c in calls)
        assert len({c.id for c in calls}) == len(calls)
    for block in final.final_content if api.raw_item_ids else []:
        assert block.provider_raw is not None and block.provider_raw.provider == exchange.api
        data = block.provider_raw.data
        if isinstance(block, OpaqueBlock):  # the item itself, whole
            assert data["item"]["type"] == block.kind
        else:
            assert data["id"].startswith(api.raw_item_ids)
    if exchange.streamed:
        checker = StreamChecker()
        for event in events:
            checker.check(event)
        checker.check_ended()


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", [param(e) for e in FAILURES])
async def test_a_recorded_error_is_raised_classified(exchange: Exchange) -> None:
    want = APIS[exchange.api].error(exchange)
    with pytest.raises(want.error_type) as caught:
        await replay(exchange)
    error = caught.value
    assert isinstance(error, AdapterError)
    assert error.error_class is want.error_class
    assert error.provider_status == exchange.status
    assert want.message_contains in error.message
    if want.provider_message is not None:
        assert error.provider_message == want.provider_message
    if want.provider_message_contains is not None:
        assert error.provider_message and want.provider_message_contains in error.provider_message
    if want.provider_code is not None:
        assert error.provider_code == want.provider_code
    if want.retryable is not None:
        assert error.retryable is want.retryable


CHUNKED = [
    param(e, size)
    for e in SUCCESSES
    if e.streamed
    for size in APIS[e.api].chunk_sizes
    if e.source in APIS[e.api].chunked_sources or not APIS[e.api].chunked_sources
]


@pytest.mark.anyio
@pytest.mark.parametrize(("exchange", "chunk_size"), CHUNKED)
async def test_chunk_boundaries_do_not_matter(exchange: Exchange, chunk_size: int) -> None:
    whole = (await replay(exchange, chunk_size=len(exchange.body)))[-1]
    cut = (await replay(exchange, chunk_size=chunk_size))[-1]
    assert isinstance(whole, MessageComplete) and isinstance(cut, MessageComplete)
    observed = APIS[exchange.api].observed
    assert observed(whole) == observed(cut)
    assert whole.usage == cut.usage and whole.stop_reason == cut.stop_reason
    assert _without_tool_ids(whole) == _without_tool_ids(cut)


def _without_tool_ids(final: MessageComplete) -> list[Any]:
    """The final content, tool-call ids left out (each replay issues fresh ones)."""
    return [
        b.model_copy(update={"id": ""}) if isinstance(b, ToolUseBlock) else b
        for b in final.final_content
    ]


def test_the_recordings_were_found() -> None:
    def found(api: str, failed: bool = False) -> list[Exchange]:
        return [e for e in EXCHANGES if e.api == api and (e.status != 200) == failed]

    assert found("anthropic") and found("openai")
    assert len(found("anthropic") + found("openai")) >= 30
    assert len(found("openai_responses")) >= 15 and len(found("openai_responses", True)) >= 2
    assert any(not e.streamed for e in found("openai_responses"))
    gemini = found("gemini")
    assert len(gemini) >= 20 and found("gemini", True) and FOLLOWED
    assert any(e.source.startswith("openai_chat/") for e in gemini)  # Gemini calls filed elsewhere
    assert any("aiplatform" in e.uri for e in gemini)
    assert len(found("bedrock")) >= 8 and found("bedrock", True) and CONVERSE_REQUESTS
    ollama = [e for e in EXCHANGES if e.api == "ollama"]
    chat = [e for e in ollama if e.uri == "/api/chat"]
    assert len(chat) >= 9 and {e.uri for e in ollama} == {"/api/chat", "/api/generate", "/api/pull"}
    assert any(e.status == 400 for e in chat) and any(not e.streamed for e in chat)
    sources = {e.source for e in EXCHANGES}
    assert all(set(api.chunked_sources) <= sources for api in APIS.values())


# Gemini: what the recording's client sent back, we send back too ------------------------------


FOLLOWED = [
    e
    for e in SUCCESSES
    if e.api == "gemini"
    and e.next_request is not None
    and any(c.get("role") == "model" for c in e.next_request.get("contents") or [])
    and len(e.next_request.get("contents") or []) > len(e.request.get("contents") or [])
]


def _signature_bytes(value: str) -> bytes:
    """A signature decoded (the recording's client re-encoded some as URL-safe base64)."""
    return base64.b64decode(value.replace("-", "+").replace("_", "/") + "==")


def _part_shape(part: dict[str, Any]) -> tuple[Any, ...]:
    call = part.get("functionCall")
    what = (call["name"], call.get("args", {})) if call else part.get("text")
    signature = part.get("thoughtSignature")
    return what, _signature_bytes(signature) if signature else None


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", FOLLOWED, ids=str)
async def test_the_reply_goes_back_as_the_recorded_client_sent_it(exchange: Exchange) -> None:
    """The canonical reply, sent back to the same model in the next request, gives the model
    turn the recording's client sent: same parts, and each thought signature on its part,
    byte for byte as Gemini issued it."""
    final = (await replay(exchange))[-1]
    assert isinstance(final, MessageComplete)
    history = [Message.user("replayed"), Message(role=Role.ASSISTANT, content=final.final_content)]
    results = [
        ToolResultBlock(tool_use_id=b.id, content="done")
        for b in final.final_content
        if isinstance(b, ToolUseBlock)
    ]
    history.append(Message.tool(*results) if results else Message.user("next"))
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        reply = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                                 "finishReason": "STOP"}]}  # fmt: skip
        return httpx.Response(200, json=reply)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    adapter = build_adapter("gemini", AdapterConfig(api_key="k", http_client=client))
    request = request_for(exchange).model_copy(update={"messages": history, "stream": False})
    await adapter.complete(request)
    ours = next(c for c in sent[0]["contents"] if c["role"] == "model")
    assert exchange.next_request is not None
    turns = [c for c in exchange.next_request.get("contents") or [] if c.get("role") == "model"]
    recorded = turns[-1]
    assert [_part_shape(p) for p in ours["parts"]] == [
        _part_shape(p)
        for p in recorded["parts"]
        if p.get("text") != "" or p.get("thoughtSignature")
    ]
    issued = {
        p["thoughtSignature"]
        for chunk in rec.gemini_chunks(exchange)
        for p in rec.gemini_parts(chunk)
        if "thoughtSignature" in p
    }
    assert {p["thoughtSignature"] for p in ours["parts"] if "thoughtSignature" in p} <= issued


# Bedrock: the Converse encoder writes what the recorded requests sent --------------------------


CONVERSE_REQUESTS = list(recorded_request_bodies("bedrock"))


def canonical_messages(body: dict[str, Any]) -> list[Message]:
    """The recorded Converse messages, read into canonical ones (by the test, not the codec)."""
    messages = []
    for message in body["messages"]:
        blocks: list[Any] = []
        for block in message["content"]:
            if "text" in block:
                blocks.append(TextBlock(text=block["text"]))
            elif "toolUse" in block:
                use = block["toolUse"]
                blocks.append(
                    ToolUseBlock(id=use["toolUseId"], name=use["name"], input=use["input"])
                )
            elif "toolResult" in block:
                result = block["toolResult"]
                text = "".join(part["text"] for part in result["content"])
                is_error = result.get("status") == "error"
                blocks.append(
                    ToolResultBlock(
                        tool_use_id=result["toolUseId"], content=text, is_error=is_error
                    )
                )
            elif "reasoningContent" in block:
                reasoning = block["reasoningContent"]["reasoningText"]
                blocks.append(
                    ThinkingBlock(thinking=reasoning["text"], signature=reasoning["signature"])
                )
        messages.append(Message(role=Role(message["role"]), content=blocks))
    return messages


@pytest.mark.parametrize(("name", "body"), CONVERSE_REQUESTS, ids=[n for n, _ in CONVERSE_REQUESTS])
def test_the_converse_encoder_writes_what_the_recorded_requests_sent(
    name: str, body: dict[str, Any]
) -> None:
    tools = [
        ToolDefinition(
            name=t["toolSpec"]["name"],
            description=t["toolSpec"].get("description", ""),
            input_schema=t["toolSpec"]["inputSchema"]["json"],
        )
        for t in (body.get("toolConfig") or {}).get("tools", [])
    ]
    thinking = (body.get("additionalModelRequestFields") or {}).get("thinking")
    request = CanonicalRequest(
        model="bedrock:m",
        messages=canonical_messages(body),
        system_prompt="\n".join(s["text"] for s in body["system"]) or None,
        max_output_tokens=body["inferenceConfig"].get("maxTokens", 4096),
        temperature=body["inferenceConfig"].get("temperature"),
        tools=tools,
        thinking=ThinkingConfig(budget_tokens=thinking["budget_tokens"]) if thinking else None,
    )
    encoded = converse_codec.encode(request, make_call(provider="bedrock", model="bedrock:m"))
    assert encoded["messages"] == body["messages"]
    assert encoded.get("system", []) == body["system"]
    assert encoded.get("toolConfig", {}).get("tools") == (body.get("toolConfig") or {}).get("tools")
    assert encoded.get("additionalModelRequestFields") == body.get("additionalModelRequestFields")
    for key, value in body["inferenceConfig"].items():
        assert encoded["inferenceConfig"][key] == value
