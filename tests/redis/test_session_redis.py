"""RedisToolIdStore against real redis-servers started on loopback by the tests: the map, its
time to live, pools and event loops, passwords and TLS, Sentinel, servers that are down, not
Redis, killed and restarted, and a reply recorded while the server dies.

Skipped when redis-server is not on PATH; ``METIS_REDIS_URL`` points the plain-server tests at
a running server instead.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

coredis = pytest.importorskip("coredis")

from metis import AdapterConfig, build_adapter  # noqa: E402
from metis.core.ids import derive_provider_tool_id  # noqa: E402
from metis.errors import NetworkError, ProtocolError  # noqa: E402
from metis.model import (  # noqa: E402
    CanonicalRequest,
    Message,
    MessageComplete,
    MessageStart,
    StopKind,
    StopReason,
    TextDelta,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseStart,
)
from metis.redis.target import CLIENT_NAME  # noqa: E402
from metis.redis.tool_ids import RedisError, RedisToolIdStore  # noqa: E402
from metis.stages.policy.tool_ids import ToolIds  # noqa: E402
from metis.telemetry import ListSink  # noqa: E402
from metis.testing.emulator import Emulator, text, tools  # noqa: E402

from ..helpers import bound, drive, make_call  # noqa: E402
from ..redis_servers import (  # noqa: E402
    RedisFactory,
    RedisProcess,
    free_port,
    make_certificates,
)


@pytest.fixture(scope="module")  # its servers stop when the module ends, not the run
def servers() -> Iterator[RedisFactory]:
    factory = RedisFactory()
    yield factory
    factory.close()


@dataclass
class Server:
    url: str
    unix_url: str | None = None  # only for a server these tests started


@pytest.fixture(scope="module")
def redis_server(servers: RedisFactory) -> Server:
    if url := os.environ.get("METIS_REDIS_URL"):
        return Server(url)
    sock = Path(tempfile.gettempdir()) / f"metis-redis-{uuid.uuid4().hex[:12]}.sock"
    process = servers.server("--unixsocket", str(sock), "--unixsocketperm", "700")
    return Server(f"redis://127.0.0.1:{process.port}/0", f"unix://{sock}")


PASSWORD = "correct horse/battery#staple?"
HANG = 60.0
"""Seconds a test waits before it calls a store call hung: a bound, never a timing."""
NEVER = 3600.0
"""A store timeout that is not the reason a call ended: the bound on a hang comes first."""


@pytest.fixture(scope="module")
def redis_auth_port(servers: RedisFactory) -> int:
    """A server that wants a password (an ACL user ``app`` is added by the test that needs it)."""
    process = servers.server("--requirepass", PASSWORD)
    return process.port


async def _add_acl_user(port: int) -> None:
    async with coredis.Redis("127.0.0.1", port, password=PASSWORD) as client:
        await client.acl_setuser("app", "on", f">{PASSWORD}-app", "~*", "+@all")


@pytest.fixture
def prefix() -> str:
    """Keys of their own for each test, so a shared METIS_REDIS_URL server is safe to use."""
    return f"metis-test:{uuid.uuid4().hex}:"


@pytest.fixture
async def store(redis_server: Server, prefix: str) -> AsyncIterator[RedisToolIdStore]:
    async with RedisToolIdStore(redis_server.url, key_prefix=prefix, ttl_seconds=600) as s:
        yield s


async def _ttl(store: RedisToolIdStore, session_id: str) -> int:
    async with store.client() as client:
        return int(await client.ttl(store.session_key(session_id)))


# The map ------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_remembered_pairs_come_back(store: RedisToolIdStore) -> None:
    await store.remember("s", "anthropic", {"tu_1": "toolu_1", "tu_2": "toolu_2"})
    await store.remember("s", "anthropic", {"tu_3": "toolu_3"})
    got = await store.provider_ids("s", "anthropic", iter(["tu_1", "tu_3", "tu_unknown", "tu_1"]))
    assert got == {"tu_1": "toolu_1", "tu_3": "toolu_3"}
    await store.remember("s", "anthropic", {"tu_1": "toolu_1b"})  # the latest pair wins
    assert await store.provider_ids("s", "anthropic", ["tu_1"]) == {"tu_1": "toolu_1b"}


@pytest.mark.anyio
async def test_providers_and_sessions_have_their_own_maps(store: RedisToolIdStore) -> None:
    await store.remember("s", "anthropic", {"tu_1": "toolu_1"})
    await store.remember("s", "openai", {"tu_1": "call_1", "tu_2": "call_2"})
    await store.remember("t", "openai", {"tu_1": "call_t"})
    await store.remember("s:openai", "x", {"tu_1": "colliding?"})
    await store.remember("s", "open:ai", {"tu_1": "colliding?"})
    assert await store.provider_ids("s", "anthropic", ["tu_1", "tu_2"]) == {"tu_1": "toolu_1"}
    assert await store.provider_ids("s", "openai", ["tu_1", "tu_2"]) == {
        "tu_1": "call_1",
        "tu_2": "call_2",
    }
    assert await store.provider_ids("t", "openai", ["tu_1", "tu_2"]) == {"tu_1": "call_t"}
    assert await store.provider_ids("t", "anthropic", ["tu_1"]) == {}
    assert await store.provider_ids("u", "openai", ["tu_1"]) == {}


@pytest.mark.anyio
async def test_writes_and_reads_refresh_the_time_to_live(store: RedisToolIdStore) -> None:
    await store.remember("s", "openai", {"tu_1": "call_1"})
    assert 590 <= await _ttl(store, "s") <= 600
    async with store.client() as client:
        assert await client.expire(store.session_key("s"), 10)
    await store.remember("s", "openai", {"tu_2": "call_2"})
    assert 590 <= await _ttl(store, "s") <= 600
    async with store.client() as client:
        assert await client.expire(store.session_key("s"), 10)
    assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
    assert 590 <= await _ttl(store, "s") <= 600  # a read keeps a session in use alive
    assert await store.provider_ids("nobody", "openai", ["tu_1"]) == {}
    assert await _ttl(store, "nobody") == -2  # and creates nothing


@pytest.mark.anyio
async def test_without_a_ttl_nothing_expires(redis_server: Server, prefix: str) -> None:
    async with RedisToolIdStore(redis_server.url, key_prefix=prefix, ttl_seconds=None) as store:
        await store.remember("s", "openai", {"tu_1": "call_1"})
        assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
        assert await _ttl(store, "s") == -1
        await store.forget("s")


@pytest.mark.anyio
async def test_forget_removes_the_whole_session_in_one_command(
    store: RedisToolIdStore, redis_server: Server
) -> None:
    if os.environ.get("METIS_REDIS_URL"):
        pytest.skip("counts the server's commands: needs a server of its own")
    for provider in ("anthropic", "openai", "odd:name%"):
        await store.remember("s", provider, {"tu_1": f"{provider}_1"})
    await store.remember("other", "openai", {"tu_1": "call_other"})
    async with store.client() as client:
        await client.config_resetstat()
        await store.forget("s")
        stats = await client.info("commandstats")
    assert {name for name in stats if name.startswith("cmdstat_")} - {
        "cmdstat_config|resetstat"
    } == {"cmdstat_del"}  # one DEL: nothing can slip in between
    for provider in ("anthropic", "openai", "odd:name%"):
        assert await store.provider_ids("s", provider, ["tu_1"]) == {}
    assert await _ttl(store, "s") == -2
    assert await store.provider_ids("other", "openai", ["tu_1"]) == {"tu_1": "call_other"}
    await store.forget("s")  # forgetting twice, or a session never seen, is fine
    await store.forget("never")


@pytest.mark.anyio
async def test_two_workers_share_the_map(redis_server: Server, prefix: str) -> None:
    async with (
        RedisToolIdStore(redis_server.url, key_prefix=prefix) as worker_a,
        RedisToolIdStore(redis_server.url, key_prefix=prefix) as worker_b,
    ):
        await worker_a.remember("s", "openai", {"tu_1": "call_1"})
        assert await worker_b.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
        await worker_b.remember("s", "anthropic", {"tu_2": "toolu_2"})
        await worker_a.forget("s")
        assert await worker_b.provider_ids("s", "openai", ["tu_1"]) == {}
        assert await worker_b.provider_ids("s", "anthropic", ["tu_2"]) == {}


@pytest.mark.anyio
async def test_ids_that_are_not_utf8_are_a_protocol_error(store: RedisToolIdStore) -> None:
    async with store.client() as client:
        await client.hset(store.session_key("s"), {store.field("openai", "tu_1"): b"\xff\xfe"})
    with pytest.raises(ProtocolError, match="not UTF-8"):
        await store.provider_ids("s", "openai", ["tu_1"])
    with pytest.raises(ProtocolError, match="not UTF-8"):
        await store.remember("s", "openai", {"tu_2": "\udcff"})  # a lone surrogate


@pytest.mark.anyio
async def test_an_error_reply_is_a_redis_error(store: RedisToolIdStore) -> None:
    async with store.client() as client:
        await client.set(store.session_key("s"), "not a hash")
    with pytest.raises(RedisError, match="WRONGTYPE") as caught:
        await store.remember("s", "openai", {"tu_1": "call_1"})
    assert caught.value.code == "WRONGTYPE" and not caught.value.retryable
    with pytest.raises(RedisError, match="WRONGTYPE"):
        await store.provider_ids("s", "openai", ["tu_1"])
    await store.forget("s")
    await store.remember("s", "openai", {"tu_1": "call_1"})  # the store is still fine
    assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}


# Pools and event loops ---------------------------------------------------------------------------


async def _connections(url: str) -> int:
    async with RedisToolIdStore(url) as probe, probe.client() as client:
        clients = await client.client_list()
    return sum(1 for c in clients if c.get("name") == CLIENT_NAME) - 1  # less the probe's own


@pytest.mark.anyio
async def test_many_concurrent_calls_share_a_small_pool(redis_server: Server, prefix: str) -> None:
    results: dict[int, dict[str, str]] = {}

    async def one(i: int) -> None:
        session = f"s{i % 5}"
        await shared.remember(session, "openai", {f"tu_{i}": f"call_{i}"})
        results[i] = await shared.provider_ids(session, "openai", [f"tu_{i}", "tu_missing"])

    async with RedisToolIdStore(redis_server.url, key_prefix=prefix, max_connections=3) as shared:
        async with anyio.create_task_group() as tg:
            for i in range(12):  # four calls a connection
                tg.start_soon(one, i)
        assert results == {i: {f"tu_{i}": f"call_{i}"} for i in range(12)}
        if not os.environ.get("METIS_REDIS_URL"):
            assert 1 <= await _connections(redis_server.url) <= 3
        everything = await shared.provider_ids("s3", "openai", [f"tu_{i}" for i in range(12)])
        assert everything == {f"tu_{i}": f"call_{i}" for i in range(3, 12, 5)}
    if not os.environ.get("METIS_REDIS_URL"):
        assert await _connections(redis_server.url) == 0  # leaving the block closed them


def test_one_store_serves_successive_event_loops(redis_server: Server, prefix: str) -> None:
    """A worker that runs each job in its own ``anyio.run``, entering the store or not."""
    store = RedisToolIdStore(redis_server.url, key_prefix=prefix)

    async def job(n: int, enter: bool) -> dict[str, str]:
        if enter:
            async with store:
                await store.remember("s", "openai", {f"tu_{n}": f"call_{n}"})
                return await store.provider_ids("s", "openai", [f"tu_{i}" for i in range(n + 1)])
        await store.remember("s", "openai", {f"tu_{n}": f"call_{n}"})
        return await store.provider_ids("s", "openai", [f"tu_{i}" for i in range(n + 1)])

    jobs = [("asyncio", True), ("trio", True), ("asyncio", False), ("trio", False)] * 2
    for n, (backend, enter) in enumerate(jobs):
        got = anyio.run(job, n, enter, backend=backend)
        assert got == {f"tu_{i}": f"call_{i}" for i in range(n + 1)}, (n, backend, enter)


@pytest.mark.anyio
async def test_a_unix_socket_and_a_database_number(redis_server: Server, prefix: str) -> None:
    if redis_server.unix_url is None:
        pytest.skip("the unix socket test needs a server these tests start (METIS_REDIS_URL set)")
    async with (
        RedisToolIdStore(redis_server.unix_url + "?db=3", key_prefix=prefix) as db3,
        RedisToolIdStore(redis_server.url, key_prefix=prefix) as db0,
    ):
        await db3.remember("s", "openai", {"tu_1": "call_1"})
        assert await db3.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
        assert await db0.provider_ids("s", "openai", ["tu_1"]) == {}
        await db3.forget("s")


# Passwords and TLS --------------------------------------------------------------------------------


def _url(port: int, user: str = "", password: str = PASSWORD, scheme: str = "redis") -> str:
    return f"{scheme}://{user}:{password}@127.0.0.1:{port}/1"  # the password as it is: unescaped


@pytest.mark.anyio
@pytest.mark.parametrize("user", ["", "default", "app"])
async def test_the_right_password_is_let_in(redis_auth_port: int, prefix: str, user: str) -> None:
    if user == "app":
        await _add_acl_user(redis_auth_port)
    password = PASSWORD + "-app" if user == "app" else PASSWORD
    async with RedisToolIdStore(_url(redis_auth_port, user, password), key_prefix=prefix) as store:
        await store.remember("s", "openai", {"tu_1": "call_1"})
        assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
        assert PASSWORD not in repr(store)


@pytest.mark.anyio
@pytest.mark.parametrize("user", ["", "app", "nobody"])
async def test_a_wrong_password_is_a_clear_error(redis_auth_port: int, user: str) -> None:
    store = RedisToolIdStore(_url(redis_auth_port, user, "guess/again#1"))
    with pytest.raises(RedisError, match="refused the credentials") as caught:
        await store.provider_ids("s", "openai", ["tu_1"])
    assert caught.value.code == "WRONGPASS"
    assert f"127.0.0.1:{redis_auth_port}" in str(caught.value)
    assert "guess" not in str(caught.value) and "guess" not in repr(caught.value)


@pytest.mark.anyio
async def test_no_password_is_a_clear_error(redis_auth_port: int) -> None:
    store = RedisToolIdStore(f"redis://127.0.0.1:{redis_auth_port}")
    with pytest.raises(RedisError, match="needs a password") as caught:
        await store.remember("s", "openai", {"tu_1": "call_1"})
    assert caught.value.code == "NOAUTH"


@pytest.fixture(scope="module")
def tls_server(
    servers: RedisFactory, tmp_path_factory: pytest.TempPathFactory
) -> tuple[RedisProcess, ssl.SSLContext]:
    certificates = make_certificates(tmp_path_factory.mktemp("tls"))
    port = free_port()
    process = servers.server(
        "--port", "0", "--tls-port", str(port), "--tls-cert-file", str(certificates.cert),
        "--tls-key-file", str(certificates.key), "--tls-ca-cert-file", str(certificates.ca),
        "--tls-auth-clients", "no", "--requirepass", PASSWORD, port=port,
    )  # fmt: skip
    return process, ssl.create_default_context(cafile=str(certificates.ca))


@pytest.mark.slow
@pytest.mark.anyio
async def test_tls_with_a_password(
    tls_server: tuple[RedisProcess, ssl.SSLContext], prefix: str
) -> None:
    process, trusting = tls_server
    url = _url(process.port, scheme="rediss")
    async with RedisToolIdStore(url, key_prefix=prefix, ssl_context=trusting) as store:
        await store.remember("s", "openai", {"tu_1": "call_1"})
        assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
    # the system's CAs do not know the test's CA: refused, and said so without the password
    with pytest.raises(NetworkError) as caught:
        await RedisToolIdStore(url, timeout=2).provider_ids("s", "openai", ["tu_1"])
    assert "horse" not in str(caught.value)
    # plain text to a TLS port is no Redis conversation
    with pytest.raises((NetworkError, ProtocolError)):
        await RedisToolIdStore(_url(process.port), timeout=2).provider_ids("s", "openai", ["t"])


# Sentinel -----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_store_on_the_primary_a_sentinel_names(
    servers: RedisFactory, redis_server: Server, prefix: str
) -> None:
    if os.environ.get("METIS_REDIS_URL"):
        pytest.skip("the Sentinel test watches a server these tests start")
    primary_port = int(redis_server.url.rsplit(":", 1)[1].split("/")[0])
    sentinel = servers.server(
        sentinel=f"sentinel monitor metis-primary 127.0.0.1 {primary_port} 1\n"
    )
    store = RedisToolIdStore.sentinel(
        [f"127.0.0.1:{sentinel.port}"], "metis-primary", key_prefix=prefix, timeout=3
    )
    async with store:
        await store.remember("s", "openai", {"tu_1": "call_1"})
        assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
    async with RedisToolIdStore(redis_server.url, key_prefix=prefix) as direct:
        assert await direct.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
    unknown = RedisToolIdStore.sentinel([f"127.0.0.1:{sentinel.port}"], "nobody", timeout=2)
    with pytest.raises(
        (NetworkError, RedisError), match=f"sentinel nobody@127.0.0.1:{sentinel.port}"
    ):
        await unknown.provider_ids("s", "openai", ["tu_1"])


# Cluster ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster_ports(servers: RedisFactory) -> list[int]:
    """Three primaries on loopback, the slots spread over them by ``redis-cli --cluster``."""
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.skip("redis-cli is not on PATH: no cluster to create")
    nodes = [
        servers.server(
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-port", str(free_port()),  # the default, port + 10000, may not exist
        )
        for _ in range(3)
    ]  # fmt: skip
    addresses = [f"127.0.0.1:{node.port}" for node in nodes]
    subprocess.run(
        [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    deadline = time.monotonic() + 30
    while True:  # every node agrees the cluster is up and knows all three
        infos = [
            subprocess.run(
                [cli, "-p", str(node.port), "cluster", "info"], capture_output=True, text=True
            ).stdout
            for node in nodes
        ]
        if all("cluster_state:ok" in i and "cluster_known_nodes:3" in i for i in infos):
            return [node.port for node in nodes]
        if time.monotonic() > deadline:
            pytest.fail("the cluster did not come up:\n" + "\n".join(infos))
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_store_on_a_cluster(cluster_ports: list[int], prefix: str) -> None:
    store = RedisToolIdStore.cluster([f"127.0.0.1:{cluster_ports[1]}"], key_prefix=prefix)
    sessions = [f"s{i}" for i in range(30)]
    async with store:
        for n, session in enumerate(sessions):
            await store.remember(session, "openai", {"tu_1": f"call_{n}", "tu_2": "call_x"})
        for n, session in enumerate(sessions):
            got = await store.provider_ids(session, "openai", ["tu_1", "tu_3"])
            assert got == {"tu_1": f"call_{n}"}
        await store.forget("s1")
        assert await store.provider_ids("s1", "openai", ["tu_1"]) == {}
    # the sessions are spread over every primary, each session whole on one of them
    for port in cluster_ports:
        async with coredis.Redis("127.0.0.1", port) as node:
            assert await node.dbsize() > 0
    assert await store.provider_ids("s2", "openai", ["tu_2"]) == {"tu_2": "call_x"}  # unentered


# Servers that are down, not Redis, killed and restarted ------------------------------------------


@pytest.mark.anyio
async def test_a_server_that_is_down_is_a_network_error() -> None:
    port = free_port()  # nothing listens here
    store = RedisToolIdStore(f"redis://127.0.0.1:{port}", timeout=NEVER)
    with anyio.fail_after(HANG), pytest.raises(NetworkError, match=f"127.0.0.1:{port}") as caught:
        await store.provider_ids("s", "openai", ["tu_1"])  # refused: long before the timeout
    assert caught.value.retryable
    with pytest.raises(NetworkError, match=f"127.0.0.1:{port}"):
        async with store:
            await store.remember("s", "openai", {"tu_1": "call_1"})


@asynccontextmanager
async def _serve(handler: Any) -> AsyncIterator[int]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handler)
        try:
            yield port
        finally:
            tg.cancel_scope.cancel()
    await listener.aclose()


async def _silent(stream: anyio.abc.SocketStream) -> None:
    async with stream:
        await anyio.sleep_forever()


async def _http(stream: anyio.abc.SocketStream) -> None:
    async with stream:
        await stream.receive()
        await stream.send(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        await anyio.sleep_forever()


HELLO = (
    b"%7\r\n+server\r\n+redis\r\n+version\r\n+7.0.15\r\n+proto\r\n:3\r\n+id\r\n:1\r\n"
    b"+mode\r\n+standalone\r\n+role\r\n+master\r\n+modules\r\n*0\r\n"
)


async def _malformed(stream: anyio.abc.SocketStream) -> None:
    """Redis until the transaction: then an EXEC reply whose HMGET result is a number."""
    async with stream:
        while data := await _receive(stream):
            answers = []
            for command in data.split(b"*")[1:]:
                name = command.split(b"\r\n")[2].upper() if command.count(b"\r\n") > 2 else b""
                if name == b"HELLO":
                    answers.append(HELLO)
                elif name in (b"HMGET", b"EXPIRE"):
                    answers.append(b"+QUEUED\r\n")
                elif name == b"EXEC":
                    answers.append(b"*2\r\n:7\r\n:1\r\n")
                elif name:
                    answers.append(b"+OK\r\n")
            await stream.send(b"".join(answers))


async def _receive(stream: anyio.abc.SocketStream) -> bytes:
    try:
        return await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        return b""


@pytest.mark.anyio
async def test_a_server_that_does_not_answer_times_out() -> None:
    async with _serve(_silent) as port:
        store = RedisToolIdStore(f"redis://127.0.0.1:{port}", timeout=0.1)  # it never answers
        with (
            anyio.fail_after(HANG),
            pytest.raises(NetworkError, match=rf"127.0.0.1:{port}.*timed out after 0\.1s"),
        ):
            await store.remember("s", "openai", {"tu_1": "call_1"})


@pytest.mark.anyio
async def test_a_server_that_is_not_redis_is_a_protocol_error() -> None:
    async with _serve(_http) as port:
        store = RedisToolIdStore(f"redis://127.0.0.1:{port}", timeout=2)
        with pytest.raises(ProtocolError, match=f"127.0.0.1:{port}"):
            await store.provider_ids("s", "openai", ["tu_1"])


@pytest.mark.anyio
async def test_a_malformed_reply_is_a_protocol_error() -> None:
    async with _serve(_malformed) as port:
        store = RedisToolIdStore(f"redis://127.0.0.1:{port}", timeout=2)
        with pytest.raises(ProtocolError, match=f"127.0.0.1:{port}"):
            await store.provider_ids("s", "openai", ["tu_1", "tu_2"])


@pytest.fixture
def own_server(servers: RedisFactory) -> RedisProcess:
    """A server of this test's own, to kill."""
    return servers.server()


