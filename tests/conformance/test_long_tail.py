"""The OpenAI-compatible long tail: one short stack each, YAML only.

Each stack is a few lines over openai_compatible (open_responses over openai_responses): its
documented base URL and path, key variable and catalog id, and its documented quirks as
wire_fields edits. Here each sends the same canonical request through a mock peer and the wire
request is checked against that provider's documentation; the stacks' size, parents and catalog
ids are checked, and a key that is not set is named before anything is sent. (The conformance
suite runs over all of them in tests/conformance/test_conformance.py.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

import httpx
import pytest
import yaml

from metis import AdapterConfig, CapabilityError, build_adapter
from metis.catalog import default_catalog
from metis.model import CanonicalRequest, Message, ToolDefinition
from metis.model.content import ToolResultBlock, ToolUseBlock
from metis.pipeline.stores import InMemoryToolIdStore
from metis.registry import NotConfiguredError, Registry
from metis.stacks.loader import load_stack

pytestmark = pytest.mark.backend_independent  # replays through a mock transport

KEY = "sk-long-tail-0123456789"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)
CHAT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}


@dataclass(frozen=True)
class Documented:
    url: str
    env: str
    catalog: str | None
    fields: dict[str, Any]  # body fields that must be there, with these values
    absent: tuple[str, ...] = ()  # body fields that must not be there


MAX_TOKENS = {"max_tokens": 256, "stream_options": {"include_usage": True}}
LONG_TAIL: dict[str, Documented] = {
    "xai": Documented(
        "https://api.x.ai/v1/chat/completions",
        "XAI_API_KEY",
        "xai",
        {"max_completion_tokens": 256, "parallel_tool_calls": False},
    ),
    "cerebras": Documented(
        "https://api.cerebras.ai/v1/chat/completions",
        "CEREBRAS_API_KEY",
        "cerebras",
        {"max_completion_tokens": 256},
        absent=("parallel_tool_calls",),  # a 400 on Cerebras
    ),
    "fireworks": Documented(
        "https://api.fireworks.ai/inference/v1/chat/completions",
        "FIREWORKS_API_KEY",
        "fireworks-ai",
        MAX_TOKENS,
        absent=("max_completion_tokens",),
    ),
    "perplexity": Documented(
        "https://api.perplexity.ai/chat/completions",
        "PERPLEXITY_API_KEY",
        "perplexity",
        {"max_tokens": 256},
        absent=("max_completion_tokens", "stream_options", "tools", "parallel_tool_calls"),
    ),
    "deepinfra": Documented(
        "https://api.deepinfra.com/v1/openai/chat/completions",
        "DEEPINFRA_API_KEY",
        "deepinfra",
        MAX_TOKENS,
        absent=("max_completion_tokens",),
    ),
    "nebius": Documented(
        "https://api.tokenfactory.nebius.com/v1/chat/completions",
        "NEBIUS_API_KEY",
        "nebius",
        MAX_TOKENS,
        absent=("max_completion_tokens",),
    ),
    "sambanova": Documented(
        "https://api.sambanova.ai/v1/chat/completions",
        "SAMBANOVA_API_KEY",
        None,
        MAX_TOKENS,
        absent=("max_completion_tokens",),
    ),
    "moonshot": Documented(
        "https://api.moonshot.ai/v1/chat/completions",
        "MOONSHOT_API_KEY",
        "moonshotai",
        MAX_TOKENS,
        absent=("max_completion_tokens",),
    ),
    "zai": Documented(
        "https://api.z.ai/api/paas/v4/chat/completions",
        "ZAI_API_KEY",
        "zai",
        {"max_tokens": 256},
        absent=("max_completion_tokens", "stream_options", "parallel_tool_calls"),
    ),
    "minimax": Documented(
        "https://api.minimax.io/v1/chat/completions",
        "MINIMAX_API_KEY",
        "minimax",
        {"max_completion_tokens": 256},
        absent=("parallel_tool_calls",),
    ),
    "dashscope": Documented(
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1/chat/completions",
        "DASHSCOPE_API_KEY",
        "alibaba",
        {**MAX_TOKENS, "parallel_tool_calls": False},
        absent=("max_completion_tokens",),
    ),
}
NO_TOOLS = {"perplexity"}


def request(stack: str, **fields: Any) -> CanonicalRequest:
    fields.setdefault("tools", [] if stack in NO_TOOLS else [WEATHER])
    fields.setdefault("parallel_tool_calls", False if fields["tools"] else None)
    fields.setdefault("stream", True)
    return CanonicalRequest(
        model=f"{stack}:some-model",
        messages=[Message.user("What's the weather in Paris?")],
        max_output_tokens=256,
        **fields,
    )


def streamed_reply() -> bytes:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "Hi."}, "finish_reason": "stop"}],
        "usage": CHAT_REPLY["usage"],
    }
    return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()


@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(LONG_TAIL))
async def test_each_stack_sends_what_its_provider_documents(stack: str) -> None:
    documented = LONG_TAIL[stack]
    sent: list[httpx.Request] = []

    def peer(http_request: httpx.Request) -> httpx.Response:
        sent.append(http_request)
        return httpx.Response(200, content=streamed_reply())

    config = AdapterConfig(
        api_key=KEY, http_client=httpx.AsyncClient(transport=httpx.MockTransport(peer))
    )
    adapter = build_adapter(stack, config, tool_id_store=InMemoryToolIdStore())
    events = [e async for e in adapter.stream(request(stack))]
    assert events[-1].final_content[0].text == "Hi."  # type: ignore[attr-defined]
    (wire,) = sent
    assert str(wire.url) == documented.url
    assert wire.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(wire.content)
    for name, value in documented.fields.items():
        assert body.get(name) == value, name
    for name in documented.absent:
        assert name not in body, name


@pytest.mark.parametrize("stack", [*LONG_TAIL, "open_responses"])
def test_each_stack_is_a_short_extension_with_its_key_and_catalog(stack: str) -> None:
    text = (resources.files("metis.stacks.builtin") / f"{stack}.yaml").read_text()
    yaml_lines = [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    assert len(yaml_lines) <= 15
    raw = yaml.safe_load(text)
    spec = load_stack(stack)
    if stack == "open_responses":
        assert raw["extends"] == "openai_responses" and spec.auth.optional
        assert spec.catalog is None and spec.auth.env == "OPEN_RESPONSES_API_KEY"
        return
    documented = LONG_TAIL[stack]
    assert raw["extends"] == "openai_compatible"
    assert spec.auth.env == documented.env and not spec.auth.optional
    assert spec.catalog == documented.catalog
    if documented.catalog is not None:
        assert default_catalog().models(documented.catalog), documented.catalog


@pytest.mark.parametrize("stack", list(LONG_TAIL))
def test_a_key_that_is_not_set_is_named_before_anything_is_sent(stack: str) -> None:
    registry = Registry.from_dict(
        {"adapters": {stack: {"type": stack}}, "models": {f"{stack}:m": {"adapter": stack}}},
        environ={},
    )
    with pytest.raises(NotConfiguredError, match=LONG_TAIL[stack].env):
        registry.adapter(f"{stack}:m")


@pytest.mark.anyio
async def test_perplexity_refuses_tools_before_sending() -> None:
    sent: list[httpx.Request] = []
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(500))
    )
    adapter = build_adapter("perplexity", AdapterConfig(api_key=KEY, http_client=client))
    with pytest.raises(CapabilityError):
        await adapter.complete(request("perplexity", tools=[WEATHER]))
    assert sent == []


@pytest.mark.anyio
async def test_open_responses_is_stateless_and_sends_the_whole_conversation() -> None:
    sent: list[dict[str, Any]] = []

    def peer(http_request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(http_request.content))
        return httpx.Response(
            200,
            json={
                "id": f"resp_{len(sent)}",
                "object": "response",
                "status": "completed",
                "model": "m",
                "output": [
                    {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_1",
                        "name": "get_weather",
                        "arguments": '{"city": "Paris"}',
                        "status": "completed",
                    }
                ],
                "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
            },
        )

    config = AdapterConfig(
        base_url="http://127.0.0.1:9",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(peer)),
    )
    adapter = build_adapter("open_responses", config, tool_id_store=InMemoryToolIdStore())
    first = request("open_responses", session_id="s", stream=False, parallel_tool_calls=None)
    reply = await adapter.complete(first)
    (call,) = [b for b in reply.content if isinstance(b, ToolUseBlock)]
    history = [
        *first.messages,
        Message.assistant(call),
        Message.user(ToolResultBlock(tool_use_id=call.id, content="Sunny")),
    ]
    await adapter.complete(first.model_copy(update={"messages": history}))
    assert "previous_response_id" not in sent[1]
    assert [item.get("type") for item in sent[1]["input"]][-2:] == [
        "function_call",
        "function_call_output",
    ]
