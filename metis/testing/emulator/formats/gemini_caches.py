"""Gemini API explicit caching, its endpoints: ``POST /v1beta/cachedContents {model, contents,
systemInstruction, tools, toolConfig, ttl | expireTime, displayName}`` stores a prompt prefix
as ``cachedContents/{id}``; ``GET`` and ``DELETE /v1beta/cachedContents/{id}`` read and remove
it, ``PATCH`` moves its expiry (``updateMask`` ``ttl`` or ``expireTime``: nothing else may change),
and ``GET /v1beta/cachedContents`` lists them a page at a time (:mod:`.gemini_cached` has what is
stored and how a request reads it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from metis.testing.emulator.formats.base import Call, Route
from metis.testing.emulator.formats.gemini import Gemini, google_error, google_json
from metis.testing.emulator.formats.gemini_cached import (
    check_create,
    check_update,
    created,
    find,
    listed,
    missing,
    shown,
    updated,
)
from metis.testing.emulator.wire import JsonReply


class GeminiCaches(Gemini):
    name = "gemini"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", r"/(v1beta|v1)/cachedContents", "create"),
        ("GET", r"/(v1beta|v1)/cachedContents", "list"),
        ("PATCH", r"/(v1beta|v1)/cachedContents/(?P<id>[^/:]+)", "update"),
        ("GET", r"/(v1beta|v1)/cachedContents/(?P<id>[^/:]+)", "get"),
        ("DELETE", r"/(v1beta|v1)/cachedContents/(?P<id>[^/:]+)", "delete"),
    )

    def parse(self, call: Call) -> None:
        if call.endpoint == "create":
            check_create(call.body)
        elif call.endpoint == "update":
            check_update(call)

    def serve(self, call: Call) -> JsonReply | None:
        if call.endpoint == "create":
            return google_json(created(call))
        if call.endpoint == "list":
            return google_json(listed(call))
        name = f"cachedContents/{call.match['id']}"
        found = find(call, name, remove=call.endpoint == "delete")
        if found is None:
            return google_error(403, "PERMISSION_DENIED", missing(name))
        if call.endpoint == "update":
            return google_json(updated(call, found))
        return google_json({} if call.endpoint == "delete" else shown(found))
