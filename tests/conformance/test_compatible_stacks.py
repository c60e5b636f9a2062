"""OpenAI-compatible endpoints by YAML alone: the seven built-in stacks and a made-up one.

Each built-in stack is driven through a mock HTTP peer that answers in OpenAI chunk format
(with the reasoning field that server uses), and the wire body it sent is checked for that
provider's quirks; every quirk is sourced in the stack's YAML comments. A stack written in a
temporary file shows a new provider needs no Python at all. (Conversations alternating OpenAI
with these stacks: tests/conformance/test_conversations.py.)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.core.ids import new_tool_id
from metis.errors import AdapterError, ErrorClass
from metis.model import (
    CanonicalRequest,
    CanonicalResponse,
    Message,
    MessageComplete,
    MessageStart,
    Role,
    StreamEvent,
    TextBlock,
    TextDelta,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.content import ThinkingBlock
from metis.model.events import ThinkingDelta
from metis.model.request import ThinkingConfig, ToolChoice
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stacks.loader import load_stack
from metis.stages.edits.wire_fields import WireFields
from metis.stages.policy.invariants import StreamChecker

from ..helpers import lossy_warnings

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

KEY = "sk-test-0123456789abcdef"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
MISSING = object()


@dataclass(frozen=True)
class Quirks:
    url: str
    reasoning_field: str | None  # where this server streams its chain of thought
    fields: dict[str, Any]  # body fields that must be there, with these values
    absent: tuple[str, ...]  # body fields that must not be there
    tool_id: re.Pattern[str] = re.compile(r"^call_")  # ids of calls made elsewhere


# Every row is the wire request of the same canonical request (below), as each server wants it.
STACKS: dict[str, Quirks] = {
    "openrouter": Quirks(
        url="https://openrouter.ai/api/v1/chat/completions",
        reasoning_field="reasoning",
        fields={"max_tokens": 1024, "parallel_tool_calls": False},
        absent=("max_completion_tokens", "stream_options", "reasoning_effort"),
    ),
    "groq": Quirks(
        url="https://api.groq.com/openai/v1/chat/completions",
        reasoning_field="reasoning",
        fields={
            "max_completion_tokens": 1024,
            "stream_options": {"include_usage": True},
            "parallel_tool_calls": False,
        },
        absent=("max_tokens",),
    ),
    "mistral": Quirks(
        url="https://api.mistral.ai/v1/chat/completions",
        reasoning_field=None,
        fields={"max_tokens": 1024, "parallel_tool_calls": False},
        absent=("max_completion_tokens", "stream_options"),
        tool_id=re.compile(r"^[A-Za-z0-9]{9}$"),
    ),
    "deepseek": Quirks(
        url="https://api.deepseek.com/chat/completions",
        reasoning_field="reasoning_content",
        fields={"max_tokens": 1024, "stream_options": {"include_usage": True}},
        absent=("max_completion_tokens", "parallel_tool_calls"),
    ),
    "together": Quirks(
        url="https://api.together.xyz/v1/chat/completions",
        reasoning_field="reasoning",
        fields={
            "max_tokens": 1024,
            "stream_options": {"include_usage": True},
            "parallel_tool_calls": False,
        },
        absent=("max_completion_tokens",),
    ),
    "openai_compatible": Quirks(
        url="http://localhost:8000/v1/chat/completions",
        reasoning_field="reasoning",
        fields={
            "max_completion_tokens": 1024,
            "stream_options": {"include_usage": True},
            "parallel_tool_calls": False,
        },
        absent=("max_tokens",),
    ),
    "vllm": Quirks(
        url="http://localhost:8000/v1/chat/completions",
        reasoning_field="reasoning",
        fields={
            "max_completion_tokens": 1024,
            "stream_options": {"include_usage": True},
            "parallel_tool_calls": False,
        },
        absent=("max_tokens",),
    ),
    "llamacpp": Quirks(
        url="http://localhost:8080/v1/chat/completions",
        reasoning_field="reasoning_content",
        fields={
            "max_tokens": 1024,
            "stream_options": {"include_usage": True},
            "parallel_tool_calls": False,
        },
        absent=("max_completion_tokens",),
    ),
}


# A peer answering in OpenAI chunk format ----------------------------------------------------


def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    data = {"id": "chatcmpl-7", "object": "chat.completion.chunk", "model": "m", "choices": choices}
    if usage is not None:
        data["usage"] = usage
    return f"data: {json.dumps(data)}\n\n"


USAGE = {"prompt_tokens": 61, "completion_tokens": 17, "total_tokens": 78}


def tool_call_stream(tool_id: str, reasoning_field: str | None) -> list[bytes]:
    """A reply that may reason, says a few words and calls get_weather, cut at odd places."""
    lines = [chunk({"role": "assistant", "content": ""})]
    if reasoning_field:
        lines += [chunk({reasoning_field: "User wants "}), chunk({reasoning_field: "Paris."})]
    lines += [
        chunk({"content": "Checking "}),
        chunk({"content": "the weather."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": tool_id,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "Paris"}'}}]}),
        chunk({}, finish="tool_calls"),
        chunk(None, usage=USAGE),
        "data: [DONE]\n\n",
    ]
    raw = "".join(lines).encode()
    return [raw[i : i + 97] for i in range(0, len(raw), 97)]  # boundaries mid-line, mid-JSON


def tool_call_body(tool_id: str, reasoning_field: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "Checking the weather.",
        "tool_calls": [
            {
                "id": tool_id,
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    if reasoning_field:
        message[reasoning_field] = "User wants Paris."
    return {
        "id": "chatcmpl-7",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": USAGE,
    }


@dataclass
class Peer:
    """Answers each request with a tool call, streamed or not, and keeps what it was sent."""

    tool_id: str = "call_abc123"
    reasoning_field: str | None = None
    requests: list[httpx.Request] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if json.loads(request.content).get("stream"):
            stream = tool_call_stream(self.tool_id, self.reasoning_field)
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=_Chunks(stream)
            )
        return httpx.Response(200, json=tool_call_body(self.tool_id, self.reasoning_field))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handle))

    def body(self, n: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[n].content)  # type: ignore[no-any-return]


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> Any:
        for piece in self.chunks:
            yield piece


def adapter_for(stack: str | Path, peer: Peer, **config: Any) -> Adapter:
    return build_adapter(
        stack,
        AdapterConfig(api_key=KEY, http_client=peer.client(), **config),
        tool_id_store=InMemoryToolIdStore(),
    )


def weather_request(provider: str, stream: bool = True, **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=f"{provider}:m",
        session_id="compat",
        system_prompt="Be brief.",
        messages=[Message.user("Weather in Paris?")],
        tools=[WEATHER],
        tool_choice=ToolChoice.any(),
        parallel_tool_calls=False,
        max_output_tokens=1024,
        temperature=0.3,
        stream=stream,
        **fields,
    )


async def collect(adapter: Adapter, request: CanonicalRequest) -> list[StreamEvent]:
    return [event async for event in adapter.stream(request)]


# The seven stacks ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STACKS))
def test_the_stack_loads_and_its_pipeline_validates(name: str) -> None:
    spec = load_stack(name)
    assert spec.name == name
    pipeline = spec.build_pipeline()  # checks every neighbour pair
    names = pipeline.names()
    assert names[0] == "invariants" and names[-1] == "transport"
    assert names.index("encode") < names.index("retry")
    assert "strict_schema" not in names  # none of these servers is given OpenAI strict mode
    if "wire_fields" in names:
        assert names.index("encode") < names.index("wire_fields") < names.index("retry")
    assert spec.capabilities.supports_tools and spec.capabilities.supports_streaming_tool_calls
    assert spec.auth.header == "authorization" and spec.auth.scheme == "Bearer"
    assert spec.auth.env and spec.auth.env.endswith("_API_KEY")


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(STACKS))
async def test_a_streamed_tool_call_through_each_stack(name: str) -> None:
    quirks = STACKS[name]
    peer = Peer(reasoning_field=quirks.reasoning_field)
    adapter = adapter_for(name, peer)
    events = await collect(adapter, weather_request(name))

    # The wire request: this provider's URL, auth and body quirks.
    assert len(peer.requests) == 1
    sent = peer.requests[0]
    assert str(sent.url) == quirks.url
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = peer.body()
    assert body["model"] == "m" and body["stream"] is True
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["tool_choice"] == "required"
    assert body["temperature"] == 0.3
    for key, value in quirks.fields.items():
        assert body.get(key, MISSING) == value, (name, key, body)
    for key in quirks.absent:
        assert key not in body, (name, key, body)
    assert all("strict" not in tool["function"] for tool in body["tools"])

    # The canonical events: in order, with the provider's id replaced by a canonical one.
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    assert isinstance(events[0], MessageStart)
    thinking = "".join(e.thinking for e in events if isinstance(e, ThinkingDelta))
    assert thinking == ("User wants Paris." if quirks.reasoning_field else "")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Checking the weather."
    (start,) = [e for e in events if isinstance(e, ToolUseStart)]
    assert start.tool_name == "get_weather" and start.tool_use_id.startswith("tu_")
    fragments = [e.partial_json for e in events if isinstance(e, ToolUseInputDelta)]
    assert fragments == ['{"city":', ' "Paris"}']
    (end,) = [e for e in events if isinstance(e, ToolUseEnd)]
    assert end.final_input == {"city": "Paris"} and end.tool_use_id == start.tool_use_id
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert final.stop_reason.kind is StopKind.TOOL_USE and final.stop_reason.raw == "tool_calls"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (61, 17)
    kinds = [type(b) for b in final.final_content]
    expected = [TextBlock, ToolUseBlock]
    assert kinds == ([ThinkingBlock, *expected] if quirks.reasoning_field else expected)
    await adapter.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(STACKS))
async def test_complete_gives_the_same_content_from_a_json_body(name: str) -> None:
    quirks = STACKS[name]
    peer = Peer(reasoning_field=quirks.reasoning_field)
    response = await adapter_for(name, peer).complete(weather_request(name, stream=False))
    body = peer.body()
    assert body["stream"] is False and "stream_options" not in body
    for key in ("max_tokens", "max_completion_tokens"):
        if key in quirks.fields:
            assert body[key] == 1024
    calls = response.tool_calls
    assert [(c.name, c.input) for c in calls] == [("get_weather", {"city": "Paris"})]
    assert response.stop_reason.kind is StopKind.TOOL_USE
    assert response.text == "Checking the weather."


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(STACKS))
async def test_history_from_another_provider_gets_ids_this_server_accepts(name: str) -> None:
    """A call made elsewhere (canonical id only) reaches each server under a derived id that
    fits its rules (Mistral: exactly 9 of [A-Za-z0-9]), the same in the call and its answer."""
    peer = Peer(reasoning_field=STACKS[name].reasoning_field)
    call_id = new_tool_id()
    history = [
        Message.user("Weather in Paris?"),
        Message(
            role=Role.ASSISTANT,
            content=[ToolUseBlock(id=call_id, name="get_weather", input={"city": "Paris"})],
        ),
        Message.tool(ToolResultBlock(tool_use_id=call_id, content="sunny")),
    ]
    request = weather_request(name).model_copy(update={"messages": history})
    await collect(adapter_for(name, peer), request)
    messages = peer.body()["messages"]
    assistant = next(m for m in messages if m["role"] == "assistant")
    answer = next(m for m in messages if m["role"] == "tool")
    sent_id = assistant["tool_calls"][0]["id"]
    assert STACKS[name].tool_id.match(sent_id), sent_id
    assert answer["tool_call_id"] == sent_id
    assert messages.index(answer) == messages.index(assistant) + 1


@pytest.mark.anyio
async def test_deepseek_gets_its_own_reasoning_back_on_a_tool_call_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Thinking mode requires `reasoning_content` back on every assistant turn that made tool
    calls (400 "The reasoning_content in the thinking mode must be passed back to the API"):
    DeepSeek's own reasoning goes back there, with no WARN; reasoning from another model or
    provider never does (a tool-call turn made elsewhere carries a placeholder)."""
    peer = Peer(reasoning_field="reasoning_content")
    adapter = adapter_for("deepseek", peer)
    unset = {"parallel_tool_calls": None}  # deepseek's stack drops it, reported
    ask = weather_request("deepseek", stream=False).model_copy(update=unset)
    first = await adapter.complete(ask)
    thought = first.content[0]
    assert isinstance(thought, ThinkingBlock) and thought.thinking == "User wants Paris."
    results = Message.tool(
        *(ToolResultBlock(tool_use_id=c.id, content="sunny") for c in first.tool_calls)
    )
    caplog.set_level("WARNING", logger="metis")
    own = [Message.user("Weather in Paris?"), Message.assistant(*first.content), results]
    second = await adapter.complete(
        weather_request("deepseek").model_copy(update={"messages": own, **unset})
    )
    assistant = assistant_of(peer.body())
    assert assistant["reasoning_content"] == "User wants Paris." and assistant["tool_calls"]
    assert lossy_warnings(caplog) == [] and second.warnings == []

    elsewhere = thought.model_copy(
        update={"provider_raw": thought.provider_raw.model_copy(update={"model": "deepseek:x"})}  # type: ignore[union-attr]
    )
    foreign = [own[0], Message.assistant(elsewhere, *first.content[1:]), results]
    third = await adapter.complete(
        weather_request("deepseek").model_copy(update={"messages": foreign, **unset})
    )
    assert assistant_of(peer.body())["reasoning_content"] == " "  # a placeholder, required
    assert "User wants Paris." not in json.dumps(peer.body())
    assert [(w.block_type, w.provider) for w in third.warnings] == [("thinking", "deepseek")]
    assert "model deepseek:x" in third.warnings[0].reason