@pytest.mark.anyio
async def test_a_server_killed_and_restarted_mid_session(own_server: RedisProcess) -> None:
    # the restarted server answers a loaded machine late: its timeout is a bound on a hang
    async with RedisToolIdStore(f"redis://127.0.0.1:{own_server.port}", timeout=NEVER) as store:
        await store.remember("s", "openai", {"tu_1": "call_1"})
        own_server.kill()
        with anyio.fail_after(HANG):  # refused, long before the store's timeout
            with pytest.raises(NetworkError, match=f"127.0.0.1:{own_server.port}"):
                await store.provider_ids("s", "openai", ["tu_1"])
            with pytest.raises(NetworkError):
                await store.remember("s", "openai", {"tu_2": "call_2"})
        own_server.start()  # empty: it kept nothing
        with anyio.fail_after(HANG):
            assert await store.provider_ids("s", "openai", ["tu_1"]) == {}
            await store.remember("s", "openai", {"tu_2": "call_2"})
            assert await store.provider_ids("s", "openai", ["tu_2"]) == {"tu_2": "call_2"}


# The store behind the ToolIds stage ---------------------------------------------------------------


def _reply_calling(pid: str) -> list[Any]:
    return [
        MessageStart("msg_1", "claude-x"),
        ToolUseStart(0, pid, "weather"),
        ToolUseEnd(0, pid, "weather", {}),
        MessageComplete(
            [ToolUseBlock(id=pid, name="weather", input={})],
            StopReason(kind=StopKind.TOOL_USE),
            TokenUsage(),
            "msg_1",
        ),
    ]


