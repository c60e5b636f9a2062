"""RedisToolIdStore: the RESP client on its own, then the store against a real redis-server.

The integration tests start their own ``redis-server`` on a free loopback port (skipped when it
is not on PATH), or use the server at ``METIS_REDIS_URL`` when that is set.
"""

from __future__ import annotations

import os
import shutil
import socket
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
import pytest

from metis.errors import ConfigError, NetworkError, ProtocolError
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    MessageStart,
    StopKind,
    StopReason,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseStart,
)
from metis.redis_client import (
    ErrorReply,
    RedisClient,
    RedisError,
    Reply,
    RespParser,
    encode_command,
)
from metis.session_redis import RedisToolIdStore
from metis.stages.tool_ids import ToolIds

from .helpers import drive, make_call

# The RESP encoder and parser -------------------------------------------------------------------


def test_commands_are_arrays_of_bulk_strings() -> None:
    assert encode_command("PING") == b"*1\r\n$4\r\nPING\r\n"
    assert encode_command("HSET", "k", b"a\r\nb", 42, -1) == (
        b"*5\r\n$4\r\nHSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n$2\r\n42\r\n$2\r\n-1\r\n"
    )
    assert encode_command("SET", "ключ", "") == b"*3\r\n$3\r\nSET\r\n$8\r\n" + "ключ".encode() + (
        b"\r\n$0\r\n\r\n"
    )
    for bad in (True, 1.5, None):
        with pytest.raises(TypeError):
            encode_command("SET", "k", bad)  # type: ignore[arg-type]


STREAM = (
    b"+OK\r\n"
    b"-ERR unknown command 'FOO'\r\n"
    b":42\r\n"
    b":-7\r\n"
    b"$5\r\nhello\r\n"
    b"$0\r\n\r\n"
    b"$-1\r\n"
    b"*-1\r\n"
    b"*0\r\n"
    b"$6\r\na\r\nb\r\n\r\n"  # CRLF inside a bulk string
    b"*3\r\n$1\r\na\r\n$-1\r\n:1\r\n"
    b"*2\r\n*1\r\n+x\r\n-WRONGTYPE Operation against a key\r\n"
    b"+\xd0\xbe\xd0\xba\r\n"
)
EXPECTED: list[Reply] = [
    "OK",
    ErrorReply("ERR unknown command 'FOO'"),
    42,
    -7,
    b"hello",
    b"",
    None,
    None,
    [],
    b"a\r\nb\r\n",
    [b"a", None, 1],
    [["x"], ErrorReply("WRONGTYPE Operation against a key")],
    "ок",
]


def _drain(parser: RespParser) -> list[Reply]:
    out: list[Reply] = []
    while True:
        complete, reply = parser.next_reply()
        if not complete:
            return out
        out.append(reply)


def _parse_in_pieces(*pieces: bytes) -> list[Reply]:
    parser = RespParser()
    out: list[Reply] = []
    for piece in pieces:
        parser.feed(piece)
        out += _drain(parser)
    assert parser.pending == 0
    return out


def test_the_parser_reads_every_reply_type() -> None:
    assert _parse_in_pieces(STREAM) == EXPECTED
    assert ErrorReply("WRONGPASS invalid username-password pair").code == "WRONGPASS"


def test_the_parser_handles_a_split_at_every_boundary() -> None:
    for i in range(len(STREAM) + 1):
        assert _parse_in_pieces(STREAM[:i], STREAM[i:]) == EXPECTED, i


def test_the_parser_handles_two_splits_at_every_pair_of_boundaries() -> None:
    n = len(STREAM)
    for i in range(n + 1):
        for j in range(i, n + 1):
            assert _parse_in_pieces(STREAM[:i], STREAM[i:j], STREAM[j:]) == EXPECTED, (i, j)


