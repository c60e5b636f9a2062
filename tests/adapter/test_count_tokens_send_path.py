"""count_tokens sends through the provider's one send path: the transport's redirect policy,
the secrets hidden from every error, the JSON limits on the answer (docs/engine.md)."""

from __future__ import annotations

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter.count_tokens import count_tokens
from metis.errors import AuthError, ProtocolError, RedirectError
from metis.model import CanonicalRequest, Message

KEY = "tenant-7f3a9c2e1b5d"  # no known key shape: only the adapter knows it is secret


def ask() -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        messages=[Message.user("How many tokens is this?")],
        max_output_tokens=64,
    )


def adapter_answering(handler: object, *, follow_redirects: bool = False) -> object:
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(handler),  # type: ignore[arg-type]
        follow_redirects=follow_redirects,
    )
    return build_adapter("anthropic", AdapterConfig(api_key=KEY, http_client=client))


@pytest.mark.anyio
async def test_a_redirect_to_another_origin_is_refused_and_the_key_stays_home() -> None:
    reached: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        reached.append(request)
        if request.url.host == "api.anthropic.com":
            return httpx.Response(307, headers={"location": "https://collector.example/count"})
        return httpx.Response(200, json={"input_tokens": 3})

    adapter = adapter_answering(handler, follow_redirects=True)
    with pytest.raises(RedirectError, match="another origin"):
        await count_tokens(adapter, ask(), estimate_on_error=False)  # type: ignore[arg-type]
    assert [r.url.host for r in reached] == ["api.anthropic.com"]
    counted = await count_tokens(adapter, ask())  # type: ignore[arg-type]
    assert counted.source == "estimate" and "another origin" in counted.detail


@pytest.mark.anyio
async def test_a_key_the_server_echoes_back_is_hidden_from_the_error_and_the_detail() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = {
            "type": "error",
            "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"},
        }
        return httpx.Response(401, json=body)

    adapter = adapter_answering(handler)
    with pytest.raises(AuthError) as raised:
        await count_tokens(adapter, ask(), estimate_on_error=False)  # type: ignore[arg-type]
    assert KEY not in str(raised.value) and KEY not in repr(raised.value.describe())
    assert KEY not in (raised.value.provider_message or "")
    counted = await count_tokens(adapter, ask())  # type: ignore[arg-type]
    assert counted.source == "estimate" and KEY not in counted.detail


@pytest.mark.anyio
async def test_an_answer_nested_too_deep_is_a_protocol_error_not_a_recursion_error() -> None:
    deep = b'{"input_tokens": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=deep, headers={"content-type": "application/json"})

    adapter = adapter_answering(handler)
    with pytest.raises(ProtocolError, match=r"deeper|nest"):
        await count_tokens(adapter, ask(), estimate_on_error=False)  # type: ignore[arg-type]
    counted = await count_tokens(adapter, ask())  # type: ignore[arg-type]
    assert counted.source == "estimate"
