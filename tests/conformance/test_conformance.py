"""The conformance suite, over every built-in stack (docs/contract.md).

One table (tests/stack_table.py) lists every stack the emulator serves: the provider families,
the cloud platforms (Bedrock, Vertex AI, Azure OpenAI), the OpenAI-compatible long tail and
the Responses WebSocket stacks. Each must pass the same checks over real sockets: a tool-call
round trip with the stream invariants, canonical tool ids and every usage field; a tool loop
that sends the result back; a 429 retried; a failure mid-stream; an in-stream error
classified; cancellation; and capability refusal before anything is sent. The seven
compatible stacks the emulator serves only as OpenAI are checked for their own wire quirks
in tests/conformance/test_compatible_stacks.py; together the two cover every built-in stack
(the last test here). Conversations across stacks: tests/conformance/test_conversations.py.
"""

from __future__ import annotations

import anyio
import pytest

from metis import AdapterError, CapabilityError, ErrorClass, NetworkError
from metis.model import (
    Base64ImageSource,
    CanonicalRequest,
    ImageBlock,
    Message,
    Role,
    StreamEvent,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.response import StopKind
from metis.testing.emulator import Emulator

from ..stack_table import (
    DEADLINE,
    MODELS,
    NO_TOOLS,
    WEATHER,
    adapter,
    checked,
    request,
    story,
    target,
)

pytestmark = pytest.mark.usefixtures("no_backoff")  # a 429 is retried, not waited for
STACKS = list(MODELS)
WITH_TOOLS = [s for s in STACKS if s not in NO_TOOLS]


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("stack", STACKS)
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
@pytest.mark.parametrize("stack", WITH_TOOLS)
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
@pytest.mark.parametrize("stack", STACKS)
async def test_a_rate_limit_is_retried(stack: str, emulator: Emulator) -> None:
    a = adapter(stack, emulator)
    emulator.push_fault("rate_limit=1", provider=target(stack))
    with anyio.fail_after(DEADLINE):
        events = [e async for e in a.stream(request(stack))]
    checked(events)
    assert emulator.stats.requests == 2  # the 429, then the retry that succeeded
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("stack", STACKS)
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
@pytest.mark.parametrize("stack", STACKS)
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
@pytest.mark.parametrize("stack", STACKS)
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
@pytest.mark.parametrize("stack", STACKS)
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


@pytest.mark.anyio
async def test_a_vision_request_to_a_text_only_model_fails_before_any_network_call() -> None:
    """Through the registry: the model's declared capabilities (here
    overridden to text-only) are enforced before the adapter sends anything."""
    from metis import CapabilityError, Registry
    from metis.model import Base64ImageSource, ImageBlock

    sent: list[object] = []

    def handler(request: object) -> object:
        sent.append(request)
        raise AssertionError("no request may be sent")

    import httpx

    registry = Registry.from_dict(
        {
            "adapters": {"openai": {"type": "openai", "api_key_env": "OPENAI_API_KEY"}},
            "models": {
                "openai:gpt-text": {
                    "adapter": "openai",
                    "wire_name": "gpt-text",
                    "aliases": ["texty"],
                    "capabilities": {"supports_images": False},
                }
            },
        },
        environ={"OPENAI_API_KEY": "sk-test"},
        clients={"openai": httpx.AsyncClient(transport=httpx.MockTransport(handler))},  # type: ignore[arg-type]
    )
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
    adapter, request = registry.request(
        "texty", messages=[Message.user("What is this?", image)], max_output_tokens=100
    )
    with pytest.raises(CapabilityError, match="images"):
        await adapter.complete(request)
    with pytest.raises(CapabilityError, match="images"):
        async for _ in adapter.stream(request):
            pass
    assert sent == []
    await registry.aclose()


def test_every_built_in_stack_is_covered() -> None:
    from metis.stacks.loader import builtin_stacks

    from .test_compatible_stacks import STACKS as COMPATIBLE  # their wire quirks, checked there

    assert set(builtin_stacks()) == set(MODELS) | set(COMPATIBLE)