def test_the_parser_handles_one_byte_at_a_time() -> None:
    assert _parse_in_pieces(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


def test_an_incomplete_reply_waits_for_more_and_consumes_nothing() -> None:
    parser = RespParser()
    start = b"*2\r\n$3\r\nabc\r\n$2\r\nd"
    parser.feed(start)
    assert parser.next_reply() == (False, None)
    assert parser.pending == len(start)
    parser.feed(b"e\r\n:5")
    assert parser.next_reply() == (True, [b"abc", b"de"])
    assert parser.next_reply() == (False, None)
    parser.feed(b"\r\n")
    assert parser.next_reply() == (True, 5)


@pytest.mark.parametrize(
    "data",
    [
        b"?what\r\n",
        b":1_0\r\n",
        b": 1\r\n",
        b":+1\r\n",
        b":\r\n",
        b"$abc\r\n",
        b"$-2\r\n",
        b"$3\r\nabcd\r\n",
        b"*-3\r\n",
        b"*1\r\n" * 20 + b":1\r\n",
        b"+" + b"x" * (64 * 1024 + 10),
        b"$999999999999\r\n",
    ],
)
def test_the_parser_refuses_what_is_not_resp(data: bytes) -> None:
    parser = RespParser()
    parser.feed(data)
    with pytest.raises(ProtocolError):
        parser.next_reply()


# Urls --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown", "where"),
    [
        ("redis://localhost", "redis://localhost:6379/0", "localhost:6379"),
        ("redis://h:6380/2", "redis://h:6380/2", "h:6380"),
        ("redis://h?db=4", "redis://h:6379/4", "h:6379"),
        ("redis://:s3cret@h/1", "redis://:***@h:6379/1", "h:6379"),
        ("redis://ann:p%40ss%3Aw0rd@h:1", "redis://ann:***@h:1/0", "h:1"),
        ("redis://[::1]:7000", "redis://[::1]:7000/0", "[::1]:7000"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock?db=0", "unix:/run/redis.sock"),
        ("unix:///run/redis.sock?db=3", "unix:///run/redis.sock?db=3", "unix:/run/redis.sock"),
        ("unix://:pw@/run/r.sock", "unix://:***@/run/r.sock?db=0", "unix:/run/r.sock"),
    ],
)
def test_urls_are_parsed_and_shown_without_the_password(url: str, shown: str, where: str) -> None:
    store = RedisToolIdStore(url)
    assert store.client.url == shown
    assert store.client.where == where
    for text in (repr(store), str(store), repr(store.client)):
        assert shown in text
        for secret in ("s3cret", "p@ss", "pw@", "w0rd"):
            assert secret not in text


def test_the_url_credentials_are_decoded() -> None:
    address = RedisClient("redis://ann:p%40ss%3Aw0rd@h:1/5")._address
    assert (address.username, address.password, address.db) == ("ann", "p@ss:w0rd", 5)
    assert RedisClient("redis://:pw@h")._address.username is None


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("http://h", "scheme"),
        ("rediss://h", "TLS"),
        ("redis://", "no host"),
        ("redis://h/zero", "must be a number"),
        ("redis://h/1?db=2", "twice"),
        ("redis://h:port", "redis url"),
        ("redis://h?timeout=3", "unknown query"),
        ("redis://ann@h", "needs a password"),
        ("unix://", "no socket path"),
    ],
)
def test_bad_urls_are_refused(url: str, complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        RedisToolIdStore(url)


def test_bad_options_are_refused() -> None:
    with pytest.raises(ConfigError, match="max_connections"):
        RedisToolIdStore(max_connections=0)
    with pytest.raises(ConfigError, match="timeout"):
        RedisToolIdStore(timeout=0)
    with pytest.raises(ConfigError, match="ttl_seconds"):
        RedisToolIdStore(ttl_seconds=0)


def test_keys_of_different_sessions_never_coincide() -> None:
    store = RedisToolIdStore(key_prefix="p:")
    assert store.hash_key("s1", "openai") == "p:s1:openai"
    assert store.session_key("s1") == "p:s1"
    keys = {
        store.session_key("a:openai"),
        store.hash_key("a", "openai"),
        store.hash_key("a:b", "c"),
        store.hash_key("a", "b:c"),
        store.session_key("a%3Aopenai"),
    }
    assert len(keys) == 5


@pytest.mark.anyio
async def test_nothing_to_look_up_or_remember_needs_no_server() -> None:
    async with RedisToolIdStore("redis://127.0.0.1:1", timeout=0.5) as store:
        assert await store.provider_ids("s", "openai", []) == {}
        await store.remember("s", "openai", {})


# A real redis-server ----------------------------------------------------------------------------


@dataclass
class Server:
    url: str
    unix_url: str | None = None  # only for a server these tests started


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = sock.recv(64)
    except OSError:
        return False
    return reply.startswith((b"+PONG", b"-NOAUTH"))


@pytest.fixture(scope="session")
def redis_server_factory() -> Iterator[Any]:
    """Start redis-servers on free loopback ports; stop them all at the end of the session."""
    started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(*extra: str) -> tuple[int, Path]:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.skip(
                "redis-server is not on PATH (apt-get install redis-server, "
                "or set METIS_REDIS_URL to use a running server)"
            )
        workdir = Path(tempfile.mkdtemp(prefix="metis-redis-"))
        port = _free_port()
        args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--dir", str(workdir), "--daemonize", "no"]
        args += ["--logfile", str(workdir / "redis.log"), *extra]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        started.append((proc, workdir))
        deadline = time.monotonic() + 10
        while not _answers_ping(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = workdir / "redis.log"
                tail = log.read_text()[-2000:] if log.exists() else ""
                pytest.fail(f"redis-server on port {port} did not start:\n{tail}")
            time.sleep(0.02)
        return port, workdir

    yield start
    for proc, workdir in started:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server(redis_server_factory: Any) -> Server:
    if url := os.environ.get("METIS_REDIS_URL"):
        return Server(url)
    sock = Path(tempfile.gettempdir()) / f"metis-redis-{uuid.uuid4().hex[:12]}.sock"
    port, _ = redis_server_factory("--unixsocket", str(sock), "--unixsocketperm", "700")
    return Server(f"redis://127.0.0.1:{port}/0", f"unix://{sock}")


PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="session")
def redis_auth_port(redis_server_factory: Any) -> int:
    """A second server that wants a password."""
    port, _ = redis_server_factory("--requirepass", PASSWORD)
    return int(port)


@pytest.fixture
def prefix() -> str:
    """Keys of their own for each test, so a shared METIS_REDIS_URL server is safe to use."""
    return f"metis-test:{uuid.uuid4().hex}:"


@pytest.fixture
async def store(redis_server: Server, prefix: str) -> AsyncIterator[RedisToolIdStore]:
    async with RedisToolIdStore(redis_server.url, key_prefix=prefix, ttl_seconds=600) as s:
        yield s


@pytest.mark.anyio
async def test_the_client_commands(redis_server: Server, prefix: str) -> None:
    async with RedisClient(redis_server.url) as client:
        assert await client.ping()
        h, s = prefix + "h", prefix + "s"
        assert await client.hset(h, {"a": "1", "b": b"\x00\r\n", "c": 3}) == 3
        assert await client.hmget(h, ["a", "b", "missing", "c"]) == [b"1", b"\x00\r\n", None, b"3"]
        assert await client.sadd(s, "x", "y", "x") == 2
        assert sorted(await client.smembers(s)) == [b"x", b"y"]
        assert await client.ttl(h) == -1
        assert await client.expire(h, 30)
        assert 25 <= await client.ttl(h) <= 30
        assert not await client.expire(prefix + "missing", 30)
        added, members = await client.transaction([("SADD", s, "z"), ("SMEMBERS", s)])
        assert added == 1
        assert isinstance(members, list) and sorted(members) == [b"x", b"y", b"z"]  # type: ignore[type-var]
        assert await client.delete(h, s, prefix + "missing") == 2
        assert await client.delete() == 0
        assert await client.smembers(s) == []


@pytest.mark.anyio
async def test_remembered_pairs_come_back(store: RedisToolIdStore) -> None:
    assert await store.client.ping()
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
    assert await store.provider_ids("s", "anthropic", ["tu_1", "tu_2"]) == {"tu_1": "toolu_1"}
    assert await store.provider_ids("s", "openai", ["tu_1", "tu_2"]) == {
        "tu_1": "call_1",
        "tu_2": "call_2",
    }
    assert await store.provider_ids("t", "openai", ["tu_1", "tu_2"]) == {"tu_1": "call_t"}
    assert await store.provider_ids("t", "anthropic", ["tu_1"]) == {}
    assert await store.provider_ids("u", "openai", ["tu_1"]) == {}


@pytest.mark.anyio
async def test_remember_sets_and_refreshes_the_time_to_live(store: RedisToolIdStore) -> None:
    await store.remember("s", "openai", {"tu_1": "call_1"})
    keys = [store.hash_key("s", "openai"), store.session_key("s")]
    for key in keys:
        assert 590 <= await store.client.ttl(key) <= 600
        assert await store.client.expire(key, 10)
    await store.remember("s", "openai", {"tu_2": "call_2"})
    for key in keys:
        assert 590 <= await store.client.ttl(key) <= 600
    assert await store.client.ttl(store.hash_key("nobody", "openai")) == -2


@pytest.mark.anyio
async def test_without_a_ttl_nothing_expires(redis_server: Server, prefix: str) -> None:
    async with RedisToolIdStore(redis_server.url, key_prefix=prefix, ttl_seconds=None) as store:
        await store.remember("s", "openai", {"tu_1": "call_1"})
        assert await store.client.ttl(store.hash_key("s", "openai")) == -1
        assert await store.client.ttl(store.session_key("s")) == -1
        await store.forget("s")


@pytest.mark.anyio
async def test_forget_removes_the_whole_session(store: RedisToolIdStore) -> None:
    for provider in ("anthropic", "openai", "odd:name%"):
        await store.remember("s", provider, {"tu_1": f"{provider}_1"})
    await store.remember("other", "openai", {"tu_1": "call_other"})
    await store.forget("s")
    for provider in ("anthropic", "openai", "odd:name%"):
        assert await store.provider_ids("s", provider, ["tu_1"]) == {}
        assert await store.client.ttl(store.hash_key("s", provider)) == -2
    assert await store.client.ttl(store.session_key("s")) == -2
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
async def test_many_concurrent_calls_share_a_small_pool(redis_server: Server, prefix: str) -> None:
    results: dict[int, dict[str, str]] = {}

    async def one(i: int) -> None:
        session = f"s{i % 5}"
        await shared.remember(session, "openai", {f"tu_{i}": f"call_{i}"})
        results[i] = await shared.provider_ids(session, "openai", [f"tu_{i}", "tu_missing"])

    async with RedisToolIdStore(redis_server.url, key_prefix=prefix, max_connections=4) as shared:
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(one, i)
        assert results == {i: {f"tu_{i}": f"call_{i}"} for i in range(50)}
        assert 1 <= len(shared.client._idle) <= 4
        everything = await shared.provider_ids("s3", "openai", [f"tu_{i}" for i in range(50)])
        assert everything == {f"tu_{i}": f"call_{i}" for i in range(3, 50, 5)}


@pytest.mark.anyio
async def test_a_connection_the_server_closed_is_replaced(
    store: RedisToolIdStore, redis_server: Server
) -> None:
    await store.remember("s", "openai", {"tu_1": "call_1"})
    client_id = await store.client.execute("CLIENT", "ID")
    assert isinstance(client_id, int)
    async with RedisClient(redis_server.url) as killer:
        assert await killer.execute("CLIENT", "KILL", "ID", client_id) == 1
    # the pooled connection is dead; the command goes out again on a new one
    assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
    assert await store.client.execute("CLIENT", "ID") != client_id


@pytest.mark.anyio
async def test_an_error_reply_raises_and_the_connection_stays_usable(
    redis_server: Server, prefix: str
) -> None:
    async with RedisToolIdStore(redis_server.url, key_prefix=prefix, max_connections=1) as store:
        await store.client.execute("SET", store.hash_key("s", "openai"), "not a hash")
        with pytest.raises(RedisError, match="WRONGTYPE") as caught:
            await store.remember("s", "openai", {"tu_1": "call_1"})
        assert caught.value.code == "WRONGTYPE"
        assert not caught.value.retryable
        with pytest.raises(RedisError, match="WRONGTYPE"):
            await store.provider_ids("s", "openai", ["tu_1"])
        with pytest.raises(RedisError, match="unknown command"):
            await store.client.execute("NO-SUCH-COMMAND")
        [connection] = store.client._idle
        await store.remember("t", "openai", {"tu_1": "call_1"})
        assert await store.provider_ids("t", "openai", ["tu_1"]) == {"tu_1": "call_1"}
        assert store.client._idle == [connection]
        await store.client.delete(store.hash_key("s", "openai"))


@pytest.mark.anyio
async def test_a_command_cancelled_midway_does_not_leave_its_reply_behind(
    store: RedisToolIdStore,
) -> None:
    await store.remember("s", "openai", {"tu_1": "call_1"})
    [connection] = store.client._idle
    with anyio.move_on_after(0.2) as scope:  # BLPOP blocks on the server for 5 s
        await store.client.execute("BLPOP", store.key_prefix + "empty-list", 5)
    assert scope.cancelled_caught
    assert store.client._idle == []  # the connection that waited was closed, not pooled
    with pytest.raises(anyio.ClosedResourceError):
        await connection.stream.send(b"*1\r\n$4\r\nPING\r\n")
    assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}


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


