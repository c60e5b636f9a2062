"""The proxy a client metis makes sends each URL through (metis/transport/routes.py): the
environment read as httpx reads it, and among the mounts the one httpx's own client picks.
httpx's private helpers are the reference here, and only here."""

from __future__ import annotations

import httpx
import pytest
from httpx._utils import get_environment_proxies

from metis.errors import ConfigError
from metis.transport.proxy import client_proxy
from metis.transport.routes import Routes, environment_proxies, routes_of
from metis.transport.stage import http_client

pytestmark = pytest.mark.anyio

_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")

ENVIRONMENTS: list[dict[str, str]] = [
    {},
    {"HTTP_PROXY": "http://plain:3128"},
    {"HTTPS_PROXY": "secure:3128", "http_proxy": "http://lower:8080"},
    {"ALL_PROXY": "socks5://every:1080"},
    {"HTTPS_PROXY": "http://u:p%40ss@secure:3128", "NO_PROXY": "*"},
    {
        "HTTP_PROXY": "http://plain:3128",
        "HTTPS_PROXY": "http://secure:3128",
        "NO_PROXY": " example.com, .internal.test,,127.0.0.1,10.0.0.0/8,::1,localhost,"
        "http://exact.test:8080,LOCALHOST ",
    },
    {"ALL_PROXY": "http://every:3128", "no_proxy": "api.example.com"},
]

URLS = [
    "http://example.com/",
    "https://example.com/v1",
    "https://api.example.com/v1",
    "https://wwwexample.com/",
    "https://internal.test/",
    "https://a.internal.test/",
    "http://127.0.0.1:8000/",
    "http://10.1.2.3/",
    "http://[::1]:8080/",
    "http://localhost/",
    "http://exact.test:8080/",
    "http://exact.test:8081/",
    "https://exact.test:8080/",
    "https://api.anthropic.com/v1/messages",
]


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _NAMES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


@pytest.mark.parametrize("variables", ENVIRONMENTS)
def test_the_environment_is_read_as_httpx_reads_it(
    environment: pytest.MonkeyPatch, variables: dict[str, str]
) -> None:
    for name, value in variables.items():
        environment.setenv(name, value)
    assert environment_proxies() == get_environment_proxies()


@pytest.mark.parametrize("variables", ENVIRONMENTS)
async def test_each_url_goes_where_httpxs_own_client_sends_it(
    environment: pytest.MonkeyPatch, variables: dict[str, str]
) -> None:
    for name, value in variables.items():
        environment.setenv(name, value)
    own = httpx.AsyncHTTPTransport()
    proxies = environment_proxies()
    mounts = {
        key: None if url is None else httpx.AsyncHTTPTransport() for key, url in proxies.items()
    }
    routes = Routes(own, mounts, proxies)
    async with httpx.AsyncClient(transport=own, mounts=mounts) as client:
        for url in URLS:
            assert routes.transport_for(httpx.URL(url)) is client._transport_for_url(httpx.URL(url))


def test_more_specific_patterns_win_as_in_httpx() -> None:
    own, a, b, c = object(), object(), object(), object()
    mounts = {"all://": a, "https://": b, "all://*example.com": c, "all://api.example.com": None}
    routes = Routes(own, mounts)
    assert routes.transport_for(httpx.URL("http://other.test/")) is a
    assert routes.transport_for(httpx.URL("https://other.test/")) is b
    assert routes.transport_for(httpx.URL("https://www.example.com/")) is c
    assert routes.transport_for(httpx.URL("https://api.example.com/")) is own
    assert routes.transports() == [own, c, b, a]
    with pytest.raises(ValueError, match="URL pattern"):
        Routes(own, {"https": a})


@pytest.mark.parametrize("lean", [True, False])
async def test_the_client_metis_makes_routes_as_its_mounts_do(
    environment: pytest.MonkeyPatch, lean: bool
) -> None:
    environment.setenv("HTTPS_PROXY", "http://u:p%40ss@secure:3128")
    environment.setenv("NO_PROXY", "internal.test")
    async with http_client(30.0, lean=lean) as client:
        routes = routes_of(client)
        assert routes is not None
        for url in URLS:
            assert routes.transport_for(httpx.URL(url)) is client._transport_for_url(httpx.URL(url))
        proxied = routes.transport_for(httpx.URL("https://api.anthropic.com/"))
        assert isinstance(proxied, httpx.AsyncHTTPTransport)
        assert proxied is not routes.transport
        assert routes.transport_for(httpx.URL("https://a.internal.test/")) is routes.transport
        assert client_proxy(client, "wss://api.openai.com/v1") == "http://u:p%40ss@secure:3128"
        assert client_proxy(client, "wss://a.internal.test/v1") == ""
        assert client_proxy(client, "ws://api.openai.com/v1") == ""


async def test_no_proxy_star_or_no_proxies_mount_nothing(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("HTTP_PROXY", "http://plain:3128")
    environment.setenv("NO_PROXY", "a.test,*")
    async with http_client(30.0) as client:
        routes = routes_of(client)
        assert routes is not None
        assert routes.transports() == [routes.transport]


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [("HTTPS_PROXY", "ftp://proxy.example:21", "ftp"), ("NO_PROXY", "http://[::1", "::1")],
)
async def test_a_proxy_setting_that_cannot_be_used_is_a_config_error_naming_it(
    environment: pytest.MonkeyPatch, name: str, value: str, named: str
) -> None:
    environment.setenv(name, value)
    with pytest.raises(ConfigError) as raised:
        http_client()
    assert "HTTPS_PROXY" in str(raised.value) and "NO_PROXY" in str(raised.value)
    assert named in str(raised.value)
