"""The gateway's ASGI application: keys in both Anthropic forms, anthropic-version, the size
limit, health and readiness, the per-request timeout, a client that goes away (the upstream
call is cancelled), and a shutdown that lets the streams in flight finish."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.gateway.models import Target
from metis.model.capabilities import AdapterCapabilities
from metis.model.events import MessageComplete, StreamEvent, TextDelta
from metis.model.request import CanonicalRequest
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, scope, serving

pytestmark = pytest.mark.anyio
SAID = {"model": "flash", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}


class Held:
    """A model whose stream says one word, then waits for ``release`` (and records whether
    its stream was closed, and how)."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.first_sent = threading.Event()
        self.closed = False

    async def _events(self) -> AsyncIterator[StreamEvent]:
        try:
            yield TextDelta(0, "one ")
            self.first_sent.set()
            await self.release.wait()
            yield TextDelta(0, "two")
            done = StopReason(kind=StopKind.END_TURN)
            yield MessageComplete([], done, TokenUsage(output_tokens=2))
        finally:
            self.closed = True

    def stream(self, request: CanonicalRequest) -> AsyncIterator[StreamEvent]:
        return self._events()

    async def complete(self, request: CanonicalRequest) -> Any:
        await self.release.wait()


def _held(app: Any) -> Held:
    held = Held()
    caps = AdapterCapabilities(max_output_tokens=100)
    app.state.gateway.models.resolve = lambda name: Target(name, held, "x:y", caps, "y")  # type: ignore[arg-type]
    return held


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")


@pytest.fixture
def emulator() -> Emulator:
    return Emulator()


async def test_both_anthropic_key_forms_and_versions(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator))
    async with _client(app) as client:
        for headers in (
            {"x-api-key": GATEWAY_KEY, "anthropic-version": "2023-06-01"},
            {"authorization": f"Bearer {GATEWAY_KEY}", "anthropic-version": "2026-10-21"},
        ):
            reply = await client.post("/v1/messages", json=SAID, headers=headers)
            assert reply.status_code == 200, reply.text
        refused = await client.post(
            "/v1/messages", json=SAID, headers={"x-api-key": GATEWAY_KEY, "anthropic-version": "1"}
        )
        assert (
            refused.status_code == 400 and "anthropic-version" in refused.json()["error"]["message"]
        )
        missing = await client.post("/v1/chat/completions", json=SAID)
        assert missing.status_code == 401 and missing.json()["error"]["code"] == "invalid_api_key"


async def test_a_body_over_the_limit_is_413_in_the_callers_shape(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator, {"max_request_bytes": 2048}))
    big = {**SAID, "messages": [{"role": "user", "content": "x" * 4096}]}
    headers = {"x-api-key": GATEWAY_KEY}
    async with _client(app) as client:
        reply = await client.post("/v1/messages", json=big, headers=headers)
        assert reply.status_code == 413 and reply.json()["error"]["type"] == "request_too_large"
        reply = await client.post(
            "/v1/responses", json={"model": "gpt", "input": "x" * 4096}, headers=headers
        )
        assert reply.status_code == 413 and reply.json()["error"]["code"] == "request_too_large"
        broken = await client.post("/v1/chat/completions", content=b"{not json", headers=headers)
        assert broken.status_code == 400 and "not valid JSON" in broken.json()["error"]["message"]


async def test_health_readiness_and_the_model_list(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator))
    async with _client(app) as client:
        assert (await client.get("/health")).json() == {"status": "ok"}
        assert (await client.get("/ready")).status_code == 503  # no lifespan ran here
        listed = await client.get("/v1/models", headers={"x-api-key": GATEWAY_KEY})
        flash = next(m for m in listed.json()["data"] if m["id"] == "flash")
        assert flash["model"] == "gemini:gemini-2.5-flash" and flash["context_window"] > 0
    assert flash["max_input_tokens"] == flash["context_window"]  # the anthropic SDK's names
    assert flash["max_tokens"] == flash["max_output_tokens"] and flash["lifecycle"] == "active"


async def test_an_unknown_model_is_404_pointing_at_the_list_and_naming_no_file(
    emulator: Emulator,
) -> None:
    app = create_app(gateway_config(emulator))
    async with _client(app) as client:
        reply = await client.post(
            "/v1/messages", json={**SAID, "model": "flsh"}, headers={"x-api-key": GATEWAY_KEY}
        )
    assert reply.status_code == 404
    assert reply.json()["error"] == {
        "type": "not_found_error",
        "message": "model 'flsh' is not served here; did you mean 'flash'? GET /v1/models "
        "lists the models, aliases and routes you may name",
    }


