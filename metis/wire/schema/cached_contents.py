"""Gemini API cached contents on the wire (ai.google.dev/gemini-api/docs/caching): the body of
``POST /v1beta/cachedContents`` made from an encoded ``generateContent`` body, and the cached
content Gemini answers with (``name``, ``model``, ``expireTime``,
``usageMetadata.totalTokenCount``)."""

from __future__ import annotations

from typing import Any

from metis.model.cache import CachedContent
from metis.wire.read import object_value, optional_text, required_text

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
