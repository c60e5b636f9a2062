"""The names a client may give as ``model``: the configuration's models, their aliases and its
routes, each resolved to what a library call would use (an adapter, or a router)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from metis.adapter.adapter import Adapter
from metis.adapter.chat_model import ChatModel
from metis.adapter.embedder import Embedder
from metis.catalog.embedding_models import embedding_model
from metis.core.suggest import closest
from metis.errors import CapabilityError, InvalidRequestError, NotConfiguredError
from metis.gateway.errors import ModelNotFoundError
from metis.model.capabilities import AdapterCapabilities
from metis.registry.entries import ModelRoute
from metis.registry.registry import Registry
from metis.routing.router import Router
from metis.stacks.embedding import (
    builtin_embedding_stacks,
    embedding_catalog_provider,
    load_embedding_stack,
)


@dataclass(frozen=True, slots=True)
class Target:
    """Where a request goes: the model (an adapter or a router), the request's ``model`` for
    it, and what it can serve."""

    name: str
    chat_model: ChatModel
    request_model: str
    capabilities: AdapterCapabilities
    wire_model: str
    """The model's name to its provider (a route's: its first callable model's, whose
    capabilities stand for the route's)."""


MAX_NAME = 256
"""The longest model name looked up."""
MAX_FOUND = 4096
"""The most names whose lookup is kept (only names the configuration serves are kept)."""
SERVED: ContextVar[str] = ContextVar("metis_gateway_served", default="")
"""The name the request being answered gave that the configuration has (a model, alias or
route), once :meth:`ModelTable.resolve` found it: what ``/metrics`` counts a failed request's
``model`` as (a name it has not found is never a label: it may be anything)."""


class ModelTable:
    def __init__(self, registry: Registry, suggest: bool = True) -> None:
        self.registry = registry
        self.suggest = suggest
        """Whether a name not served is answered with the nearest that are: not when a key may
        name only some (the others would be shown to it)."""
        self._routers: dict[str, Router] = {}
        self._embedders: dict[str, Embedder] = {}  # by adapter entry
        self._found: dict[str, tuple[Adapter, str, str]] = {}
        """A served model's adapter, request model and wire name, by the name a client gave
        (the configuration does not change while it serves: looked up once a name)."""
        self.shared: dict[str, Any] = {}
        """What the routers keep outside the process (availability, buckets, slots), given
        to each as it is made (``gateway.redis_url``: Redis)."""

    def share(self, client: Any) -> None:
        """The routers' availability and limits in the Redis of ``client``, shared by every
        gateway that names it."""
        from metis.redis.availability import RedisAvailability
        from metis.redis.limits import RedisBuckets, RedisSlots

        self.shared = {
            "availability": RedisAvailability(client),
            "buckets": RedisBuckets(client),
            "slots": RedisSlots(client),
        }

    def resolve(self, name: str) -> Target:
        """The target of ``name``; ModelNotFoundError (404) for a name the configuration does
        not have, NotConfiguredError (a 500 to the caller) for a model whose adapter has no key."""
        if len(name) > MAX_NAME:  # no model is named so: not echoed back, nor searched for
            raise ModelNotFoundError(f"unknown model {name[:64]!r}... ({len(name)} characters)")
        if name in self.registry.route_specs:
            SERVED.set(name)
            router = self._routers.get(name)
            if router is None:
                router = self._routers[name] = self.registry.router(name, **self.shared)
            first = router.callable_targets()[0].wire_model
            return Target(name, router, f"route:{name}", router.capabilities_for(name), first)
        found = self._found.get(name)
        if found is None:
            route = self._route(name)
            SERVED.set(name)  # served, though its adapter may have no key (a 500 named so)
            adapter = self.registry.adapter(name)
            found = (adapter, f"{adapter.name}:{route.wire_name}", route.wire_name)
            if len(self._found) < MAX_FOUND:
                self._found[name] = found
        else:
            SERVED.set(name)
        adapter, model, wire_name = found  # its capabilities: an adapter's lifespan may refine them
        return Target(name, adapter, model, adapter.capabilities_for(wire_name), wire_name)

    def _route(self, name: str) -> ModelRoute:
        try:
            return self.registry.resolve(name)
        except NotConfiguredError:
            raise
        except InvalidRequestError:  # the registry's, naming its file and every model
            near = (self.suggest and self._nearest(name)) or ";"
            raise ModelNotFoundError(  # a client sees only what its key may list
                f"model {name!r} is not served here{near} GET /v1/models lists the models, "
                "aliases and routes you may name"
            ) from None

    def _nearest(self, name: str) -> str:
        """The served names nearest ``name``: the models it is the provider's name of
        (``gpt-4o`` for ``openai:gpt-4o``), else the closest spelt."""
        names = [entry["id"] for entry in self.listing()]
        same = [served for served in names if served.partition(":")[2] == name]
        near = same or closest(name, names, n=3)
        return f"; did you mean {' or '.join(map(repr, near))}?" if near else ""

    def known(self, name: str) -> None:
        """ModelNotFoundError unless ``name`` is a model, alias or route of the configuration
        (NotConfiguredError for a model whose adapter has no key)."""
        if name not in self.registry.route_specs:
            self._route(name)

    def embedder(self, name: str) -> tuple[Embedder, str]:
        """The embedder of model ``name`` (an id or alias) and the model to ask it for: the
        built-in embedding stack of the model's adapter stack, with the adapter entry's key,
        settings and connection pool. ModelNotFoundError for a name the configuration does
        not have, CapabilityError (400) for a route or a model that does not embed."""
        if name in self.registry.route_specs:
            raise CapabilityError(f"{name!r} is a route: routes serve chat, not embeddings")
        route = self._route(name)
        if not embeds(route):
            raise CapabilityError(f"model {name!r} is not an embedding model; it cannot embed")
        built = self._embedders.get(route.adapter_name)
        if built is None:
            stack = load_embedding_stack(route.stack_name)
            config = self.registry.adapter_config(route.adapter_name)
            if stack.settings == "none":  # the chat stack's own (Ollama's keep_alive, ...)
                config = config.model_copy(update={"settings": None})
            built = Embedder(stack, config, telemetry=self.registry.telemetry)
            self._embedders[route.adapter_name] = built
        return built, f"{built.name}:{route.wire_name}"

    def warm(self) -> list[str]:
        """What a first request to each configured model would build, built now: its target
        (adapter, stages, catalog entry) and the modules its call imports (a served process
        then freezes them; metis.gateway.frozen). The names that are served."""
        import metis.adapter.delivery
        import metis.adapter.sendable
        import metis.pipeline.call  # noqa: F401 - imported by an adapter's first call

        served = []
        for route in self.registry.routes():
            for name in (route.model, *route.aliases):
                try:
                    target = self.resolve(name)
                except NotConfiguredError:
                    break  # it answers 500 (logged at startup)
                served.append(name)
                if isinstance(target.chat_model, Adapter):
                    target.chat_model.pipeline  # noqa: B018 - built on first use
        return served

    def unconfigured(self) -> list[str]:
        """A line for each adapter the configuration declares without what it needs (its
        key, ...): the models it serves answer 500 until it is configured."""
        lines = []
        for status in self.registry.status():
            if status.configured:
                continue
            models = [r.model for r in self.registry.routes() if r.adapter_name == status.name]
            lines.append(
                f"adapter {status.name!r} is not configured ({status.reason}): its models "
                f"({', '.join(models) or 'none'}) answer 500 (provider_key_missing) until it is"
            )
        return lines

    def listing(self) -> list[dict[str, Any]]:
        """Every name a client may give: models and their aliases (with what they can serve)
        and routes (with the names they go through, and the limits every one of them keeps:
        a client that fits its request to them fits whichever model answers)."""
        listed: list[dict[str, Any]] = []
        limits: dict[str, tuple[int, int]] = {}
        for route in self.registry.routes():
            caps = route.capabilities
            for name in (route.model, *route.aliases):
                limits[name] = (caps.max_context_tokens, caps.max_output_tokens)
                listed.append(
                    {
                        "id": name,
                        "kind": "model",
                        "model": route.model,
                        "context_window": caps.max_context_tokens,
                        "max_output_tokens": caps.max_output_tokens,
                    }
                )
        for name, spec in self.registry.route_specs.items():
            members = [target.model for target in spec.targets()]
            entry: dict[str, Any] = {"id": name, "kind": "route", "models": members}
            kept = [limits[m] for m in members if m in limits]
            if kept:
                entry["context_window"] = min(window for window, _ in kept)
                entry["max_output_tokens"] = min(output for _, output in kept)
            listed.append(entry)
        return listed

    async def aclose(self) -> None:
        self._found.clear()
        embedders, self._embedders = list(self._embedders.values()), {}
        for embedder in embedders:
            await embedder.aclose()  # the pool is the registry's: it closes it
        routers, self._routers = list(self._routers.values()), {}
        for router in routers:
            await router.aclose()
        await self.registry.aclose()


