"""The registry's adapters, built on first use and kept: one
:class:`~metis.adapter.Adapter` per (adapter entry, set of capability overrides), and one HTTP
connection pool per entry that all its Adapters share (the pool the registry made, which it
closes, or the client given for that entry, which stays the caller's)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from metis.adapter.adapter import Adapter, build_adapter
from metis.core.deprecation import warn_deprecated
from metis.errors import ConfigError
from metis.pipeline.config import AdapterConfig
from metis.registry.file import AdapterEntry
from metis.transport.clients import AsyncHTTPClient

if TYPE_CHECKING:
    from metis.registry.entries import ResolvedAdapter


class AdapterPool:
    """The Adapters of a registry's entries (``entries``, resolved), made with
    ``adapter_kwargs``; ``make_client`` makes an entry's pool (given its timeout)."""

    def __init__(
        self,
        entries: Mapping[str, ResolvedAdapter],
        clients: Mapping[str, AsyncHTTPClient],
        make_client: Callable[[float], AsyncHTTPClient],
        adapter_kwargs: dict[str, Any],
    ) -> None:
        self._entries = entries
        self._clients = dict(clients)
        self._owned: dict[str, AsyncHTTPClient] = {}
        self._make_client = make_client
        self._adapter_kwargs = adapter_kwargs
        self._built: dict[tuple[str, str], Adapter] = {}

    @property
    def owns_clients(self) -> bool:
        """Connection pools the pool made are open."""
        return bool(self._owned)

    def adapter(self, entry_name: str, overrides: dict[str, Any]) -> Adapter:
        """Entry ``entry_name``'s Adapter with these capability ``overrides``."""
        key = (entry_name, json.dumps(overrides, sort_keys=True, default=str))
        built = self._built.get(key)
        if built is None:
            config = self.config(entry_name, overrides)
            stack = self._entries[entry_name].stack
            built = build_adapter(stack, config, init_on_first_call=True, **self._adapter_kwargs)
            self._built[key] = built
        return built

    def config(self, entry_name: str, overrides: dict[str, Any] | None = None) -> AdapterConfig:
        """What entry ``entry_name``'s Adapters are built with (see
        :meth:`~metis.registry.Registry.adapter_config`)."""
        spec = self._entries[entry_name]
        entry = spec.entry
        return AdapterConfig(
            api_key=spec.api_key,
            base_url=entry.base_url,
            timeout_seconds=entry.timeout_seconds,
            max_retries=entry.max_retries,
            extra_headers=dict(entry.extra_headers),
            settings=_entry_settings(entry_name, entry),
            capabilities=dict(overrides or {}),
            http_client=self._client_for(entry_name, entry),
        )

    def _client_for(self, entry_name: str, entry: AdapterEntry) -> AsyncHTTPClient:
        client = self._clients.get(entry_name) or self._owned.get(entry_name)
        if client is None:
            # As Adapter would make it; owned here so that every Adapter of the entry shares it.
            client = self._make_client(entry.timeout_seconds)
            self._owned[entry_name] = client
        return client

    async def aclose(self) -> None:
        """Close every Adapter built and the connection pools made."""
        built, self._built = list(self._built.values()), {}
        owned, self._owned = list(self._owned.values()), {}
        for adapter in built:
            await adapter.aclose()  # each stage's dispose, then the adapter's own client
        for client in owned:
            await client.aclose()


def _entry_settings(name: str, entry: AdapterEntry) -> dict[str, Any] | None:
    """An adapter entry's ``settings:``, or its deprecated ``options:``."""
    if entry.options:
        if entry.settings:
            raise ConfigError(f"adapter {name!r}: give settings or options (deprecated), not both")
        warn_deprecated("an adapter's `options:` in models.yaml", "`settings:`", stacklevel=7)
        return dict(entry.options)
    return dict(entry.settings) if entry.settings else None