@pytest.mark.anyio
async def test_aclose_closes_the_pooled_connections(store: RedisToolIdStore) -> None:
    await store.remember("s", "openai", {"tu_1": "call_1"})
    [connection] = store.client._idle
    await store.aclose()
    assert store.client._idle == []
    with pytest.raises(anyio.ClosedResourceError):
        await connection.stream.send(b"*1\r\n$4\r\nPING\r\n")
    # a closed store opens a new connection when it is used again
    assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}


# Passwords ---------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("user", ["", "default"])
async def test_the_right_password_is_let_in(redis_auth_port: int, prefix: str, user: str) -> None:
    url = f"redis://{user}:{PASSWORD.replace(' ', '%20')}@127.0.0.1:{redis_auth_port}/1"
    async with RedisToolIdStore(url, key_prefix=prefix) as store:
        await store.remember("s", "openai", {"tu_1": "call_1"})
        assert await store.provider_ids("s", "openai", ["tu_1"]) == {"tu_1": "call_1"}
        assert PASSWORD not in repr(store)


@pytest.mark.anyio
async def test_a_wrong_password_is_a_clear_error(redis_auth_port: int) -> None:
    where = f"127.0.0.1:{redis_auth_port}"
    async with RedisToolIdStore(f"redis://:guess-again@{where}") as store:
        with pytest.raises(RedisError, match="refused the credentials") as caught:
            await store.provider_ids("s", "openai", ["tu_1"])
        assert caught.value.code == "WRONGPASS"
        assert where in str(caught.value)
        assert "guess-again" not in str(caught.value) and "guess-again" not in repr(caught.value)
        assert store.client._idle == []


