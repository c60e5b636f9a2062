"""The router over the adapters it wraps: prompt fallback, keyless models skipped, lifecycles
run, the capability verdict made once per model, one deadline for a limit's wait and the call,
the probe kept by its own caller, and telemetry that cannot cost an answer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import pytest

import metis.pipeline.call
from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.errors import ClosedError, ErrorClass, NotConfiguredError
from metis.model import MessageComplete, ToolDefinition
from metis.model.request import FreeformInput
from metis.pipeline.call import Call
from metis.registry import Registry
from metis.routing import InMemoryAvailability, InMemoryBuckets, Limits, Router, RouteTarget, State
from metis.telemetry import ListSink, RouteDecided, TelemetryEvent
from metis.testing.emulator import Emulator

from ..routing_helpers import MODELS, ask, emulated

pytestmark = [
    pytest.mark.usefixtures("no_backoff"),  # retries are not waited for
    pytest.mark.backend_independent,  # the route's decisions; deadlines and cancels run under both
]

DEADLINE = 20.0


def decision(sink: ListSink) -> RouteDecided:
    (found,) = [e for e in sink.events if isinstance(e, RouteDecided)]
    return found


async def served_by(route: Router, emulator: Emulator, streaming: bool) -> str | None:
    """Which provider served a call made with ``complete`` or ``stream``."""
    if not streaming:
        return (await route.complete(ask())).provider
    events = [event async for event in route.stream(ask())]
    assert isinstance(events[-1], MessageComplete)
    return emulator.requests[-1].provider


# Prompt fallback ---------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
async def test_a_model_with_another_after_it_moves_on_at_its_first_failure(
    emulator: Emulator, streaming: bool
) -> None:
    route = Router([MODELS["anthropic"], MODELS["openai"]], adapters=emulated(emulator))
    emulator.push_fault("overloaded", times=3, provider="anthropic")
    with anyio.fail_after(DEADLINE):
        provider = await served_by(route, emulator, streaming)
    assert provider == "openai"
    assert [r.provider for r in emulator.requests] == ["anthropic", "openai"]  # no retry first


@pytest.mark.anyio
async def test_the_last_model_keeps_its_adapters_retries(emulator: Emulator) -> None:
    route = Router([MODELS["anthropic"], MODELS["openai"]], adapters=emulated(emulator))
    emulator.push_fault("overloaded", provider="anthropic")
    emulator.push_fault("server_error", times=2, provider="openai")
    with anyio.fail_after(DEADLINE):
        assert (await route.complete(ask())).provider == "openai"
    assert [r.provider for r in emulator.requests] == ["anthropic"] + ["openai"] * 3
    assert [t.max_retries for t in route.targets] == [0, None]  # None: the adapter's own (2)


@pytest.mark.anyio
async def test_retries_set_for_a_model_are_the_calls_not_a_copy_of_its_adapter(
    emulator: Emulator,
) -> None:
    adapters = emulated(emulator)
    route = Router(
        [RouteTarget(MODELS["anthropic"], max_retries=1), MODELS["openai"]], adapters=adapters
    )
    assert route.targets[0].adapter is adapters["anthropic"]
    emulator.push_fault("overloaded", times=2, provider="anthropic")
    with anyio.fail_after(DEADLINE):
        assert (await route.complete(ask())).provider == "openai"
    assert [r.provider for r in emulator.requests] == ["anthropic", "anthropic", "openai"]


# Keyless models ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
async def test_a_model_without_its_key_is_skipped_and_the_step_says_why(
    emulator: Emulator,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    streaming: bool,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    sink = ListSink()
    with caplog.at_level(logging.WARNING, "metis"):
        route = Router(
            [MODELS["anthropic"], MODELS["openai"]],
            adapters={"openai": emulated(emulator)["openai"]},
            telemetry=sink,
        )
    with anyio.fail_after(DEADLINE):
        assert await served_by(route, emulator, streaming) == "openai"
    assert "will be skipped" in caplog.text and "ANTHROPIC_API_KEY" in caplog.text
    skip, served = decision(sink).steps
    assert skip[:2] == (MODELS["anthropic"], "skipped")
    assert skip[2].startswith("not configured: ") and "set ANTHROPIC_API_KEY" in skip[2]
    assert served[:2] == (MODELS["openai"], "served")
    assert [r.provider for r in emulator.requests] == ["openai"]
    await route.aclose()


@pytest.mark.anyio
async def test_a_route_none_of_whose_models_has_its_key_says_which_keys_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    route = Router([MODELS["anthropic"], MODELS["openai"]])  # built, as a Registry loads
    with anyio.fail_after(DEADLINE), pytest.raises(NotConfiguredError) as raised:
        await route.complete(ask())
    notes = " ".join(raised.value.__notes__)
    assert "ANTHROPIC_API_KEY" in notes and "OPENAI_API_KEY" in notes
    assert raised.value.message == (  # the message itself, all a gateway's client sees
        f"no model of route route is configured: {MODELS['anthropic']} (set ANTHROPIC_API_KEY), "
        f"{MODELS['openai']} (set OPENAI_API_KEY)"
    )


@pytest.mark.anyio
async def test_a_registry_route_skips_a_model_whose_adapter_has_no_key(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    spec = {
        "adapters": {
            "claude": {"type": "anthropic", "base_url": emulator.url},
            "gpt": {"type": "openai", "api_key": "k", "base_url": emulator.url},
        },
        "models": {
            "anthropic:claude-sonnet-4-5": {"adapter": "claude", "aliases": ["sonnet"]},
            "openai:gpt-4o": {"adapter": "gpt", "aliases": ["4o"]},
        },
        "routes": {"default": {"models": ["sonnet", "4o"]}},
    }
    sink = ListSink()
    async with Registry.from_dict(spec, environ={}) as registry:
        route = registry.router("default", telemetry=sink)
        with anyio.fail_after(DEADLINE):
            assert (await route.complete(ask())).provider == "openai"
    assert decision(sink).steps[0][1] == "skipped"
    assert [r.provider for r in emulator.requests] == ["openai"]


@pytest.mark.anyio
async def test_a_credential_missing_only_when_called_is_a_skip_too(emulator: Emulator) -> None:
    """A cloud token, say, is looked for when the call is made: the model is skipped then."""
    adapters = emulated(emulator)

    async def no_token(*args: Any, **kwargs: Any) -> Any:
        raise NotConfiguredError(
            "anthropic: no token: set CLOUD_TOKEN",
            model=MODELS["anthropic"],
            adapter="anthropic",
            api_key_env="CLOUD_TOKEN",
        )

    adapters["anthropic"].complete = no_token  # type: ignore[method-assign]
    sink = ListSink()
    route = Router([MODELS["anthropic"], MODELS["openai"]], adapters=adapters, telemetry=sink)
    with anyio.fail_after(DEADLINE):
        assert (await route.complete(ask())).provider == "openai"
    assert decision(sink).steps[0][1:] == (
        "skipped",
        "not configured: anthropic: no token: set CLOUD_TOKEN",
    )
    alone = Router([MODELS["anthropic"]], adapters=adapters)
    with anyio.fail_after(DEADLINE), pytest.raises(NotConfiguredError, match="CLOUD_TOKEN"):
        await alone.complete(ask())


# Lifecycles --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_model_built_by_the_router_runs_its_lifecycle(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    ran: list[tuple[str, str]] = []
    init, aclose = Adapter.init, Adapter.aclose

    async def spy_init(self: Adapter) -> None:
        ran.append(("init", self.name))
        await init(self)

    async def spy_aclose(self: Adapter) -> None:
        ran.append(("aclose", self.name))  # each stage's dispose, then the pool
        await aclose(self)

    monkeypatch.setattr(Adapter, "init", spy_init)
    monkeypatch.setattr(Adapter, "aclose", spy_aclose)
    route = Router([MODELS["anthropic"]])
    with anyio.fail_after(DEADLINE):
        assert (await route.complete(ask())).provider == "anthropic"
    assert ("init", "anthropic") in ran and ("aclose", "anthropic") not in ran
    await route.aclose()
    assert ran[-1] == ("aclose", "anthropic")


@pytest.mark.anyio
async def test_a_models_init_runs_before_the_router_decides_what_it_can_serve(
    emulator: Emulator,
) -> None:
    """Ollama declares no tools; its init reads them from the server (``/api/show``)."""
    config = AdapterConfig(base_url=emulator.url, settings={"model": "qwen3:8b"})
    ollama = build_adapter("ollama", config, init_on_first_call=True)
    assert not ollama.capabilities.supports_tools
    sink = ListSink()
    route = Router(
        [RouteTarget("ollama:qwen3:8b", adapter=ollama), MODELS["openai"]],
        adapters=emulated(emulator),
        telemetry=sink,
    )
    with anyio.fail_after(DEADLINE):
        response = await route.complete(ask())
    assert response.provider == "ollama", decision(sink).steps
    paths = [r.path for r in emulator.requests]
    assert paths.index("/api/version") < paths.index("/api/chat")
    await ollama.aclose()


# One capability verdict per model ----------------------------------------------------------


def count_calls(monkeypatch: pytest.MonkeyPatch, name: str, module: Any) -> list[int]:
    """Counts calls of ``module.name`` made through any metis module that imported it."""
    import sys

    original: Callable[..., Any] = getattr(module, name)
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    for loaded in list(sys.modules.values()):
        if getattr(loaded, "__name__", "").startswith("metis") and (
            getattr(loaded, name, None) is original
        ):
            monkeypatch.setattr(loaded, name, counted)
    return calls


@pytest.mark.anyio
async def test_a_fallback_decides_each_models_capabilities_once(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    import metis.catalog.estimate
    import metis.stages.policy.capability_check

    checks = count_calls(monkeypatch, "unmet_needs", metis.stages.policy.capability_check)
    estimates = count_calls(monkeypatch, "estimate_request_tokens", metis.catalog.estimate)
    route = Router(
        [MODELS["anthropic"], MODELS["openai"]],
        adapters=emulated(emulator),
        max_retries=0,
        limits={"anthropic": Limits(tokens_per_minute=100_000), "openai": Limits(max_concurrent=2)},
    )
    emulator.push_fault("overloaded", provider="anthropic")
    with anyio.fail_after(DEADLINE):
        assert (await route.complete(ask())).provider == "openai"
    assert len(checks) == 2 and len(estimates) == 2  # one each per model tried


@pytest.mark.anyio
async def test_a_model_that_would_lose_a_tools_grammar_is_passed_over(emulator: Emulator) -> None:
    """A freeform tool held to a grammar: a model without custom tools cannot enforce it, so
    the route passes that model over, as a direct call to it is refused, and the next model
    (with custom tools) serves; the routed request was sent to Claude, grammar dropped."""
    sql = ToolDefinition(
        name="sql",
        description="Run a query.",
        freeform=FreeformInput(syntax="lark", definition='start: "SELECT " /[a-z]+/'),
    )
    sink = ListSink()
    route = Router(
        [MODELS["anthropic"], "openai:gpt-5"], adapters=emulated(emulator), telemetry=sink
    )
    with anyio.fail_after(DEADLINE):
        assert (await route.complete(ask(tools=[sql]))).provider == "openai"
    skip, served = decision(sink).steps
    assert skip[:2] == (MODELS["anthropic"], "skipped") and "lark grammar" in skip[2]
    assert served[:2] == ("openai:gpt-5", "served")
    assert [r.provider for r in emulator.requests] == ["openai"]
    await route.aclose()


# One deadline for a limit's wait and the call ----------------------------------------------


class WaitingBuckets(InMemoryBuckets):
    """Buckets that make every call wait ``seconds``, noting when they were asked."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.asked: list[float] = []

    async def reserve(
        self, name: str, per_minute: float, amount: float, max_wait: float
    ) -> float | None:
        self.asked.append(anyio.current_time())
        return self.seconds if self.seconds <= max_wait else None


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
async def test_a_call_that_waits_for_its_limits_has_one_deadline_for_the_wait_and_the_call(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    deadlines: list[float] = []

    class NotedCall(Call):
        __slots__ = ()

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            deadlines.append(self.deadline)

    monkeypatch.setattr(metis.pipeline.call, "Call", NotedCall)  # the adapter makes its calls
    buckets = WaitingBuckets(0.05)  # any wait: a deadline set after it is past asked + timeout
    timeout = 5.0
    adapters = emulated(emulator, timeout_seconds=timeout)
    route = Router(
        [MODELS["openai"]],
        adapters=adapters,
        limits={"openai": Limits(requests_per_minute=60)},
        buckets=buckets,
    )
    with anyio.fail_after(DEADLINE):
        assert (await route.complete(ask())).provider == "openai"
    (deadline,) = deadlines
    assert deadline <= buckets.asked[0] + timeout  # not the wait plus a whole timeout


# The probe belongs to its caller -----------------------------------------------------------


async def requests_reach(emulator: Emulator, count: int) -> None:
    """Until the emulator (another thread: no event to wait on) has seen ``count`` requests."""
    while len(emulator.requests) < count:  # noqa: ASYNC110
        await anyio.sleep(0.01)


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
async def test_another_call_cancelled_during_the_probe_does_not_admit_a_second_probe(
    emulator: Emulator, streaming: bool
) -> None:
    now = [0.0]
    availability = InMemoryAvailability(clock=lambda: now[0])
    route = Router(
        [MODELS["anthropic"], MODELS["openai"]],
        adapters=emulated(emulator),
        max_retries=0,
        availability=availability,
    )
    key = MODELS["anthropic"]

    async def call() -> None:
        if streaming:
            async for _ in route.stream(ask()):
                pass
        else:
            await route.complete(ask())

    emulator.push_fault("stall=30;after=0", provider="anthropic")  # an earlier call, in flight
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as group:
            earlier, earlier_ended = anyio.CancelScope(), anyio.Event()

            async def in_flight() -> None:
                try:
                    with earlier:
                        await call()
                finally:
                    earlier_ended.set()

            group.start_soon(in_flight)
            await requests_reach(emulator, 1)
            emulator.push_fault("overloaded", provider="anthropic")  # cools the model down
            await route.complete(ask())
            now[0] += 60
            emulator.push_fault("stall=30;after=0", provider="anthropic")  # the probe
            probe = anyio.CancelScope()

            async def probing() -> None:
                with probe:
                    await call()

            group.start_soon(probing)
            await requests_reach(emulator, 4)
            assert (await availability.record(key)).state is State.PROBING
            earlier.cancel()  # not the probe: the model's state is the probe's
            await earlier_ended.wait()
            assert (await availability.record(key)).state is State.PROBING
            sink = ListSink()
            route.telemetry = sink
            assert (await route.complete(ask())).provider == "openai"
            assert "another call is probing it" in decision(sink).steps[0][2]
            probe.cancel()


class NeverRefilled(InMemoryBuckets):
    """A bucket that keeps every caller waiting (and is this process's own)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = anyio.Event()

    async def reserve(
        self, name: str, per_minute: float, amount: float, max_wait: float
    ) -> float | None:
        self.asked.set()
        await anyio.sleep_forever()
        raise AssertionError


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
async def test_a_probe_cancelled_while_it_waits_for_its_limits_frees_the_model(
    emulator: Emulator,
) -> None:
    now = [0.0]
    availability = InMemoryAvailability(clock=lambda: now[0])
    buckets = NeverRefilled()
    route = Router(
        [MODELS["anthropic"], MODELS["openai"]],
        adapters=emulated(emulator),
        availability=availability,
        limits={"anthropic": Limits(requests_per_minute=60)},
        buckets=buckets,
    )
    await availability.failed(MODELS["anthropic"], ErrorClass.OVERLOADED, None)
    now[0] += 60
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as group:
            group.start_soon(route.complete, ask())
            await buckets.asked.wait()  # the probe, admitted, waits for its limits
            assert (await availability.record(MODELS["anthropic"])).state is State.PROBING
            group.cancel_scope.cancel()
    record = await availability.record(MODELS["anthropic"])
    assert record.state is State.COOLING_DOWN and record.until == now[0]  # free to probe now


# Telemetry cannot cost an answer -----------------------------------------------------------


class FailingSink:
    def emit(self, event: TelemetryEvent) -> None:
        raise RuntimeError("the sink is broken")


@pytest.mark.anyio
async def test_a_failing_telemetry_sink_does_not_lose_the_answer(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    route = Router(
        [MODELS["anthropic"], MODELS["openai"]],
        adapters=emulated(emulator),
        telemetry=FailingSink(),
    )
    emulator.push_fault("overloaded", provider="anthropic")
    with anyio.fail_after(DEADLINE), caplog.at_level(logging.ERROR, "metis"):
        assert (await route.complete(ask())).provider == "openai"
    logged = [r for r in caplog.records if "telemetry sink" in r.getMessage()]
    assert len(logged) == 1  # once per sink, however many events it refused


@pytest.mark.anyio
@pytest.mark.parametrize("given", [False, True], ids=["built", "given"])
async def test_a_closed_router_says_the_router_was_closed(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, given: bool
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    adapters = emulated(emulator) if given else None
    route = Router([MODELS["anthropic"]], name="fast", adapters=adapters)
    await route.aclose()
    with anyio.fail_after(DEADLINE):
        with pytest.raises(ClosedError, match="the router 'fast' was closed") as closed:
            await route.complete(ask())
        assert "adapter" not in str(closed.value)
        with pytest.raises(ClosedError, match="the router 'fast' was closed"):
            async for _ in route.stream(ask()):
                pass
        with pytest.raises(ClosedError, match="the router 'fast' was closed"):
            await route.count_tokens(ask())
    for adapter in (adapters or {}).values():
        await adapter.aclose()
