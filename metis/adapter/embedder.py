"""An embedder: one embedding stack made ready to call (docs/embeddings.md).

Embeddings have their own interface, not the chat adapter's: no stream, no
tools, no system prompt; a list of inputs is the normal case. What they share with the chat
adapters is the machinery: the stack's endpoint and key, the auth flow of every platform, the
transport with its deadlines and redirect policy, the retry policy, the bus events and the
error taxonomy. ``await embedder.embed(texts, model=...)`` checks the call (before anything is
sent), splits it into requests within the provider's limits, runs them with bounded
concurrency and joins the vectors in input order. A request that fails after its retries
fails the call with its own error, carrying every vector that arrived
(``error.partial_embeddings``) and naming the items it concerns.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import anyio

from metis.adapter.checks import closed_error
from metis.adapter.embed_checks import (
    Limits,
    check_call,
    check_options,
    checked_inputs,
    limits_for,
    split,
)
from metis.adapter.embed_send import check_sizes, send_batch
from metis.catalog.embedding_models import EmbeddingModel, embedding_model
from metis.core.ids import new_request_id
from metis.core.options import checked_init
from metis.core.raised import carrying, first_raised
from metis.core.secrets import install_httpx_log_filter
from metis.errors import AdapterError, NotConfiguredError
from metis.model.embeddings import (
    EmbeddingResult,
    EmbedInput,
    FailedItems,
    InputType,
    PartialEmbeddings,
)
from metis.model.response import TokenUsage
from metis.pipeline.call import Call, DropRecord
from metis.pipeline.config import AdapterConfig
from metis.pipeline.provider import Provider
from metis.pipeline.registry import StageRegistry
from metis.pipeline.registry import stages as default_registry
from metis.pipeline.services import StageServices
from metis.pipeline.settings import validate_settings
from metis.stacks.embedding import (
    EmbeddingStackSpec,
    builtin_embedding_stacks,
    load_embedding_stack,
)
from metis.stacks.loader import endpoint_for
from metis.telemetry.sink import TelemetrySink, default_sink
from metis.transport.clients import AsyncHTTPClient, as_httpx
from metis.transport.loop_clients import LoopClients
from metis.transport.stage import http_client
from metis.wire.embeddings import EmbedBatch, Embedded, embedding_codec

install_httpx_log_filter()


class Admitted(Protocol):
    async def settle(self, usage: TokenUsage | None) -> None: ...


class Admits(Protocol):
    """What admits a request (``metis.routing.limits.Limiter`` is one)."""

    def admit(
        self, estimate: int, deadline: float = ...
    ) -> AbstractAsyncContextManager[Admitted]: ...


@checked_init
class Embedder:
    """One embedding stack's provider, shared by any number of concurrent calls."""

    def __init__(
        self,
        stack: EmbeddingStackSpec | str | Path,
        config: AdapterConfig | None = None,
        *,
        telemetry: TelemetrySink | None = None,
        registry: StageRegistry = default_registry,
        limiter: Admits | None = None,
    ) -> None:
        spec = stack if isinstance(stack, EmbeddingStackSpec) else load_embedding_stack(stack)
        self.stack = spec
        self.name = spec.name
        self.config = config or AdapterConfig()
        self.settings = validate_settings(
            spec.settings, self.config.given_settings(), f"{spec.name} embedder settings"
        )
        self.endpoint = endpoint_for(
            spec,
            api_key=self.config.api_key,
            base_url=self.config.base_url,
            extra_headers=self.config.extra_headers,
        )
        self.codec = embedding_codec(spec.codec)
        self.telemetry = telemetry or default_sink()
        self.limiter = limiter
        """Admits each request (a router's :class:`~metis.routing.limits.Limiter`: concurrent
        calls, requests and tokens per minute), or None."""
        self._client = self.config.http_client
        self._owns_client = self._client is None
        self._own_clients = LoopClients(partial(http_client, self.config.timeout_seconds))
        self._closed = False
        services = StageServices(
            provider=self.name,
            config=self.config,
            endpoint=self.endpoint,
            http=lambda: as_httpx(self._http()),
            telemetry=self.telemetry,
            settings=self.settings,
        )
        stages = [*spec.build_auth_flow(registry), registry.build("transport", {})]
        for stage in stages:
            stage.bind(services)
        provider = Provider.of(stages, services)
        assert provider is not None  # it has a transport
        self.provider = provider

    def __repr__(self) -> str:
        return f"<Embedder {self.name}: {self.stack.codec} codec>"

    def wire_model(self, model: str) -> str:
        """The provider's name for ``model`` (``openai:text-embedding-3-small`` ->
        ``text-embedding-3-small``); a name without this stack's prefix is taken as it is."""
        prefix, sep, rest = model.partition(":")
        return rest if sep and prefix in (self.name, self.stack.source) else model

    def model_info(self, model: str) -> EmbeddingModel | None:
        """What the catalog knows of ``model`` here: dimensions, limits, prices."""
        return embedding_model(self.stack.catalog, self.wire_model(model))

    async def embed(
        self,
        inputs: Sequence[EmbedInput],
        *,
        model: str,
        dimensions: int | None = None,
        input_type: InputType | None = None,
        truncate: bool = False,
        concurrency: int | None = None,
    ) -> EmbeddingResult:
        """One vector per input, in input order (docs/embeddings.md)."""
        if isinstance(inputs, str):
            inputs = [inputs]
        wire_model = self.wire_model(model)
        self._require_key()
        info = embedding_model(self.stack.catalog, wire_model)
        check_options(self.name, self.codec, info, wire_model, dimensions, input_type)
        check_call(concurrency, truncate)
        limits = limits_for(self.stack.limits, self.codec, info, wire_model)
        if concurrency is not None:
            limits = Limits(
                limits.max_inputs, limits.max_request_tokens, limits.max_input_tokens, concurrency
            )
        sent, estimates = checked_inputs(self.name, inputs, self.codec, info, limits, truncate)
        chunks = split(estimates, limits)
        run = _Run(len(sent), estimates)

        async def one(chunk: range) -> None:
            batch = EmbedBatch(
                tuple(sent[chunk.start : chunk.stop]), wire_model, dimensions, input_type, truncate
            )
            try:
                embedded = await self._send(batch, self._call(model, wire_model), estimates, chunk)
            except Exception as error:  # kept; raised once the other requests end
                run.failures.append(FailedItems(chunk, error))
                return
            run.arrived(chunk, embedded)

        limiter = anyio.CapacityLimiter(max(1, limits.concurrency))
        try:  # what a request raises that is not an Exception goes on out as itself
            async with anyio.create_task_group() as group:
                for chunk in chunks:
                    group.start_soon(carrying, _limited, limiter, one, chunk)
        except BaseExceptionGroup as failed:
            raise first_raised(failed) from None
        return run.result(self._served(model, wire_model), len(chunks))

    async def _send(
        self, batch: EmbedBatch, call: Call, estimates: list[int], chunk: range
    ) -> Embedded:
        """One request, admitted by the embedder's limiter first when it has one."""
        send = functools.partial(
            send_batch,
            self.provider,
            self.codec,
            self.endpoint,
            batch,
            call,
            self.config.max_retries,
            self.telemetry,
        )
        if self.limiter is None:
            return await send()
        estimate = sum(estimates[chunk.start : chunk.stop])
        async with self.limiter.admit(estimate, call.deadline) as admitted:
            embedded = await send()
            used = embedded.input_tokens if embedded.input_tokens is not None else estimate
            await admitted.settle(TokenUsage(input_tokens=used))
            return embedded

    def _served(self, model: str, wire_model: str) -> str:
        """The result's ``model``: ``stack:model``, or the stack file's path as the call named
        it (``my/stack.yaml:model``, which ``cost_of`` reads, as a chat reply's)."""
        source = self.stack.source
        if self.name in builtin_embedding_stacks() or not source.endswith((".yaml", ".yml")):
            return f"{self.name}:{wire_model}"
        return f"{source}:{wire_model}"

    def _call(self, model: str, wire_model: str) -> Call:
        return Call(
            request_id=new_request_id(),
            provider=self.name,
            model=model if ":" in model else f"{self.name}:{model}",
            wire_model=wire_model,
            deadline=anyio.current_time() + self.config.timeout_seconds,
            drops=DropRecord(secrets=self.endpoint.secrets),
        )

    def _require_key(self) -> None:
        auth = self.stack.auth
        if self.endpoint.api_key or not auth.env or auth.optional:
            return
        raise NotConfiguredError(
            f"{self.name}: no API key: set {auth.env} (or pass api_key=...)",
            model=None,
            adapter=self.name,
            api_key_env=auth.env,
        )

    def _http(self) -> AsyncHTTPClient:
        if self._closed:  # a new pool here would outlive the aclose() that ended the last
            raise closed_error(self.name, "embedder")
        if self._client is None:  # its own: one per event loop (metis/transport/loop_clients.py)
            return self._own_clients.get()
        return self._client

    async def aclose(self) -> None:
        """Releases the connection pool if this embedder made it; a call after it is a
        ClosedError."""
        self._closed = True
        if self._owns_client:
            await self._own_clients.aclose()

    async def __aenter__(self) -> Embedder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _limited(limiter: anyio.CapacityLimiter, one: Any, chunk: range) -> None:
    async with limiter:
        await one(chunk)


