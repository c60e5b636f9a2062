"""An adapter: docs/contract.md ProviderAdapter, made of a provider stack's pipeline.

``stream()`` runs the pipeline and yields its canonical events; ``complete()`` runs the same
pipeline on a non-streamed request and folds the same events into a CanonicalResponse
(docs/contract.md §2). The adapter holds no per-conversation state (that lives in the tool-id
store, keyed by session), so one adapter serves any number of concurrent calls.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metis.adapter.capabilities import ModelCapabilities
from metis.adapter.checks import (
    check_ready,
    closed_error,
    foreign_prefixes,
    given,
    transport_mode,
    warn_unclosed,
)
from metis.adapter.lifecycle import Lifecycle
from metis.core.any_loop import AnyLoopSlots
from metis.core.config_files import typed
from metis.core.options import checked_init, checked_options
from metis.core.secrets import install_httpx_log_filter
from metis.errors import AdapterError, ProtocolError
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.config import AdapterConfig, with_given
from metis.pipeline.registry import StageRegistry
from metis.pipeline.registry import stages as default_registry
from metis.pipeline.settings import ProviderSettings, validate_settings
from metis.pipeline.stores import ToolIdStore, default_tool_id_store
from metis.stacks.deferred import checked_without_code
from metis.stacks.loader import StackSpec, endpoint_for, load_stack
from metis.stacks.model_ids import own_stack_names, wire_name
from metis.telemetry.sink import TelemetrySink, default_sink
from metis.transport.clients import AsyncHTTPClient, as_httpx
from metis.transport.loop_clients import LoopClients, own_client

if TYPE_CHECKING:  # what a call uses loads with the first call (benchmarks/README.md, import)
    import httpx

    from metis.adapter.count_tokens import TokenCount
    from metis.model.content import Message
    from metis.model.events import StreamEvent
    from metis.model.request import CanonicalRequest, ToolDefinition
    from metis.model.response import CanonicalResponse
    from metis.pipeline.call import Call, CallTerms
    from metis.pipeline.cancellation import CancelHandle
    from metis.pipeline.hooks import Watch
    from metis.pipeline.pipeline import Pipeline
    from metis.pipeline.services import StageServices

install_httpx_log_filter()


@checked_init
class Adapter(Lifecycle):
    """One provider stack's pipeline, behind the adapter interface (docs/contract.md §1): a
    :class:`~metis.ChatModel`, shared by any number of concurrent calls."""

    def __init__(
        self,
        stack: StackSpec,
        config: AdapterConfig | None = None,
        *,
        pipeline: Pipeline | None = None,
        tool_id_store: ToolIdStore | None = None,
        telemetry: TelemetrySink | None = None,
        registry: StageRegistry = default_registry,
        init_on_first_call: bool = False,
    ) -> None:
        self.stack, self.config = given(stack, config)
        self.name = self.stack.name
        self._capabilities = ModelCapabilities(stack, self.config)
        self.settings = validate_settings(
            stack.settings, self.config.given_settings(), f"{stack.name} adapter settings"
        )
        """The provider's own settings, of the kind the stack names, checked here."""
        self.endpoint = endpoint_for(
            stack,
            api_key=self.config.api_key,
            base_url=self.config.base_url,
            extra_headers=self.config.extra_headers,
        )
        self._tool_id_store = tool_id_store or default_tool_id_store
        self._telemetry = telemetry or default_sink()
        self._client = self.config.http_client
        self._owns_client = self._client is None
        self._registry = registry
        self._own_clients = LoopClients(partial(own_client, self.config.timeout_seconds))
        self._pipeline: Pipeline | None = None
        if pipeline is not None or not checked_without_code(stack.stages, registry):
            self._pipeline = (pipeline or stack.build_pipeline(registry)).bound(self._services())
        self._inflight: dict[str, list[CancelHandle]] = {}
        self.init_on_first_call = init_on_first_call
        """Run :meth:`init` before the first call (the Registry and the one-line calls ask)."""
        self._initialized = False
        self._init_lock = AnyLoopSlots(1)
        self._lifespan = None
        self._closed = False

    @property
    def pipeline(self) -> Pipeline:
        """This adapter's own stages, bound to its client, store, sink and settings (stages
        inserted later as they arrive); built on first use (metis/stacks/deferred.py)."""
        if self._pipeline is None:
            self._pipeline = self.stack.build_pipeline(self._registry).bound(self._services())
        return self._pipeline

    def __repr__(self) -> str:
        names = self._pipeline.names() if self._pipeline else [s.name for s in self.stack.stages]
        return f"<Adapter {self.name}: {' -> '.join(names)}>"

    def __del__(self) -> None:
        if getattr(self, "_owns_client", False) and self._own_clients.any_open():
            warn_unclosed(self.name, self)

    # ProviderAdapter ---------------------------------------------------------------------

    def stream(
        self, request: CanonicalRequest, terms: CallTerms | None = None
    ) -> AsyncIterator[StreamEvent]:
        """One call's events, ending with ``message.complete``; ``terms``: what a router settled."""
        return self._run(request, terms, stream_by_default=True)

    async def complete(
        self, request: CanonicalRequest, terms: CallTerms | None = None
    ) -> CanonicalResponse:
        """One call, folded from ``stream()``'s events (whole-body unless ``stream=True``)."""
        from metis.adapter.delivery import folded
        from metis.model.events import MessageComplete

        started = time.monotonic()
        final: MessageComplete | None = None
        try:
            async with aclosing(self._run(request, terms)) as events:
                async for event in events:
                    if isinstance(event, MessageComplete):
                        final = event
        except AdapterError as error:
            if final is not None:
                error.partial_response = folded(self.name, request, final, started)
            raise
        if final is None:
            raise ProtocolError(f"{self.name} gave no message.complete", provider=self.name)
        return folded(self.name, request, final, started)

    def estimate_input_tokens(
        self,
        messages: list[Message],
        tools: list[ToolDefinition],
        system_prompt: str | None,
        *,
        model: str | None = None,
    ) -> int:
        """About how many input tokens this provider will count (docs/contract.md §1): a local
        heuristic under the stack's ``token_estimate`` profile (with ``model``'s overrides,
        if named), no network."""
        from metis.catalog.estimate import estimate_input_tokens

        profile = self.stack.token_estimate
        if model is not None:
            profile = profile.for_model(self.wire_model(model))
        return estimate_input_tokens(messages, tools, system_prompt, profile)

    async def count_tokens(self, request: CanonicalRequest) -> TokenCount:
        """The request's input tokens from the provider's counting endpoint where it has one,
        else the offline estimate; the result says which (:mod:`metis.adapter.count_tokens`)."""
        from metis.adapter.count_tokens import count_tokens

        return await count_tokens(self, request)

    def cancel(self, request_id: str) -> bool:
        """Abort an in-flight call (docs/contract.md §2). Its stream closes any tool still open,
        yields ``message.complete`` with stop reason ``cancelled`` and the partial content,
        and ends. True only if the call was running and is now cancelled; safe before it
        starts, after it ends, twice, and from any task."""
        handles = self._inflight.get(typed(request_id, str, "Adapter.cancel(request_id)"))
        return any([handle.cancel() for handle in handles or ()])

    def http_client(self) -> AsyncHTTPClient:
        """The client this adapter sends with (made on first use when none was given)."""
        return self._http()

    # Internals ---------------------------------------------------------------------------

    def _run(
        self, request: CanonicalRequest, terms: CallTerms | None, stream_by_default: bool = False
    ) -> AsyncGenerator[StreamEvent, None]:
        """The call's one generator, opened by :meth:`_start` (this adapter's watch outermost)."""
        return self.pipeline.stream(request, partial(self._start, terms, stream_by_default))

    async def _start(
        self, terms: CallTerms | None, stream_by_default: bool, request: CanonicalRequest
    ) -> tuple[CanonicalRequest, Call, Watch]:
        from metis.adapter.delivery import Delivery
        from metis.adapter.sendable import check_request
        from metis.model.schema_forms import own_tools
        from metis.pipeline.call import NO_TERMS, Call, DropRecord

        terms = terms or NO_TERMS
        default = stream_by_default and self.capabilities.supports_streaming
        request = transport_mode(request, default, self.capabilities.supports_streaming, self.name)
        if self.init_on_first_call and not self._initialized:
            await self.init()
        history = check_request(request, self.name)  # before any stage serializes a tool input
        if request.tools and self.pipeline.own_sees_request:
            request = own_tools(request)
        check_ready(self.name, self.stack, self.endpoint, request, self._foreign_prefixes)
        call = Call(
            request_id=request.request_id,
            provider=self.name,
            model=request.model,
            wire_model=self.wire_model(request.model),
            session_id=request.session_id,
            deadline=terms.deadline_after(self.config.timeout_seconds),
            drops=DropRecord(secrets=self.endpoint.secrets),
            terms=terms,
            seen=(request.messages, history),
        )
        handles = self._inflight.setdefault(request.request_id, [])
        handles.append(call.cancel)
        return request, call, Delivery(call, self._inflight)

    @property
    def telemetry(self) -> TelemetrySink:
        """Where the bus events of every call go; setting it tells the stages at once."""
        return self._telemetry

    @telemetry.setter
    def telemetry(self, sink: TelemetrySink) -> None:
        self._telemetry = sink
        if self._pipeline is not None:  # one built later is bound with what is set then
            self._pipeline.rebind(self._services())

    @property
    def tool_id_store(self) -> ToolIdStore:
        """The session store of tool ids; setting it tells the stages at once."""
        return self._tool_id_store

    @tool_id_store.setter
    def tool_id_store(self, store: ToolIdStore) -> None:
        self._tool_id_store = store
        if self._pipeline is not None:
            self._pipeline.rebind(self._services())

    @property
    def capabilities(self) -> AdapterCapabilities:
        """What this adapter serves for a model the catalog does not know: the stack's
        declaration with the configured overrides (a lifespan may refine it)."""
        return self._capabilities.declared

    @capabilities.setter
    def capabilities(self, value: AdapterCapabilities) -> None:
        self._capabilities.declared = value

    def capabilities_for(self, wire_model: str) -> AdapterCapabilities:
        """What ``wire_model`` can serve through this adapter: :attr:`capabilities` narrowed by
        the model's catalog entry, with the configured overrides still winning."""
        wire_model = typed(wire_model, str, "Adapter.capabilities_for(wire_model)")
        return self._capabilities.of(wire_model)

    @functools.cached_property
    def _own_names(self) -> frozenset[str]:
        return own_stack_names(self.stack)

    @functools.cached_property
    def _foreign_prefixes(self) -> frozenset[str]:
        return foreign_prefixes(self.stack)

    def wire_model(self, model: str) -> str:
        """The provider's name for a model id (``metis.stacks.model_ids.wire_name``)."""
        return wire_name(
            typed(model, str, "Adapter.wire_model(model)"), self.stack, self._own_names
        )

    def _services(self) -> StageServices:
        from metis.pipeline.services import StageServices

        return StageServices(
            provider=self.name,
            config=self.config,
            endpoint=self.endpoint,
            http=self._stage_client,
            tool_ids=self.tool_id_store,
            telemetry=self.telemetry,
            capabilities_for=self.capabilities_for,
            token_profile_for=self.stack.token_estimate.for_model,
            settings=self.settings,
            option_keys=self._own_names | ({self.stack.catalog} if self.stack.catalog else set()),
        )

    def _stage_client(self) -> httpx.AsyncClient:
        return as_httpx(self._http())

    def _http(self) -> AsyncHTTPClient:
        if self._closed:  # a new pool here would outlive the aclose() that ended the last
            raise closed_error(self.name)
        if self._client is None:  # its own: one per event loop (metis/transport/loop_clients.py)
            return self._own_clients.get()
        return self._client


