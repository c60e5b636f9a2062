"""Gemini explicit caching through a Gemini API adapter (docs/caching.md): make a cached
content of a stable prompt prefix, read it, list them, move its expiry, delete it.

``CachedContents(adapter).create(request)`` caches the request's system prompt, tools and
messages, encoded by the adapter's own stages up to ``encode`` (as a call would send them),
and returns a :class:`~metis.model.cache.CachedContent`. Later requests name it in
``CachePolicy(cached_content=cached.name)`` and carry only what follows the prefix: the
``cache_control`` stage then leaves out their system prompt and tools, which the cache holds.
Every request goes through the adapter's provider (``Provider.fetch``): its auth, transport,
deadlines and error classification.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from metis.adapter.checks import of_adapter
from metis.adapter.count_tokens import Countable, model_call
from metis.core.options import checked_init, checked_options
from metis.errors import CapabilityError, InvalidRequestError
from metis.model.cache import CACHED_CONTENT_NAME, CachedContent
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.wire.schema.cached_contents import (
    create_body,
    expiry_update,
    read_cached_content,
    read_page,
    remember,
)

GEMINI_API = ("google", "schema")
"""The catalog provider and codec of the stacks that speak the Gemini API (not Vertex AI,
whose cached contents live under a project and location)."""
MIN_TTL_SECONDS = 1


@checked_init
class CachedContents:
    """Create, read, list, update and delete Gemini cached contents through one Gemini API
    adapter. A keyword a method does not take is an UnknownOptionError naming the nearest
    one (``ttl=`` for ``ttl_seconds=``), raised when the method is called."""

    def __init__(self, adapter: Countable) -> None:
        of_adapter(adapter, "CachedContents(adapter)", "gemini")
        provider = adapter.pipeline.provider
        codec = provider.codec_name if provider is not None else None
        if provider is None or (adapter.stack.catalog, codec) != GEMINI_API:
            raise CapabilityError(
                f"{adapter.name}: explicit cached contents are the Gemini API's "
                "(docs/caching.md); other providers cache through CachePolicy alone",
                provider=adapter.name,
            )
        self.adapter, self.provider = adapter, provider
        self.base_url = adapter.endpoint.base_url.rstrip("/").partition("?")[0]

    @checked_options
    async def create(
        self,
        request: CanonicalRequest,
        *,
        ttl_seconds: int = 3600,
        display_name: str | None = None,
    ) -> CachedContent:
        """Cache ``request``'s system prompt, tools and messages for its model, for
        ``ttl_seconds``. Gemini refuses a prefix below the model's minimum (1,024 to 4,096
        tokens) with an InvalidRequestError."""
        _check_ttl(ttl_seconds)
        call = self._call(request.model)
        encode = self.provider.part("encode")
        assert encode is not None
        unstreamed = request.model_copy(update={"stream": False, "cache": None})
        wire: WireRequest = await self.adapter.pipeline.prepare(unstreamed, call, through=encode)
        body = create_body(wire.body, call.wire_model, ttl_seconds, display_name)
        answer = await self._json("POST", f"{self.base_url}/v1beta/cachedContents", body)
        cached = read_cached_content(answer)
        remember(cached.name, body)
        return cached

    @checked_options
    async def get(self, name: str) -> CachedContent:
        """The cached content named ``name`` (``cachedContents/...``), as Gemini keeps it."""
        answer = await self._json("GET", self._url(name))
        return read_cached_content(answer)

    @checked_options
    async def list(self, *, page_size: int = 1000) -> list[CachedContent]:
        """Every cached content of the key's project, reading page after page
        (``page_size`` each, at most 1,000)."""
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise InvalidRequestError(f"page_size must be a positive integer, not {page_size!r}")
        found: list[CachedContent] = []
        query: dict[str, str | int] = {"pageSize": min(page_size, 1000)}
        while True:
            url = f"{self.base_url}/v1beta/cachedContents?{urlencode(query)}"
            page, token = read_page(await self._json("GET", url))
            found += page
            if token is None:
                return found
            query["pageToken"] = token

    @checked_options
    async def update(
        self, name: str, *, ttl_seconds: int | None = None, expire_time: datetime | None = None
    ) -> CachedContent:
        """Move the cached content's expiry: ``ttl_seconds`` from now, or to ``expire_time``
        (an aware datetime); give exactly one. Its contents cannot change (Gemini's rule)."""
        if (ttl_seconds is None) == (expire_time is None):
            raise InvalidRequestError("give exactly one of ttl_seconds and expire_time")
        if ttl_seconds is not None:
            _check_ttl(ttl_seconds)
        elif not isinstance(expire_time, datetime) or expire_time.utcoffset() is None:
            raise InvalidRequestError(
                f"expire_time must be a timezone-aware datetime, not {expire_time!r}"
            )
        mask, body = expiry_update(ttl_seconds, expire_time)
        answer = await self._json("PATCH", f"{self._url(name)}?updateMask={mask}", body)
        return read_cached_content(answer)

    @checked_options
    async def delete(self, name: str) -> None:
        """Delete the cached content now (it is billed for storage until it expires)."""
        await self._json("DELETE", self._url(name))
        remember(name, None)

    def _url(self, name: str) -> str:
        if not isinstance(name, str) or not re.fullmatch(CACHED_CONTENT_NAME, name):
            raise InvalidRequestError(f"{name!r} is not a cached content name (cachedContents/…)")
        return f"{self.base_url}/v1beta/{name}"

    async def _json(
        self, method: str, url: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        headers = dict(self.adapter.endpoint.request_headers())
        if body is None:
            headers.pop("content-type", None)
        wire = WireRequest(url, body or {}, headers, method=method, content=None if body else b"")
        fetched = await self.provider.fetch(wire, self._call(f"{self.adapter.name}:cache"))
        answer: dict[str, Any] = fetched.body
        return answer

    def _call(self, model: str) -> Call:
        return model_call(self.adapter, model)


def _check_ttl(ttl_seconds: object) -> None:
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int):
        raise InvalidRequestError(f"ttl_seconds must be an integer, not {ttl_seconds!r}")
    if ttl_seconds < MIN_TTL_SECONDS:
        raise InvalidRequestError(f"ttl_seconds must be at least 1, not {ttl_seconds}")


__all__ = ["CachedContents"]
