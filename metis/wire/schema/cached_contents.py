"""Gemini API cached contents on the wire (ai.google.dev/api/caching): the body of ``POST
/v1beta/cachedContents`` made from an encoded ``generateContent`` body, the ``PATCH`` that
moves a cached content's expiry (only the expiry may change), and the cached content Gemini
answers with (``name``, ``model``, ``expireTime``, ``usageMetadata.totalTokenCount``), alone
or as a page of ``GET /v1beta/cachedContents``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from metis.model.cache import CachedContent
from metis.wire.read import object_value, optional_list, optional_text, required_text

CACHED_FIELDS = ("contents", "systemInstruction", "tools", "toolConfig")
"""What of a generateContent body a cached content holds (a request that reads it must set
none of the last three: Gemini refuses them)."""


def create_body(
    encoded: dict[str, Any], wire_model: str, ttl_seconds: int, display_name: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": f"models/{wire_model}"}
    body.update({k: encoded[k] for k in CACHED_FIELDS if encoded.get(k)})
    body["ttl"] = f"{ttl_seconds}s"
    if display_name:
        body["displayName"] = display_name
    return body


def expiry_update(
    ttl_seconds: int | None, expire_time: datetime | None
) -> tuple[str, dict[str, Any]]:
    """The ``updateMask`` and body of a ``PATCH`` that sets a new expiry: a time to live from
    now, or a moment (an aware datetime, sent in UTC as RFC 3339)."""
    if expire_time is not None:
        moment = expire_time.astimezone(UTC).isoformat(timespec="microseconds")
        return "expireTime", {"expireTime": moment.replace("+00:00", "Z")}
    return "ttl", {"ttl": f"{ttl_seconds}s"}


def read_page(answer: dict[str, Any]) -> tuple[list[CachedContent], str | None]:
    """A page of ``GET /v1beta/cachedContents``: its cached contents and the next page's
    token (none on the last page; Gemini leaves out ``cachedContents`` when there are none)."""
    items = optional_list(answer, "cachedContents", "cachedContents.list")
    page = [read_cached_content(object_value(item, "cachedContents[]")) for item in items]
    return page, optional_text(answer, "nextPageToken", "cachedContents.list") or None


def read_cached_content(answer: dict[str, Any]) -> CachedContent:
    usage = object_value(answer.get("usageMetadata") or {}, "cachedContent.usageMetadata")
    tokens = usage.get("totalTokenCount")
    model = required_text(answer, "model", "cachedContent")
    return CachedContent(
        name=required_text(answer, "name", "cachedContent"),
        model=model.removeprefix("models/"),
        expire_time=optional_text(answer, "expireTime", "cachedContent"),
        token_count=tokens if isinstance(tokens, int) else None,
        display_name=optional_text(answer, "displayName", "cachedContent") or None,
    )
