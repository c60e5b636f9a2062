"""The model registry: models.yaml maps canonical model ids to adapters (docs/models-yaml.md).

::

    adapters:
      anthropic: {type: anthropic, api_key_env: ANTHROPIC_API_KEY, timeout_seconds: 600}
    models:
      anthropic:claude-sonnet-4-6:
        adapter: anthropic
        aliases: [sonnet, balanced]
        capabilities: {max_context_tokens: 200000}

An adapter entry's ``type`` names a provider stack: a built-in one (``anthropic``, ``openai``) or a
stack file, relative to the models.yaml that names it. Its other keys are
:class:`~metis.pipeline.config.AdapterConfig`'s, plus ``api_key_env`` (docs/models-yaml.md). Keys
are read when the registry loads: ``api_key`` if given (accepted, with a WARNING: use
``api_key_env``), else the variable ``api_key_env`` names (by default the one the stack declares).
An adapter without its key stays in the registry as ``not_configured``, and routing to any of its
models raises :class:`NotConfiguredError` naming the variable to set.

Use::

    registry = Registry.load("~/.yourtool/models.yaml")
    adapter, request = registry.request("sonnet", messages=[...], max_output_tokens=1024)
    response = await adapter.complete(request)
    await registry.aclose()

Adapters are built on first use and kept. A model's ``capabilities`` override what its
adapter's stack declares; since an :class:`~metis.adapter.Adapter` enforces one set of
capabilities, the registry keeps one Adapter per (adapter entry, set of overrides): models
without overrides share their entry's Adapter, models with the same overrides share another.
All the Adapters of one entry share one HTTP connection pool, which the registry owns (or the
``httpx.AsyncClient`` or ``httpx2.AsyncClient`` given for that entry in ``clients``, which
stays the caller's to close).

The file format is :mod:`metis.registry.file`; resolving its entries (stacks, keys, catalog
capabilities) is :mod:`metis.registry.entries`; building the adapters and their pools is
:mod:`metis.registry.pool`.
"""

from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from metis.adapter.adapter import Adapter, build_adapter
from metis.core.config_files import config_error, read_yaml, typed
from metis.core.deprecation import renamed
from metis.core.options import check_options, keyword_names
from metis.errors import ConfigError, InvalidRequestError, NotConfiguredError
from metis.model.request import CanonicalRequest
from metis.pipeline.config import AdapterConfig
from metis.registry.entries import AdapterStatus, ModelRoute, model_route, resolve_adapter
from metis.registry.file import AdapterEntry, ModelEntry, RegistryFile
from metis.registry.pool import AdapterPool
from metis.routing.router import Router
from metis.routing.spec import check_routes
from metis.routing.targets import RouteTarget
from metis.transport.clients import AsyncHTTPClient
from metis.transport.stage import http_client
from metis.wire.knobs.reasoning import default_reply_tokens

if TYPE_CHECKING:
    from metis.registry.entries import ResolvedAdapter

__all__ = [
    "AdapterEntry",
    "AdapterStatus",
    "ModelEntry",
    "ModelRoute",
    "NotConfiguredError",
    "Registry",
    "RegistryFile",
]
if not TYPE_CHECKING:  # a type checker sees the names above and no other (Route is gone)
    __getattr__ = renamed(__name__, {"Route": "ModelRoute"}, globals())


# The registry ------------------------------------------------------------------------------

_REGISTRY_OPTIONS = frozenset({"source", "base_dir", "environ", "clients", "make_client"}) | (
    keyword_names(build_adapter) - {"stack", "config", "init_on_first_call"}
)
"""A Registry's own options, and the ones it passes to every adapter it builds."""


_NO_ADAPTERS = (
    "none (the file declares no adapters; declare each as adapters: {NAME: {type: STACK}}, "
    "STACK a built-in stack such as anthropic, or a stack file)"
)


