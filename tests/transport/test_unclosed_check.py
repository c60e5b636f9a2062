"""tests/unclosed.py: a check of what a block leaves unclosed is not failed by an earlier test's
asyncio transport let go of inside the block (seen once in a full run under load:
``unclosed transport <_SelectorSocketTransport fd=21>`` in test_request_body.py's block, a
transport of a loop closed before it), and still fails on what the block left."""

from __future__ import annotations

import asyncio
import gc
import socket
import warnings

from ..unclosed import unclosed_by


def left_open_on_a_closed_loop() -> tuple[asyncio.BaseTransport, asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    ours, theirs = socket.socketpair()
    transport, _ = loop.run_until_complete(
        loop.create_connection(asyncio.Protocol, sock=ours)  # type: ignore[arg-type]
    )
    loop.close()  # the transport is not closed: an earlier test's leftover
    theirs.close()
    return transport, loop


def test_another_loops_transport_let_go_of_in_the_block_is_not_the_blocks() -> None:
    leftover, _ = left_open_on_a_closed_loop()
    block_loop = asyncio.new_event_loop()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            del leftover
            gc.collect()
    finally:
        block_loop.close()
    heard = [str(w.message) for w in caught if w.category is ResourceWarning]
    assert any(w.startswith("unclosed transport <_SelectorSocketTransport fd=") for w in heard)
    assert unclosed_by(caught, [block_loop]) == []


def test_the_blocks_own_leftovers_are_still_its() -> None:
    leftover, loop = left_open_on_a_closed_loop()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del leftover
        gc.collect()
        socket.socket()  # a socket of no transport, dropped unclosed
        gc.collect()
    found = unclosed_by(caught, [loop])
    assert any(w.startswith("unclosed transport <_SelectorSocketTransport fd=") for w in found)
    assert found[-1].startswith("unclosed <socket.socket fd=")