class _Run:
    """One call's vectors as they arrive, and the requests that failed."""

    def __init__(self, count: int, estimates: list[int]) -> None:
        self.vectors: list[list[float] | None] = [None] * count
        self.estimates = estimates
        self.tokens = 0
        self.estimated = False
        self.served: str | None = None
        self.failures: list[FailedItems] = []

    def arrived(self, chunk: range, embedded: Embedded) -> None:
        self.vectors[chunk.start : chunk.stop] = embedded.vectors
        if embedded.input_tokens is None:
            self.tokens += sum(self.estimates[chunk.start : chunk.stop])
            self.estimated = True
        else:
            self.tokens += embedded.input_tokens
        self.served = self.served or embedded.model

    def result(self, model: str, requests: int) -> EmbeddingResult:
        provider = model.partition(":")[0]
        served = f"{provider}:{self.served}" if self.served else model
        usage = TokenUsage(input_tokens=self.tokens, estimated=self.estimated)
        if self.failures:
            raise self._failed(served, usage, requests)
        vectors = [v for v in self.vectors if v is not None]
        check_sizes(vectors, None, f"across the {requests} requests of one call")
        return EmbeddingResult(vectors, served, usage, requests)

    def _failed(self, model: str, usage: TokenUsage, requests: int) -> Exception:
        failures = tuple(sorted(self.failures, key=lambda f: f.indices.start))
        error = failures[0].error
        if not isinstance(error, AdapterError):
            # not the provider's answer: a configuration an auth step refused, or a bug;
            # raised as itself (not inside an exception group)
            assert isinstance(error, Exception)
            return error
        items = sum(len(f.indices) for f in failures)
        where = _ranges([f.indices for f in failures])
        error.message = (
            f"{len(failures)} of {requests} embedding requests failed, {items} of "
            f"{len(self.vectors)} inputs without a vector (items {where}); the first: "
            f"{error.message}"
        )
        error.args = (error.message,)
        error.partial_embeddings = PartialEmbeddings(self.vectors, model, usage, failures)
        return error


def _ranges(ranges: list[range], shown: int = 5) -> str:
    parts = [f"{r.start}" if len(r) == 1 else f"{r.start}-{r.stop - 1}" for r in ranges[:shown]]
    return ", ".join(parts) + (f" and {len(ranges) - shown} more" if len(ranges) > shown else "")


def build_embedder(
    stack: str | Path | EmbeddingStackSpec,
    config: AdapterConfig | None = None,
    *,
    telemetry: TelemetrySink | None = None,
    limiter: Admits | None = None,
    **given: Any,
) -> Embedder:
    """An embedder for a built-in embedding stack (``"openai"``, ``"voyage"``) or a stack file;
    the configuration is :class:`AdapterConfig`'s, as keywords or ``config``."""
    if given:
        base = dict(config) if config else {}
        config = AdapterConfig(**{**base, **{k: v for k, v in given.items() if v is not None}})
    return Embedder(stack, config, telemetry=telemetry, limiter=limiter)


__all__ = ["Embedder", "build_embedder"]
