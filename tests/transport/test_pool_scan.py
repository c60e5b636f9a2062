"""httpcore's pool bookkeeping in one pass (metis/transport/pool_scan.py): the same decisions
as httpcore 1.0's own on any pool (connections closed, expired, idle or busy, of two origins;
requests queued or not) whenever a request waits, none until one does, and given only to
pools that are httpcore 1.0's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpcore
import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from metis.transport.pool_scan import LinearPool, linear_pools
from metis.transport.stage import http_client

ORIGINS = (b"a", b"b")


@dataclass(eq=False)
class FakeConnection:
    name: str
    origin: bytes
    closed: bool = False
    expired: bool = False
    idle: bool = False
    available: bool = False

    def is_closed(self) -> bool:
        return self.closed

    def has_expired(self) -> bool:
        return self.expired

    def is_idle(self) -> bool:
        return self.idle

    def is_available(self) -> bool:
        return self.available

    def can_handle_request(self, origin: Any) -> bool:
        return bool(origin == self.origin)


@dataclass(eq=False)
class FakeRequest:
    """httpcore's pool request, its request and its URL in one: what the pass reads."""

    origin: bytes
    connection: Any = None

    @property
    def request(self) -> FakeRequest:
        return self

    @property
    def url(self) -> FakeRequest:
        return self

    def is_queued(self) -> bool:
        return self.connection is None

    def assign_to_connection(self, connection: Any) -> None:
        self.connection = connection


connections = st.lists(
    st.tuples(st.sampled_from(ORIGINS), st.booleans(), st.booleans(), st.booleans(), st.booleans()),
    max_size=12,
)
requests = st.lists(st.tuples(st.sampled_from(ORIGINS), st.booleans()), max_size=6)


def run(pool: Any, given_connections: list[Any], given_requests: list[Any]) -> tuple[Any, ...]:
    """``pool``'s pass over a fresh copy of the state: what it keeps, closes, creates and
    assigns, by name."""
    made: list[str] = []

    def create_connection(origin: Any) -> FakeConnection:
        made.append(f"new{len(made)}")
        return FakeConnection(made[-1], origin)

    pool.create_connection = create_connection
    pool._connections = [FakeConnection(f"c{n}", *c) for n, c in enumerate(given_connections)]
    pool._requests = []
    for origin, queued in given_requests:
        request = FakeRequest(origin)
        request.connection = None if queued else FakeConnection("held", origin)
        pool._requests.append(request)
    kept = pool._connections
    closing = pool._assign_requests_to_connections()
    assigned = [getattr(r.connection, "name", None) for r in pool._requests]
    return (
        kept is pool._connections,
        [c.name for c in pool._connections],
        [c.name for c in closing],
        made,
        assigned,
    )


@settings(deadline=None)  # a loaded machine is no reason to fail; its size: tests/conftest.py
@given(
    given_connections=connections,
    given_requests=requests,
    most=st.integers(1, 8),
    kept_idle=st.integers(0, 8),
)
def test_one_pass_decides_as_httpcore_does(
    given_connections: list[Any], given_requests: list[Any], most: int, kept_idle: int
) -> None:
    limits = {"max_connections": most, "max_keepalive_connections": kept_idle}
    ours = run(LinearPool(**limits), given_connections, given_requests)
    theirs = run(httpcore.AsyncConnectionPool(**limits), given_connections, given_requests)
    if any(queued for _, queued in given_requests):
        assert ours == theirs
    else:  # no request waits: nothing is decided until one does
        names = [f"c{n}" for n in range(len(given_connections))]
        assert ours == (True, names, [], [], ["held"] * len(given_requests))
    assert ours[0]  # the pool's own list, changed in place


def test_what_a_pass_with_no_request_waiting_leaves_the_next_request_decides() -> None:
    """A response closed with no request waiting leaves the pool as it is; the next request's
    pass closes what httpcore's pass at that close would have, then assigns."""
    spent = [("a", False, True, True, True), ("a", False, False, True, True)]
    pool = LinearPool(max_connections=4, max_keepalive_connections=4)
    assert run(pool, spent, []) == (True, ["c0", "c1"], [], [], [])
    ours = run(LinearPool(max_connections=4), spent, [("a", True)])
    theirs = run(httpcore.AsyncConnectionPool(max_connections=4), spent, [("a", True)])
    assert ours == theirs == (True, ["c1"], ["c0"], [], ["c1"])


def test_the_client_metis_makes_is_given_the_one_pass_pool() -> None:
    client = http_client(keep_alive=7, lean=False)
    pool = client._transport._pool  # type: ignore[attr-defined]
    assert type(pool) is httpcore.AsyncConnectionPool
    assert linear_pools(client)
    assert type(pool) is LinearPool
    assert pool._max_keepalive_connections == 7


def test_a_pool_that_is_not_httpcores_own_is_left_as_it_is() -> None:
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: httpx.Response(200)))
    assert not linear_pools(client)
    assert isinstance(client._transport, httpx.MockTransport)


def test_a_second_call_finds_the_pool_already_changed_and_leaves_it() -> None:
    client = http_client(lean=False)
    assert linear_pools(client)
    assert not linear_pools(client)
    assert type(client._transport._pool) is LinearPool  # type: ignore[attr-defined]
