"""The conformance suite over the cloud and long-tail stacks, against metis.testing.emulator.

Mirrors tests/test_conformance_all.py for the stacks added with Vertex AI, Azure OpenAI and
the OpenAI-compatible long tail: a tool-call round trip with the stream invariants, canonical
tool ids and usage, a 429 retried, a dropped stream, an error inside the stream, cancellation,
and capability refusal before anything is sent. Vertex and Azure run at their own paths with
their own authentication (a faked Google credential, an ``api-key``); the long tail is served
by the emulator's OpenAI Chat endpoint at each provider's path.
"""

from __future__ import annotations

import datetime
from typing import Any

import anyio
import pytest

from metis import (
    AdapterConfig,
    AdapterError,
    CapabilityError,
    ErrorClass,
    NetworkError,
    build_adapter,
)
from metis.adapter import Adapter
from metis.model import (
    Base64ImageSource,
    CanonicalRequest,
    ImageBlock,
    Message,
    MessageComplete,
    Role,
    StreamEvent,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stages.policy.invariants import StreamChecker
from metis.testing.emulator import Emulator

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for


TOKEN = "ya29.test-token"
CLOUD = {
    "vertex": "vertex:gemini-2.5-flash",
    "vertex_anthropic": "vertex_anthropic:claude-sonnet-4-5@20250929",
    "azure": "azure:my-gpt-4o-deployment",
    "azure_responses": "azure_responses:my-gpt-5-deployment",
}
LONG_TAIL = {
    "xai": "xai:grok-4",
    "cerebras": "cerebras:gpt-oss-120b",
    "fireworks": "fireworks:accounts/fireworks/models/kimi-k2-instruct",
    "perplexity": "perplexity:sonar-pro",
    "deepinfra": "deepinfra:meta-llama/Llama-3.3-70B-Instruct",
    "nebius": "nebius:meta-llama/Llama-3.3-70B-Instruct",
    "sambanova": "sambanova:Meta-Llama-3.3-70B-Instruct",
    "moonshot": "moonshot:kimi-k2-0905-preview",
    "zai": "zai:glm-4.6",
    "minimax": "minimax:MiniMax-M2",
    "dashscope": "dashscope:qwen-plus",
    "open_responses": "open_responses:some-model",
}
WEBSOCKET = {  # OpenAI's and Azure's Responses over WebSocket (docs/websocket.md)
    "openai_responses_ws": "openai_responses_ws:gpt-5",
    "azure_responses_ws": "azure_responses_ws:my-gpt-5-deployment",
}
MODELS = {**CLOUD, **LONG_TAIL, **WEBSOCKET}
EMULATED_AS = {
    **dict.fromkeys(LONG_TAIL, "openai"),
    "open_responses": "openai_responses",
    "openai_responses_ws": "openai_responses",
    "azure_responses_ws": "azure_responses",
}
NO_TOOLS = {"perplexity"}  # Sonar has no tool calling: the stack refuses tools unsent
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
DEADLINE = 20.0


def google_credentials() -> Any:
    """A google-auth credential holding a valid token (the test extra installs google-auth)."""
    from google.oauth2.credentials import Credentials

    expiry = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(hours=1)
    return Credentials(token=TOKEN, expiry=expiry)


def adapter(stack: str, emulator: Emulator, **config: Any) -> Adapter:
    options: dict[str, Any] = {}
    api_key: str | None = "test-key"
    if stack.startswith("vertex"):
        options = {"project": "proj-1", "location": "us-east5"}
        options["google_credentials"] = google_credentials()
        api_key = None
    settings = AdapterConfig(
        api_key=api_key,
        base_url=emulator.base_url(EMULATED_AS.get(stack, stack)),
        options=options,
        capabilities=config.pop("capabilities", {}),
        **config,
    )
    return build_adapter(stack, settings, tool_id_store=InMemoryToolIdStore())


def request(
    stack: str, text: str = "What's the weather in Paris?", **fields: Any
) -> CanonicalRequest:
    fields.setdefault("tools", [] if stack in NO_TOOLS else [WEATHER])
    return CanonicalRequest(
        model=MODELS[stack],
        session_id=f"conformance-{stack}",
        messages=[Message.user(text)],
        max_output_tokens=512,
        **fields,
    )


def story(stack: str) -> CanonicalRequest:
    return request(stack, "Tell me a long story about the sea.", tools=[])


def target(stack: str) -> str:
    return EMULATED_AS.get(stack, stack)


def checked(events: list[StreamEvent]) -> MessageComplete:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return final


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(MODELS))
async def test_a_tool_call_round_trip_keeps_invariants_ids_and_usage(
    stack: str, emulator: Emulator
) -> None:
    a = adapter(stack, emulator)
    if stack in NO_TOOLS:
        with pytest.raises(CapabilityError):
            await a.complete(request(stack, tools=[WEATHER]))
        assert emulator.stats.requests == 0
        final = checked([e async for e in a.stream(request(stack))])
        assert final.stop_reason.kind is StopKind.END_TURN and final.usage.output_tokens > 0
        return await a.aclose()
    with anyio.fail_after(DEADLINE):
        events = [e async for e in a.stream(request(stack))]
        final = checked(events)
        (call,) = [b for b in final.final_content if b.type == "tool_use"]
        assert call.id.startswith("tu_") and call.name == "get_weather"  # type: ignore[union-attr]
        assert call.input == {"city": "Paris"}  # type: ignore[union-attr]
        assert final.stop_reason.kind is StopKind.TOOL_USE
        assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
        response = await a.complete(request(stack))
    assert [b.type for b in response.content] == [b.type for b in final.final_content]
    assert {r.status for r in emulator.requests} == {200}
    await a.aclose()


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("stack", [s for s in MODELS if s not in NO_TOOLS])
async def test_a_tool_loop_sends_the_result_back_and_ends_the_turn(
    stack: str, emulator: Emulator
) -> None:
    a = adapter(stack, emulator)
    first = request(stack)
    with anyio.fail_after(DEADLINE):
        reply = await a.complete(first)
        (call,) = [b for b in reply.content if isinstance(b, ToolUseBlock)]
        history = [
            *first.messages,
            Message(role=Role.ASSISTANT, content=reply.content),
            Message.user(ToolResultBlock(tool_use_id=call.id, content="Sunny, 21 C")),
        ]
        final = checked([e async for e in a.stream(first.model_copy(update={"messages": history}))])
    assert final.stop_reason.kind is StopKind.END_TURN
    assert any(b.type == "text" and b.text for b in final.final_content)  # type: ignore[union-attr]
    assert {r.status for r in emulator.requests} == {200}
    await a.aclose()


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(MODELS))
async def test_a_rate_limit_is_retried(stack: str, emulator: Emulator) -> None:
    a = adapter(stack, emulator)
    emulator.push_fault("rate_limit=1", provider=target(stack))
    with anyio.fail_after(DEADLINE):
        events = [e async for e in a.stream(request(stack))]
    checked(events)
    assert emulator.stats.requests == 2  # the 429, then the retry that succeeded
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(MODELS))
async def test_a_dropped_stream_ends_with_its_partial_message_then_a_network_error(
    stack: str, emulator: Emulator
) -> None:
    a = adapter(stack, emulator)
    emulator.push_fault("drop=3", provider=target(stack), times=3)
    events: list[StreamEvent] = []
    with anyio.fail_after(DEADLINE), pytest.raises(NetworkError):
        async for event in a.stream(story(stack)):
            events.append(event)
    assert checked(events).stop_reason.kind is StopKind.ERROR
    assert emulator.stats.requests == 1  # an event had reached us: not retried
    await a.aclose()


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(MODELS))
async def test_an_error_inside_the_stream_is_classified(stack: str, emulator: Emulator) -> None:
    a = adapter(stack, emulator, max_retries=0)
    emulator.push_fault("stream_error=server_error;after=2", provider=target(stack))
    events: list[StreamEvent] = []
    with anyio.fail_after(DEADLINE), pytest.raises(AdapterError) as caught:
        async for event in a.stream(story(stack)):
            events.append(event)
    assert caught.value.error_class in (ErrorClass.SERVER_ERROR, ErrorClass.OVERLOADED)
    if events:
        assert checked(events).stop_reason.kind is StopKind.ERROR
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(MODELS))
async def test_cancel_mid_stream_ends_cleanly(stack: str, emulator: Emulator) -> None:
    a = adapter(stack, emulator)
    emulator.push_fault("stall=30;after=2", provider=target(stack))
    req = story(stack)
    events: list[StreamEvent] = []

    async def consume() -> None:
        async for event in a.stream(req):
            events.append(event)

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            while not events:  # noqa: ASYNC110 (the stream stalls right after its first events)
                await anyio.sleep(0.01)
            assert a.cancel(req.request_id) is True
    assert checked(events).stop_reason.kind is StopKind.CANCELLED
    await a.aclose()


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(MODELS))
async def test_what_the_model_cannot_do_is_refused_before_sending(
    stack: str, emulator: Emulator
) -> None:
    a = adapter(stack, emulator, capabilities={"supports_images": False})
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
    req = CanonicalRequest(
        model=MODELS[stack], messages=[Message.user("What is this?", image)], max_output_tokens=64
    )
    with pytest.raises(CapabilityError):
        await a.complete(req)
    assert emulator.stats.requests == 0
    await a.aclose()
