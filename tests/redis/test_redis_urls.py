"""RedisToolIdStore's configuration: URLs, Sentinel and Cluster targets, key layout. No server."""

from __future__ import annotations

import itertools
import sys

import pytest

pytest.importorskip("coredis")

from metis.errors import ConfigError
from metis.redis.tool_ids import RedisToolIdStore


@pytest.mark.parametrize(
    ("url", "shown", "where"),
    [
        ("redis://localhost", "redis://localhost:6379/0", "localhost:6379"),
        ("redis://h:6380/2", "redis://h:6380/2", "h:6380"),
        ("redis://h?db=4", "redis://h:6379/4", "h:6379"),
        ("rediss://h:6380", "rediss://h:6380/0", "h:6380"),
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
    assert store.target.url == shown
    assert store.target.where == where
    assert store.target.tls == url.startswith("rediss:")
    for text in (repr(store), str(store.target), repr(store.target)):
        assert shown in text or where in text
        for secret in ("s3cret", "p@ss", "pw@", "w0rd"):
            assert secret not in text


def test_the_url_credentials_are_decoded() -> None:
    target = RedisToolIdStore("redis://ann:p%40ss%3Aw0rd@h:1/5").target
    assert (target.username, target.password, target.db) == ("ann", "p@ss:w0rd", 5)
    assert RedisToolIdStore("redis://:pw@h").target.username is None


@pytest.mark.parametrize("password", ["ab/cd", "ab#cd", "ab?cd", "a@b/c#d?e", "p:w%zz"])
def test_a_password_with_unescaped_url_characters_still_works(password: str) -> None:
    target = RedisToolIdStore(f"redis://ann:{password}@h:7/2").target
    assert (target.username, target.nodes, target.db) == ("ann", (("h", 7),), 2)
    assert target.password == password.replace("%zz", "%zz")
    assert password not in repr(RedisToolIdStore(f"redis://ann:{password}@h:7/2"))


def _pieces(secret: str, size: int = 3) -> set[str]:
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


SECRET = "Zq7/Xw#Kp?Vm@Rt"


@pytest.mark.parametrize(
    "url",
    [
        f"http://:{SECRET}@h",
        f"redis://:{SECRET}@h:port",
        f"redis://:{SECRET}@h/zero",
        f"redis://:{SECRET}@h/1?db=2",
        f"redis://:{SECRET}@h?timeout=3",
        f"redis://:{SECRET}@",
        f"redis://{SECRET}@h",  # no colon: a user name without a password
        f"unix://:{SECRET}@",
        f"redis:/:{SECRET}@h",
        f"{SECRET}",
    ],
)
def test_a_url_error_never_echoes_any_part_of_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RedisToolIdStore(url)
    message = str(caught.value)
    assert message.startswith("redis")
    leaked = {piece for piece in _pieces(SECRET) if piece in message}
    assert not leaked, message


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("http://h", "scheme"),
        ("127.0.0.1:6379", r"no scheme.*redis://host:port"),  # it said 'not ?://'
        ("redis://", "no host"),
        ("redis://h/zero", "must be a number"),
        ("redis://h/1?db=2", "twice"),
        ("redis://h:port", "port must be a number"),
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
    with pytest.raises(ConfigError, match="host:port"):
        RedisToolIdStore.cluster(["h:port"])
    with pytest.raises(ConfigError, match="at least one node"):
        RedisToolIdStore.sentinel([], "mymaster")


def test_sentinel_and_cluster_targets_from_config() -> None:
    sentinel = RedisToolIdStore.sentinel(
        ["s1", "s2:26380", ("s3", 5000)],
        "mymaster",
        db=2,
        username="app",
        password="pw-secret",
        sentinel_password="sentinel-secret",
        key_prefix="p:",
        timeout=2,
    )
    assert sentinel.target.nodes == (("s1", 26379), ("s2", 26380), ("s3", 5000))
    assert sentinel.target.where == "sentinel mymaster@s1:26379,s2:26380,s3:5000"
    assert (sentinel.key_prefix, sentinel.timeout, sentinel.target.db) == ("p:", 2, 2)
    cluster = RedisToolIdStore.cluster(["n1:7000", "[::1]:7001"], password="pw-secret")
    assert cluster.target.nodes == (("n1", 7000), ("::1", 7001))
    assert cluster.target.url == "redis+cluster://:***@n1:7000,[::1]:7001"
    for store in (sentinel, cluster):
        assert "secret" not in repr(store) and "secret" not in repr(store.target)


def test_keys_and_fields_of_different_sessions_and_providers_never_coincide() -> None:
    store = RedisToolIdStore(key_prefix="p:")
    assert store.session_key("s1") == "p:s1"
    assert store.field("openai", "tu_1") == "openai:tu_1"
    sessions = ["a", "a:b", "a%3Ab", "a%b", "a:"]
    assert len({store.session_key(s) for s in sessions}) == len(sessions)
    providers = ["openai", "open:ai", "open%3Aai", "open"]
    cids = ["tu_1", "ai:tu_1", "3Aai:tu_1"]
    fields = {store.field(p, c) for p, c in itertools.product(providers, cids)}
    assert len(fields) == len(providers) * len(cids)


@pytest.mark.anyio
async def test_nothing_to_look_up_or_remember_needs_no_server() -> None:
    store = RedisToolIdStore("redis://127.0.0.1:1", timeout=0.5)
    assert await store.provider_ids("s", "openai", []) == {}
    await store.remember("s", "openai", {})


def test_the_store_says_how_to_install_coredis_when_it_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "coredis", None)
    with pytest.raises(ImportError, match=r"pip install 'metis\[redis\]'"):
        RedisToolIdStore()
