"""An adapter: seed 000's ProviderAdapter, made of a provider stack's pipeline.

``stream()`` runs the pipeline and yields its canonical events; ``complete()`` runs the same
pipeline on a non-streamed request and folds the same events into a CanonicalResponse
(DESIGN.md 2). The adapter holds no per-conversation state (that lives in the tool-id store,
keyed by session), so one adapter serves any number of concurrent calls.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import httpx

from metis.catalog.capabilities import model_capabilities
from metis.catalog.lookup import find_model, warn_uncatalogued
from metis.config import AdapterConfig
from metis.count_tokens import TokenCount, count_tokens
from metis.errors import AdapterError, ProtocolError
from metis.estimate import estimate_input_tokens
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import Message
from metis.model.events import MessageComplete, StreamEvent
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.model.response import CanonicalResponse
from metis.pipeline.call import Call
from metis.pipeline.cancellation import CancelHandle
from metis.pipeline.pipeline import Pipeline
from metis.pipeline.registry import StageRegistry
from metis.pipeline.registry import stages as default_registry
from metis.pipeline.stack import Endpoint, StackSpec, load_stack
from metis.session import ToolIdStore, default_tool_id_store
from metis.telemetry import NULL_SINK, TelemetrySink


class Adapter:
    def __init__(
        self,
        stack: StackSpec,
        config: AdapterConfig | None = None,
        *,
        pipeline: Pipeline | None = None,
        tool_id_store: ToolIdStore | None = None,
        telemetry: TelemetrySink | None = None,
        registry: StageRegistry = default_registry,
    ) -> None:
        self.stack = stack
        self.name = stack.name
        self.config = config or AdapterConfig()
        self.capabilities = self.config.merged_capabilities(stack.capabilities)
        self.pipeline = pipeline or stack.build_pipeline(registry)
        self.endpoint = Endpoint.for_stack(
            stack,
            api_key=self.config.api_key,
            base_url=self.config.base_url,
            extra_headers=self.config.extra_headers,
        )
        self.tool_id_store = tool_id_store or default_tool_id_store
        self.telemetry = telemetry or NULL_SINK
        self._client = self.config.http_client
        self._owns_client = self._client is None
        self._inflight: dict[str, list[CancelHandle]] = {}
        self._model_capabilities: dict[str, AdapterCapabilities] = {}

    def __repr__(self) -> str:
        return f"<Adapter {self.name}: {' -> '.join(self.pipeline.names())}>"

    # ProviderAdapter ---------------------------------------------------------------------

    async def stream(self, request: CanonicalRequest) -> AsyncIterator[StreamEvent]:
        """Yield the canonical events of one call, ending with ``message.complete``."""
        wants_stream = self.capabilities.supports_streaming
        if request.stream != wants_stream:
            request = request.model_copy(update={"stream": wants_stream})
        async with aclosing(self._run(request)) as events:
            async for event in events:
                yield event

    async def complete(self, request: CanonicalRequest) -> CanonicalResponse:
        """One non-streamed call, folded from the same events ``stream()`` yields."""
        if request.stream:
            request = request.model_copy(update={"stream": False})
        started = time.monotonic()
        final: MessageComplete | None = None
        try:
            async with aclosing(self._run(request)) as events:
                async for event in events:
                    if isinstance(event, MessageComplete):
                        final = event
        except AdapterError as error:
            if final is not None:
                error.partial_response = self._response(request, final, started)
            raise
        if final is None:
            raise ProtocolError(f"{self.name} gave no message.complete", provider=self.name)
        return self._response(request, final, started)

    def estimate_input_tokens(
        self,
        messages: list[Message],
        tools: list[ToolDefinition],
        system_prompt: str | None,
        *,
        model: str | None = None,
    ) -> int:
        """About how many input tokens this provider will count (seed 000 §3.1): a local
        heuristic under the stack's ``token_estimate`` profile (with ``model``'s overrides,
        if named), no network."""
        profile = self.stack.token_estimate
        if model is not None:
            profile = profile.for_model(self.wire_model(model))
        return estimate_input_tokens(messages, tools, system_prompt, profile)

    async def count_tokens(self, request: CanonicalRequest) -> TokenCount:
        """The request's input tokens from the provider's counting endpoint where it has one,
        else the offline estimate; the result says which (:mod:`metis.count_tokens`)."""
        return await count_tokens(self, request)

    async def cancel(self, request_id: str) -> bool:
        """Abort an in-flight call (seed 000 §5.3). Its stream closes any tool still open,
        yields ``message.complete`` with stop reason ``cancelled`` and the partial content,
        and ends. True only if the call was running and is now cancelled; safe before it
        starts, after it ends, twice, and from any task."""
        handles = self._inflight.get(request_id)
        if not handles:
            return False
        return any([handle.cancel() for handle in handles])

    async def close(self) -> None:
        """Release the connection pool, if this adapter made it."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def init(self) -> None:
        """Lifecycle hook (seed 004 §6): runs each stage's ``init`` (a local provider checks
        its server and model there); a remote HTTP stack has nothing to prepare."""
        for stage in self.pipeline:
            await stage.init(self)

    async def dispose(self) -> None:
        """Runs each stage's ``dispose``, innermost first, then releases the HTTP client."""
        try:
            for stage in reversed(self.pipeline.stages):
                await stage.dispose(self)
        finally:
            await self.close()

    def http_client(self) -> httpx.AsyncClient:
        """The client this adapter sends with (made on first use when none was given)."""
        return self._http()

    async def __aenter__(self) -> Adapter:
        await self.init()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.dispose()

    # Internals ---------------------------------------------------------------------------

    async def _run(self, request: CanonicalRequest) -> AsyncGenerator[StreamEvent, None]:
        wire_model = self.wire_model(request.model)
        call = Call(
            request_id=request.request_id,
            provider=self.name,
            model=request.model,
            wire_model=wire_model,
            config=self.config,
            endpoint=self.endpoint,
            capabilities=self.capabilities_for(wire_model),
            http=self._http(),
            tool_ids=self.tool_id_store,
            session_id=request.session_id,
            telemetry=self.telemetry,
            token_profile=self.stack.token_estimate.for_model(wire_model),
            deadline=anyio.current_time() + self.config.timeout_seconds,
        )
        handles = self._inflight.setdefault(request.request_id, [])
        handles.append(call.cancel)
        try:
            async with self.pipeline.run(request, call) as events:
                async for event in events:
                    yield event
        finally:
            call.cancel.finished = True
            handles.remove(call.cancel)
            if not handles:
                del self._inflight[request.request_id]

    def capabilities_for(self, wire_model: str) -> AdapterCapabilities:
        """What ``wire_model`` can serve through this adapter: the stack's declaration narrowed
        by the model's catalog entry, then the configured overrides. A model the catalog does
        not know keeps the stack's declaration (with one WARN per model per process)."""
        found = self._model_capabilities.get(wire_model)
        if found is None:
            declared = self.stack.capabilities
            info = find_model(self.stack.catalog, wire_model) if self.stack.catalog else None
            if info is not None:
                declared = model_capabilities(declared, info)
            elif self.stack.catalog:
                warn_uncatalogued(self.stack.catalog, wire_model, self.stack.source)
            found = self.config.merged_capabilities(declared)
            self._model_capabilities[wire_model] = found
        return found

    def wire_model(self, model: str) -> str:
        """The provider's name for a canonical ``provider:name`` model id."""
        prefix = f"{self.name}:"
        return model[len(prefix) :] if model.startswith(prefix) else model

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.config.timeout_seconds, connect=10.0),
                follow_redirects=False,
            )
        return self._client

    def _response(
        self, request: CanonicalRequest, final: MessageComplete, started: float
    ) -> CanonicalResponse:
        return CanonicalResponse(
            request_id=request.request_id,
            model=request.model,
            provider=self.name,
            content=final.final_content,
            stop_reason=final.stop_reason,
            usage=final.usage,
            latency_ms=int((time.monotonic() - started) * 1000),
            message_id=final.message_id,
        )


def build_adapter(
    stack: str | Path | StackSpec,
    config: AdapterConfig | None = None,
    **kwargs: Any,
) -> Adapter:
    """An adapter for a built-in stack (``"anthropic"``, ``"openai"``) or a stack file."""
    spec = stack if isinstance(stack, StackSpec) else load_stack(stack)
    return Adapter(spec, config, **kwargs)
