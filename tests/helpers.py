"""Helpers shared by the tests: a real Call without an adapter."""

from __future__ import annotations

from typing import Any

import httpx

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
