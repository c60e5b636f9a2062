"""Helpers shared by the tests: a real Call without an adapter."""

from __future__ import annotations

import gc
import logging
import os
import sys
import types
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx
import pytest

from metis.catalog.estimate import DEFAULT_PROFILE, TokenProfile
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.call import Call
from metis.pipeline.config import AdapterConfig
from metis.pipeline.endpoint import Endpoint
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Stage
from metis.pipeline.stores import InMemoryToolIdStore, ToolIdStore
from metis.telemetry import NULL_SINK, TelemetrySink

FULL_CAPABILITIES = AdapterCapabilities(
    supports_tools=True,
    supports_images=True,
    supports_thinking=True,
    supports_structured_output=True,
    supports_parallel_tool_calls=True,
    max_context_tokens=100_000,
    max_output_tokens=8_000,
)


def make_call(
    provider: str = "anthropic",
    model: str = "anthropic:claude-x",
    session_id: str | None = "s1",
    **kw: Any,
) -> Call:
    """A call's identity, as an adapter makes it (``attempt``, ``deadline``, ``drops`` by
    keyword)."""
    return Call(
        request_id="req_1",
        provider=provider,
        model=model,
        wire_model=model.split(":", 1)[-1],
        session_id=session_id,
        **kw,
    )


class RecordingCall(Call):
    """A real :class:`Call` that also keeps the arguments of each ``warn_dropped`` (extras
    included), for codec tests that check what was dropped and why."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.dropped: list[tuple[str, str, dict[str, Any]]] = []

    def warn_dropped(
        self, block_type: str, reason: str, message_id: str | None = None, **extra: Any
    ) -> None:
        self.dropped.append((block_type, reason, {"message_id": message_id, **extra}))
        super().warn_dropped(block_type, reason, message_id, **extra)

    @property
    def dropped_types(self) -> list[str]:
        return [d[0] for d in self.dropped]


def recording_call(
    provider: str = "anthropic", model: str = "anthropic:claude-x", session_id: str | None = "s1"
) -> RecordingCall:
    """:func:`make_call`, keeping what ``warn_dropped`` was told."""
    return RecordingCall(
        request_id="req_1",
        provider=provider,
        model=model,
        wire_model=model.split(":", 1)[-1],
        session_id=session_id,
    )


def services(
    provider: str = "anthropic",
    *,
    capabilities: AdapterCapabilities | None = None,
    store: ToolIdStore | None = None,
    http: httpx.AsyncClient | None = None,
    telemetry: TelemetrySink | None = None,
    config: AdapterConfig | None = None,
    endpoint: Endpoint | None = None,
    token_profile: TokenProfile | None = None,
) -> StageServices:
    """What an adapter gives its stages, for a stage under test: a full-featured model, a
    fresh in-memory tool-id store, an endpoint at http://test/v1."""
    client = http
    caps = capabilities or FULL_CAPABILITIES
    profile = token_profile or DEFAULT_PROFILE

    def the_client() -> httpx.AsyncClient:
        nonlocal client
        if client is None:
            client = httpx.AsyncClient()
        return client

    return StageServices(
        provider=provider,
        config=config or AdapterConfig(),
        endpoint=endpoint or Endpoint(base_url="http://test", path="/v1"),
        http=the_client,
        tool_ids=store or InMemoryToolIdStore(),
        telemetry=telemetry or NULL_SINK,
        capabilities_for=lambda _model: caps,
        token_profile_for=lambda _model: profile,
    )


S = TypeVar("S", bound=Stage[Any, Any, Any, Any])


def bound(stage: S, **kw: Any) -> S:
    """``stage``, given :func:`services` built from ``kw``, as an adapter would give them."""
    stage.bind(services(**kw))
    return stage


