"""Upstream faults in the middle of a stream, over real sockets end to end (a client, ``metis
serve``'s server, the gateway's own HTTP/1.1 transport, a faulty peer in front of the
emulator): the connection reset, a stream cut inside a multi-byte character, an upstream
that stalls past the request's deadline, and a client that goes away mid-stream; each API,
passed through and translated. The client gets its API's error event and nothing of a good end;
the key's place is given back and it is charged no more than the whole answer costs; the
upstream connection is closed; no task is left behind."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import anyio
import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.config import GatewayConfig
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.fault_proxy import CLOSE, DRAIN, RESET, FaultProxy, Forward
from tests.gateway_fixture import serving

pytestmark = [pytest.mark.anyio, pytest.mark.backend_independent]
SAID = "Héllo wörld, ünïcödé façade naïve café"
ROUTES = [
    (
        "anthropic",
        "/v1/messages",
        {"max_tokens": 200, "messages": [{"role": "user", "content": SAID}]},
    ),
    ("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": SAID}]}),
    ("responses", "/v1/responses", {"input": SAID}),
]
OWN = {"anthropic": "sonnet", "chat": "gpt", "responses": "gpt5"}
"""The model of each API's own stack (passed through); ``flash`` is translated for each."""
ENDED_WELL = {
    "anthropic": "event: message_stop",
    "chat": "data: [DONE]",
    "responses": "event: response.completed",
}
STACKS = {
    "anthropic": ("anthropic", "anthropic:claude-sonnet-4-5", "sonnet"),
    "openai": ("openai", "openai:gpt-4o", "gpt"),
    "responses": ("openai_responses", "openai_responses:gpt-5", "gpt5"),
    "gemini": ("gemini", "gemini:gemini-2.5-flash", "flash"),
}


def config(upstream: str, timeout: float) -> GatewayConfig:
    """Every model's adapter sending to ``upstream`` over the gateway's own transport."""
    adapter = {"api_key_env": "UPSTREAM_KEY", "max_retries": 0, "base_url": upstream}
    data = {
        "adapters": {name: {**adapter, "type": stack} for name, (stack, _, _) in STACKS.items()},
        "models": {
            model: {"adapter": name, "aliases": [alias]}
            for name, (_, model, alias) in STACKS.items()
        },
        "gateway": {
            "keys": [{"name": "team", "sha256": digest("team-key"), "budget_usd": 100}],
            "request_timeout_seconds": timeout,
        },
    }
    return GatewayConfig.from_dict(data, environ={"UPSTREAM_KEY": "sk-upstream"})


def each_route() -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    for api, path, body in ROUTES:
        for model in (OWN[api], "flash"):
            yield api, model, path, {"model": model, **body, "stream": True}


async def tasks_in(loop: asyncio.AbstractEventLoop) -> int:
    """The tasks on the server's loop, once what just ended has had a moment to end."""

    async def count() -> int:
        await asyncio.sleep(0.1)
        return len(asyncio.all_tasks())

    done = asyncio.run_coroutine_threadsafe(count(), loop)
    return await anyio.to_thread.run_sync(done.result)


async def until(done: Any) -> None:
    with anyio.fail_after(30):  # a bound on a hang, not a timing: at once when right
        while not done():  # noqa: ASYNC110 (what it waits for happens in other threads)
            await anyio.sleep(0.01)


def ended_in_error(api: str, reply: httpx.Response, case: str) -> None:
    assert reply.status_code == 200 and ENDED_WELL[api] not in reply.text, case
    last = [part for part in reply.text.split("\n\n") if part.strip()][-1]
    data = json.loads(last.split("data:", 1)[1])
    assert "error" in data.get("response", data), case


@pytest.mark.parametrize("fault", ["reset", "multibyte"])
async def test_a_stream_cut_upstream_is_the_apis_error_and_leaves_nothing(fault: str) -> None:
    with Emulator(host="127.0.0.1", port=0) as emulator:
        async with FaultProxy.running(("127.0.0.1", emulator.port)) as proxy:
            app = create_app(config(proxy.url, 120))
            with serving(app) as (url, server):
                loop = server.servers[0].get_loop()
                key = app.state.gateway.keys.find("team-key")
                headers = {"x-api-key": "team-key"}
                async with httpx.AsyncClient(base_url=url, timeout=60, headers=headers) as gw:
                    tasks = await tasks_in(loop)
                    for api, model, path, body in each_route():
                        relayed, spent = len(proxy.relayed), key.spent
                        await gw.post(path, json=body)  # whole, to cut the same answer
                        await until(lambda: len(proxy.relayed) > relayed)  # noqa: B023
                        whole, spent = key.spent - spent, key.spent
                        answer = proxy.answers[-1]
                        body_at = answer.index(b"\r\n\r\n") + 4
                        if fault == "reset":
                            half = body_at + (len(answer) - body_at) // 2
                            proxy.script(Forward(stall_after=half, then=RESET))
                        else:  # the FIN just after a character's first byte
                            lead = next(
                                i for i, b in enumerate(answer) if i > body_at and b >= 0xC0
                            )
                            proxy.script(answer[: lead + 1], CLOSE)
                        reply = await gw.post(path, json=body)
                        case = f"{api} {model}: {reply.text[-300:]}"
                        ended_in_error(api, reply, case)
                        assert Decimal(0) <= key.spent - spent <= whole, case
                        assert key.in_flight == 0, case
                    assert await tasks_in(loop) <= tasks
            await until(lambda: proxy.open == 0)  # every upstream connection closed


async def test_a_stall_past_the_deadline_or_a_client_gone_closes_the_upstream() -> None:
    """The stalls run at once, each on a connection of its own: one deadline's wait, not one
    a route."""
    with Emulator(host="127.0.0.1", port=0) as emulator:
        async with FaultProxy.running(("127.0.0.1", emulator.port)) as proxy:
            app = create_app(config(proxy.url, 3))
            with serving(app) as (url, server):
                loop = server.servers[0].get_loop()
                key = app.state.gateway.keys.find("team-key")
                headers = {"x-api-key": "team-key"}
                limits = httpx.Limits(max_connections=None)
                async with httpx.AsyncClient(
                    base_url=url, timeout=60, headers=headers, limits=limits
                ) as gw:
                    tasks = await tasks_in(loop)
                    routes = list(each_route())
                    for _ in routes:
                        proxy.script(Forward(stall_after=1200, then=DRAIN))

                    async def stalled(api: str, model: str, path: str, body: Any) -> None:
                        reply = await gw.post(path, json=body)
                        case = f"{api} {model} stalled: {reply.status_code} {reply.text[-300:]}"
                        if reply.status_code == 200:  # else the deadline came before any byte
                            ended_in_error(api, reply, case)
                            assert "took longer than the gateway allows" in reply.text, case
                        else:
                            assert reply.status_code == 504, case

                    async with anyio.create_task_group() as group:
                        for route in routes:
                            group.start_soon(stalled, *route)
                    await until(lambda: proxy.drained == len(routes) and key.in_flight == 0)
                    for *_, path, body in routes:
                        drained = proxy.drained
                        proxy.script(Forward(stall_after=1200, then=DRAIN))
                        async with gw.stream("POST", path, json=body) as streamed:
                            async for _ in streamed.aiter_bytes():
                                break  # the client goes with the first bytes
                        await until(lambda: proxy.drained > drained and key.in_flight == 0)  # noqa: B023
                    assert await tasks_in(loop) <= tasks
            await until(lambda: proxy.open == 0)
