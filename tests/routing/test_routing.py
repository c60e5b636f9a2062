"""The router: fallback across providers, capability skips, streams, telemetry, one-line calls.
The route's decisions go through the emulator in process (no sockets: tests/transport has
them); the cancellation tests and the sync one-line calls reach it over loopback."""

from __future__ import annotations

import anyio
import pytest

import metis
from metis import CapabilityError, ErrorClass, OverloadedError, RateLimitError, WebSearch
from metis.adapter import Adapter
from metis.core.options import UnknownOptionError
from metis.errors import ContextOverflowError
from metis.model import (
    Base64ImageSource,
    ImageBlock,
    Message,
    MessageComplete,
    MessageStart,
    Role,
    TextBlock,
    ThinkingConfig,
)
from metis.model.response import StopKind
from metis.routing import InMemoryAvailability, Limits, Router, RouteTarget, State
from metis.telemetry import AvailabilityChanged, ListSink, RouteDecided
from metis.testing.emulator import Emulator

from ..routing_helpers import MODELS, ask, emulated

pytestmark = [
    pytest.mark.usefixtures("no_backoff"),  # retries are not waited for
    pytest.mark.backend_independent,  # the route's decisions; cancellation runs under both
]

DEADLINE = 20.0


def router(
    emulator: Emulator,
    order: list[str],
    sink: ListSink | None = None,
    *,
    sockets: bool = False,
    **kw: object,
):
    adapters = in_process(emulator) if not sockets else emulated(emulator)
    return Router(
        [MODELS[p] for p in order],
        adapters=adapters,
        max_retries=0,
        telemetry=sink,
        **kw,  # type: ignore[arg-type]
    )


def in_process(emulator: Emulator, **config: object) -> dict[str, Adapter]:
    """:func:`emulated` adapters answered by the emulator in process, with no socket."""
    return emulated(emulator, http_client=emulator.client(), **config)


def decision(sink: ListSink) -> RouteDecided:
    (found,) = [e for e in sink.events if isinstance(e, RouteDecided)]
    return found


@pytest.mark.anyio
async def test_an_overloaded_first_model_fails_over_to_another_provider(
    emulator: Emulator,
) -> None:
    sink = ListSink()
    route = router(emulator, ["anthropic", "openai"], sink)
    emulator.push_fault("overloaded", provider="anthropic")
    with anyio.fail_after(DEADLINE):
        response = await route.complete(ask())
    assert response.provider == "openai" and response.model == MODELS["openai"]
    assert response.tool_calls[0].input == {"city": "Paris"}
    assert [r.provider for r in emulator.requests] == ["anthropic", "openai"]
    assert [(m, o) for m, o, _ in decision(sink).steps] == [
        (MODELS["anthropic"], "failed"),
        (MODELS["openai"], "served"),
    ]
    assert decision(sink).served_by == MODELS["openai"]
    change = next(e for e in sink.events if isinstance(e, AvailabilityChanged))
    assert (change.key, change.old_state, change.new_state, change.reason) == (
        MODELS["anthropic"],
        "available",
        "cooling_down",
        "overloaded",
    )
    await route.aclose()


@pytest.mark.anyio
async def test_the_adapter_retries_first_as_configured_per_model(emulator: Emulator) -> None:
    adapters = in_process(emulator)
    route = Router(
        [RouteTarget(MODELS["anthropic"], max_retries=2), MODELS["gemini"]],
        adapters=adapters,
    )
    emulator.push_fault("overloaded", times=3, provider="anthropic")
    with anyio.fail_after(DEADLINE):
        response = await route.complete(ask())
    assert response.provider == "gemini"
    assert [r.provider for r in emulator.requests] == ["anthropic"] * 3 + ["gemini"]


@pytest.mark.anyio
@pytest.mark.parametrize("fault", ["rate_limit=0", "server_error", "drop=0"])
async def test_each_transient_class_moves_on_by_default(emulator: Emulator, fault: str) -> None:
    route = router(emulator, ["openai", "gemini"])
    emulator.push_fault(fault, provider="openai")
    with anyio.fail_after(DEADLINE):
        assert (await route.complete(ask())).provider == "gemini"