@pytest.mark.parametrize(
    ("named", "keys", "said"),
    [  # the provider's own name, as an SDK's or an agent CLI's default sends it
        ("gpt-4o", [], "model 'gpt-4o' is not served here; did you mean 'openai:gpt-4o'? GET"),
        ("flsh", [], "model 'flsh' is not served here; did you mean 'flash'? GET"),
        (  # a key that may name only some models is shown no others
            "flsh",
            [{"name": "team", "sha256": digest("team-key"), "models": ["gpt"]}],
            "model 'flsh' is not served here; GET",
        ),
    ],
)
async def test_an_unknown_model_names_the_nearest_served_when_every_key_may_name_every_model(
    emulator: Emulator, named: str, keys: list[dict[str, Any]], said: str
) -> None:
    app = create_app(gateway_config(emulator, {"keys": keys}))
    async with _client(app) as client:
        reply = await client.post(
            "/v1/chat/completions",
            json={"model": named, "messages": [{"role": "user", "content": "Hi"}]},
            headers={"authorization": f"Bearer {GATEWAY_KEY}"},
        )
    assert reply.status_code == 404
    assert reply.json()["error"]["message"].startswith(said)


async def test_a_request_past_its_timeout_is_504(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator, {"request_timeout_seconds": 0.01}))
    _held(app)  # never released
    async with _client(app) as client:
        headers = {"x-api-key": GATEWAY_KEY}
        reply = await client.post("/v1/messages", json=SAID, headers=headers)
        assert reply.status_code == 504 and reply.json()["error"]["type"] == "timeout_error"
        said = "the gateway allows: 0.01 s (gateway.request_timeout_seconds)"
        assert reply.json()["error"]["message"].endswith(said)  # the limit and its setting
        streamed = await client.post(
            "/v1/chat/completions", json={**SAID, "stream": True}, headers=headers
        )
        assert streamed.status_code == 200  # the first event came in time: the error ends it
        assert '"code":"timeout"' in streamed.text and said in streamed.text


@pytest.mark.backend_independent(False)
async def test_a_client_that_goes_away_cancels_the_upstream_call(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator))
    held = _held(app)
    sent: list[dict[str, Any]] = []
    body = anyio.Event()

    async def receive() -> dict[str, Any]:
        if not sent:
            data = json.dumps({**SAID, "stream": True}).encode()
            sent.append({})
            return {"type": "http.request", "body": data, "more_body": False}
        await body.wait()  # the first chunk reached the client: now it hangs up
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            body.set()

    await app(scope(), receive, send)
    assert held.closed and not held.release.is_set()


def test_shutdown_drains_the_streams_in_flight(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator))
    held = _held(app)
    with serving(app) as (url, server):
        result: dict[str, str] = {}

        def call() -> None:
            with httpx.stream(
                "POST",
                url + "/v1/messages",
                json={**SAID, "stream": True},
                headers={"x-api-key": GATEWAY_KEY},
            ) as reply:
                result["text"] = "".join(reply.iter_text())

        client = threading.Thread(target=call)
        client.start()
        held.first_sent.wait()
        server.should_exit = True  # as SIGTERM does: stop accepting, let the streams finish
        loop_release(server, held)
        client.join()
    assert "message_stop" in result["text"] and '"text":"two"' in result["text"]


def loop_release(server: Any, held: Held) -> None:
    """Sets ``held.release`` on the server's own event loop."""
    server.servers[0].get_loop().call_soon_threadsafe(held.release.set)


def test_the_example_configuration_loads_and_refuses_a_missing_key() -> None:
    from metis.errors import ConfigError
    from metis.gateway.config import GatewayConfig

    loaded = GatewayConfig.load("examples/gateway.yaml", environ={"METIS_GATEWAY_KEY": "k"})
    assert loaded.api_key == "k" and loaded.settings.port == 4000
    assert "default" in loaded.registry.route_specs
    with pytest.raises(ConfigError, match="METIS_GATEWAY_KEY"):
        GatewayConfig.load("examples/gateway.yaml", environ={})
    with pytest.raises(ConfigError, match=r"gateway\.prot"):
        GatewayConfig.from_dict({"gateway": {"prot": 1}}, environ={})
    unknown = r"modles: unknown key; expected one of: .*, gateway; did you mean 'models'\?$"
    with pytest.raises(ConfigError, match=unknown):
        GatewayConfig.from_dict({"modles": {}}, environ={})


