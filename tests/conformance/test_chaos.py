"""Chaos over real sockets (issue 7, item 3).

Many calls, streamed and not, to all five emulated providers at once, while the emulator
injects about 20% faults (429 with retry-after, 529/503, 500, connections dropped mid-stream,
stalls, in-stream errors). Every call must either complete (a transient fault that was retried
and then succeeded counts as completed) or fail with the ErrorClass its last attempt's fault
calls for; no call may hang, no connection may be left checked out of the pool, and every
stream must obey the event invariants.

Which faults hit which call is read back from the emulator's request records: each call's
prompt carries a unique tag, so its attempts (and their faults) can be found in the records.

The default run is bounded (200 calls per backend). The full run (2,000 calls per backend)
is marked ``slow`` and runs only when selected (``-m slow``); ``METIS_CHAOS_CALLS`` bounds it.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from metis import AdapterConfig, AdapterError, ErrorClass, build_adapter
from metis.adapter import Adapter
from metis.errors import InvariantViolation
from metis.model import CanonicalRequest, Message, MessageComplete, StreamEvent, ToolDefinition
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stages.policy.invariants import StreamChecker
from metis.testing.emulator import Emulator
from metis.transport.stage import Transport

from .. import pool_state
from ..conftest import Waits

PROVIDERS = ["anthropic", "openai", "openai_responses", "gemini", "ollama"]
MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o",
    "openai_responses": "openai_responses:gpt-4o",
    "gemini": "gemini:gemini-2.5-flash",
    "ollama": "ollama:qwen3",
}
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)

# About 20% of requests get a fault (the rates add up to 0.20). A stall lasts longer than the
# call's timeout, so a stalled call always ends as a network error: a stream after the idle
# timeout, a whole reply (whose stall comes before its head) at the call's timeout.
FAULTS = (
    "rate_limit:0.05,overloaded:0.04,server_error:0.04,drop=3:0.03,"
    "stall=5;after=2:0.02,stream_error=server_error;after=2:0.02"
)
TIMEOUT = 4.0  # the whole call's timeout: every attempt and every wait between them
# Both well above a busy machine's pauses (a call that met no fault must not time out), and
# below the stall and the call's timeout.
FIRST_EVENT_TIMEOUT = 2.0
IDLE_TIMEOUT = 1.0
MAX_RETRIES = 2
MARGIN = 5.0
CALL_DEADLINE = TIMEOUT + MARGIN  # no call may take longer than this
BATCH = 40

# The error class a call must end with when its last attempt met this fault.
EXPECTED: dict[str, set[ErrorClass]] = {
    "rate_limit": {ErrorClass.RATE_LIMIT},
    "overloaded": {ErrorClass.OVERLOADED},
    "server_error": {ErrorClass.SERVER_ERROR},
    "drop": {ErrorClass.NETWORK},
    "stall": {ErrorClass.NETWORK},
    "stream_error": {ErrorClass.SERVER_ERROR},
}


@dataclass
class Outcome:
    index: int
    provider: str
    streamed: bool
    tag: str
    error: BaseException | None = None
    hung: bool = False
    violation: str | None = None
    events: int = 0


@dataclass
class Figures:
    backend: str
    calls: int = 0
    streamed: int = 0
    completed: int = 0
    completed_after_retry: int = 0
    completed_despite_late_drop: int = 0
    failed_as_expected: int = 0
    failed_unexpectedly: int = 0
    requests_served: int = 0
    retries: int = 0
    retry_sleeps: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    failures_by_class: dict[str, int] = field(default_factory=dict)
    hangs: int = 0
    leaked_connections: int = 0
    violations: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def report(self) -> str:
        faults = ", ".join(f"{k}={v}" for k, v in sorted(self.faults.items()))
        failures = ", ".join(f"{k}={v}" for k, v in sorted(self.failures_by_class.items()))
        return "\n".join(
            [
                f"chaos [{self.backend}]: {self.calls} calls ({self.streamed} streamed) "
                f"over 5 providers in {self.seconds:.1f} s",
                f"  completed: {self.completed} ({self.completed_after_retry} after a retry, "
                f"{self.completed_despite_late_drop} whole before a drop)",
                f"  failed with the expected class: {self.failed_as_expected} ({failures})",
                f"  failed otherwise: {self.failed_unexpectedly}",
                f"  requests served: {self.requests_served}, retries: {self.retries} "
                f"(retry waits: {self.retry_sleeps})",
                f"  faults injected: {sum(self.faults.values())} ({faults})",
                f"  hangs: {self.hangs}, leaked connections: {self.leaked_connections}, "
                f"invariant violations: {self.violations}",
            ]
        )


def make_adapter(provider: str, emulator: Emulator) -> Adapter:
    caps = {"supports_tools": True} if provider == "ollama" else {}
    settings = AdapterConfig(
        api_key="test-key",
        base_url=emulator.base_url(provider),
        capabilities=caps,
        timeout_seconds=TIMEOUT,
        max_retries=MAX_RETRIES,
    )
    adapter = build_adapter(provider, settings, tool_id_store=InMemoryToolIdStore())
    adapter.pipeline.replace(
        "transport",
        Transport(idle_timeout=IDLE_TIMEOUT, first_event_timeout=FIRST_EVENT_TIMEOUT),
    )
    return adapter


def busy_connections(adapter: Adapter) -> int:
    """Connections of the adapter's pool that are still checked out or mid-request."""
    return pool_state.busy_connections(adapter.http_client())