def embeds(route: ModelRoute) -> bool:
    """Whether ``route``'s model embeds: its adapter's stack has a built-in embedding stack,
    and the embedding catalog knows the model there (any model, where that stack has no
    catalog: Ollama, OpenAI-compatible servers)."""
    if route.stack_name not in _embedding_stacks():
        return False
    catalog = embedding_catalog_provider(route.stack_name)
    return catalog is None or embedding_model(catalog, route.wire_name) is not None


@functools.cache
def _embedding_stacks() -> frozenset[str]:
    return frozenset(builtin_embedding_stacks())


PAGE = 20
"""How many models a page holds for an Anthropic client that names no ``limit``, as Anthropic's
``GET /v1/models`` pages them (the anthropic SDKs fetch the next pages as the list is read)."""


def listed_page(data: list[dict[str, Any]], query: Mapping[str, str] | None) -> dict[str, Any]:
    """The model list as a page: the whole list for OpenAI's ``GET /v1/models`` (``query``
    None: it has no pages); for Anthropic's, ``limit`` entries (1 to 1000, default 20) after
    ``after_id`` or before ``before_id``, ``has_more`` saying whether more lie that way."""
    chosen, more = data, False
    if query is not None:
        limit = query.get("limit", str(PAGE))
        if not limit.isdecimal() or not 1 <= int(limit) <= 1000:
            raise InvalidRequestError(
                f"limit: expected an integer from 1 to 1000, got {limit!r}"[:200]
            )
        size, after, before = int(limit), query.get("after_id"), query.get("before_id")
        if after is not None and before is not None:
            raise InvalidRequestError("after_id, before_id: give one of them, not both")
        ids = [entry["id"] for entry in data]
        if before is not None:
            end = _place(ids, before, "before_id")
            chosen, more = data[max(0, end - size) : end], end > size
        else:
            start = 0 if after is None else _place(ids, after, "after_id") + 1
            chosen, more = data[start : start + size], start + size < len(data)
    first, last = (chosen[0]["id"], chosen[-1]["id"]) if chosen else (None, None)
    return {"object": "list", "data": chosen, "has_more": more, "first_id": first, "last_id": last}


def _place(ids: list[str], cursor: str, name: str) -> int:
    try:
        return ids.index(cursor)
    except ValueError:
        raise InvalidRequestError(f"{name}: no model {cursor!r} in the list"[:200]) from None