def _request(*messages: Message) -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-x", messages=list(messages), max_output_tokens=100
    )


@pytest.mark.anyio
async def test_the_tool_ids_stage_round_trips_across_workers(
    redis_server: Server, prefix: str
) -> None:
    async with (
        RedisToolIdStore(redis_server.url, key_prefix=prefix) as worker_a,
        RedisToolIdStore(redis_server.url, key_prefix=prefix) as worker_b,
    ):
        on_a = bound(ToolIds(prefix="toolu_"), store=worker_a)
        on_b = bound(ToolIds(prefix="toolu_"), store=worker_b)
        # turn 1, on worker A: the provider issues toolu_X, the application sees a canonical id
        _, out = await drive(
            on_a,
            _request(Message.user("weather?")),
            make_call(session_id="conv-1"),
            _reply_calling("toolu_X"),
        )
        [complete] = [e for e in out if isinstance(e, MessageComplete)]
        [cid] = [b.id for b in complete.final_content if isinstance(b, ToolUseBlock)]
        assert cid.startswith("tu_")
        assert {e.tool_use_id for e in out if isinstance(e, ToolUseStart | ToolUseEnd)} == {cid}

        # turn 2, on worker B: the provider sees its own id again
        history = _request(
            Message.user("weather?"),
            Message.assistant(ToolUseBlock(id=cid, name="weather", input={})),
            Message.tool(ToolResultBlock(tool_use_id=cid, content="rain")),
        )
        seen, _ = await drive(on_b, history, make_call(session_id="conv-1"))
        blocks = [b for m in seen[0].messages for b in m.content]
        assert [b.id for b in blocks if isinstance(b, ToolUseBlock)] == ["toolu_X"]
        assert [b.tool_use_id for b in blocks if isinstance(b, ToolResultBlock)] == ["toolu_X"]

        # another session on worker B does not know it
        seen, _ = await drive(on_b, history, make_call(session_id="conv-2"))
        blocks = [b for m in seen[0].messages for b in m.content]
        assert [b.id for b in blocks if isinstance(b, ToolUseBlock)] == ["toolu_" + cid[3:]]