async def drive(
    stage: Any, request: Any, call: Call, events: Iterable[Any] = ()
) -> tuple[list[Any], list[Any]]:
    """Run ``stage`` over a fake inner that records each request it is handed and yields
    ``events``; return (requests seen by inner, items the stage yielded)."""
    seen: list[Any] = []

    async def inner(req: Any, c: Call) -> AsyncIterator[Any]:
        seen.append(req)
        for event in events:
            yield event

    out = [item async for item in stage(request, call, inner)]
    return seen, out


def lossy_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The structured WARN records of ``Call.warn_dropped`` (docs/contract.md §8)."""
    return [
        r
        for r in caplog.records
        if r.name == "metis" and getattr(r, "event", None) == "metis.lossy_projection"
    ]


WARN_FIELDS = ("session_id", "request_id", "message_id", "block_type", "adapter", "reason")


def warn_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of one ``warn_dropped`` record."""
    return {name: record.__dict__.get(name) for name in WARN_FIELDS}


async def answer(adapter: Any, request: Any, streaming: bool) -> Any:
    """One turn's CanonicalResponse, by complete() or by folding stream()'s events."""
    from metis.model import CanonicalResponse, MessageComplete

    if not streaming:
        return await adapter.complete(request)
    final = None
    async for event in adapter.stream(request):
        final = event
    assert isinstance(final, MessageComplete)
    return CanonicalResponse(
        request_id=request.request_id,
        model=request.model,
        provider=adapter.name,
        content=final.final_content,
        stop_reason=final.stop_reason,
        usage=final.usage,
        latency_ms=0,
        message_id=final.message_id,
        warnings=final.warnings,
    )


class ImportOnUse:
    """A module imported on first use, inside the test that uses it, and skipped there when
    it is not installed: the official SDKs take seconds to import, and every xdist worker
    imports every test module to collect it, while only one worker runs the tests that need
    them."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__") or attribute == "_mock_name":  # pytest's collection asks
            raise AttributeError(attribute)
        return getattr(pytest.importorskip(self._name), attribute)


def stack_codec(stack: str) -> Any:
    """The codec a built-in stack's ``encode`` stage encodes with, with its settings."""
    from metis.stacks.loader import load_stack
    from metis.wire.codec import get_codec

    (encode,) = [s for s in load_stack(stack).stages if s.name == "encode"]
    return get_codec(encode.options["codec"], encode.options.get("settings", {}))


def checked_final(events: list[Any]) -> Any:
    """The stream's closing MessageComplete, after every event passed the invariant checker
    and the stream was checked as ended."""
    from metis.model.events import MessageComplete
    from metis.stages.policy.invariants import StreamChecker

    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return final


@contextmanager
def collector_off_alone() -> Iterator[None]:
    """The cyclic collector run, then off for the block, and no other thread running Python
    code in it (unless the block blocks): the garbage :func:`metis_objects_in_cycles` finds
    there is the block's own. A connection of a server an earlier test of the worker left
    running, dropped in another thread during the block, was counted as the block's cycle; so
    was what finalizing an earlier test's garbage made (an async generator of a closed event
    loop, handed back for closing): collected until a pass finds nothing."""
    for _ in range(10):
        if not gc.collect():
            break
    gc.disable()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(3600.0)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        gc.enable()


def metis_objects_in_cycles() -> list[object]:
    """What the cyclic collector finds unreachable now that metis's code made (its objects,
    functions, generators, coroutines and frames). Garbage another thread makes meanwhile (a
    server an earlier test of the same worker left running) is not counted, so a test that
    asserts none is left fails only for a cycle of metis's own."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return [o for o in gc.garbage if _made_by_metis(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _made_by_metis(obj: object) -> bool:
    if isinstance(obj, types.FunctionType):
        return (obj.__module__ or "").startswith("metis")
    if (type(obj).__module__ or "").startswith("metis"):
        return True
    for name in ("gi_code", "cr_code", "ag_code", "f_code"):
        code = getattr(obj, name, None)
        if isinstance(code, types.CodeType):
            return f"{os.sep}metis{os.sep}" in code.co_filename
    return False
