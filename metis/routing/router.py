"""A router: one ChatModel over an ordered list of models of any providers.

A call goes to the first model that has its key, can serve the request, is not cooling down
after failures, and whose client-side limits let it through. When it fails with an error class
the route moves on for (overloaded, rate_limit, server_error, network by default), the next is
tried at once: a model with another after it does not retry by default (the route is its
retry), the last one keeps its adapter's own. A stream moves on only until its first event has
reached the caller; after that a failure ends it as an adapter's stream ends. Every decision
and change of a model's availability is a telemetry event. Availability, buckets and slots kept
in a shared store fall back to this process's own while it fails (:mod:`.shared_state`). The
history stays each model's own stack's business (tool ids, thinking provenance), so any model
can take the next turn. A closed router refuses every call."""

from __future__ import annotations

from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from metis.adapter.adapter import Adapter
from metis.adapter.chat_model import ChatModel
from metis.adapter.count_tokens import TokenCount
from metis.core.deprecation import warn_deprecated
from metis.core.options import checked_init
from metis.errors import (
    AdapterError,
    CapabilityError,
    ConfigError,
    ErrorClass,
    NotConfiguredError,
    RateLimitError,
)
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import Message
from metis.model.events import StreamEvent
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.model.response import CanonicalResponse, TokenUsage
from metis.pipeline.call import CallTerms
from metis.routing.attempt import CANNOT_SERVE, Attempt, RouteCall, aclose_items, first_item
from metis.routing.availability import AvailabilityStore, InMemoryAvailability
from metis.routing.limits import Buckets, InMemoryBuckets, InMemorySlots, Limits, SharedSlots
from metis.routing.shared_state import SHARED_STATE_TIMEOUT, Fallback, checked_timeout
from metis.routing.spec import DEFAULT_FALLBACK_ON, TargetSpec, error_classes
from metis.routing.targets import ResolvedTarget, RouteTarget, Targets
from metis.routing.verdicts import AVAILABILITY_ERRORS, Verdicts
from metis.stages.policy.capability_check import fitted_for
from metis.telemetry import TelemetrySink, default_sink

T = TypeVar("T")
__all__ = ["AVAILABILITY_ERRORS", "Router"]