# A reply recorded while the server dies -----------------------------------------------------------


class _DyingStore(httpx.AsyncBaseTransport):
    """The emulator's streamed reply, with the Redis server killed just before the message
    ends (when the tool_ids stage records the reply's ids)."""

    def __init__(self, emulator: Emulator, server: RedisProcess) -> None:
        self.inner, self.server = emulator.transport(), server

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if not json.loads(request.content).get("stream"):
            return response
        head, tail = (await response.aread()).decode().split("event: message_delta", 1)

        async def chunks() -> AsyncIterator[bytes]:
            yield head.encode()
            self.server.kill()
            yield ("event: message_delta" + tail).encode()

        return httpx.Response(200, headers=response.headers, content=chunks())


def _store_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "metis.tool_id_store_failed"]


@pytest.mark.anyio
async def test_a_reply_recorded_while_the_server_dies_reaches_the_caller_whole(
    own_server: RedisProcess, caplog: pytest.LogCaptureFixture
) -> None:
    script = [tools(("weather", {"city": "Oslo"}), say="checking"), text("rain, 4 C")]
    emulator = Emulator(model=script, models="any")
    http = httpx.AsyncClient(transport=_DyingStore(emulator, own_server))
    sink = ListSink()
    store = RedisToolIdStore(f"redis://127.0.0.1:{own_server.port}", timeout=2)
    adapter = build_adapter(
        "anthropic",
        AdapterConfig(api_key="k", max_retries=0, http_client=http),
        tool_id_store=store,
        telemetry=sink,
    )
    first = CanonicalRequest(
        model="anthropic:claude-x",
        messages=[Message.user("weather in Oslo?")],
        max_output_tokens=100,
        session_id="conv-1",
    )
    async with store:
        await store.remember("warm-up", "anthropic", {"tu_0": "toolu_0"})  # a pooled connection
        with caplog.at_level(logging.WARNING, logger="metis"):
            events = [event async for event in adapter.stream(first)]
    # every event, the message complete at the end, its tool call with a canonical id
    complete = events[-1]
    assert isinstance(complete, MessageComplete)
    assert complete.stop_reason.kind is StopKind.TOOL_USE
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "checking"
    [call] = [b for b in complete.final_content if isinstance(b, ToolUseBlock)]
    assert call.id.startswith("tu_") and call.input == {"city": "Oslo"}
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "MessageStart" and kinds.count("MessageComplete") == 1
    assert kinds.index("ToolUseStart") < kinds.index("ToolUseEnd") < kinds.index("MessageComplete")
    tool_events = [e for e in events if isinstance(e, ToolUseStart | ToolUseEnd)]
    assert {e.tool_use_id for e in tool_events} == {call.id}
    # the failure: one WARN, one bus event, and the call itself reported as completed
    [warning] = [
        r for r in caplog.records if getattr(r, "event", None) == "metis.tool_id_store_failed"
    ]
    assert warning.operation == "write" and warning.error_class == "network"  # type: ignore[attr-defined]
    assert f"127.0.0.1:{own_server.port}" in warning.getMessage()
    assert sink.names() == ["llm.call_started", "metis.tool_id_store_failed", "llm.call_completed"]

    # the next turn, the server still down: derived ids, the answer, one more WARN (the read)
    second = first.model_copy(
        update={
            "messages": [
                *first.messages,
                Message(role="assistant", content=complete.final_content),
                Message.tool(ToolResultBlock(tool_use_id=call.id, content="rain, 4 C")),
            ]
        }
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="metis"):
        answer = await adapter.complete(second)
    assert answer.text == "rain, 4 C"
    derived = derive_provider_tool_id(call.id, "toolu_", 40)
    sent = emulator.bodies("anthropic")[1]["messages"]
    assert sent[1]["content"][-1]["id"] == derived
    assert sent[2]["content"][0]["tool_use_id"] == derived
    [warning] = [
        r for r in caplog.records if getattr(r, "event", None) == "metis.tool_id_store_failed"
    ]
    assert warning.operation == "read"  # type: ignore[attr-defined]

    # and once the server is back, the store works again
    own_server.start()
    await store.remember("conv-1", "anthropic", {call.id: derived})
    assert await store.provider_ids("conv-1", "anthropic", [call.id]) == {call.id: derived}
    await http.aclose()