@pytest.mark.anyio
async def test_auth_does_not_move_on_unless_configured(emulator: Emulator) -> None:
    sink = ListSink()
    route = router(emulator, ["anthropic", "openai"], sink)
    emulator.push_fault("auth", provider="anthropic")
    with anyio.fail_after(DEADLINE), pytest.raises(metis.AdapterError) as raised:
        await route.complete(ask())
    assert raised.value.error_class is ErrorClass.AUTH
    assert [r.provider for r in emulator.requests] == ["anthropic"]
    assert decision(sink).served_by is None

    configured = router(emulator, ["anthropic", "openai"], fallback_on=["auth", "overloaded"])
    emulator.push_fault("auth", provider="anthropic")
    with anyio.fail_after(DEADLINE):
        assert (await configured.complete(ask())).provider == "openai"


@pytest.mark.anyio
async def test_a_request_the_provider_refuses_is_raised_at_once(emulator: Emulator) -> None:
    sink = ListSink()
    route = router(emulator, ["anthropic", "openai"], sink)
    emulator.push_fault("context_overflow", provider="anthropic")
    with anyio.fail_after(DEADLINE), pytest.raises(ContextOverflowError):
        await route.complete(ask())
    assert [r.provider for r in emulator.requests] == ["anthropic"]
    assert decision(sink).steps[0][1] == "failed"
    # the provider answered: the model is not cooled down for the caller's mistake
    assert not [e for e in sink.events if isinstance(e, AvailabilityChanged)]


@pytest.mark.anyio
async def test_per_model_options_reach_only_that_model(emulator: Emulator) -> None:
    adapters = in_process(emulator)
    route = Router(
        [
            RouteTarget(MODELS["anthropic"], options={"temperature": 0.1}),
            RouteTarget(MODELS["openai"], options={"temperature": 0.7, "max_output_tokens": 99}),
        ],
        adapters=adapters,
        max_retries=0,
    )
    emulator.push_fault("overloaded", provider="anthropic")
    with anyio.fail_after(DEADLINE):
        await route.complete(ask())
    first, second = (r.json() for r in emulator.requests)
    assert first["temperature"] == 0.1 and first["max_tokens"] == 512
    assert second["temperature"] == 0.7 and second["max_completion_tokens"] == 99


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"temprature": 1}, "unknown request option 'temprature'; did you mean 'temperature'"),
        (
            {"extra_headers": {"x-trace": "1"}},
            r"'extra_headers' at \['x-trace'\]: Input should be a valid dictionary \(it is "
            "keyed by provider",
        ),
        ({"temperature": -1}, "'temperature': Input should be greater than or equal to 0"),
        ({"max_output_tokens": "many"}, "'max_output_tokens': Input should be a valid integer"),
        ({"messages": []}, "unknown request option 'messages'"),
    ],
)
def test_wrong_per_model_options_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(metis.ConfigError, match=message):
        Router([RouteTarget("anthropic:claude-sonnet-4-5", options=options)])


def test_wrong_route_settings_are_config_errors() -> None:
    with pytest.raises(metis.ConfigError, match="unknown error classes \\['sometimes'\\]"):
        Router(["anthropic:claude-sonnet-4-5"], fallback_on=["overloaded", "sometimes"])
    with pytest.raises(metis.ConfigError, match="did you mean 'overloaded'"):
        Router(["anthropic:claude-sonnet-4-5"], fallback_on=["overload"])
    with pytest.raises(metis.ConfigError, match=r"give fallback_on=\['rate_limit'\]"):
        Router(["anthropic:claude-sonnet-4-5"], fallback_on="rate_limit")
    with pytest.raises(metis.ConfigError, match="limits for 'antropic' match no model of"):
        Router(["anthropic:claude-sonnet-4-5"], limits={"antropic": Limits(max_concurrent=2)})
    for key in ("anthropic", "anthropic:claude-sonnet-4-5", "openai"):  # another platform's kept
        Router(["anthropic:claude-sonnet-4-5"], limits={key: Limits(max_concurrent=2)})
    with pytest.raises(UnknownOptionError, match="did you mean 'max_retries'"):
        RouteTarget("anthropic:claude-sonnet-4-5", max_retires=1)  # type: ignore[call-arg]
    with pytest.raises(metis.ConfigError, match="got 3"):
        Router([3])  # type: ignore[list-item]
    with pytest.raises(metis.ConfigError, match="at least one model"):
        Router([])
    for name in ("", 5):
        with pytest.raises(metis.ConfigError, match="name is the route's name"):
            Router(["anthropic:claude-sonnet-4-5"], name=name)  # type: ignore[arg-type]


