"""Cancelling a session's turn from another task or another thread.

A turn waits for two kinds of things: the model's events and its tool calls. A model call in
flight is cancelled through the adapter's (or router's) own ``cancel``: its stream ends with
``message.complete``, stop reason ``cancelled``, and what arrived (docs/contract.md §2). Tool
calls run in a cancel scope entered and left around them (never held across a ``yield`` to the
caller, where it would cancel the caller's code instead). ``cancel()`` marks the turn
cancelled, stops what it is waiting for, and every later wait of the turn ends at once.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio
import anyio.from_thread
import anyio.lowlevel

from metis.sessions.stream import Reader


class TurnControl:
    """One turn's cancellation, made on the event loop the turn runs on."""

    def __init__(self, reader: Reader | None = None) -> None:
        self.reader = reader
        """The turn's stream's reader (a streamed turn's), to tell a stream dropped unread."""
        self.ended = anyio.Event()
        self.cancelled = False
        self.release = False
        """The session's block was left with the turn in flight: when it ends, what providers
        keep open for the session is released."""
        self._scope: anyio.CancelScope | None = None
        self._stop_call: Callable[[], object] | None = None
        self._call_stopped = False
        self._token = anyio.lowlevel.current_token()
        self._thread = threading.get_ident()

    @contextmanager
    def wait(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one wait of the turn (its tool calls)."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self.cancelled:
                scope.cancel()
            try:
                yield scope
            finally:
                self._scope = None

    @contextmanager
    def calling(self, stop: Callable[[], object]) -> Iterator[None]:
        """A model call in flight, which ``stop()`` cancels (the adapter's ``cancel``)."""
        self._stop_call, self._call_stopped = stop, False
        try:
            yield
        finally:
            self._stop_call = None

    def event_arrived(self) -> None:
        """A cancel asked before the adapter had the call in flight (so it did not stop it)
        stops it now, at its first event."""
        if self.cancelled and not self._call_stopped and self._stop_call is not None:
            self._call_stopped = True
            self._stop_call()

    def cancel(self) -> None:
        """Cancel the turn, from any thread."""
        if threading.get_ident() == self._thread:
            self._cancel_here()
            return
        with contextlib.suppress(RuntimeError):  # the loop has ended: so has the turn
            anyio.from_thread.run_sync(self._cancel_here, token=self._token)

    def _cancel_here(self) -> None:
        self.cancelled = True
        if self._scope is not None:
            self._scope.cancel()
        if self._stop_call is not None:
            self._call_stopped = bool(self._stop_call())


async def abandoned_turn_ended(control: TurnControl | None) -> None:
    """Wait for a turn in flight whose reader dropped its stream unclosed (a ``break`` out of
    ``async for event in session.astream(...)``): the event loop's finalizer of that stream
    ends it, so the next turn goes on rather than finding the session busy. Any other turn
    in flight is left alone (the session refuses the new one)."""
    if control is None or control.reader is None or not control.reader.gone:
        return
    if sys.get_asyncgen_hooks().finalizer is None:  # no loop closes dropped streams here
        return
    if control._thread != threading.get_ident() or control._token != anyio.lowlevel.current_token():
        return
    await control.ended.wait()