@pytest.mark.anyio
async def test_store_calls_end_at_the_calls_deadline_and_on_cancel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = _request(
        Message.user("weather?"),
        Message.assistant(ToolUseBlock(id="tu_01ABCDEFGHJKMNPQRSTVWXYZ01", name="w", input={})),
        Message.tool(ToolResultBlock(tool_use_id="tu_01ABCDEFGHJKMNPQRSTVWXYZ01", content="-")),
    )
    async with _serve(_silent) as port:
        store = RedisToolIdStore(f"redis://127.0.0.1:{port}", timeout=NEVER)
        stage = bound(ToolIds(prefix="toolu_"), store=store)
        # the deadline: both store calls (read, then write) give up by it, not by the store's
        # timeout (which the bound on a hang comes long before)
        call = make_call(deadline=anyio.current_time() + 0.1)
        with caplog.at_level(logging.WARNING, logger="metis"), anyio.fail_after(HANG):
            seen, out = await drive(stage, history, call, _reply_calling("toolu_Y"))
        assert isinstance(out[-1], MessageComplete) and len(seen) == 1
        assert [r.operation for r in _store_warnings(caplog)] == ["read", "write"]  # type: ignore[attr-defined]

        # a cancel: the read gives up at once, quietly
        call = make_call()
        caplog.clear()
        with anyio.fail_after(HANG):  # at once, not after the store's timeout
            async with anyio.create_task_group() as tg:
                tg.start_soon(drive, stage, history, call)
                await anyio.sleep(0.2)
                call.cancel.cancel()
        assert _store_warnings(caplog) == []


