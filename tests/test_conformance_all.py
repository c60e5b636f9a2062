"""The conformance suite, for every provider stack, over real sockets (issue 4).

Each stack talks to metis.testing.emulator, a loopback server speaking that provider's wire
format and refusing what the real API refuses, and must pass the same checks as Anthropic and OpenAI
Chat: a tool-call round trip with the stream invariants, tool ids, every usage field, retry
of a transient error, a failure mid-stream, an in-stream error, cancellation, and capability
refusal before anything is sent.
"""

from __future__ import annotations

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
    StreamEvent,
    ToolDefinition,
)
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stages.policy.invariants import StreamChecker
from metis.testing.emulator import Emulator

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for

MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o",
    "openai_responses": "openai_responses:gpt-4o",
    "gemini": "gemini:gemini-2.5-flash",
    "ollama": "ollama:qwen3",
    "groq": "groq:llama-3.3-70b-versatile",
    "tgi": "tgi:tgi",
    "bedrock": "bedrock:us.amazon.nova-pro-v1:0",
    "bedrock_anthropic": "bedrock_anthropic:us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "bedrock_mantle": "bedrock_mantle:openai.gpt-oss-120b-1:0",
}
EMULATED_AS = {
    "groq": "openai",
    "tgi": "openai",
    "bedrock_anthropic": "bedrock",
    "bedrock_mantle": "openai",
}
PROVIDERS = list(MODELS)
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


def adapter(provider: str, emulator: Emulator, **config: Any) -> Adapter:
    caps = {"supports_tools": True} if provider == "ollama" else {}
    caps.update(config.pop("capabilities", {}))
    settings = AdapterConfig(
        api_key="test-key",
        base_url=emulator.base_url(EMULATED_AS.get(provider, provider)),
        capabilities=caps,
        **config,
    )
    built = build_adapter(provider, settings, tool_id_store=InMemoryToolIdStore())
    return built


def request(
    provider: str, text: str = "What's the weather in Paris?", **fields: Any
) -> CanonicalRequest:
    fields.setdefault("tools", [WEATHER])
    return CanonicalRequest(
        model=MODELS[provider],
        session_id=f"conformance-{provider}",
        messages=[Message.user(text)],
        max_output_tokens=512,
        **fields,
    )


def fault_target(provider: str) -> str:
    return EMULATED_AS.get(provider, provider)


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
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_tool_call_round_trip_keeps_invariants_ids_and_usage(
    provider: str, emulator: Emulator
) -> None:
    a = adapter(provider, emulator)
    with anyio.fail_after(DEADLINE):
        events = [e async for e in a.stream(request(provider))]
        final = checked(events)
        (call,) = [b for b in final.final_content if b.type == "tool_use"]
        assert call.id.startswith("tu_") and call.name == "get_weather"  # type: ignore[union-attr]
        assert call.input == {"city": "Paris"}  # type: ignore[union-attr]
        assert final.stop_reason.kind is StopKind.TOOL_USE
        assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
        response = await a.complete(request(provider))
    assert [b.type for b in response.content] == [b.type for b in final.final_content]
    await a.aclose()


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_rate_limit_is_retried(provider: str, emulator: Emulator) -> None:
    a = adapter(provider, emulator)
    emulator.push_fault("rate_limit=1", provider=fault_target(provider))
    with anyio.fail_after(DEADLINE):
        events = [e async for e in a.stream(request(provider))]
    checked(events)
    assert emulator.stats.requests == 2  # the 429, then the retry that succeeded
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_dropped_stream_ends_with_its_partial_message_then_a_network_error(
    provider: str, emulator: Emulator
) -> None:
    a = adapter(provider, emulator)
    emulator.push_fault("drop=3", provider=fault_target(provider), times=3)
    events: list[StreamEvent] = []
    with anyio.fail_after(DEADLINE), pytest.raises(NetworkError):
        async for event in a.stream(
            request(provider, "Tell me a long story about the sea.", tools=[])
        ):
            events.append(event)
    final = checked(events)
    assert final.stop_reason.kind is StopKind.ERROR
    assert emulator.stats.requests == 1  # an event had reached us: not retried
    await a.aclose()


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_error_inside_the_stream_is_classified(provider: str, emulator: Emulator) -> None:
    a = adapter(provider, emulator, max_retries=0)
    emulator.push_fault("stream_error=server_error;after=2", provider=fault_target(provider))
    events: list[StreamEvent] = []
    with anyio.fail_after(DEADLINE), pytest.raises(AdapterError) as caught:
        async for event in a.stream(
            request(provider, "Tell me a long story about the sea.", tools=[])
        ):
            events.append(event)
    assert caught.value.error_class in (ErrorClass.SERVER_ERROR, ErrorClass.OVERLOADED)
    if events:
        assert checked(events).stop_reason.kind is StopKind.ERROR
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cancel_mid_stream_ends_cleanly(provider: str, emulator: Emulator) -> None:
    a = adapter(provider, emulator)
    emulator.push_fault("stall=30;after=2", provider=fault_target(provider))
    req = request(provider, "Tell me a long story about the sea.", tools=[])
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
    final = checked(events)
    assert final.stop_reason.kind is StopKind.CANCELLED
    await a.aclose()


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_what_the_model_cannot_do_is_refused_before_sending(
    provider: str, emulator: Emulator
) -> None:
    a = adapter(provider, emulator, capabilities={"supports_images": False})
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
    req = CanonicalRequest(
        model=MODELS[provider],
        messages=[Message.user("What is this?", image)],
        max_output_tokens=64,
    )
    with pytest.raises(CapabilityError):
        await a.complete(req)
    assert emulator.stats.requests == 0
    await a.aclose()


def test_every_built_in_stack_is_covered() -> None:
    from metis.stacks.loader import builtin_stacks

    compatible = {
        "openrouter",
        "mistral",
        "deepseek",
        "together",
        "vllm",
        "llamacpp",
        "openai_compatible",
    }
    from .test_cloud_conformance import MODELS as CLOUD_AND_LONG_TAIL  # run there

    assert set(builtin_stacks()) == set(MODELS) | compatible | set(CLOUD_AND_LONG_TAIL)