def assistant_of(body: dict[str, Any]) -> dict[str, Any]:
    (assistant,) = [m for m in body["messages"] if m["role"] == "assistant"]
    return assistant  # type: ignore[no-any-return]


@pytest.mark.anyio
async def test_openrouter_takes_reasoning_effort_nested_and_attribution_headers() -> None:
    peer = Peer(reasoning_field="reasoning")
    adapter = adapter_for(
        "openrouter",
        peer,
        extra_headers={"HTTP-Referer": "https://app.example", "X-OpenRouter-Title": "Example"},
    )
    request = weather_request("openrouter", thinking=ThinkingConfig(budget_tokens=4096))
    await collect(adapter, request)
    body = peer.body()
    assert body["reasoning"] == {"effort": "medium"} and "reasoning_effort" not in body
    sent = peer.requests[0].headers
    assert sent["http-referer"] == "https://app.example"
    assert sent["x-openrouter-title"] == "Example"


@pytest.mark.anyio
async def test_deepseek_refuses_images_before_sending() -> None:
    from metis import CapabilityError
    from metis.model import Base64ImageSource, ImageBlock

    peer = Peer()
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
    request = weather_request("deepseek").model_copy(
        update={"messages": [Message.user("What is this?", image)]}
    )
    with pytest.raises(CapabilityError, match="images"):
        await collect(adapter_for("deepseek", peer), request)
    assert peer.requests == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "status", "payload", "error_class"),
    [
        # Mistral's 422 for a field it does not know: detail is a list, not a string.
        (
            "mistral",
            422,
            {
                "object": "error",
                "message": {"detail": [{"type": "extra_forbidden", "loc": ["body", "x"]}]},
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            },
            ErrorClass.INVALID_REQUEST,
        ),
        # vLLM's flat error object.
        (
            "vllm",
            400,
            {
                "object": "error",
                "message": "bad tool_choice",
                "type": "BadRequestError",
                "code": 400,
            },
            ErrorClass.INVALID_REQUEST,
        ),
        # llama-server's error, with an integer code.
        (
            "llamacpp",
            503,
            {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
            None,
        ),
        ("groq", 429, {"error": {"message": "Rate limit reached", "type": "tokens"}}, None),
        ("openrouter", 402, {"error": {"code": 402, "message": "Insufficient credits"}}, None),
        ("deepseek", 401, {"error": {"message": "Authentication Fails", "type": "auth"}}, None),
        ("together", 500, "<html>upstream error</html>", None),
    ],
)
async def test_error_bodies_of_these_servers_are_classified(
    name: str, status: int, payload: Any, error_class: ErrorClass | None
) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if isinstance(payload, str):
            return httpx.Response(status, text=payload)
        return httpx.Response(status, json=payload)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    adapter = build_adapter(name, AdapterConfig(api_key=KEY, http_client=client, max_retries=0))
    with pytest.raises(AdapterError) as caught:
        await adapter.complete(weather_request(name, stream=False))
    assert caught.value.provider_status == status
    if error_class is not None:
        assert caught.value.error_class is error_class