def test_an_adapter_without_its_key_is_said_at_startup(caplog: pytest.LogCaptureFixture) -> None:
    """The operator learns at startup, not from the first client's error, that a model's
    adapter lacks its key; the client gets the gateway's 500, not a 401 about its own key."""
    from metis.gateway.config import GatewayConfig

    data = {
        "adapters": {"claude": {"type": "anthropic", "api_key_env": "NOT_SET_HERE"}},
        "models": {"anthropic:claude-sonnet-4-5": {"adapter": "claude", "aliases": ["sonnet"]}},
        "gateway": {"api_key_env": "GATEWAY_KEY"},
    }
    app = create_app(GatewayConfig.from_dict(data, environ={"GATEWAY_KEY": GATEWAY_KEY}))
    with caplog.at_level("WARNING", logger="metis.gateway"), serving(app) as (url, _):
        said = {"model": "sonnet", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}
        answer = httpx.post(url + "/v1/messages", json=said, headers={"x-api-key": GATEWAY_KEY})
    assert answer.status_code == 500
    assert answer.json()["error"]["type"] == "api_error"
    (line,) = [r for r in caplog.records if getattr(r, "event", "") == "metis.gateway.unconfigured"]
    assert "'claude'" in line.getMessage() and "NOT_SET_HERE" in line.getMessage()
    assert "anthropic:claude-sonnet-4-5" in line.getMessage()


@pytest.mark.anyio
async def test_the_metrics_endpoint_counts_requests_errors_tokens_and_cost(
    emulator: Emulator,
) -> None:
    app = create_app(gateway_config(emulator))
    headers = {"x-api-key": GATEWAY_KEY}
    async with _client(app) as client:
        assert (await client.post("/v1/messages", json=SAID, headers=headers)).status_code == 200
        streamed = {"model": "gpt", "messages": SAID["messages"], "stream": True}
        await client.post("/v1/chat/completions", json=streamed, headers=headers)
        await client.post("/v1/messages", json={**SAID, "model": "nope"}, headers=headers)
        text = (await client.get("/metrics")).text
    assert (
        'metis_gateway_requests_total{api="anthropic",'
        'endpoint="POST /v1/messages",model="flash",status="200"} 1'
    ) in text
    assert (
        'metis_gateway_requests_total{api="chat",'
        'endpoint="POST /v1/chat/completions",model="gpt",status="200"} 1'
    ) in text
    assert (
        'metis_gateway_requests_total{api="anthropic",'
        'endpoint="POST /v1/messages",model="",status="404"} 1'
    ) in text
    assert (
        'metis_gateway_errors_total{api="anthropic",'
        'endpoint="POST /v1/messages",error_class="invalid_request"} 1'
    ) in text
    assert 'metis_gateway_tokens_total{model="openai:gpt-4o",direction="output"}' in text
    assert 'metis_gateway_cost_usd_total{model="gemini:gemini-2.5-flash"}' in text
    assert (
        'metis_gateway_request_seconds_count{api="chat",endpoint="POST /v1/chat/completions"} 1'
    ) in text