def test_a_routes_adapters_that_could_serve_no_call_are_refused() -> None:
    """``adapters={"anthropic": "x"}`` was an AttributeError from inside the router; a
    misspelt key was taken, its adapter never used (limits keyed so are refused already)."""
    adapter = metis.build_adapter("anthropic", metis.AdapterConfig(api_key="test-key"))
    with pytest.raises(metis.ConfigError, match="for 'anthropic': expected an Adapter, got str"):
        Router(["anthropic:claude-sonnet-4-5"], adapters={"anthropic": "x"})  # type: ignore[dict-item]
    with pytest.raises(metis.ConfigError, match=r"'antropic' serves no model .* 'anthropic'"):
        Router(["anthropic:claude-sonnet-4-5"], adapters={"antropic": adapter})
    Router(["anthropic:claude-sonnet-4-5"], adapters={"anthropic": adapter, "openai": adapter})


def test_a_route_target_given_its_fields_in_the_wrong_order_says_so() -> None:
    """``RouteTarget(adapter, model)`` was an AttributeError from inside the router
    ('Adapter' object has no attribute 'partition'), and an adapter given as a string was
    taken."""
    adapter = metis.build_adapter("anthropic", metis.AdapterConfig(api_key="test-key"))
    swapped = RouteTarget(adapter, "anthropic:claude-sonnet-4-5")  # type: ignore[arg-type]
    with pytest.raises(metis.ConfigError, match="the model comes first: RouteTarget"):
        Router([swapped])
    named = RouteTarget("anthropic:claude-sonnet-4-5", "anthropic")  # type: ignore[arg-type]
    with pytest.raises(metis.ConfigError, match=r"adapter is an Adapter .* got str 'anthropic'"):
        Router([named])


PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


@pytest.mark.anyio
async def test_a_model_that_cannot_serve_the_request_is_skipped_and_reported(
    emulator: Emulator,
) -> None:
    sink = ListSink()
    adapters = in_process(emulator, capabilities={})
    blind = in_process(emulator, capabilities={"supports_images": False})["openai"]
    route = Router(
        [RouteTarget(MODELS["openai"], adapter=blind), MODELS["anthropic"]],
        adapters=adapters,
        telemetry=sink,
    )
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data=PIXEL))
    request = ask(tools=[]).model_copy(
        update={"messages": [Message(role=Role.USER, content=[image, TextBlock(text="What?")])]}
    )
    with anyio.fail_after(DEADLINE):
        response = await route.complete(request)
    assert response.provider == "anthropic"
    assert [r.provider for r in emulator.requests] == ["anthropic"]  # nothing sent to openai
    (skip, served) = decision(sink).steps
    assert skip[:2] == (MODELS["openai"], "skipped") and "takes no images" in skip[2]
    assert served[:2] == (MODELS["anthropic"], "served")


@pytest.mark.anyio
async def test_a_model_whose_wire_refuses_the_request_before_sending_moves_the_route_on(
    emulator: Emulator,
) -> None:
    """What the catalog does not say (a server tool only some APIs run) is refused as the
    request is encoded: that refusal was raised at once, though the next model could serve it
    and nothing had been sent."""
    sink = ListSink()
    route = router(emulator, ["openai", "anthropic"], sink)
    request = ask(tools=[], server_tools=[WebSearch()])
    with anyio.fail_after(DEADLINE):
        response = await route.complete(request)
    assert response.provider == "anthropic"
    assert [r.provider for r in emulator.requests] == ["anthropic"]  # nothing sent to openai
    (refused, served) = decision(sink).steps
    assert refused[:2] == (MODELS["openai"], "failed") and "search the web" in refused[2]
    assert served[:2] == (MODELS["anthropic"], "served")
    with pytest.raises(CapabilityError, match="search the web"):  # the last: its own error
        await router(emulator, ["openai"]).complete(request)