@checked_init
class Router:
    """A :class:`~metis.ChatModel` (``complete``, ``stream``, ``count_tokens``,
    ``capabilities_for``, ``aclose``; and ``cancel``, ``estimate_input_tokens``) over an ordered
    list of models; see the module's docstring."""

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
        shared_state_timeout: float = SHARED_STATE_TIMEOUT,
    ) -> None:
        if not targets:
            raise ConfigError("a route needs at least one model")
        if not isinstance(name, str) or not name:
            raise ConfigError(
                "Router: name is the route's name in its errors and telemetry, a non-empty "
                f"string, got {type(name).__name__} {name!r:.60}"
            )
        self.name = name
        self.fallback_on = error_classes(fallback_on)
        self.availability: AvailabilityStore = availability or InMemoryAvailability()
        self._telemetry = telemetry or default_sink()
        self.shared_state_timeout = checked_timeout(shared_state_timeout, "Router")
        self._outage: set[str] = set()  # the shared stores now standing in locally
        self._stores: list[Fallback[Any]] = []
        policy = getattr(self.availability, "policy", None)
        local = InMemoryAvailability(policy)
        self._verdicts = Verdicts(
            self._fallback("availability", self.availability, local), self._telemetry
        )
        self._targets = Targets(
            adapters or {},
            limits or {},
            self._fallback("buckets", buckets or InMemoryBuckets(), InMemoryBuckets()),
            None if slots is None else self._fallback("slots", slots, InMemorySlots()),
        )
        self.targets = self._targets.resolve_all(name, targets, max_retries)

    @property
    def telemetry(self) -> TelemetrySink:
        """Where the route's decisions and state changes go; setting it tells every store."""
        return self._telemetry

    @telemetry.setter
    def telemetry(self, sink: TelemetrySink) -> None:
        self._telemetry = self._verdicts.telemetry = sink
        for store in self._stores:
            store.telemetry = sink

    def _fallback(self, kind: str, shared: Any, local: Any) -> Fallback[Any]:
        """A store of the router's state, and the local one that stands in while it fails."""
        if isinstance(shared, type(local)):  # a store of this process's own
            return Fallback.local_only(kind, shared)
        store: Fallback[Any] = Fallback(
            kind,
            shared,
            local,
            route=self.name,
            telemetry=self.telemetry,
            timeout=self.shared_state_timeout,
            outage=self._outage,
        )
        self._stores.append(store)
        return store

    def __repr__(self) -> str:
        return f"<Router {self.name}: {' -> '.join(t.model for t in self.targets)}>"

    # ChatModel ---------------------------------------------------------------------------------

    async def complete(self, request: CanonicalRequest) -> CanonicalResponse:
        """The first model that serves the request answers it."""
        return await self.serve(request, Attempt.complete)

    def stream(self, request: CanonicalRequest) -> AsyncGenerator[StreamEvent, None]:
        """The first model whose stream yields an event serves the whole stream."""
        return self.serve_stream(request, Attempt.stream)

    async def serve(
        self, request: CanonicalRequest, answer: Callable[[Attempt], Awaitable[T]]
    ) -> T:
        """The route's choice with the caller's way of answering: ``answer(attempt)`` for each
        model in turn (its turn, its limits, its availability, the fallback decided as for
        :meth:`complete`) until one returns. An answer settles the attempt's token budget
        (:meth:`Attempt.settle`). The gateway answers a model of the caller's own API its own
        way here (docs/gateway.md "Pass-through")."""
        self._targets.check_open(self.name)
        call = RouteCall(self.name, request, self.telemetry)
        for target in self.targets:
            async with self._attempt(call, target) as attempt:
                if attempt is None:
                    continue
                answered = await answer(attempt)
                await self._served(call, attempt, None)
                return answered
        raise call.exhausted()

    async def serve_stream(
        self, request: CanonicalRequest, open_: Callable[[Attempt], AsyncIterator[T]]
    ) -> AsyncGenerator[T, None]:
        """:meth:`serve` for a stream: the first model whose ``open_(attempt)`` yields an item
        serves the whole stream (as :meth:`stream`)."""
        self._targets.check_open(self.name)
        call = RouteCall(self.name, request, self.telemetry)
        for target in self.targets:
            async with self._attempt(call, target) as attempt:
                if attempt is None:
                    continue
                items = open_(attempt)
                try:
                    item = await first_item(items, target)
                    await self._served(call, attempt, None)
                    while True:
                        yield item
                        item = await anext(items)
                except StopAsyncIteration:
                    return
                finally:
                    await aclose_items(items)
        raise call.exhausted()

    async def count_tokens(self, request: CanonicalRequest) -> TokenCount:
        """The first callable model's count of ``request`` (see :meth:`Adapter.count_tokens`)."""
        self._targets.check_open(self.name)
        first = self.callable_targets()[0]
        return await first.adapter.count_tokens(first.request_for(request))

    def capabilities_for(self, wire_model: str) -> AdapterCapabilities:
        """For defaults: the first callable model's, with the route's smallest output limit."""
        found = [t.capabilities for t in self.callable_targets()]
        smallest = min(c.max_output_tokens for c in found)
        return found[0].model_copy(update={"max_output_tokens": smallest})

    async def aclose(self) -> None:
        """Dispose of the adapters this router built (adapters given to it stay the caller's)."""
        await self._targets.aclose()

    # The rest of the adapter interface ---------------------------------------------------------

    def cancel(self, request_id: str) -> bool:
        """Cancel the call wherever it is running (see :meth:`Adapter.cancel`)."""
        adapters = {id(t.adapter): t.adapter for t in self.targets}.values()
        return any([adapter.cancel(request_id) for adapter in adapters])

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
        """The first callable model's estimate (see :meth:`Adapter.estimate_input_tokens`)."""
        first = self.callable_targets()[0]
        return first.adapter.estimate_input_tokens(
            messages, tools, system_prompt, model=model or first.model
        )

    def wire_model(self, model: str) -> str:
        """``model`` as it is: each target's adapter names it to its provider."""
        return model

    def callable_targets(self) -> list[ResolvedTarget]:
        """The models that have their keys (all when none has); the first stands for the route."""
        return [t for t in self.targets if t.missing_key is None] or self.targets

    # One model's turn --------------------------------------------------------------------------

    @asynccontextmanager
    async def _attempt(
        self, call: RouteCall, target: ResolvedTarget
    ) -> AsyncIterator[Attempt | None]:
        """The model's turn: None (the step recorded) when it is skipped; else the attempt,
        under its limits. A failure the route moves on for is recorded and suppressed; any
        other is raised once the decision is told."""
        attempt = await self._admitted(call, target)
        if attempt is None:
            yield None
            return
        async with AsyncExitStack() as held:
            if not await self._limited(call, attempt, held):
                yield None
                return
            try:
                yield attempt
            except NotConfiguredError as error:  # a credential the adapter looked for in vain
                call.not_configured(target, error)
                await self._leave_probe(attempt)
            except AdapterError as error:
                if attempt.served:
                    await self._verdicts.failed_serving(target.key, error)
                    raise
                if not await self._failed(call, target, error, attempt.probe):
                    call.decided(None)
                    raise
            except BaseException:
                if not attempt.served:
                    await self._leave_probe(attempt)
                raise

    async def _admitted(self, call: RouteCall, target: ResolvedTarget) -> Attempt | None:
        """The checks before any wait, in order: the key, the lifecycle's ``init``, the
        capabilities (decided once, and handed to the adapter), the availability."""
        missing = target.not_configured()
        if missing is not None:
            call.not_configured(target, missing)
            return None
        deadline = anyio.current_time() + target.adapter.config.timeout_seconds
        if not await self._initialized(call, target):
            return None
        routed = target.request_for(call.request)
        caps, provider = target.capabilities, target.adapter.name
        _, problems, estimate = fitted_for(routed, caps, provider, target.profile)
        if problems:
            call.skipped(target, CANNOT_SERVE + "; ".join(problems))
            return None
        admission = await self._verdicts.admit(target.key, deadline)
        if not admission.admitted:
            call.skipped(target, admission.reason, admission.retry_after)
            return None
        terms = CallTerms(deadline, target.max_retries, capabilities_checked=True)
        return Attempt(target, routed, terms, deadline, admission.probe, estimate)

    async def _initialized(self, call: RouteCall, target: ResolvedTarget) -> bool:
        """The lifecycle's ``init`` (once) for an adapter built to run it before its first
        call; False (the step recorded) when it failed and the route moves on."""
        if not target.adapter.init_on_first_call:
            return True
        try:
            await target.adapter.init()
        except NotConfiguredError as error:
            call.not_configured(target, error)
            return False
        except AdapterError as error:
            if await self._failed(call, target, error, probe=False):
                return False
            call.decided(None)
            raise
        return True

    async def _limited(self, call: RouteCall, attempt: Attempt, held: AsyncExitStack) -> bool:
        """Whether the model's limits let the call through before its deadline (the budget
        they grant is held in ``held``); if not, the step is recorded."""
        limiter = attempt.target.limiter
        if limiter is None:
            return True
        try:
            admit = limiter.admit(attempt.estimate, attempt.deadline)
            attempt.budget = await held.enter_async_context(admit)
        except RateLimitError as refusal:
            call.skipped(attempt.target, refusal.message, refusal.retry_after_seconds)
            await self._leave_probe(attempt)
            return False
        except BaseException:  # cancelled while waiting its turn
            await self._leave_probe(attempt)
            raise
        return True

    async def _served(self, call: RouteCall, attempt: Attempt, usage: TokenUsage | None) -> None:
        attempt.served = True
        if attempt.budget is not None:
            await attempt.budget.settle(usage)
        call.served(attempt.target)
        await self._verdicts.succeeded(attempt.target.key)

    async def _failed(
        self, call: RouteCall, target: ResolvedTarget, error: AdapterError, probe: bool
    ) -> bool:
        """Record a failed attempt; True when the route moves on."""
        call.failed(target, error)
        await self._verdicts.failed(target.key, error, probe)
        unsent = isinstance(error, CapabilityError) and error.provider_status is None
        return unsent or error.error_class in self.fallback_on  # unsent: as a skip moves on

    async def _leave_probe(self, attempt: Attempt) -> None:
        """A call that took the probe ending with no verdict frees the model for the next."""
        if attempt.probe:
            await self._verdicts.abandoned(attempt.target.key)


if TYPE_CHECKING:  # mypy holds the router and the adapter to the one interface
    _ROUTER: type[ChatModel] = Router
    _ADAPTER: type[ChatModel] = Adapter
