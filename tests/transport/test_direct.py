"""A client marked to send its requests itself (metis/transport/direct.py; the gateway's
upstream clients): each request as httpx would build it, from what it keeps of the URL and
headers, handed to the client's own transport; and no cookie kept from one answer for the
next request."""

from __future__ import annotations

import anyio
import httpx
import pytest

from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.transport.direct import send_directly
from metis.transport.exchange import Limits, open_exchange

pytestmark = pytest.mark.anyio
URL = "https://api.example.com/v1/chat/completions"


def _call() -> Call:
    return Call(
        request_id="req_1",
        provider="openai",
        model="openai:gpt-x",
        wire_model="gpt-x",
        deadline=anyio.current_time() + 30,
    )


async def _asked(client: httpx.AsyncClient, body: dict[str, str]) -> None:
    wire = WireRequest(URL, body, {"authorization": "Bearer sk-1"}, stream=False).serialized()
    exchange = await open_exchange(client, wire, _call(), Limits())
    await exchange.body()
    await exchange.aclose()


async def _seen(marked: bool) -> list[httpx.Request]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True}, headers={"set-cookie": "lb=node-7; Path=/"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    if marked:
        send_directly(client)
    async with client:
        await _asked(client, {"model": "gpt-x", "said": "one"})
        await _asked(client, {"model": "gpt-x", "said": "a second, longer body"})
    return seen


async def test_the_next_request_carries_no_cookie_an_answer_set() -> None:
    kept = await _seen(marked=False)  # httpx's own client keeps it
    assert kept[1].headers.get("cookie") == "lb=node-7"
    first, second = await _seen(marked=True)
    assert "cookie" not in first.headers and "cookie" not in second.headers


async def test_each_request_is_what_httpx_would_have_built() -> None:
    plain, marked = await _seen(marked=False), await _seen(marked=True)
    for mine, theirs in zip(marked, plain, strict=True):
        assert str(mine.url) == str(theirs.url) and mine.method == theirs.method
        assert mine.content == theirs.content
        drop = {"cookie"}
        assert [(k, v) for k, v in mine.headers.multi_items() if k not in drop] == [
            (k, v) for k, v in theirs.headers.multi_items() if k not in drop
        ]
        assert mine.extensions["timeout"].keys() == theirs.extensions["timeout"].keys()
    assert marked[1].headers["content-length"] == str(len(marked[1].content))
