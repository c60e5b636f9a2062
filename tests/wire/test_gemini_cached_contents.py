"""Gemini explicit caching (docs/caching.md): a cached content made through a Gemini adapter
(``POST /v1beta/cachedContents`` in Gemini's shape), read by later requests through
``CachePolicy(cached_content=...)`` with the cached tokens in usage, streamed and whole, under
asyncio and trio; listed page by page and its expiry moved (``PATCH`` with ``updateMask``);
the emulator refuses what Gemini refuses of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, CachedContents, build_adapter
from metis.errors import AuthError, CapabilityError, InvalidRequestError
from metis.model import CachePolicy, CanonicalRequest, Message, ToolDefinition
from metis.testing.emulator import Emulator

from ..helpers import answer

MODEL = "gemini:gemini-2.5-flash"
MANUAL = "The manual says many things about the device. " * 300
WEATHER = ToolDefinition(
    name="get_weather",
    description="The weather in a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def gemini(emulator: Emulator) -> Any:
    config = AdapterConfig(api_key="k", base_url=emulator.base_url("gemini"), max_retries=0)
    return build_adapter("gemini", config)


def prefix(**fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODEL,
        system_prompt="Answer from the manual.",
        messages=[Message.user(MANUAL)],
        tools=[WEATHER],
        max_output_tokens=200,
        **fields,
    )


@pytest.mark.anyio
async def test_a_cached_content_is_made_in_geminis_shape(emulator: Emulator) -> None:
    cached = await CachedContents(gemini(emulator)).create(
        prefix(), ttl_seconds=600, display_name="manual"
    )
    (recorded,) = emulator.requests
    assert (recorded.method, recorded.path) == ("POST", "/v1beta/cachedContents")
    body = recorded.json()
    assert body["model"] == "models/gemini-2.5-flash"
    assert body["systemInstruction"] == {"parts": [{"text": "Answer from the manual."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": MANUAL}]}]
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    assert (body["ttl"], body["displayName"]) == ("600s", "manual")
    assert cached.name.startswith("cachedContents/") and cached.model == "gemini-2.5-flash"
    assert cached.token_count is not None and cached.token_count > 1024


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_a_request_reads_the_cached_content(emulator: Emulator, stream: bool) -> None:
    adapter = gemini(emulator)
    cached = await CachedContents(adapter).create(prefix())
    request = prefix(cache=CachePolicy(cached_content=cached.name)).model_copy(
        update={"messages": [Message.user("How do I reset it?")]}
    )
    response = await answer(adapter, request, stream)
    sent = emulator.requests[-1]
    assert sent.status == 200
    body = sent.json()
    assert body["cachedContent"] == cached.name
    assert "systemInstruction" not in body and "tools" not in body  # the cache holds them
    assert body["contents"] == [{"role": "user", "parts": [{"text": "How do I reset it?"}]}]
    assert response.usage.cached_input_tokens == cached.token_count
    assert 0 < response.usage.input_tokens < 50  # the new message only
    assert response.warnings == []


@pytest.mark.anyio
async def test_a_system_prompt_or_tools_unlike_the_caches_are_left_out_with_a_warning(
    emulator: Emulator,
) -> None:
    adapter = gemini(emulator)
    cached = await CachedContents(adapter).create(prefix())
    other = prefix(cache=CachePolicy(cached_content=cached.name)).model_copy(
        update={"messages": [Message.user("How?")], "system_prompt": "Answer in French."}
    )
    response = await adapter.complete(other)
    body = emulator.requests[-1].json()
    assert "systemInstruction" not in body and "tools" not in body  # Gemini refuses them
    assert [(w.block_type, w.reason) for w in response.warnings] == [
        (
            "cache",
            f"the request's system prompt differs from what {cached.name} holds and was left "
            "out, as Gemini refuses it beside a cached content",
        )
    ]
    no_tools = await adapter.complete(
        prefix(cache=CachePolicy(cached_content=cached.name)).model_copy(
            update={
                "messages": [Message.user("Hi")],
                "tools": [WEATHER, WEATHER.model_copy(update={"name": "get_time"})],
            }
        )
    )
    assert [w.reason for w in no_tools.warnings] == [
        f"the request's tools differ from what {cached.name} holds and were left out, as "
        "Gemini refuses them beside a cached content"
    ]


@pytest.mark.anyio
async def test_a_cached_content_is_read_and_deleted(emulator: Emulator) -> None:
    caches = CachedContents(gemini(emulator))
    cached = await caches.create(prefix(), display_name="manual")
    assert await caches.get(cached.name) == cached
    await caches.delete(cached.name)
    assert [(r.method, r.path) for r in emulator.requests[1:]] == [
        ("GET", f"/v1beta/{cached.name}"),
        ("DELETE", f"/v1beta/{cached.name}"),
    ]
    with pytest.raises(AuthError, match="CachedContent not found"):  # Gemini's 403
        await caches.get(cached.name)


@pytest.mark.anyio
async def test_a_cached_contents_expiry_moves_by_ttl_or_to_a_moment(emulator: Emulator) -> None:
    caches = CachedContents(gemini(emulator))
    cached = await caches.create(prefix(), ttl_seconds=600)
    assert cached.expire_time == "2026-01-01T00:10:00.000000Z"  # the emulator's clock: EPOCH
    longer = await caches.update(cached.name, ttl_seconds=7200)
    patch = emulator.requests[-1]
    assert (patch.method, patch.path, patch.query) == (
        "PATCH",
        f"/v1beta/{cached.name}",
        {"updateMask": "ttl"},
    )
    assert patch.json() == {"ttl": "7200s"}
    assert longer.expire_time == "2026-01-01T02:00:00.000000Z"
    assert (longer.name, longer.token_count) == (cached.name, cached.token_count)

    paris = timezone(timedelta(hours=1))
    moment = datetime(2026, 1, 2, 13, 30, tzinfo=paris)
    at = await caches.update(cached.name, expire_time=moment)
    patch = emulator.requests[-1]
    assert patch.query == {"updateMask": "expireTime"}
    assert patch.json() == {"expireTime": "2026-01-02T12:30:00.000000Z"}  # in UTC
    assert at.expire_time == "2026-01-02T12:30:00.000000Z"
    assert await caches.get(cached.name) == at


@pytest.mark.anyio
async def test_an_expiry_update_is_checked_before_sending(emulator: Emulator) -> None:
    caches = CachedContents(gemini(emulator))
    name = "cachedContents/abc"
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "exactly one"),
        ({"ttl_seconds": 60, "expire_time": datetime.now(UTC)}, "exactly one"),
        ({"ttl_seconds": 0}, "at least 1"),
        ({"ttl_seconds": "60"}, "an integer"),
        ({"expire_time": datetime(2026, 1, 2)}, "timezone-aware"),
        ({"expire_time": "2026-01-02T00:00:00Z"}, "timezone-aware"),
    ]
    for given, named in cases:
        with pytest.raises(InvalidRequestError, match=named):
            await caches.update(name, **given)
    with pytest.raises(AuthError, match="CachedContent not found"):  # Gemini's 403
        await caches.update(name, ttl_seconds=60)
    assert len(emulator.requests) == 1


@pytest.mark.anyio
async def test_cached_contents_are_listed_page_after_page(emulator: Emulator) -> None:
    caches = CachedContents(gemini(emulator))
    assert await caches.list() == []
    made = [await caches.create(prefix(), display_name=f"manual {i}") for i in range(5)]
    before = len(emulator.requests)
    assert await caches.list(page_size=2) == made
    pages = [r.query for r in emulator.requests[before:]]
    assert pages == [
        {"pageSize": "2"},
        {"pageSize": "2", "pageToken": "2"},
        {"pageSize": "2", "pageToken": "4"},
    ]
    assert await caches.list() == made
    with pytest.raises(InvalidRequestError, match="page_size"):
        await caches.list(page_size=0)


@pytest.mark.anyio
async def test_a_prefix_below_the_models_minimum_is_refused(emulator: Emulator) -> None:
    short = prefix().model_copy(update={"messages": [Message.user("hi")], "tools": []})
    with pytest.raises(InvalidRequestError, match="Cached content is too small"):
        await CachedContents(gemini(emulator)).create(short)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("ttl", "named"), [(0, "at least 1"), (1.5, "an integer"), (True, "an integer")]
)
async def test_a_bad_ttl_is_refused_before_sending(
    emulator: Emulator, ttl: Any, named: str
) -> None:
    with pytest.raises(InvalidRequestError, match=named):
        await CachedContents(gemini(emulator)).create(prefix(), ttl_seconds=ttl)
    with pytest.raises(InvalidRequestError, match="not a cached content name"):
        await CachedContents(gemini(emulator)).get("manual")
    assert emulator.requests == []


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["openai", "anthropic", "vertex"])
async def test_only_a_gemini_api_adapter_makes_cached_contents(
    emulator: Emulator, stack: str
) -> None:
    settings = {"project": "p", "location": "us-central1"} if stack == "vertex" else {}
    adapter = build_adapter(stack, AdapterConfig(api_key="k", settings=settings))
    with pytest.raises(CapabilityError, match="Gemini API"):
        CachedContents(adapter)


@pytest.mark.parametrize(
    ("change", "status", "fragment"),
    [
        ({"systemInstruction": {"parts": [{"text": "x"}]}}, 400, "can not be used with"),
        ({"model": "gemini-2.5-pro"}, 400, "has to be the same"),
        ({"cachedContent": "cachedContents/none"}, 403, "CachedContent not found"),
        ({"patch": "?updateMask=contents", "contents": []}, 400, "updateMask must name"),
        ({"patch": "", "ttl": "60s"}, 400, "updateMask must name"),
        ({"patch": "?updateMask=ttl", "expireTime": "x"}, 400, "does not set"),
        ({"patch": "?updateMask=ttl", "ttl": "60"}, 400, "duration must end with 's'"),
        ({"patch": "?updateMask=expireTime", "expireTime": 5}, 400, "(TYPE_STRING)"),
    ],
)
def test_the_emulator_refuses_what_gemini_refuses_of_a_cached_content(
    emulator: Emulator, change: dict[str, Any], status: int, fragment: str
) -> None:
    headers = {"x-goog-api-key": "k"}
    with httpx.Client(base_url=emulator.url, headers=headers, timeout=10) as http:
        made = http.post(
            "/v1beta/cachedContents",
            json={"model": "models/gemini-2.5-flash", "contents": [_content(MANUAL)]},
        )
        assert made.status_code == 200, made.text
        change, name = dict(change), made.json()["name"]
        if "patch" in change:
            answered = http.patch(f"/v1beta/{name}{change.pop('patch')}", json=change)
        else:
            model = change.pop("model", "gemini-2.5-flash")
            body = {"contents": [_content("hi")], "cachedContent": name, **change}
            answered = http.post(f"/v1beta/models/{model}:generateContent", json=body)
    assert answered.status_code == status, answered.text
    assert fragment in answered.json()["error"]["message"]


def _content(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "args", "option", "meant"),
    [
        ("create", ("prefix",), "ttl", "ttl_seconds"),
        ("create", ("prefix",), "display", "display_name"),
        ("get", ("cachedContents/abc",), "nme", "name"),
        ("list", (), "page_sise", "page_size"),
        ("update", ("cachedContents/abc",), "expire", "expire_time"),
        ("delete", ("cachedContents/abc",), "force", None),
    ],
)
async def test_a_misspelt_keyword_is_an_unknown_option_error_and_nothing_is_sent(
    emulator: Emulator, method: str, args: tuple[Any, ...], option: str, meant: str | None
) -> None:
    from metis import UnknownOptionError

    caches = CachedContents(gemini(emulator))
    given = tuple(prefix() if arg == "prefix" else arg for arg in args)
    with pytest.raises(UnknownOptionError, match=f"unknown option {option!r}") as caught:
        await getattr(caches, method)(*given, **{option: 1})
    assert caught.value.suggestion == meant
    assert emulator.requests == []


def test_a_misspelt_keyword_of_the_constructor_is_an_unknown_option_error() -> None:
    from metis import UnknownOptionError

    with pytest.raises(UnknownOptionError, match="did you mean 'adapter'"):
        CachedContents(adaptor=None)  # type: ignore[call-arg]