# A new provider, by YAML alone ---------------------------------------------------------------

ACME_STACK = """
name: acme
description: a made-up OpenAI-compatible service
endpoint: {base_url: "https://llm.acme.test", path: /api/v2/chat}
auth: {header: x-acme-key, env: ACME_API_KEY}
headers: {x-acme-client: metis}
capabilities: {supports_tools: true, supports_streaming_tool_calls: true,
               max_context_tokens: 32000, max_output_tokens: 4000}
stages:
  - invariants
  - capability_check
  - system_hoist
  - tool_result_check
  - tool_ids: {prefix: call_}
  - thinking_filter
  - encode: {codec: openai_chat}
  - include_usage
  - wire_fields:
      rename: {max_completion_tokens: max_new_tokens}
      drop: [parallel_tool_calls]
      set: {acme: {priority: low}}
  - retry
  - normalize: {codec: openai_chat}
  - decode: {format: sse}
  - transport
"""


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_a_new_compatible_provider_needs_only_a_yaml_file(
    tmp_path: Path, streaming: bool
) -> None:
    path = tmp_path / "acme.yaml"
    path.write_text(ACME_STACK, encoding="utf-8")
    peer = Peer(tool_id="acme-call-1")
    adapter = build_adapter(path, AdapterConfig(api_key="acme-secret", http_client=peer.client()))
    assert adapter.name == "acme"
    request = weather_request("acme", stream=streaming)

    if streaming:
        events = await collect(adapter, request)
        final = events[-1]
        assert isinstance(final, MessageComplete)
        content, stop = final.final_content, final.stop_reason
        usage = final.usage
    else:
        response = await adapter.complete(request)
        assert isinstance(response, CanonicalResponse)
        content, stop, usage = response.content, response.stop_reason, response.usage

    sent = peer.requests[0]
    assert str(sent.url) == "https://llm.acme.test/api/v2/chat"
    assert sent.headers["x-acme-key"] == "acme-secret"  # no scheme: the key as it is
    assert "authorization" not in sent.headers
    assert sent.headers["x-acme-client"] == "metis"
    body = peer.body()
    assert body["model"] == "m"  # "acme:" is the stack's own prefix
    assert body["max_new_tokens"] == 1024 and "max_completion_tokens" not in body
    assert "parallel_tool_calls" not in body
    assert body["acme"] == {"priority": "low"}
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert ("stream_options" in body) is streaming

    assert [type(b) for b in content] == [TextBlock, ToolUseBlock]
    call = content[1]
    assert isinstance(call, ToolUseBlock)
    assert (call.name, call.input) == ("get_weather", {"city": "Paris"})
    assert call.id.startswith("tu_")
    assert stop.kind is StopKind.TOOL_USE
    assert (usage.input_tokens, usage.output_tokens) == (61, 17)

    # The issued id is remembered: answering the call sends Acme its own id back.
    history = [
        *request.messages,
        Message(role=Role.ASSISTANT, content=content),
        Message.tool(ToolResultBlock(tool_use_id=call.id, content="sunny")),
    ]
    await adapter.complete(request.model_copy(update={"messages": history, "stream": False}))
    answer = next(m for m in peer.body()["messages"] if m["role"] == "tool")
    assert answer["tool_call_id"] == "acme-call-1"


def test_a_stack_file_with_a_bad_wire_fields_option_fails_to_load(tmp_path: Path) -> None:
    from metis.errors import StackError

    path = tmp_path / "broken.yaml"
    path.write_text(ACME_STACK.replace("drop: [parallel_tool_calls]", "drop: [a..b]"))
    with pytest.raises(StackError, match=r"broken\.yaml.*wire_fields.*empty segment"):
        build_adapter(path, AdapterConfig(api_key="k"))


def test_every_wire_fields_option_in_the_built_in_stacks_is_well_formed() -> None:
    for name in STACKS:
        for entry in load_stack(name).stages:
            if entry.name == "wire_fields":
                WireFields(**entry.options)  # raises on a malformed path