@pytest.mark.backend_independent(False)
async def test_a_client_that_goes_away_cancels_a_whole_body_call(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator))
    held = _held(app)
    cancelled: list[bool] = []
    begun = anyio.Event()

    async def complete(request: CanonicalRequest) -> Any:
        begun.set()
        try:
            await held.release.wait()
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise

    held.complete = complete  # type: ignore[method-assign]
    messages = [{"type": "http.request", "body": json.dumps(SAID).encode(), "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await begun.wait()  # the call has started: now the client hangs up
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(60):  # a bound on a hang, not a timing: it ends at once when right
        await app(scope(), receive, send)
    assert cancelled == [True] and not held.release.is_set()


def test_a_worker_s_application_is_frozen_out_of_the_cyclic_collector(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a worker built before serving (modules, catalog, configuration) lives as long as
    it does: a full collection does not walk it again (``metis serve`` does the same)."""
    import gc

    from metis.gateway.app import from_environment

    config = tmp_path / "models.yaml"
    config.write_text("adapters: {}\nmodels: {}\n")
    monkeypatch.setenv("METIS_GATEWAY_CONFIG", str(config))
    # Not unfrozen first: what the worker froze after collecting (tests/conftest.py), once
    # unfrozen, was walked again by every later full collection (20 s of CPU in one test).
    frozen_before = gc.get_freeze_count()
    app = from_environment()
    assert gc.get_freeze_count() > frozen_before
    assert all(o is not app for o in gc.get_objects())  # the collector's are not frozen


async def test_a_served_gateway_builds_and_freezes_each_models_adapter_before_it_is_ready(
    emulator: Emulator,
) -> None:
    """``metis serve``'s lifespan builds what a first request to each model would (its
    adapter and stages) before the gateway is ready, and freezes it with the rest; a gateway
    made only for a library's tests builds them on first use, as before."""
    import gc

    from metis.gateway.app import frozen_for_serving

    def adapters(app: Any) -> list[Any]:
        names = ("sonnet", "gpt", "gpt5", "flash", "haiku", "llama")
        return [app.state.gateway.models.resolve(name).chat_model for name in names]

    plain = create_app(gateway_config(emulator))
    async with plain.router.lifespan_context(plain):
        assert any(adapter._pipeline is None for adapter in adapters(plain))
    app = frozen_for_serving(create_app(gateway_config(emulator)))  # frozen for good, as above
    async with app.router.lifespan_context(app):
        built = adapters(app)
        assert all(adapter._pipeline is not None for adapter in built)
        tracked = {id(o) for o in gc.get_objects()}  # the collector's: not frozen
        assert not any(id(adapter) in tracked for adapter in built)
        assert not any(id(adapter.pipeline) in tracked for adapter in built)
        async with _client(app) as client:
            reply = await client.post("/v1/messages", json=SAID, headers={"x-api-key": GATEWAY_KEY})
            assert reply.status_code == 200, reply.text
            assert reply.json()["content"][0]["text"]


@pytest.mark.anyio
async def test_the_gateways_adapters_keep_every_connection_and_a_librarys_keep_a_hundred() -> None:
    """The gateway's registry makes each adapter entry's client on the lean transport with
    every connection kept alive (metis/gateway/upstream_pool.py); a registry in a program
    keeps the official SDKs' 100 (on the lean transport too, by default)."""
    from metis.gateway.config import GatewayConfig
    from metis.registry.registry import Registry
    from metis.transport.http1 import LeanTransport
    from metis.transport.http1_pool import Pool

    data = {
        "adapters": {"claude": {"type": "anthropic", "api_key_env": "UPSTREAM_KEY"}},
        "models": {"anthropic:claude-sonnet-4-5": {"adapter": "claude", "aliases": ["sonnet"]}},
    }
    environ = {"UPSTREAM_KEY": "sk-upstream"}
    served = GatewayConfig.from_dict({**data, "gateway": {}}, environ=environ).registry
    library = Registry.from_dict(data, environ=environ)
    async with served, library:
        gateway_transport = served.adapter("sonnet").config.http_client._transport
        library_transport = library.adapter("sonnet").config.http_client._transport
        assert type(gateway_transport) is type(library_transport) is LeanTransport
        gateway_pool, library_pool = gateway_transport._pool, library_transport._pool
        assert type(gateway_pool) is type(library_pool) is Pool
        assert (gateway_pool.max_keepalive, gateway_pool.max_connections) == (1000, 1000)
        assert (library_pool.max_keepalive, library_pool.max_connections) == (100, 1000)


@pytest.mark.anyio
async def test_metrics_can_ask_for_a_key_of_their_own(emulator: Emulator) -> None:
    """``gateway.metrics.api_key_env``: a scrape sends that key (as Prometheus's bearer token,
    or x-api-key) or gets 401; without it /metrics stays open (the default)."""
    from metis.errors import ConfigError
    from metis.gateway.config import GatewayConfig

    scraped = gateway_config(emulator, {"metrics": {"api_key_env": "GATEWAY_KEY"}})
    assert scraped.metrics_key == GATEWAY_KEY
    async with _client(create_app(scraped)) as client:
        refused = [
            await client.get("/metrics"),
            await client.get("/metrics", headers={"authorization": "Bearer wrong"}),
            await client.get("/metrics", headers={"authorization": f"Basic {GATEWAY_KEY}"}),
        ]
        assert [r.status_code for r in refused] == [401, 401, 401]
        assert refused[0].headers["www-authenticate"] == "Bearer"
        assert "metis_gateway" not in refused[0].text
        for given in ({"authorization": f"Bearer {GATEWAY_KEY}"}, {"x-api-key": GATEWAY_KEY}):
            allowed = await client.get("/metrics", headers=given)
            assert (
                allowed.status_code == 200 and "# TYPE metis_gateway_requests_total" in allowed.text
            )
    async with _client(create_app(gateway_config(emulator))) as client:
        assert (await client.get("/metrics")).status_code == 200
    with pytest.raises(ConfigError, match=r"gateway\.metrics\.api_key_env names SCRAPE_KEY"):
        GatewayConfig.from_dict({"gateway": {"metrics": {"api_key_env": "SCRAPE_KEY"}}}, environ={})
    with pytest.raises(ConfigError, match=r"gateway\.metrics\.path"):
        GatewayConfig.from_dict({"gateway": {"metrics": {"path": "/m"}}}, environ={})
