"""Per-call provider options: wire fields, headers and query parameters for one provider only
(docs/contract.md §13).

A request keys each by provider name; a provider takes the entries under any of its own names
(the adapter's, the stacks it extends, its catalog id) and ignores the rest, so one request
serves a route of several providers. Fields are merged into the body (a mapping into a mapping
key by key, anything else replacing what was there); a field metis itself sets for the call
(the model, the conversation, streaming) is refused, as are the headers that carry the key or
frame the body.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from metis.core.secrets import is_secret_header
from metis.errors import InvalidRequestError
from metis.model.request import CanonicalRequest

RESERVED_FIELDS = frozenset({"model", "messages", "stream", "input", "contents", "modelId"})
"""Body fields metis sets for every call: the model, the conversation (``messages``, Responses'
``input``, Gemini's ``contents``) and whether it streams."""
RESERVED_HEADERS = frozenset({"content-type", "content-length", "host"})
RESERVED_QUERY = frozenset({"alt", "key"})
"""Gemini's stream framing (``alt=sse``) and its key parameter."""


@dataclass(frozen=True, slots=True)
class OptionTarget:
    """One HTTP request about to go: its body, headers and URL."""

    body: dict[str, Any]
    headers: dict[str, str]
    url: str


def apply_provider_options(
    request: CanonicalRequest, names: Iterable[str], target: OptionTarget, provider: str
) -> OptionTarget:
    """``target`` with the options ``request`` gives for any of ``names``."""
    keys = [name for name in names if name]
    fields = _selected(request.provider_options, keys)
    headers = _selected(request.extra_headers, keys)
    query = _selected(request.extra_query, keys)
    if not (fields or headers or query):
        return target
    _refuse(request, provider, fields, headers, query)
    body = _merged(target.body, fields)
    url = str(httpx.URL(target.url).copy_merge_params(query)) if query else target.url
    return OptionTarget(body=body, headers={**target.headers, **headers}, url=url)


def _selected(by_provider: Mapping[str, Mapping[str, Any]], keys: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys:
        for name, value in by_provider.get(key, {}).items():
            out[name] = _merged(out[name], value) if isinstance(out.get(name), dict) else value
    return out


def _refuse(
    request: CanonicalRequest,
    provider: str,
    fields: Mapping[str, Any],
    headers: Mapping[str, str],
    query: Mapping[str, Any],
) -> None:
    problems = [
        f"provider option {name!r} is set by metis" for name in fields if name in RESERVED_FIELDS
    ]
    problems += [
        f"extra header {name!r} is set by metis"
        for name in headers
        if name.lower() in RESERVED_HEADERS or is_secret_header(name)
    ]
    problems += [
        f"extra query parameter {name!r} is set by metis"
        for name in query
        if name in RESERVED_QUERY
    ]
    if problems:
        raise InvalidRequestError(
            f"{provider}: " + "; ".join(problems) + " (give it as the request's own field, or "
            "the adapter's configuration)",
            provider=provider,
            request_id=request.request_id,
            retryable=False,
        )


def _merged(base: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged in: mappings key by key, anything else replaced."""
    out = dict(base) if isinstance(base, dict) else {}
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out