@pytest.mark.anyio
async def test_thinking_context_and_output_limits_skip_models(emulator: Emulator) -> None:
    route = router(emulator, ["openai", "anthropic"])
    with anyio.fail_after(DEADLINE):
        thoughtful = await route.complete(
            ask(max_output_tokens=4096, thinking=ThinkingConfig(budget_tokens=1024))
        )
    assert thoughtful.provider == "anthropic"  # gpt-4o over Chat Completions shows no thinking

    long_reply = ask(max_output_tokens=50_000)  # gpt-4o writes at most 16,384
    assert (await route.complete(long_reply)).provider == "anthropic"

    huge = ask("word" * 625_000, tools=[])  # one run of 2.5 M letters: beyond both contexts
    with pytest.raises(CapabilityError) as raised:
        await route.complete(huge)
    assert str(raised.value).count("the context holds") == 2
    assert emulator.stats.requests == 2


@pytest.mark.anyio
async def test_a_cooling_model_is_skipped_until_its_probe(emulator: Emulator) -> None:
    now = [1000.0]
    sink = ListSink()
    availability = InMemoryAvailability(clock=lambda: now[0])
    route = router(emulator, ["anthropic", "gemini"], sink, availability=availability)
    emulator.push_fault("rate_limit=7", provider="anthropic")
    with anyio.fail_after(DEADLINE):
        assert (await route.complete(ask())).provider == "gemini"
        record = await availability.record(MODELS["anthropic"])
        assert record.state is State.COOLING_DOWN and record.until == 1007.0  # Retry-After
        sink.clear()
        assert (await route.complete(ask())).provider == "gemini"
        assert decision(sink).steps[0][1:] == ("skipped", "cooling down (7.0 s left)")
        now[0] += 7
        assert (await route.complete(ask())).provider == "anthropic"  # the probe succeeds
    assert (await availability.record(MODELS["anthropic"])).state is State.AVAILABLE
    assert [r.provider for r in emulator.requests] == ["anthropic", "gemini", "gemini", "anthropic"]


@pytest.mark.anyio
async def test_when_every_model_is_cooling_down_the_error_says_so(emulator: Emulator) -> None:
    route = router(emulator, ["anthropic", "openai"])
    emulator.push_fault("overloaded", times=2)
    with pytest.raises(OverloadedError) as first:
        await route.complete(ask())
    assert "every model failed or was skipped" in " ".join(first.value.__notes__)
    with pytest.raises(OverloadedError, match="is available now") as second:
        await route.complete(ask())
    assert "cooling down" in str(second.value)
    assert emulator.stats.requests == 2


@pytest.mark.anyio
async def test_when_every_model_is_busy_the_error_says_when_the_first_is_free(
    emulator: Emulator,
) -> None:
    """Before: no ``retry_after_seconds``, so a gateway's client got a 529 without
    ``retry-after`` and retried on its own backoff, before any model was free again."""
    now = [1000.0]
    availability = InMemoryAvailability(clock=lambda: now[0])
    route = router(emulator, ["anthropic", "openai"], availability=availability)
    emulator.push_fault("rate_limit=30", provider="anthropic")
    emulator.push_fault("rate_limit=12", provider="openai")
    with pytest.raises(RateLimitError):
        await route.complete(ask())
    now[0] += 2
    with pytest.raises(OverloadedError, match="is available now") as busy:
        await route.complete(ask())
    assert busy.value.retry_after_seconds == 10.0  # openai's, the sooner


@pytest.mark.anyio
async def test_a_stream_fails_over_before_its_first_event(emulator: Emulator) -> None:
    route = router(emulator, ["gemini", "openai_responses"])
    emulator.push_fault("overloaded", provider="gemini")
    with anyio.fail_after(DEADLINE):
        events = [e async for e in route.stream(ask())]
    final = events[-1]
    assert isinstance(events[0], MessageStart) and isinstance(final, MessageComplete)
    assert final.stop_reason.kind is StopKind.TOOL_USE
    assert [r.provider for r in emulator.requests] == ["gemini", "openai_responses"]