def call_request(index: int, provider: str, streamed: bool, tag: str) -> CanonicalRequest:
    if index % 3 == 0:  # a tool call
        text, tools = f"[{tag}] What's the weather in Paris?", [WEATHER]
    else:
        text, tools = f"[{tag}] Tell me a long story about the sea.", []
    return CanonicalRequest(
        model=MODELS[provider],
        session_id=f"chaos-{tag}",
        messages=[Message.user(text)],
        tools=tools,
        max_output_tokens=512,
        stream=streamed,
    )


async def one_call(adapter: Adapter, outcome: Outcome) -> None:
    req = call_request(outcome.index, outcome.provider, outcome.streamed, outcome.tag)
    checker = StreamChecker()
    events: list[StreamEvent] = []
    try:
        with anyio.fail_after(CALL_DEADLINE):
            try:
                if outcome.streamed:
                    async for event in adapter.stream(req):
                        events.append(event)
                        checker.check(event)
                else:
                    response = await adapter.complete(req)
                    assert response.usage.output_tokens > 0
            except InvariantViolation as exc:
                outcome.violation = str(exc)
            except AdapterError as exc:
                outcome.error = exc
            if outcome.streamed and events and outcome.violation is None:
                try:
                    checker.check_ended()
                    assert isinstance(events[-1], MessageComplete)
                except (InvariantViolation, AssertionError) as exc:
                    outcome.violation = f"{type(exc).__name__}: {exc}"
    except TimeoutError:
        outcome.hung = True
    outcome.events = len(events)


def last_fault(faults: list[str]) -> str | None:
    """The fault that decided a request (modifiers such as ``slow`` do not)."""
    for fault in faults:
        kind = fault.split("=")[0].split(";")[0]
        if kind not in ("slow", "none"):
            return kind
    return None