class Registry:
    """Canonical model ids and aliases -> routes and adapters, from a models.yaml."""

    def __init__(
        self,
        spec: RegistryFile,
        *,
        source: str = "<inline>",
        base_dir: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
        clients: Mapping[str, AsyncHTTPClient] | None = None,
        make_client: Callable[[float], AsyncHTTPClient] = http_client,
        **adapter_kwargs: Any,
    ) -> None:
        """``make_client``: how the pool of an entry not given a client in ``clients`` is made
        (called with the entry's ``timeout_seconds``); the registry owns and closes it."""
        check_options("Registry()", adapter_kwargs, _REGISTRY_OPTIONS)
        spec = typed(spec, RegistryFile, "Registry(spec)", " (Registry.load(path) reads a file)")
        self.source = source
        env = os.environ if environ is None else environ
        base = Path(base_dir) if base_dir is not None else None
        self.telemetry = adapter_kwargs.get("telemetry")
        """The telemetry sink the adapters are given (None: theirs by default)."""
        unknown_clients = sorted(set(clients or {}) - set(spec.adapters))
        if unknown_clients:
            raise ConfigError(
                f"clients given for undeclared adapters {', '.join(unknown_clients)}; "
                f"{source} declares: {', '.join(spec.adapters) or 'none'}"
            )
        self._adapters: dict[str, ResolvedAdapter] = {
            name: resolve_adapter(name, entry, env, base, source)
            for name, entry in spec.adapters.items()
        }
        self._pool = AdapterPool(self._adapters, clients or {}, make_client, adapter_kwargs)
        self._routes: dict[str, ModelRoute] = {}
        self._overrides: dict[str, dict[str, Any]] = {}
        self._names: dict[str, str] = {}  # canonical id or alias -> canonical id
        for model_id, entry in spec.models.items():
            self._add_model(model_id, entry)
        for model_id, entry in spec.models.items():
            self._add_aliases(model_id, entry)
        self.route_specs = check_routes(spec.routes, self._names, source)

    # Loading -------------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        environ: Mapping[str, str] | None = None,
        clients: Mapping[str, AsyncHTTPClient] | None = None,
        **adapter_kwargs: Any,
    ) -> Registry:
        """Read a models.yaml; stack files it names are found relative to it."""
        file = Path(path).expanduser()
        data = read_yaml(file, "model registry")
        return cls.from_dict(
            data,
            str(file),
            base_dir=file.parent,
            environ=environ,
            clients=clients,
            **adapter_kwargs,
        )

    @classmethod
    def from_dict(
        cls,
        data: Any,
        source: str = "<inline>",
        *,
        base_dir: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
        clients: Mapping[str, AsyncHTTPClient] | None = None,
        **adapter_kwargs: Any,
    ) -> Registry:
        """A registry from parsed YAML; ``source`` names it in errors."""
        if not isinstance(data, dict):
            shown = "nothing" if data is None else repr(data)
            raise ConfigError(f"{source}: expected a mapping with adapters and models, got {shown}")
        try:
            spec = RegistryFile.model_validate(data)
        except ValidationError as exc:
            raise config_error(exc, source, RegistryFile) from None
        return cls(
            spec,
            source=source,
            base_dir=base_dir,
            environ=environ,
            clients=clients,
            **adapter_kwargs,
        )

    def _add_model(self, model_id: str, entry: ModelEntry) -> None:
        adapter = self._adapters.get(entry.adapter)
        if adapter is None:
            near = difflib.get_close_matches(entry.adapter, list(self._adapters), n=1)
            raise ConfigError(
                f"{self.source}: models.{model_id}.adapter: model {model_id} names adapter "
                f"{entry.adapter!r}, which is not declared; expected one of the adapters: "
                + (", ".join(self._adapters) or _NO_ADAPTERS)
                + (f"; did you mean {near[0]!r}?" if near else "")
            )
        self._routes[model_id] = model_route(model_id, entry, adapter.stack, self.source)
        self._overrides[model_id] = dict(entry.capabilities)
        self._names[model_id] = model_id

    def _add_aliases(self, model_id: str, entry: ModelEntry) -> None:
        for alias in entry.aliases:
            other = self._names.get(alias)
            if other is not None and other != model_id:
                what = "the id of model" if alias == other else "already an alias of model"
                raise ConfigError(
                    f"{self.source}: models.{model_id}.aliases: {alias!r} is {what} {other}; "
                    f"expected each alias to name one model (models {other} and {model_id})"
                )
            self._names[alias] = model_id

    # Routing -------------------------------------------------------------------------------

    def status(self) -> list[AdapterStatus]:
        """Every declared adapter, configured or not (with the reason)."""
        return [adapter.status for adapter in self._adapters.values()]

    def routes(self) -> list[ModelRoute]:
        """Every model's route, whether or not its adapter is configured."""
        return list(self._routes.values())

    def resolve(self, name: str) -> ModelRoute:
        """The route for a canonical model id or alias.

        Raises :class:`~metis.errors.InvalidRequestError` (with close matches) for an unknown
        name, and :class:`NotConfiguredError` when the model's adapter has no API key.
        """
        model_id = self._names.get(name)
        if model_id is None:
            raise self._unknown(name, "model", list(self._names))
        route = self._routes[model_id]
        self._check_configured(route.adapter_name, model_id)
        return route

    def adapter(self, name: str) -> Adapter:
        """The Adapter for a model (canonical id or alias), or for an adapter entry by name.

        Model names are looked up first; an adapter entry's own Adapter enforces its stack's
        capabilities with no model's overrides.
        """
        if name in self._names:
            route = self.resolve(name)
            return self._adapter_for(route.adapter_name, self._overrides[route.model])
        if name in self._adapters:
            self._check_configured(name, None)
            return self._adapter_for(name, {})
        raise self._unknown(name, "model or adapter", [*self._names, *self._adapters])

    def request(self, name: str, **fields: Any) -> tuple[Adapter, CanonicalRequest]:
        """The Adapter for model ``name`` and a CanonicalRequest for it built from ``fields``
        (``max_output_tokens`` by default the one-line calls': the model's, up to 4,096)."""
        if "model" in fields:
            raise TypeError("request() takes the model from the route; do not pass model=")
        route = self.resolve(name)
        adapter = self._adapter_for(route.adapter_name, self._overrides[route.model])
        if fields.get("max_output_tokens") is None:
            limit = adapter.capabilities_for(route.wire_name).max_output_tokens
            fields["max_output_tokens"] = min(limit, default_reply_tokens(fields.get("thinking")))
        request = CanonicalRequest(model=f"{adapter.name}:{route.wire_name}", **fields)
        return adapter, request

    def router(self, name: str, **kwargs: Any) -> Router:
        """The router for ``routes: {name: ...}`` (keyword arguments go to ``Router``). A model
        whose adapter has no key is skipped by the router, as a model string without one is."""
        if name not in self.route_specs:
            raise self._unknown(name, "route", list(self.route_specs))
        spec = self.route_specs[name]
        targets = []
        for target in spec.targets():
            route = self._routes[self._names[target.model]]
            adapter = self._adapter_for(route.adapter_name, self._overrides[route.model])
            model = f"{adapter.name}:{route.wire_name}"
            targets.append(RouteTarget(model, adapter, target.max_retries, target.options))
        return Router(
            targets,
            name=name,
            fallback_on=spec.fallback_on,
            max_retries=spec.max_retries,
            limits=spec.limits,
            **kwargs,
        )

    def _check_configured(self, adapter_name: str, model_id: str | None) -> None:
        adapter = self._adapters[adapter_name]
        if adapter.status.configured:
            return
        subject = f"model {model_id} routes to adapter" if model_id else "adapter"
        fix = (
            f"set {adapter.api_key_env}"
            if adapter.api_key_env
            else f"give adapters.{adapter_name}.api_key_env in {self.source}"
        )
        raise NotConfiguredError(
            f"{subject} {adapter_name!r}, which is not configured: {adapter.status.reason}; {fix}",
            model=model_id,
            adapter=adapter_name,
            api_key_env=adapter.api_key_env,
        )

    def _unknown(self, name: str, what: str, known: list[str]) -> InvalidRequestError:
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        if close:
            hint = "did you mean " + " or ".join(repr(c) for c in close) + "?"
        else:
            hint = "known models: " + (", ".join(sorted(self._routes)) or "none")
        return InvalidRequestError(f"unknown {what} {name!r} in {self.source}; {hint}")

    # Building adapters ---------------------------------------------------------------------

    def _adapter_for(self, adapter_name: str, overrides: dict[str, Any]) -> Adapter:
        return self._pool.adapter(adapter_name, overrides)

    def adapter_config(
        self, adapter_name: str, overrides: dict[str, Any] | None = None
    ) -> AdapterConfig:
        """What entry ``adapter_name``'s adapters are built with (its key, base URL, timeout,
        retries, headers, settings and shared connection pool), for another client of the
        same provider beside them (the gateway's embedders)."""
        return self._pool.config(adapter_name, overrides)

    async def aclose(self) -> None:
        """Close every Adapter built and the connection pools the registry made."""
        await self._pool.aclose()

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None and pool.owns_clients:  # as an unclosed adapter is said
            warnings.warn(
                f"the Registry of {self.source} was never closed, its connection pools still "
                "open: use 'async with Registry.load(...) as registry:' or "
                "'await registry.aclose()'",
                ResourceWarning,
                source=self,
                stacklevel=2,
            )

    async def __aenter__(self) -> Registry:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        configured = sum(a.status.configured for a in self._adapters.values())
        return (
            f"<Registry {self.source}: {len(self._routes)} models, "
            f"{configured}/{len(self._adapters)} adapters configured>"
        )
