"""The lean transport against httpx's own, reply by reply: each crafted HTTP/1.1 reply of
tests/transport/replies.py goes through a client over ``httpx.AsyncHTTPTransport`` (httpcore
and h11) and through one over metis's ``LeanTransport``, on asyncio and on uvloop, and what
each client saw must be the same: the status, reason and version, the headers as httpx exposes
them, the body's bytes, whether it failed and with which class (and what metis makes of it),
the response's extensions, and whether the next request went on the same connection.

Where the two differ on purpose, :data:`DIFFERS` says which fields and why, and the lean
transport's values there are asserted too."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest

from .loops import Runner
from .replay import Outcome, ReplayServer, outcome, reply, through_metis
from .replies import REPLIES

pytest.importorskip("httptools")

from metis.transport.http1 import LeanStream, LeanTransport
from metis.transport.http1_parse import MAX_REPARSES
from metis.transport.http1_protocol import Http1Connection

_OVERREAD = (
    "RFC 9112 §6.3: bytes past a response's end are not the next response; httpx's transport "
    "pools the connection and reads them as the next request's answer (the exchange of "
    "metis closes such a connection: metis/transport/slots.py close_if_overread), the lean "
    "transport closes it"
)
DIFFERS: dict[str, tuple[dict[str, Any], str]] = {
    "body longer than length": ({"reused": False, "next_body": b"next"}, _OVERREAD),
    "204 with a body": ({"reused": False, "next_body": b"next"}, _OVERREAD),
    "304 with a body": ({"reused": False, "next_body": b"next"}, _OVERREAD),
    "length and chunked": (
        {"reused": False},
        "RFC 9112 §6.3: Transfer-Encoding overrides Content-Length, and such a message "
        "'ought to be handled as an error': both read it by its chunks, the lean transport "
        "then closes the connection",
    ),
    "CRLF before the status line": (
        {
            "status": 200,
            "reason": b"OK",
            "version": "HTTP/1.1",
            "headers": [(b"Content-Length", b"2")],
            "body": b"ok",
            "error": None,
            "metis_error": None,
            "extensions": ["http_version", "network_stream", "reason_phrase"],
        },
        "httptools skips empty lines before a message (RFC 9112 §2.2's robustness, written for "
        "requests), h11 refuses them: the lean transport reads the reply after them",
    ),
    "gzip not gzip": (
        {"reused": True},
        "the body's framing was whole: the lean transport had read it to its end before httpx "
        "failed to decode it, so its connection is reused; httpx's had not",
    ),
}
"""Replies the two transports answer differently, by design: the lean transport's values of
the fields that differ, and why."""
METIS_DIFFERS: dict[str, tuple[int | None, bytes, str | None]] = {
    "CRLF before the status line": (200, b"ok", None),
}
"""What metis's exchange makes of the replies of :data:`DIFFERS` whose reading differs."""


def _both(run: Runner, name: str) -> tuple[Outcome, Outcome]:
    async def main() -> tuple[Outcome, Outcome]:
        async with ReplayServer().running() as server:
            theirs = await outcome(server, httpx.AsyncHTTPTransport, REPLIES[name])
            ours = await outcome(server, LeanTransport, REPLIES[name])
            return theirs, ours

    result: tuple[Outcome, Outcome] = run(main())
    return result


@pytest.mark.parametrize("name", list(REPLIES))
def test_the_lean_transport_reads_each_reply_as_httpx_does(run: Runner, name: str) -> None:
    theirs, ours = _both(run, name)
    expected = dataclasses.asdict(theirs)
    lean, _why = DIFFERS.get(name, ({}, ""))
    for field, value in lean.items():
        assert expected[field] != value, f"{name}: httpx agrees on {field} now (DIFFERS)"
        expected[field] = value
    assert dataclasses.asdict(ours) == expected
    assert ours.reused is not None


@pytest.mark.parametrize("name", [name for name, reply in REPLIES.items() if reply.method == "GET"])
def test_metis_reads_each_reply_alike_over_either_transport(run: Runner, name: str) -> None:
    """The exchange of a provider's call (metis's own decoding, its classified errors) over
    each transport: the same status, body and error class. (Not the answers to a HEAD: a
    call is a POST.)"""

    async def main() -> list[tuple[int | None, bytes, str | None]]:
        async with ReplayServer().running() as server:
            return [
                await through_metis(server, make, REPLIES[name])
                for make in (httpx.AsyncHTTPTransport, LeanTransport)
            ]

    theirs, ours = run(main())
    assert ours == METIS_DIFFERS.get(name, theirs)
    assert theirs != METIS_DIFFERS.get(name, ())