async def run_chaos(calls: int, backend: str, seed: int, waits: Waits) -> Figures:
    figures = Figures(backend=backend, calls=calls)
    started = time.monotonic()
    with Emulator(port=0, faults=FAULTS, seed=seed, record=calls * 4 + 100) as emulator:
        adapters = {p: make_adapter(p, emulator) for p in PROVIDERS}
        outcomes = [
            Outcome(
                index=i,
                provider=PROVIDERS[i % len(PROVIDERS)],
                streamed=(i // len(PROVIDERS)) % 2 == 0,
                tag=f"chaos-{seed}-{i:05d}",
            )
            for i in range(calls)
        ]
        try:
            for start in range(0, calls, BATCH):
                async with anyio.create_task_group() as tg:
                    for outcome in outcomes[start : start + BATCH]:
                        tg.start_soon(one_call, adapters[outcome.provider], outcome)
            await anyio.lowlevel.checkpoint()
            figures.leaked_connections = sum(busy_connections(a) for a in adapters.values())
        finally:
            for adapter in adapters.values():
                await adapter.aclose()
        stats = emulator.stats
        records = emulator.requests

    attempts: dict[str, list[Any]] = {}
    for record in records:
        text = record.body.decode("utf-8", "replace")
        marker = text.find("[chaos-")
        if marker >= 0:
            tag = text[marker + 1 : text.index("]", marker)]
            attempts.setdefault(tag, []).append(record)
    by_class: Counter[str] = Counter()
    for outcome in outcomes:
        figures.streamed += outcome.streamed
        tried = sorted(attempts.get(outcome.tag, []), key=lambda r: r.number)
        where = f"call {outcome.index} ({outcome.provider}, streamed={outcome.streamed})"
        if outcome.hung:
            figures.hangs += 1
            figures.problems.append(f"{where}: hung")
            continue
        if outcome.violation is not None:
            figures.violations += 1
            figures.problems.append(f"{where}: invariant violation: {outcome.violation}")
            continue
        if not tried:
            figures.failed_unexpectedly += 1
            figures.problems.append(f"{where}: never reached the emulator ({outcome.error!r})")
            continue
        decisive = last_fault(tried[-1].faults)
        faults_seen = [[str(f) for f in r.faults] for r in tried]
        if outcome.error is None:
            # A drop after the reply's last event (a short reply) loses nothing: the whole
            # message had arrived, and a failure reading on after the end does not undo it.
            if decisive is None or decisive == "drop":
                figures.completed += 1
                figures.completed_after_retry += len(tried) > 1
                figures.completed_despite_late_drop += decisive == "drop"
            else:
                figures.failed_unexpectedly += 1
                figures.problems.append(f"{where}: completed despite {faults_seen}")
            continue
        assert isinstance(outcome.error, AdapterError)
        error_class = outcome.error.error_class
        if decisive is not None and error_class in EXPECTED[decisive]:
            figures.failed_as_expected += 1
            by_class[error_class.value] += 1
        else:
            figures.failed_unexpectedly += 1
            figures.problems.append(
                f"{where}: {error_class.value} ({outcome.error}) after faults {faults_seen}"
            )
    figures.failures_by_class = dict(by_class)
    figures.requests_served = stats.requests
    figures.retries = stats.requests - calls
    figures.retry_sleeps = len(waits)  # Retry-After is honoured, just not waited
    figures.faults = dict(stats.faults)
    figures.seconds = time.monotonic() - started
    return figures


def check(figures: Figures) -> None:
    print()
    print(figures.report())
    for problem in figures.problems[:20]:
        print("  !", problem)
    assert figures.hangs == 0
    assert figures.leaked_connections == 0
    assert figures.violations == 0
    assert figures.failed_unexpectedly == 0, figures.problems[:20]
    assert figures.completed + figures.failed_as_expected == figures.calls
    # Every retry the emulator served was waited for. A machine loaded enough that an attempt
    # times out before its request reaches the emulator adds a wait with no request served.
    assert figures.retries > 0 and figures.retries <= figures.retry_sleeps
    assert sum(figures.faults.values()) > figures.calls // 10  # the chaos did happen
    assert figures.completed > figures.calls // 2


@pytest.mark.slow
@pytest.mark.anyio
async def test_chaos_bounded(anyio_backend: str, no_backoff: Waits) -> None:
    figures = await run_chaos(200, anyio_backend, seed=1, waits=no_backoff)
    check(figures)


def _slow_selected(config: pytest.Config) -> bool:
    return "slow" in (config.option.markexpr or "") or bool(os.environ.get("METIS_SLOW"))


@pytest.mark.slow
@pytest.mark.anyio
async def test_chaos_full(
    anyio_backend: str, request: pytest.FixtureRequest, no_backoff: Waits
) -> None:
    if not _slow_selected(request.config):
        pytest.skip("the full chaos run: select it with -m slow (METIS_CHAOS_CALLS bounds it)")
    calls = int(os.environ.get("METIS_CHAOS_CALLS", "2000"))
    figures = await run_chaos(calls, anyio_backend, seed=7, waits=no_backoff)
    check(figures)
