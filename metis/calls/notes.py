"""What a one-line call or a session adds to a provider's refusal, shown under the traceback
(``error.add_note``): what was meant, and where what it sent came from."""

from __future__ import annotations

import os

from metis.adapter.adapter import Adapter
from metis.errors import AdapterError, AuthError, InvalidRequestError, NetworkError


def call_note(
    error: AdapterError,
    adapter: Adapter,
    model: str,
    key_given: bool,
    *,
    base_url_given: bool = False,
) -> str | None:
    """For "no such model" the catalog's nearest names; for a refused key where that key came
    from (the stack's variable, or ``api_key=``); for a server that cannot be reached, the
    variable that chose it (one left set for another server, the emulator, say)."""
    if isinstance(error, InvalidRequestError) and error.provider_status == 404:
        return unknown_model_note(adapter, model)
    if isinstance(error, AuthError) and error.provider_status in (401, 403):
        env = adapter.stack.auth.env
        if key_given:
            return "metis: the key sent was the call's api_key="
        if env and not os.environ.get(env):
            return f"metis: no key was sent: ${env} is not set (or pass api_key=...)"
        if env:
            return f"metis: the key sent was ${env}'s (or pass api_key=...)"
    if isinstance(error, NetworkError) and error.provider_status is None and not base_url_given:
        endpoint = adapter.stack.endpoint
        chosen = endpoint.env_base_url() if endpoint.base_url_env else None
        if chosen is not None:
            return (
                f"metis: the base URL {chosen} is ${endpoint.base_url_env}'s (unset it for "
                f"{endpoint.base_url}, or pass base_url=...)"
            )
    return None


def unknown_model_note(adapter: Adapter, model: str) -> str | None:
    """For a provider's "no such model" (404): the model catalog's nearest names, when the
    catalog does not know the one asked for (a misspelling, most often)."""
    from metis.catalog import default_catalog
    from metis.core.suggest import closest

    provider, wire = adapter.stack.catalog, adapter.wire_model(model)
    if not provider or wire in (ids := default_catalog().ids(provider)):
        return None
    near = closest(wire, ids, n=3, cutoff=0.7)
    known = f"; the nearest it has: {', '.join(near)}" if near else ""
    return f"metis: {wire!r} is not in the model catalog for {provider}{known}"