def test_the_table_covers_what_the_brief_names() -> None:
    shapes = (
        "obs-fold",
        "length repeated identical",
        "length conflicting",
        "length with spaces",
        "length with plus sign",
        "chunk extensions",
        "chunk size leading zeros",
        "chunk size uppercase hex",
        "trailers",
        "100 then 200",
        "204 with a body",
        "304 with a body",
        "HEAD",
        "close without length",
        "gzip, deflate",
        "zstd",
        "br",
        "body shorter than length",
        "body longer than length",
        "closed mid head",
        "closed mid chunk",
        "reason utf-8",
        "reason latin-1",
        "header value latin-1",
        "many headers",
    )
    assert [shape for shape in shapes if shape not in REPLIES] == []
    assert set(METIS_DIFFERS) <= set(DIFFERS) <= set(REPLIES)


def test_a_response_tells_its_connection_as_httpx_does(run: Runner) -> None:
    """``network_stream``'s ``get_extra_info`` answers as httpcore's stream does."""

    async def main() -> list[tuple[Any, ...]]:
        said = []
        async with ReplayServer().running() as server:
            url = f"http://127.0.0.1:{server.port}/next"
            for make in (httpx.AsyncHTTPTransport, LeanTransport):
                async with (
                    httpx.AsyncClient(transport=make()) as client,
                    client.stream("GET", url) as response,
                ):
                    await response.aread()
                    info = response.extensions["network_stream"].get_extra_info
                    said.append(
                        (
                            info("server_addr"),
                            info("client_addr")[0],
                            info("ssl_object"),
                            info("socket").fileno() > 0,
                            info("is_readable"),
                            info("anything else"),
                        )
                    )
        return said

    theirs, ours = run(main())
    assert ours == theirs
    assert ours[1] == "127.0.0.1"


def test_a_request_to_upgrade_goes_to_httpx_s_transport(run: Runner) -> None:
    """Its 101 hands the connection on as httpcore's ``network_stream``, which the lean
    transport's cannot be (LeanStream has no read or write)."""

    async def main() -> tuple[int, bool, bool]:
        switching = reply(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", close=True)
        async with ReplayServer().running() as server:
            server.reply = switching
            transport = LeanTransport()
            async with httpx.AsyncClient(transport=transport) as client:
                url = f"http://127.0.0.1:{server.port}/case"
                answer = await client.get(url, headers={"Upgrade": "x", "Connection": "upgrade"})
                stream = answer.extensions["network_stream"]
                return answer.status_code, hasattr(stream, "read"), bool(transport.used_fallback)

    assert run(main()) == (101, True, True)  # httpcore's stream, readable
    assert not hasattr(LeanStream, "read")


def test_a_head_refused_in_many_pieces_is_parsed_again_once_whole() -> None:
    """Each piece of a folded head would be refused again: the head is parsed again once, when
    its end has come, so a server's tiny pieces cost one more pass, not one per piece."""
    connection = Http1Connection()
    connection.start(httpx.Request("GET", "http://example.test/"))
    connection.data_received(b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n")
    for n in range(500):
        connection.data_received(b" %d\r\n" % n)
    connection.data_received(b"Content-Length: 2\r\n\r\nok")
    assert connection.reparses == 1
    folded = b" ".join([b"a", *(b"%d" % n for n in range(500))])
    assert connection.headers[0] == (b"X-Folded", folded)
    assert connection.complete and connection.body == [b"ok"]


def test_the_heads_of_one_response_are_parsed_again_a_bounded_number_of_times() -> None:
    connection = Http1Connection()
    connection.start(httpx.Request("GET", "http://example.test/"))
    for _ in range(MAX_REPARSES + 1):
        assert connection.error is None
        connection.data_received(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n ; rel=x\r\n\r\n")
    assert isinstance(connection.error, httpx.RemoteProtocolError)
    assert connection.reparses == MAX_REPARSES


def test_a_refused_head_that_no_rewriting_reads_fails_at_once() -> None:
    connection = Http1Connection()
    connection.start(httpx.Request("GET", "http://example.test/"))
    connection.data_received(b"SSH-2.0-OpenSSH_9.6\r\n")
    assert isinstance(connection.error, httpx.RemoteProtocolError)