@pytest.mark.anyio
async def test_no_password_is_a_clear_error(redis_auth_port: int) -> None:
    async with RedisToolIdStore(f"redis://127.0.0.1:{redis_auth_port}") as store:
        with pytest.raises(RedisError, match="needs a password") as caught:
            await store.remember("s", "openai", {"tu_1": "call_1"})
        assert caught.value.code == "NOAUTH"
        assert f"127.0.0.1:{redis_auth_port}" in str(caught.value)


# Servers that are not there or not well -----------------------------------------------------------


@pytest.mark.anyio
async def test_a_server_that_is_down_is_a_network_error() -> None:
    port = _free_port()  # nothing listens here
    started = time.monotonic()
    async with RedisToolIdStore(f"redis://127.0.0.1:{port}", timeout=2) as store:
        with pytest.raises(NetworkError, match=f"127.0.0.1:{port}.*connection refused") as caught:
            await store.provider_ids("s", "openai", ["tu_1"])
    assert time.monotonic() - started < 2
    assert caught.value.retryable
    assert not isinstance(caught.value, OSError)


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


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A server that accepts connections and never says a word."""

    async def handler(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await anyio.sleep_forever()

    async with _serve(handler) as port:
        yield port


@pytest.fixture
async def http_port() -> AsyncIterator[int]:
    """A server that is not Redis."""

    async def handler(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await stream.receive()
            await stream.send(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            await anyio.sleep_forever()

    async with _serve(handler) as port:
        yield port


@pytest.mark.anyio
async def test_a_server_that_does_not_answer_times_out(silent_port: int) -> None:
    started = time.monotonic()
    async with RedisToolIdStore(f"redis://127.0.0.1:{silent_port}", timeout=0.3) as store:
        with pytest.raises(NetworkError, match=f"127.0.0.1:{silent_port}: timed out after 0.3s"):
            await store.remember("s", "openai", {"tu_1": "call_1"})
        assert store.client._idle == []
    assert 0.25 <= time.monotonic() - started < 2


@pytest.mark.anyio
async def test_a_server_that_is_not_redis_is_a_protocol_error(http_port: int) -> None:
    async with RedisToolIdStore(f"redis://127.0.0.1:{http_port}", timeout=2) as store:
        with pytest.raises(ProtocolError, match=f"127.0.0.1:{http_port}: unknown RESP type"):
            await store.provider_ids("s", "openai", ["tu_1"])
        assert store.client._idle == []


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
    stage = ToolIds(prefix="toolu_")
    async with (
        RedisToolIdStore(redis_server.url, key_prefix=prefix) as worker_a,
        RedisToolIdStore(redis_server.url, key_prefix=prefix) as worker_b,
    ):
        # turn 1, on worker A: the provider issues toolu_X, the application sees a canonical id
        _, out = await drive(
            stage,
            _request(Message.user("weather?")),
            make_call(session_id="conv-1", store=worker_a),
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
        seen, _ = await drive(stage, history, make_call(session_id="conv-1", store=worker_b))
        blocks = [b for m in seen[0].messages for b in m.content]
        assert [b.id for b in blocks if isinstance(b, ToolUseBlock)] == ["toolu_X"]
        assert [b.tool_use_id for b in blocks if isinstance(b, ToolResultBlock)] == ["toolu_X"]

        # another session on worker B does not know it
        seen, _ = await drive(stage, history, make_call(session_id="conv-2", store=worker_b))
        blocks = [b for m in seen[0].messages for b in m.content]
        assert [b.id for b in blocks if isinstance(b, ToolUseBlock)] == ["toolu_" + cid[3:]]
