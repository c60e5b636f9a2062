"""One routed call, step by step: the models considered, what each did, and the decision."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from metis.errors import (
    AdapterError,
    CapabilityError,
    NotConfiguredError,
    OverloadedError,
    ProtocolError,
)
from metis.model.events import MessageComplete, StreamEvent
from metis.model.request import CanonicalRequest
from metis.model.response import CanonicalResponse, TokenUsage
from metis.pipeline.call import CallTerms
from metis.routing.limits import Admitted
from metis.routing.shared_state import emit_safely
from metis.routing.targets import ResolvedTarget
from metis.telemetry import RouteDecided, TelemetrySink

T = TypeVar("T")
CANNOT_SERVE = "cannot serve: "
NOT_CONFIGURED = "not configured: "


@dataclass(slots=True)
class Attempt:
    """A model admitted to serve the call: the request as it goes to it, the terms settled for
    the adapter (the deadline that began before any wait, the retries, the capability verdict),
    whether it is the probe after a cool-down, and the budget its limits granted."""

    target: ResolvedTarget
    request: CanonicalRequest
    terms: CallTerms
    deadline: float
    probe: bool
    estimate: int
    budget: Admitted | None = None
    served: bool = False
    """Its answer (or its stream's first event) reached the caller: no moving on any more."""

    async def settle(self, usage: TokenUsage | None) -> None:
        """The token budget its limits granted, corrected with the usage the model reported."""
        if self.budget is not None:
            await self.budget.settle(usage)

    async def complete(self) -> CanonicalResponse:
        """The model's answer, the budget settled with its usage."""
        response = await self.target.adapter.complete(self.request, self.terms)
        await self.settle(response.usage)
        return response

    async def stream(self) -> AsyncGenerator[StreamEvent, None]:
        """The model's stream, the budget settled with its usage when it completes."""
        events = self.target.adapter.stream(self.request, self.terms)
        try:
            async for event in events:
                if isinstance(event, MessageComplete):
                    await self.settle(event.usage)
                yield event
        finally:
            await aclose_items(events)


async def first_item(items: AsyncIterator[T], target: ResolvedTarget) -> T:
    try:
        return await anext(items)
    except StopAsyncIteration:
        raise ProtocolError(f"{target.model} ended its stream without an event") from None


async def aclose_items(items: AsyncIterator[Any]) -> None:
    aclose = getattr(items, "aclose", None)
    if aclose is not None:
        await aclose()


@dataclass(slots=True)
class RouteCall:
    """One call through a route: its request, every step so far as ``(model, outcome,
    reason)``, and the last error of a model that was tried."""

    route: str
    request: CanonicalRequest
    telemetry: TelemetrySink
    steps: list[tuple[str, str, str]] = field(default_factory=list)
    last: AdapterError | None = None
    unconfigured: NotConfiguredError | None = None
    """The last credential a model's adapter looked for in vain when called."""
    missing: list[tuple[str, NotConfiguredError]] = field(default_factory=list)
    """Each model that was not configured, with its error."""
    soonest: float | None = None
    """The fewest seconds until a model skipped as busy (cooling down, limited) may be tried."""

    def skipped(
        self, target: ResolvedTarget, reason: str, retry_after: float | None = None
    ) -> None:
        self.steps.append((target.model, "skipped", reason))
        if retry_after is not None:
            self.soonest = retry_after if self.soonest is None else min(self.soonest, retry_after)

    def not_configured(self, target: ResolvedTarget, error: NotConfiguredError) -> None:
        self.unconfigured = error
        self.missing.append((target.model, error))
        self.skipped(target, f"{NOT_CONFIGURED}{error.message}")

    def _none_configured(self) -> NotConfiguredError:
        """One error naming what each model of the route needs (a gateway's client sees only
        the message, not the notes)."""
        needs = [
            f"{model} (set {error.api_key_env})" if error.api_key_env else f"{model} ({error})"
            for model, error in self.missing
        ]
        last = self.missing[-1][1]
        return NotConfiguredError(
            f"no model of route {self.route} is configured: {', '.join(needs)}",
            model=None,
            adapter=last.adapter,
            api_key_env=last.api_key_env,
            request_id=self.request.request_id,
        )

    def failed(self, target: ResolvedTarget, error: AdapterError) -> None:
        self.last = error
        self.steps.append((target.model, "failed", f"{error.error_class.value}: {error.message}"))

    def served(self, target: ResolvedTarget) -> None:
        self.steps.append((target.model, "served", "answered"))
        self.decided(target.model)

    def decided(self, served_by: str | None) -> None:
        event = RouteDecided(
            request_id=self.request.request_id,
            session_id=self.request.session_id,
            route=self.route,
            served_by=served_by,
            steps=tuple(self.steps),
            timestamp=time.time(),
        )
        emit_safely(self.telemetry, event)

    def exhausted(self) -> Exception:
        """The error when no model served: the last model's own, with every step in a note;
        else the missing credential (no model could be called), a CapabilityError (none could
        serve it) or an OverloadedError (none was free; its Retry-After the soonest one is)."""
        self.decided(None)
        summary = "; ".join(f"{model} {outcome}: {reason}" for model, outcome, reason in self.steps)
        note = f"route {self.route}: every model failed or was skipped: {summary}"
        reasons = [reason for _, _, reason in self.steps]
        if self.last is not None:
            self.last.add_note(note)
            return self.last
        if self.unconfigured is not None and all(r.startswith(NOT_CONFIGURED) for r in reasons):
            error = self._none_configured() if len(self.missing) > 1 else self.unconfigured
            error.add_note(note)
            return error
        if all(reason.startswith(CANNOT_SERVE) for reason in reasons):
            return CapabilityError(
                f"no model of route {self.route} can serve this request: {summary}",
                request_id=self.request.request_id,
            )
        return OverloadedError(
            f"no model of route {self.route} is available now: {summary}",
            request_id=self.request.request_id,
            retry_after_seconds=self.soonest,
        )
