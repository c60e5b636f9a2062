"""Helpers shared by the tests: a real Call without an adapter."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx
import pytest

from metis.config import AdapterConfig
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.call import Call
from metis.pipeline.stack import Endpoint
from metis.session import InMemoryToolIdStore, ToolIdStore

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
    capabilities: AdapterCapabilities | None = None,
    store: ToolIdStore | None = None,
    http: httpx.AsyncClient | None = None,
    **kw: Any,
) -> Call:
    return Call(
        request_id="req_1",
        provider=provider,
        model=model,
        wire_model=model.split(":", 1)[-1],
        config=AdapterConfig(),
        endpoint=Endpoint(base_url="http://test", path="/v1"),
        capabilities=capabilities or FULL_CAPABILITIES,
        http=http or httpx.AsyncClient(),
        tool_ids=store or InMemoryToolIdStore(),
        session_id=session_id,
        **kw,
    )


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