@pytest.mark.anyio
async def test_tasks_entering_the_store_share_the_pool_its_opener_closes(
    redis_server: Server, prefix: str
) -> None:
    store = RedisToolIdStore(redis_server.url, key_prefix=prefix)
    opened, done = anyio.Event(), anyio.Event()

    async def opener() -> None:
        async with store, store:  # nested in one task: the outer block closes
            opened.set()
            await done.wait()

    async def user(n: int) -> None:
        await opened.wait()
        async with store:  # joins the open pool; leaving does not close it
            await store.remember("s", "openai", {f"tu_{n}": f"call_{n}"})
        assert await store.provider_ids("s", "openai", [f"tu_{n}"]) == {f"tu_{n}": f"call_{n}"}

    async with anyio.create_task_group() as tg:
        tg.start_soon(opener)
        async with anyio.create_task_group() as users:
            for n in range(5):
                users.start_soon(user, n)
        if not os.environ.get("METIS_REDIS_URL"):
            assert await _connections(redis_server.url) >= 1
        done.set()
    if not os.environ.get("METIS_REDIS_URL"):
        assert await _connections(redis_server.url) == 0
    assert len(await store.provider_ids("s", "openai", [f"tu_{n}" for n in range(5)])) == 5


@pytest.mark.anyio
async def test_a_command_cancelled_midway_leaves_nothing_behind(store: RedisToolIdStore) -> None:
    """What a deadline does to a store call: the pool's next call gets its own reply."""
    await store.remember("s", "openai", {"tu_1": "call_1"})
    queue = store.key_prefix + "queue"
    async with store.client() as client:
        with anyio.move_on_after(0.2) as scope:  # BLPOP waits on the server for 5 s
            await client.blpop([queue], timeout=5)
        assert scope.cancelled_caught
        await client.rpush(queue, ["late"])  # a BLPOP still waiting would take it
    assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
    async with store.client() as client:
        assert await client.lrange(queue, 0, -1) == [b"late"]
        await client.delete([queue])


