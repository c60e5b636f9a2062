"""Gemini API cached contents (ai.google.dev/gemini-api/docs/caching): what ``POST
/v1beta/cachedContents`` stores (:mod:`.gemini_caches` serves it) and how a ``generateContent``
naming one reads it, as docs/emulator.md "The prompt cache" describes. Entries live until
deleted or the emulator is reset: the emulator keeps no clock, and its times count from
``EPOCH`` (an expiry is ``EPOCH`` plus the time to live).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from metis.core.digits import ascii_digits
from metis.testing.emulator.formats.base import Call
from metis.testing.emulator.rules import Refused
from metis.testing.emulator.wire import count_tokens, dumps, request_ids

CACHED_PARTS = ("systemInstruction", "tools", "toolConfig")
NOT_WITH_CACHE = (
    "CachedContent can not be used with GenerateContent request setting system_instruction, "
    "tools or tool_config.\n\nProposed fix: move those values to CachedContent from "
    "GenerateContent request."
)


def find(call: Call, name: str, remove: bool = False) -> dict[str, Any] | None:
    """The cached content named ``name`` (None: there is none); ``remove``: deleted too."""
    with call.env.lock:
        stored = call.env.cached_contents
        found: dict[str, Any] | None = stored.pop(name, None) if remove else stored.get(name)
        return found


def read_cached_content(call: Call) -> None:
    """A ``generateContent`` body that names a cached content, with the cache's parts put in:
    its contents first, its system instruction and tools (``call.options["cached_tokens"]``:
    how many tokens came from the cache)."""
    body = call.body
    name = body.get("cachedContent")
    if name is None:
        return
    if not isinstance(name, str):
        raise Refused("Invalid value at 'cached_content' (TYPE_STRING)")
    if any(body.get(part) is not None for part in CACHED_PARTS):
        raise Refused(NOT_WITH_CACHE)
    entry = find(call, name)
    if entry is None:
        raise Refused(missing(name), status=403)
    if entry["model"] != f"models/{call.model}":
        raise Refused(
            f"Model used by GenerateContent request (models/{call.model}) and CachedContent "
            f"({entry['model']}) has to be the same."
        )
    merged = {k: v for k, v in body.items() if k != "cachedContent"}
    merged["contents"] = [*entry.get("contents", []), *body.get("contents", [])]
    merged.update({part: entry[part] for part in CACHED_PARTS if part in entry})
    call.body = merged
    call.options["cached_tokens"] = entry["usageMetadata"]["totalTokenCount"]


def check_create(body: dict[str, Any]) -> None:
    model = body.get("model")
    if not isinstance(model, str) or not model.startswith("models/"):
        raise Refused("* CreateCachedContentRequest.cached_content.model: model is required")
    if not body.get("contents") and not body.get("systemInstruction"):
        raise Refused("* CreateCachedContentRequest.cached_content.contents: contents is required")
    _check_expiry(body)


def _check_expiry(body: dict[str, Any]) -> None:
    moment = body.get("expireTime")
    if moment is not None and not isinstance(moment, str):
        raise Refused(f"Invalid value at 'cached_content.expire_time' (TYPE_STRING), {moment}")
    ttl = body.get("ttl")
    if ttl is not None and not (isinstance(ttl, str) and _is_duration(ttl)):
        raise Refused(
            "Invalid value at 'cached_content.ttl' (type.googleapis.com/google.protobuf."
            f"Duration), Field 'ttl', Illegal duration format; duration must end with 's': {ttl}"
        )


def check_update(call: Call) -> None:
    """A PATCH names in ``updateMask`` the fields it changes: only the expiry may change."""
    mask = [f for f in call.request.query.get("updateMask", "").split(",") if f]
    if not mask or any(f not in ("ttl", "expireTime") for f in mask):
        raise Refused(f"updateMask must name ttl or expireTime (the expiry), not {mask}")
    for field in mask:
        if field not in call.body:
            raise Refused(f"updateMask names {field}, which the cached content does not set")
    _check_expiry(call.body)


def updated(call: Call, entry: dict[str, Any]) -> dict[str, Any]:
    with call.env.lock:
        entry.update(updateTime=_stamp(EPOCH), expireTime=_expiry(call.body))
    return shown(entry)


def listed(call: Call) -> dict[str, Any]:
    """A page of the cached contents, in the order they were made; the page token is the
    index of the page's first entry."""
    size = call.request.query.get("pageSize", "1000")
    start = call.request.query.get("pageToken", "0")
    if not (ascii_digits(size) and ascii_digits(start)):
        raise Refused(f"Invalid pageSize or pageToken: {size!r}, {start!r}")
    first, count = int(start), min(int(size) or 1000, 1000)
    with call.env.lock:
        entries = list(call.env.cached_contents.values())
    page: dict[str, Any] = {}
    if entries[first : first + count]:
        page["cachedContents"] = [shown(e) for e in entries[first : first + count]]
    if first + count < len(entries):
        page["nextPageToken"] = str(first + count)
    return page


EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _expiry(body: dict[str, Any]) -> str:
    ttl = body.get("ttl")
    if ttl is None:
        return str(body.get("expireTime") or _stamp(EPOCH + timedelta(hours=1)))
    return _stamp(EPOCH + timedelta(seconds=float(ttl.removesuffix("s"))))


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _is_duration(text: str) -> bool:
    number = text.removesuffix("s")
    digits = number.replace(".", "", 1)
    return text.endswith("s") and ascii_digits(digits)


def created(call: Call) -> dict[str, Any]:
    body = call.body
    model = body["model"]
    tokens = _tokens(body)
    least = 4096 if "pro" in model else 1024
    if tokens < least:
        raise Refused(
            f"Cached content is too small. total_token_count={tokens}, "
            f"min_total_token_count={least}"
        )
    name = "cachedContents/" + request_ids(call.request).token(16).lower()
    entry = {part: body[part] for part in ("contents", *CACHED_PARTS) if part in body}
    entry.update(
        name=name,
        model=model,
        displayName=body.get("displayName", ""),
        createTime=_stamp(EPOCH),
        updateTime=_stamp(EPOCH),
        expireTime=_expiry(body),
        usageMetadata={"totalTokenCount": tokens},
    )
    with call.env.lock:
        call.env.cached_contents[name] = entry
    return shown(entry)


def _tokens(body: dict[str, Any]) -> int:
    """The cached prefix's tokens, counted as a generateContent prompt's are (its tools and
    system instruction, then each content)."""
    instruction = body.get("systemInstruction") or {}
    system = "".join(
        str(p.get("text", "")) for p in instruction.get("parts") or [] if isinstance(p, dict)
    )
    segments = [dumps(body.get("tools") or [], (", ", ": ")).decode() + system]
    segments += [dumps(c, (", ", ": ")).decode() for c in body.get("contents") or []]
    return sum(count_tokens(s) for s in segments)


def shown(entry: dict[str, Any]) -> dict[str, Any]:
    """What Gemini shows of a cached content: its metadata, not the cached prompt."""
    return {k: v for k, v in entry.items() if k not in ("contents", *CACHED_PARTS)}


def missing(name: str) -> str:
    return f"CachedContent not found (or permission denied): {name}"
