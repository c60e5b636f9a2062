"""A router: one adapter-shaped object over an ordered list of models of any providers.

A call goes to the first model that can take it: one whose catalog entry can serve the
request, that is not cooling down after failures, and whose client-side limits let it through.
When that model fails with an error class the route moves on for (overloaded, rate_limit,
server_error, network by default), after the adapter's own retries, the next model is tried.
A stream moves on only until its first event has reached the caller; after that a failure
ends it as an adapter's stream ends. Every decision and every change of a model's availability
is a telemetry event. The history stays each stage's business: tool ids, thinking provenance
and the rest are handled by each model's own stack, so any of them can take the next turn.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from typing import Any, Protocol

import anyio

from metis.adapter.adapter import Adapter
from metis.adapter.count_tokens import TokenCount
from metis.catalog.estimate import estimate_request_tokens
from metis.core.deprecation import warn_deprecated
from metis.core.options import checked_init
from metis.errors import (
    AdapterError,
    CapabilityError,
    ConfigError,
    ErrorClass,
    OverloadedError,
    ProtocolError,
)
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import Message
from metis.model.events import MessageComplete, StreamEvent
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.model.response import CanonicalResponse
from metis.routing.availability import Admission, AvailabilityStore, Change, InMemoryAvailability
from metis.routing.limits import (
    Admitted,
    Buckets,
    InMemoryBuckets,
    Limiter,
    Limits,
    SharedSlots,
)
from metis.routing.spec import DEFAULT_FALLBACK_ON, RouteSpec, TargetSpec, error_classes
from metis.routing.targets import ResolvedTarget, RouteTarget, Targets
from metis.stages.policy.capability_check import unmet_needs
from metis.telemetry import NULL_SINK, AvailabilityChanged, RouteDecided, TelemetrySink

AVAILABILITY_ERRORS = DEFAULT_FALLBACK_ON
"""The error classes that say a model is unavailable (and cool it down)."""


@checked_init
class Router:
    """Presents the adapter interface (``complete``, ``stream``, ``cancel``, ``aclose``,
    ``estimate_input_tokens``) over an ordered list of models; see the module's docstring."""

    def __init__(
        self,
        targets: Sequence[str | RouteTarget | TargetSpec],
        *,
        name: str = "route",
        fallback_on: Iterable[ErrorClass | str] = DEFAULT_FALLBACK_ON,
        max_retries: int | None = None,
        adapters: Mapping[str, Adapter] | None = None,
        availability: AvailabilityStore | None = None,
        limits: Mapping[str, Limits] | None = None,
        buckets: Buckets | None = None,
        slots: SharedSlots | None = None,
        telemetry: TelemetrySink | None = None,
    ) -> None:
        if not targets:
            raise ConfigError("a route needs at least one model")
        self.name = name
        self.fallback_on = error_classes(fallback_on)
        self.availability: AvailabilityStore = availability or InMemoryAvailability()
        self.telemetry = telemetry or NULL_SINK
        self._targets = Targets(adapters or {}, limits or {}, buckets or InMemoryBuckets(), slots)
        self.targets = [self._targets.resolve(t, max_retries) for t in targets]

    def __repr__(self) -> str:
        return f"<Router {self.name}: {' -> '.join(t.model for t in self.targets)}>"

    # The adapter interface -------------------------------------------------------------------

    async def complete(self, request: CanonicalRequest) -> CanonicalResponse:
        """The first model that serves the request answers it."""
        steps: list[tuple[str, str, str]] = []
        last: AdapterError | None = None
        for target in self.targets:
            admitted = await self._admit(target, request, steps)
            if admitted is None:
                continue
            routed, admission = admitted
            try:
                async with self._limited(target, routed, admission, steps) as budget:
                    if budget is None:
                        continue
                    response = await target.adapter.complete(routed)
                    await budget.settle(response.usage)
            except AdapterError as error:
                last = error
                if await self._failed(target, error, steps):
                    continue
                self._decided(request, steps, None)
                raise
            except BaseException:
                await self._changed(self.availability.abandoned(target.key))
                raise
            await self._served(target, steps)
            self._decided(request, steps, target.model)
            return response
        raise self._exhausted(request, steps, last)

    async def stream(self, request: CanonicalRequest) -> AsyncGenerator[StreamEvent, None]:
        """The first model whose stream yields an event serves the whole stream."""
        steps: list[tuple[str, str, str]] = []
        last: AdapterError | None = None
        for target in self.targets:
            admitted = await self._admit(target, request, steps)
            if admitted is None:
                continue
            routed, admission = admitted
            async with AsyncExitStack() as stack:
                try:
                    budget = await stack.enter_async_context(
                        self._limited(target, routed, admission, steps)
                    )
                    if budget is None:
                        continue
                    events = target.adapter.stream(routed)
                    stack.push_async_callback(_aclose, events)
                    first = await _first(events, target)
                except AdapterError as error:
                    last = error
                    if await self._failed(target, error, steps):
                        continue
                    self._decided(request, steps, None)
                    raise
                except BaseException:
                    await self._changed(self.availability.abandoned(target.key))
                    raise
                await self._served(target, steps)
                self._decided(request, steps, target.model)
                async with aclosing(self._rest(target, first, events, budget)) as rest:
                    async for event in rest:
                        yield event
                return
        raise self._exhausted(request, steps, last)

    def cancel(self, request_id: str) -> bool:
        """Cancel the call wherever it is running (see :meth:`Adapter.cancel`)."""
        adapters = {id(t.adapter): t.adapter for t in self.targets}.values()
        return any([adapter.cancel(request_id) for adapter in adapters])

    async def aclose(self) -> None:
        """Close the adapters this router built (adapters given to it stay the caller's)."""
        await self._targets.aclose()

    async def close(self) -> None:
        """Deprecated: :meth:`aclose`."""
        warn_deprecated("Router.close()", "Router.aclose()")
        await self.aclose()

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def estimate_input_tokens(
        self,
        messages: list[Message],
        tools: list[ToolDefinition],
        system_prompt: str | None,
        *,
        model: str | None = None,
    ) -> int:
        """The first model's estimate (see :meth:`Adapter.estimate_input_tokens`)."""
        first = self.targets[0]
        return first.adapter.estimate_input_tokens(
            messages, tools, system_prompt, model=model or first.model
        )

    async def count_tokens(self, request: CanonicalRequest) -> TokenCount:
        """The first model's count of ``request`` (see :meth:`Adapter.count_tokens`)."""
        first = self.targets[0]
        return await first.adapter.count_tokens(first.request_for(request))

    def wire_model(self, model: str) -> str:
        return model

    def capabilities_for(self, wire_model: str) -> AdapterCapabilities:
        """What every model of the route can serve, for defaults: the first model's
        capabilities with the smallest output limit of them all."""
        smallest = min(t.capabilities.max_output_tokens for t in self.targets)
        return self.targets[0].capabilities.model_copy(update={"max_output_tokens": smallest})

    # One model -------------------------------------------------------------------------------

    async def _admit(
        self, target: ResolvedTarget, request: CanonicalRequest, steps: list[tuple[str, str, str]]
    ) -> tuple[CanonicalRequest, Admission] | None:
        routed = target.request_for(request)
        problems = unmet_needs(routed, target.capabilities, target.profile)
        if problems:
            steps.append((target.model, "skipped", "cannot serve: " + "; ".join(problems)))
            return None
        admission, change = await self.availability.admit(target.key)
        self._emit_change(change)
        if not admission.admitted:
            steps.append((target.model, "skipped", admission.reason))
            return None
        return routed, admission

    @asynccontextmanager
    async def _limited(
        self,
        target: ResolvedTarget,
        routed: CanonicalRequest,
        admission: Admission,
        steps: list[tuple[str, str, str]],
    ) -> AsyncIterator[Admitted | None]:
        """The call's budget under the target's limits; None (and the step skipped) when the
        limits refuse it."""
        if target.limiter is None:
            yield Admitted(Limiter(target.key, Limits()), 0, settled=True)
            return
        estimate = estimate_request_tokens(routed, target.profile)
        deadline = anyio.current_time() + target.adapter.config.timeout_seconds
        entered = False
        try:
            async with target.limiter.admit(estimate, deadline) as budget:
                entered = True
                yield budget
        except AdapterError as error:
            if entered:
                raise
            steps.append((target.model, "skipped", error.message))
            if admission.probe:
                await self._changed(self.availability.abandoned(target.key))
            yield None

    async def _rest(
        self,
        target: ResolvedTarget,
        first: StreamEvent,
        events: AsyncIterator[StreamEvent],
        budget: Admitted,
    ) -> AsyncGenerator[StreamEvent, None]:
        """The stream after its first event: no moving on any more."""
        event = first
        try:
            while True:
                if isinstance(event, MessageComplete):
                    await budget.settle(event.usage)
                yield event
                event = await events.__anext__()
        except StopAsyncIteration:
            return
        except AdapterError as error:
            if error.error_class in AVAILABILITY_ERRORS:
                await self._changed(
                    self.availability.failed(
                        target.key, error.error_class, error.retry_after_seconds
                    )
                )
            raise

    async def _failed(
        self, target: ResolvedTarget, error: AdapterError, steps: list[tuple[str, str, str]]
    ) -> bool:
        """Record a failed attempt; True when the route moves on."""
        steps.append((target.model, "failed", f"{error.error_class.value}: {error.message}"))
        if error.error_class in AVAILABILITY_ERRORS:
            retry_after = error.retry_after_seconds
            await self._changed(
                self.availability.failed(target.key, error.error_class, retry_after)
            )
        elif error.provider_status is not None:  # the provider answered: it is up
            await self._changed(self.availability.succeeded(target.key))
        else:
            await self._changed(self.availability.abandoned(target.key))
        return error.error_class in self.fallback_on

    async def _served(self, target: ResolvedTarget, steps: list[tuple[str, str, str]]) -> None:
        steps.append((target.model, "served", "answered"))
        await self._changed(self.availability.succeeded(target.key))

    async def _changed(self, pending: Awaitable[Change | None]) -> None:
        with anyio.CancelScope(shield=True):
            self._emit_change(await pending)

    def _emit_change(self, change: Change | None) -> None:
        if change is None:
            return
        self.telemetry.emit(
            AvailabilityChanged(
                key=change.key,
                old_state=change.old.state.value,
                new_state=change.new.state.value,
                cooldown_seconds=change.cooldown_seconds,
                failures=change.new.failures,
                reason=change.reason,
                timestamp=time.time(),
            )
        )

    def _decided(
        self, request: CanonicalRequest, steps: list[tuple[str, str, str]], served: str | None
    ) -> None:
        self.telemetry.emit(
            RouteDecided(
                request_id=request.request_id,
                session_id=request.session_id,
                route=self.name,
                served_by=served,
                steps=tuple(steps),
                timestamp=time.time(),
            )
        )

    def _exhausted(
        self,
        request: CanonicalRequest,
        steps: list[tuple[str, str, str]],
        last: AdapterError | None,
    ) -> AdapterError:
        self._decided(request, steps, None)
        summary = "; ".join(f"{model} {outcome}: {reason}" for model, outcome, reason in steps)
        if last is not None:
            last.add_note(f"route {self.name}: every model failed or was skipped: {summary}")
            return last
        if all(reason.startswith("cannot serve") for _, _, reason in steps):
            error: AdapterError = CapabilityError(
                f"no model of route {self.name} can serve this request: {summary}",
                request_id=request.request_id,
            )
        else:
            error = OverloadedError(
                f"no model of route {self.name} is available now: {summary}",
                request_id=request.request_id,
            )
        return error

    # Building --------------------------------------------------------------------------------


class ModelResolver(Protocol):
    """What resolves a route's model names (a :class:`metis.registry.Registry` does)."""

    def request(self, name: str, **fields: Any) -> tuple[Adapter, CanonicalRequest]: ...


def router_for(models: ModelResolver, name: str, spec: RouteSpec, **kwargs: Any) -> Router:
    """The router for a models.yaml route: its models are ids or aliases ``models`` knows."""
    targets = []
    for target in spec.targets():
        adapter, request = models.request(target.model, messages=[], max_output_tokens=1)
        targets.append(RouteTarget(request.model, adapter, target.max_retries, target.options))
    return Router(
        targets,
        name=name,
        fallback_on=spec.fallback_on,
        max_retries=spec.max_retries,
        limits=spec.limits,
        **kwargs,
    )


async def _aclose(events: AsyncIterator[StreamEvent]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


async def _first(events: AsyncIterator[StreamEvent], target: ResolvedTarget) -> StreamEvent:
    try:
        return await events.__anext__()
    except StopAsyncIteration:
        raise ProtocolError(f"{target.model} ended its stream without an event") from None