@checked_options
def build_adapter(
    stack: str | Path | StackSpec,
    config: AdapterConfig | None = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout_seconds: float | None = None,
    max_retries: int | None = None,
    extra_headers: dict[str, str] | None = None,
    capabilities: dict[str, Any] | None = None,
    http_client: AsyncHTTPClient | None = None,
    settings: Mapping[str, Any] | ProviderSettings | None = None,
    tool_id_store: ToolIdStore | None = None,
    telemetry: TelemetrySink | None = None,
    registry: StageRegistry = default_registry,
    init_on_first_call: bool = False,
) -> Adapter:
    """An adapter for a built-in stack (``"anthropic"``, ``"openai"``) or a stack file.

    The configuration is :class:`AdapterConfig`'s, given as keywords or as ``config`` (a
    keyword wins over the same field of ``config``). A key not given is read from the stack's
    variable (``ANTHROPIC_API_KEY``); a base URL from the SDK's variable the stack names, else
    the provider's own. ``settings`` are the provider's own, of the kind its stack names
    (``{"region": "eu-west-1"}`` for Bedrock; docs/engine.md). A base URL without a scheme,
    or a setting the stack's kind does not have, is a ConfigError here; a missing key is a
    NotConfiguredError naming the variable when the first call is made, before it is sent.
    ``init_on_first_call``: :meth:`init` runs before the first call (an Ollama server's checks,
    and what its model can do), as entering ``async with`` runs it.
    """
    spec = stack if isinstance(stack, StackSpec) else load_stack(stack, registry)
    config = with_given(
        config,
        api_key=api_key,
        base_url=base_url,
        timeout_seconds=timeout_seconds,
        max_retries=max_retries,
        extra_headers=extra_headers,
        capabilities=capabilities,
        http_client=http_client,
        settings=dict(settings) if isinstance(settings, Mapping) else settings,
    )
    return Adapter(
        spec,
        config,
        tool_id_store=tool_id_store,
        telemetry=telemetry,
        registry=registry,
        init_on_first_call=init_on_first_call,
    )
