"""An operator's mistakes in the gateway's configuration and surroundings: each a classified
error naming the key as the file loads, or a clear log line as the server starts, never a
traceback from inside the server's startup."""

from __future__ import annotations

import socket

import httpx
import pytest

from metis.errors import ConfigError
from metis.gateway.app import create_app
from metis.gateway.config import GatewayConfig
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway_fixture import gateway_config

SAID = {"model": "flash", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1:6379", "the scheme must be redis://"),
        ("127.0.0.1:6379", "the scheme must be redis://"),
        ("redis://:hunter2secret@127.0.0.1:port", "the port must be a number"),
    ],
)
def test_a_redis_url_that_cannot_be_read_is_refused_as_the_file_loads(url: str, said: str) -> None:
    """Before: read only as the server started, a traceback out of its lifespan, which
    `metis serve` then blamed on a port in use."""
    data = {"gateway": {"redis_url": url}}
    with pytest.raises(ConfigError, match=r"gateway\.redis_url") as refused:
        GatewayConfig.from_dict(data, environ={})
    assert said in str(refused.value) and "hunter2secret" not in str(refused.value)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.anyio
async def test_a_redis_down_as_the_gateway_starts_is_said_at_startup(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The gateway starts (a Redis that comes back is used), says at once that its shared
    store does not answer, and refuses keyed requests with the retried overloaded error."""
    pytest.importorskip("coredis")
    keys = [{"name": "solo", "sha256": digest("solo-key")}]
    redis_url = f"redis://127.0.0.1:{_closed_port()}"
    app = create_app(gateway_config(Emulator(), {"keys": keys, "redis_url": redis_url}))
    with caplog.at_level("WARNING", logger="metis.gateway"):
        async with app.router.lifespan_context(app):
            started = [
                r for r in caplog.records if r.__dict__.get("event") == "metis.gateway.store_failed"
            ]
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
                refused = await client.post(
                    "/v1/messages", json=SAID, headers={"x-api-key": "solo-key"}
                )
    assert len(started) == 1 and "as the gateway started" in started[0].getMessage()
    assert refused.status_code == 529 and refused.headers["retry-after"] == "1"
    assert redis_url not in refused.text


def test_a_key_digest_pasted_from_sha256sum_is_said_plainly() -> None:
    """`sha256sum` prints the digest and then `  -`: a digest with it, or cut short, is refused
    naming the key and the command, not a regular expression."""
    pasted = digest("ci-key") + "  -"
    for given in (pasted, digest("ci-key")[:63]):
        keys = [{"name": "ci", "sha256": given}]
        with pytest.raises(ConfigError, match=r"gateway\.keys\.ci\.sha256: .*sha256sum"):
            GatewayConfig.from_dict({"gateway": {"keys": keys}}, environ={})


@pytest.mark.anyio
async def test_a_key_digest_in_capitals_is_the_same_digest() -> None:
    keys = [{"name": "ci", "sha256": digest("ci-key").upper()}]
    app = create_app(gateway_config(Emulator(), {"keys": keys}))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        served = await client.post("/v1/messages", json=SAID, headers={"x-api-key": "ci-key"})
    assert served.status_code == 200, served.text


@pytest.mark.anyio
async def test_a_spent_budget_is_not_retried_by_either_sdk() -> None:
    """As docs/gateway.md says: a 429 in each API's shape, with ``x-should-retry: false`` and
    no ``retry-after`` (waiting does not refill a budget)."""
    keys = [{"name": "tiny", "sha256": digest("tiny-key"), "budget_usd": 0.000001}]
    app = create_app(gateway_config(Emulator(), {"keys": keys}))
    said = {"x-api-key": "tiny-key"}
    chat = {"model": "flash", "messages": SAID["messages"]}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        assert (await client.post("/v1/messages", json=SAID, headers=said)).status_code == 200
        anthropic = await client.post("/v1/messages", json=SAID, headers=said)
        openai = await client.post("/v1/chat/completions", json=chat, headers=said)
    assert anthropic.status_code == openai.status_code == 429
    assert anthropic.json()["error"]["type"] == "rate_limit_error"
    assert openai.json()["error"]["code"] == "insufficient_quota"
    for refused in (anthropic, openai):
        assert refused.headers["x-should-retry"] == "false"
        assert "retry-after" not in refused.headers
