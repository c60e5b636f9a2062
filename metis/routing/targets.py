"""The models of a route, resolved: each one's adapter, capabilities, limiter and options."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from metis.adapter.adapter import Adapter
from metis.catalog.estimate import TokenProfile
from metis.errors import ConfigError
from metis.model.capabilities import AdapterCapabilities
from metis.model.request import CanonicalRequest
from metis.pipeline.config import AdapterConfig
from metis.routing.limits import Buckets, Limiter, Limits, SharedSlots
from metis.routing.spec import TargetSpec, validated_options
from metis.stacks.loader import load_stack


@dataclass(frozen=True, slots=True)
class RouteTarget:
    """One model of a route: ``"provider:model"``, the adapter that serves it (built from the
    provider's stack when None), the adapter's own retries before moving on (None: its own
    setting) and request fields set for this model."""

    model: str
    adapter: Adapter | None = None
    max_retries: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ResolvedTarget:
    model: str
    key: str
    adapter: Adapter
    options: dict[str, Any]
    capabilities: AdapterCapabilities
    profile: TokenProfile
    limiter: Limiter | None

    def request_for(self, request: CanonicalRequest) -> CanonicalRequest:
        return request.model_copy(update={**self.options, "model": self.model})


class Targets:
    """Resolves a route's models to adapters: the ones given per provider, else built from the
    provider's stack (and owned: :meth:`close` closes them); limiters are shared per key."""

    def __init__(
        self,
        adapters: Mapping[str, Adapter],
        limits: Mapping[str, Limits],
        buckets: Buckets,
        slots: SharedSlots | None = None,
    ) -> None:
        self._slots = slots
        self._given = dict(adapters)
        self._owned: dict[str, Adapter] = {}
        self._limits = dict(limits)
        self._buckets = buckets
        self._limiters: dict[str, Limiter] = {}
        self._retried: dict[tuple[int, int], tuple[Adapter, Adapter]] = {}

    def _with_retries(self, adapter: Adapter, retries: int) -> Adapter:
        """The adapter with other retries, made once per adapter and count."""
        key = (id(adapter), retries)
        known = self._retried.get(key)
        if known is None or known[0] is not adapter:
            known = self._retried[key] = (adapter, _with_retries(adapter, retries))
        return known[1]

    def resolve(
        self, target: str | RouteTarget | TargetSpec, max_retries: int | None
    ) -> ResolvedTarget:
        spec = as_route_target(target)
        provider, sep, wire = spec.model.partition(":")
        if not sep or not provider or not wire:
            raise ConfigError(f"route models are 'provider:model', got {spec.model!r}")
        adapter = spec.adapter or self._given.get(provider) or self._build(provider)
        retries = spec.max_retries if spec.max_retries is not None else max_retries
        if retries is not None and retries != adapter.config.max_retries:
            adapter = self._with_retries(adapter, retries)
        wire_model = adapter.wire_model(spec.model)
        key = f"{adapter.name}:{wire_model}"
        limit_key = (
            key if key in self._limits else adapter.name if adapter.name in self._limits else None
        )
        limiter = None
        if limit_key is not None:
            limiter = self._limiters.get(limit_key)
            if limiter is None:
                limiter = Limiter(limit_key, self._limits[limit_key], self._buckets, self._slots)
                self._limiters[limit_key] = limiter
        return ResolvedTarget(
            model=spec.model,
            key=key,
            adapter=adapter,
            options=validated_options(dict(spec.options)),
            capabilities=adapter.capabilities_for(wire_model),
            profile=adapter.stack.token_estimate.for_model(wire_model),
            limiter=limiter,
        )

    async def aclose(self) -> None:
        owned, self._owned = list(self._owned.values()), {}
        for adapter in owned:
            await adapter.aclose()

    def _build(self, provider: str) -> Adapter:
        built = self._owned.get(provider)
        if built is None:
            stack = load_stack(provider)
            api_key = os.environ.get(stack.auth.env) if stack.auth.env else None
            built = self._owned[provider] = Adapter(stack, AdapterConfig(api_key=api_key))
        return built


def as_route_target(target: str | RouteTarget | TargetSpec) -> RouteTarget:
    if isinstance(target, str):
        return RouteTarget(target)
    if isinstance(target, TargetSpec):
        return RouteTarget(target.model, None, target.max_retries, target.options)
    if not isinstance(target, RouteTarget):
        raise ConfigError(
            f"a route's models are 'provider:model' strings or RouteTargets, got {target!r}"
        )
    return target


def _with_retries(adapter: Adapter, max_retries: int) -> Adapter:
    """The same adapter (stack, pipeline, connection pool, tool ids) with other retries."""
    config = adapter.config.model_copy(
        update={"max_retries": max_retries, "http_client": adapter.http_client()}
    )
    return Adapter(
        adapter.stack,
        config,
        pipeline=adapter.pipeline,
        tool_id_store=adapter.tool_id_store,
        telemetry=adapter.telemetry,
    )
