"""The models of a route, resolved: each one's adapter, limiter, options and retries, and
whether it can be called at all (its key), all decided when the router is built."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from metis.adapter.adapter import Adapter
from metis.adapter.checks import missing_key
from metis.catalog.token_profile import TokenProfile
from metis.core.config_files import config_error
from metis.core.options import checked_init
from metis.core.suggest import did_you_mean
from metis.errors import ClosedError, ConfigError, NotConfiguredError
from metis.model.capabilities import AdapterCapabilities
from metis.model.request import CanonicalRequest
from metis.pipeline.config import AdapterConfig
from metis.pipeline.settings import names_a_model
from metis.routing.limits import Buckets, Limiter, Limits, SharedSlots
from metis.routing.shared_state import Fallback
from metis.routing.spec import TargetSpec, validated_options
from metis.stacks.loader import builtin_stacks, load_stack

log = logging.getLogger("metis")


@checked_init
@dataclass(frozen=True, slots=True)
class RouteTarget:
    """One model of a route: ``"provider:model"``, the adapter that serves it (built from the
    provider's stack when None), the adapter's retries before moving on (None: the route's
    default) and request fields set for this model."""

    model: str
    adapter: Adapter | None = None
    max_retries: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ResolvedTarget:
    model: str
    key: str
    wire_model: str
    adapter: Adapter
    options: dict[str, Any]
    profile: TokenProfile
    limiter: Limiter | None
    max_retries: int | None
    """The call's retries on this model; None: the adapter's own."""
    missing_key: NotConfiguredError | None
    """Why the model cannot be called (no key), found when the route was built; None if it can."""

    def not_configured(self) -> NotConfiguredError | None:
        """A fresh error for a call that finds the model without its key (None: it has one)."""
        found = self.missing_key
        if found is None:
            return None
        return NotConfiguredError(
            found.message, model=found.model, adapter=found.adapter, api_key_env=found.api_key_env
        )

    def request_for(self, request: CanonicalRequest) -> CanonicalRequest:
        return request.model_copy(update={**self.options, "model": self.model})

    @property
    def capabilities(self) -> AdapterCapabilities:
        """What the model serves now (a lifecycle ``init`` may have refined it)."""
        return self.adapter.capabilities_for(self.wire_model)


class Targets:
    """Resolves a route's models to adapters: the ones given per provider, else built from the
    provider's stack with their lifecycle (and owned: :meth:`aclose` disposes of them);
    limiters are shared per key."""

    def __init__(
        self,
        adapters: Mapping[str, Adapter],
        limits: Mapping[str, Limits],
        buckets: Fallback[Buckets],
        slots: Fallback[SharedSlots] | None = None,
    ) -> None:
        self._slots = slots
        for what, given in (("adapters", adapters), ("limits", limits)):
            if not isinstance(given, Mapping):
                raise ConfigError(f"Router({what}): expected a mapping, got {given!r:.60}")
        for key, adapter in adapters.items():
            if not isinstance(adapter, Adapter):
                raise ConfigError(
                    f"Router(adapters) for {key!r}: expected an Adapter, got "
                    f"{type(adapter).__name__} {adapter!r:.60}"
                )
        self._given = dict(adapters)
        self._owned: dict[str, Adapter] = {}
        self._limits = {key: _limits(key, value) for key, value in limits.items()}
        self._buckets = buckets
        self._limiters: dict[str, Limiter] = {}
        self.closed = False

    def check_open(self, route: str) -> None:
        """A ClosedError naming the router once it is closed (its adapters may be the caller's,
        still open, or its own, whose error would name an adapter the caller never made)."""
        if self.closed:
            raise ClosedError(
                f"the router {route!r} was closed (aclose); build a new one to call again"
            )

    def resolve_all(
        self, route: str, targets: Sequence[str | RouteTarget | TargetSpec], max_retries: int | None
    ) -> list[ResolvedTarget]:
        """Every model of the route. A model without its key is kept, to be skipped (with one
        WARNING now). A model with no retries set moves on at its first failure when a model
        that can be called comes after it, and keeps its adapter's own retries when none does."""
        retries_checked(max_retries, f"route {route}")
        if isinstance(targets, str | bytes) or not isinstance(targets, Sequence):
            raise ConfigError(
                f"route {route}: its models are a list of 'provider:model' or RouteTarget, got "
                f"{type(targets).__name__} {targets!r:.60}"
            )
        resolved = [self.resolve(target, max_retries) for target in targets]
        self._check_adapter_keys(route, resolved)
        self._check_limit_keys(route, resolved)
        callable_ = [i for i, t in enumerate(resolved) if t.missing_key is None]
        for index, target in enumerate(resolved):
            if target.missing_key is not None:
                reason = target.missing_key.message
                log.warning("route %s: %s will be skipped: %s", route, target.model, reason)
            elif target.max_retries is None and index < callable_[-1]:
                target.max_retries = 0
        return resolved

    def resolve(
        self, target: str | RouteTarget | TargetSpec, max_retries: int | None
    ) -> ResolvedTarget:
        spec = as_route_target(target)
        provider, sep, wire = spec.model.partition(":")
        if not sep or not provider or not wire:
            raise ConfigError(f"route models are 'provider:model', got {spec.model!r}")
        retries_checked(spec.max_retries, spec.model)
        adapter = spec.adapter or self._given.get(provider) or self._build(provider, wire)
        wire_model = adapter.wire_model(spec.model)
        key = f"{adapter.name}:{wire_model}"
        missing = missing_key(adapter.name, adapter.stack, adapter.endpoint, spec.model)
        return ResolvedTarget(
            model=spec.model,
            key=key,
            wire_model=wire_model,
            adapter=adapter,
            options=validated_options(dict(spec.options)),
            profile=adapter.stack.token_estimate.for_model(wire_model),
            limiter=self._limiter(key, adapter.name),
            max_retries=spec.max_retries if spec.max_retries is not None else max_retries,
            missing_key=missing,
        )

    async def aclose(self) -> None:
        """Dispose of the adapters built here (each stage's ``dispose``, then the client)."""
        self.closed = True
        owned, self._owned = list(self._owned.values()), {}
        for adapter in owned:
            await adapter.aclose()

    def _check_adapter_keys(self, route: str, resolved: list[ResolvedTarget]) -> None:
        """Adapters given for no provider of the route nor any stack (a misspelt one) would
        never serve a call: a ConfigError naming the key and the nearest that would."""
        providers = {t.model.partition(":")[0] for t in resolved}
        for key in self._given:
            if key not in providers and key not in builtin_stacks():
                raise ConfigError(
                    f"route {route}: the adapter given for {key!r} serves no model of the route"
                    f"{did_you_mean(key, providers)}; adapters are keyed by provider "
                    f"({', '.join(sorted(providers))})"
                )

    def _check_limit_keys(self, route: str, resolved: list[ResolvedTarget]) -> None:
        """Limits keyed by no platform at all (a misspelt one) would never apply: a ConfigError
        naming the key and the nearest that would. Another platform's are kept (one dict of
        limits may serve several routes)."""
        known = {t.adapter.name for t in resolved} | {t.key for t in resolved}
        for key in self._limits:
            if key not in known and key.partition(":")[0] not in builtin_stacks():
                raise ConfigError(
                    f"route {route}: limits for {key!r} match no model of the route"
                    f"{did_you_mean(key, known)}; a key is a platform or a platform:model "
                    f"({', '.join(sorted(known))})"
                )

    def _limiter(self, key: str, platform: str) -> Limiter | None:
        limit_key = key if key in self._limits else platform if platform in self._limits else None
        if limit_key is None:
            return None
        limiter = self._limiters.get(limit_key)
        if limiter is None:
            limits = self._limits[limit_key]
            limiter = Limiter(limit_key, limits, self._buckets, self._slots)
            self._limiters[limit_key] = limiter
        return limiter

    def _build(self, provider: str, wire: str) -> Adapter:
        """The provider's adapter; one per model where its settings name one (Ollama's, so
        its ``init()`` asks the server what that model can do)."""
        stack = load_stack(provider)
        named = names_a_model(stack.settings)
        key = f"{provider}:{wire}" if named else provider
        built = self._owned.get(key)
        if built is None:
            api_key = os.environ.get(stack.auth.env) if stack.auth.env else None
            settings = {"model": wire} if named else None
            config = AdapterConfig(api_key=api_key, settings=settings)
            built = self._owned[key] = Adapter(stack, config, init_on_first_call=True)
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
    if not isinstance(target.model, str):
        raise ConfigError(
            "a RouteTarget's model is 'provider:model', got "
            f"{type(target.model).__name__}; the model comes first: "
            "RouteTarget('anthropic:claude-sonnet-4-5', adapter=adapter)"
        )
    if target.adapter is not None and not isinstance(target.adapter, Adapter):
        raise ConfigError(
            f"RouteTarget({target.model!r}): adapter is an Adapter (or None, to build one "
            f"from the stack), got {type(target.adapter).__name__} {target.adapter!r:.60}"
        )
    return target


def retries_checked(max_retries: object, where: str) -> None:
    """A ConfigError for retries that are not a whole number >= 0 (``True`` is not one)."""
    if max_retries is None:
        return
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigError(
            f"{where}: max_retries is a whole number of retries >= 0, got "
            f"{type(max_retries).__name__} {max_retries!r:.80}"
        )


def _limits(key: str, value: object) -> Limits:
    """A route's limits for ``key``: a Limits (a dict of its fields is read as one)."""
    if isinstance(value, Limits):
        return value
    if isinstance(value, Mapping):
        try:
            return Limits.model_validate(value)
        except ValidationError as exc:
            raise config_error(exc, f"Router(limits) for {key!r}", Limits) from None
    raise ConfigError(f"Router(limits) for {key!r}: expected a Limits, got {value!r:.60}")
