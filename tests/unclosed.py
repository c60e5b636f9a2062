"""The ResourceWarnings a block of a test is answerable for.

A check of what a block leaves unclosed (``warnings.catch_warnings(record=True)`` around it,
``gc.collect()`` in it) also hears of what an earlier test of the worker left, when that is
let go of inside the block: by a thread ending late, or a cache dropping it. A ``gc.collect()``
before the block cannot flush that, as it was still held then. An asyncio transport of an
event loop the block did not run on is such a leftover: its loop is another test's (closed:
``unclosed transport <_SelectorSocketTransport fd=21>``, with no polling state, is one), and
nothing the block did made it; nor its socket, which the collector may finalize first. Every
other warning (a socket of no such transport, an async generator, a transport of the block's
own loop) is the block's.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection


def unclosed_by(caught: list[warnings.WarningMessage], loops: Collection[object]) -> list[str]:
    """The ResourceWarnings in ``caught`` but those about an asyncio transport of an event loop
    not in ``loops`` (the loops the block ran on), and about that transport's socket."""
    heard = [w for w in caught if w.category is ResourceWarning]
    foreign = [w for w in heard if _of_another_loop(w.source, loops)]
    their_sockets = {f"unclosed <socket.socket fd={w.source._sock_fd}," for w in foreign}  # type: ignore[union-attr]
    return [
        str(w.message)
        for w in heard
        if w not in foreign and not str(w.message).startswith(tuple(their_sockets))
    ]


def _of_another_loop(source: object, loops: Collection[object]) -> bool:
    import asyncio

    if not isinstance(source, asyncio.BaseTransport):
        return False
    loop = getattr(source, "_loop", None)
    return loop is not None and all(loop is not mine for mine in loops)
