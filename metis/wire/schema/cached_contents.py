"""Gemini API cached contents on the wire (ai.google.dev/api/caching): the body of ``POST
/v1beta/cachedContents`` made from an encoded ``generateContent`` body, the ``PATCH`` that
moves a cached content's expiry (only the expiry may change), and the cached content Gemini
answers with (``name``, ``model``, ``expireTime``, ``usageMetadata.totalTokenCount``), alone
or as a page of ``GET /v1beta/cachedContents``."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from metis.model.cache import CachedContent
from metis.wire.read import object_value, optional_list, optional_text, required_text

CACHED_FIELDS = ("contents", "systemInstruction", "tools", "toolConfig")
"""What of a generateContent body a cached content holds (a request that reads it must set
none of the last three: Gemini refuses them)."""


NOT_BESIDE = {"systemInstruction": "system prompt", "tools": "tools", "toolConfig": "tool choice"}
"""What a request reading a cached content cannot set (Gemini refuses it), by what it is."""
HELD_LIMIT = 1024
"""How many cached contents' prefixes this process remembers (the oldest are forgotten)."""

_held: OrderedDict[str, dict[str, Any]] = OrderedDict()
_held_lock = threading.Lock()


def create_body(
    encoded: dict[str, Any], wire_model: str, ttl_seconds: int, display_name: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": f"models/{wire_model}"}
    body.update({k: encoded[k] for k in CACHED_FIELDS if encoded.get(k)})
    body["ttl"] = f"{ttl_seconds}s"
    if display_name:
        body["displayName"] = display_name
    return body


def remember(name: str, body: Mapping[str, Any] | None) -> None:
    """That the cached content ``name`` holds what ``body`` (its create body) set of the
    fields a reading request cannot set; None: forget it (deleted)."""
    with _held_lock:
        if body is None:
            _held.pop(name, None)
            return
        _held[name] = {k: body[k] for k in NOT_BESIDE if body.get(k)}
        _held.move_to_end(name)
        while len(_held) > HELD_LIMIT:
            _held.popitem(last=False)


def left_out(body: Mapping[str, Any], name: str) -> list[str]:
    """Why what ``body`` sets beside the cached content ``name`` (and must leave out) is
    content the caller loses: each field unlike what the cache holds, when this process made
    it; else one reason naming them all. None when the cache holds the same."""
    asked = {k: body[k] for k in NOT_BESIDE if body.get(k)}
    with _held_lock:
        held = _held.get(name)
    tail = "as Gemini refuses {} beside a cached content"
    if held is None:
        if not asked:
            return []
        what = _listed([NOT_BESIDE[k] for k in asked])
        return [
            f"the request's {what} {_were(asked)} left out, {tail.format(_them(asked))}; {name} "
            "was not made by this process, so whether it holds the same is not known"
        ]
    reasons = []
    for key, value in asked.items():
        if held.get(key) != value:
            one = {key: value}
            differs = "differ" if key == "tools" else "differs"
            reasons.append(
                f"the request's {NOT_BESIDE[key]} {differs} from what {name} holds and "
                f"{_were(one)} left out, {tail.format(_them(one))}"
            )
    return reasons


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _were(fields: Mapping[str, Any]) -> str:
    return "was" if list(fields) in (["systemInstruction"], ["toolConfig"]) else "were"


def _them(fields: Mapping[str, Any]) -> str:
    return "it" if _were(fields) == "was" else "them"


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