@pytest.mark.anyio
async def test_no_failover_once_an_event_reached_the_caller(emulator: Emulator) -> None:
    sink = ListSink()
    route = router(emulator, ["anthropic", "openai"], sink)
    emulator.push_fault("stream_error=overloaded;after=2", provider="anthropic")
    events = []
    with anyio.fail_after(DEADLINE), pytest.raises(OverloadedError):
        async for event in route.stream(ask()):
            events.append(event)
    assert isinstance(events[0], MessageStart)
    assert isinstance(events[-1], MessageComplete)
    assert events[-1].stop_reason.kind is StopKind.ERROR
    assert [r.provider for r in emulator.requests] == ["anthropic"]
    assert decision(sink).served_by == MODELS["anthropic"]
    assert [e.new_state for e in sink.events if isinstance(e, AvailabilityChanged)] == [
        "cooling_down"
    ]


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
async def test_cancel_reaches_the_model_serving_the_call(emulator: Emulator) -> None:
    route = router(emulator, ["anthropic", "openai"], sockets=True)
    emulator.push_fault("overloaded", provider="anthropic")
    emulator.push_fault("stall=30;after=2", provider="openai")
    request = ask()
    events = []
    with anyio.fail_after(DEADLINE):
        async for event in route.stream(request):
            events.append(event)
            if len(events) == 1:
                assert route.cancel(request.request_id)
    assert events[-1].stop_reason.kind is StopKind.CANCELLED  # type: ignore[union-attr]
    assert not route.cancel(request.request_id)


@pytest.mark.anyio
async def test_one_line_calls_take_a_router(emulator: Emulator) -> None:
    route = router(emulator, ["anthropic", "gemini"])
    emulator.push_fault("overloaded", provider="anthropic")
    with anyio.fail_after(DEADLINE):
        reply = await metis.acomplete(route, "What's the weather in Oslo?", tools=[ask().tools[0]])
        events = [e async for e in metis.astream(route, "Say hello.")]
    assert reply.provider == "gemini" and reply.tool_calls[0].input == {"city": "Oslo"}
    assert isinstance(events[-1], MessageComplete)


def test_the_sync_one_line_call_takes_a_router(emulator_server: Emulator) -> None:
    emulator_server.reset()
    route = Router(
        [MODELS["openai"], MODELS["anthropic"]],
        adapters=emulated(emulator_server),
        max_retries=0,
    )
    emulator_server.push_fault("server_error", provider="openai")
    assert metis.complete(route, "Hello there").provider == "anthropic"


def test_route_models_must_name_a_provider() -> None:
    with pytest.raises(metis.ConfigError, match="'provider:model'"):
        Router(["gpt-4o"])


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_a_probe_cancelled_by_its_caller_frees_the_model_for_the_next_call(
    emulator: Emulator, streaming: bool
) -> None:
    now = [0.0]
    availability = InMemoryAvailability(clock=lambda: now[0])
    route = router(emulator, ["anthropic", "openai"], sockets=True, availability=availability)
    emulator.push_fault("overloaded", provider="anthropic")
    assert (await route.complete(ask())).provider == "openai"
    now[0] += 60
    emulator.push_fault("stall=30;after=0", provider="anthropic")
    with anyio.fail_after(DEADLINE), anyio.CancelScope() as probe:
        async with anyio.create_task_group() as group:
            group.start_soon(_call, route, streaming)
            while len(emulator.requests) < 3:  # noqa: ASYNC110 (the emulator is another thread)
                await anyio.sleep(0.01)
            probe.cancel()  # the probe's own caller goes away, its request in flight
    record = await availability.record(MODELS["anthropic"])
    assert record.state is State.COOLING_DOWN and record.until == now[0]
    with anyio.fail_after(DEADLINE):
        assert (await route.complete(ask())).provider == "anthropic"  # probed again at once


def test_the_sync_stream_takes_a_router_with_limits(emulator_server: Emulator) -> None:
    emulator_server.reset()
    route = Router(
        [MODELS["anthropic"], MODELS["gemini"]],
        adapters=emulated(emulator_server),
        max_retries=0,
        limits={"gemini": Limits(max_concurrent=1, requests_per_minute=100)},
    )
    emulator_server.push_fault("overloaded", provider="anthropic")
    for _ in range(2):  # the slot taken and given back, whichever task reads each event
        events = list(metis.stream(route, "Say hello."))
        assert isinstance(events[-1], MessageComplete)
    assert [r.provider for r in emulator_server.requests] == ["anthropic", "gemini", "gemini"]


async def _call(route: Router, streaming: bool) -> None:
    if streaming:
        async for _ in route.stream(ask()):
            pass
    else:
        await route.complete(ask())