@pytest.mark.anyio
async def test_a_cancel_while_connecting_stays_a_cancel() -> None:
    """coredis turns a cancel during its handshake into a ConnectionError; the store does not."""
    async with _serve(_silent) as port:
        store = RedisToolIdStore(f"redis://127.0.0.1:{port}", timeout=NEVER)
        with anyio.fail_after(HANG), anyio.move_on_after(0.1) as scope:  # never answered
            await store.provider_ids("s", "openai", ["tu_1"])
        assert scope.cancelled_caught
        store = RedisToolIdStore(f"redis://127.0.0.1:{port}", timeout=0.1)
        with pytest.raises(NetworkError, match=r"timed out after 0\.1s"):
            await store.provider_ids("s", "openai", ["tu_1"])


class _WatchedStore(RedisToolIdStore):
    """The Redis store, saying when a write begins."""

    writing: anyio.Event

    async def remember(self, session_id: str, provider: str, pairs: Any) -> None:
        self.writing.set()
        await super().remember(session_id, provider, pairs)


@pytest.mark.anyio
async def test_a_cancel_while_redis_holds_the_write_ends_the_stream_cancelled(
    own_server: RedisProcess,
) -> None:
    """docs/contract.md §1-2: cancel() is True only for a call it cancelled, and such a stream
    ends with message.complete, stop reason cancelled, its content kept."""
    script = [tools(("weather", {"city": "Oslo"}), say="checking")]
    provider = Emulator(model=script, models="any")
    url = f"redis://127.0.0.1:{own_server.port}"
    store = _WatchedStore(url, timeout=30)
    store.writing = anyio.Event()
    adapter = build_adapter(
        "anthropic",
        AdapterConfig(api_key="k", max_retries=0, http_client=provider.client()),
        tool_id_store=store,
    )
    request = CanonicalRequest(
        model="anthropic:claude-x",
        messages=[Message.user("weather in Oslo?")],
        max_output_tokens=100,
        session_id="conv-1",
    )
    events: list[Any] = []

    async def consume() -> None:
        events.extend([event async for event in adapter.stream(request)])

    admin = coredis.Redis.from_url(url)
    async with admin:
        await admin.client_pause(60_000, coredis.PureToken.WRITE)  # writes wait; reads do not
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(consume)
                await store.writing.wait()
                assert adapter.cancel(request.request_id) is True
        finally:
            await admin.client_unpause()
    complete = events[-1]
    assert isinstance(complete, MessageComplete)
    assert complete.stop_reason.kind is StopKind.CANCELLED
    [call] = [b for b in complete.final_content if isinstance(b, ToolUseBlock)]
    assert call.input == {"city": "Oslo"}
    assert adapter.cancel(request.request_id) is False  # over: nothing left to cancel
