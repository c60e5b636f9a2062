"""The event loop the synchronous forms (``metis.complete``, ``metis.stream``) run their calls on.

One per process: an asyncio loop in a daemon thread, started by the first synchronous call.

- **Ctrl-C.** A ``KeyboardInterrupt`` (or any exception raised in the waiting thread) cancels
  the call in flight on the loop, waits for it to wind down (its connection closed), and is
  raised as it came; the loop goes on serving later calls. A second Ctrl-C stops the wait.
- **Fork.** A forked child (gunicorn ``--preload``, multiprocessing) does not inherit the
  loop's thread: its first synchronous call starts a loop of its own.
- **Exit.** At interpreter exit the calls still in flight (a daemon thread's) are cancelled
  and the loop's adapters closed; exit does not wait for their replies.
- **Signal handlers.** A handler may make a synchronous call, even one that lands as another
  call in the same thread is starting the loop.
- **Inside an event loop** (a notebook's cell, code under ``asyncio.run``) the calling thread
  blocks until the reply is in, as any blocking call would, while the call runs here. On this
  loop's own thread (code that metis runs: a stage, a telemetry sink, a store) a synchronous
  call would wait for itself, so it is refused.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import TypeVar

import anyio
from anyio.from_thread import BlockingPortal
from anyio.streams.memory import MemoryObjectReceiveStream

from metis.calls.async_stream import warn_unread
from metis.core.raised import Carried, carrying
from metis.errors import BlockingCallError

T = TypeVar("T")


class BlockingStream(Iterator[T]):
    """A stream read in this thread, its events as they come. Leaving the loop early ends it
    when it is closed: ``with metis.stream(...) as events: for event in events: ...`` (or
    :meth:`close`); read to its end, it closes itself."""

    __slots__ = ("_events", "_read")

    def __init__(self, events: Generator[T, None, None]) -> None:
        self._events = events
        self._read = False

    def __del__(self) -> None:
        if not self._read:
            warn_unread()

    def __next__(self) -> T:
        self._read = True
        return next(self._events)

    def close(self) -> None:
        """End the stream (a session's turn keeps what its caller was given); again: nothing."""
        self._read = True
        self._events.close()

    def __enter__(self) -> BlockingStream[T]:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


READ_AHEAD = 16
"""How many events of a synchronous stream are read before the iterating thread takes them."""
STOP_WAIT_SECONDS = 10.0
"""At exit, how long to wait for the cancelled calls' cleanup before leaving it undone."""


class BackgroundLoop:
    """An event loop in a daemon thread, and the calls it runs for blocking code."""

    def __init__(self) -> None:
        started: concurrent.futures.Future[BlockingPortal] = concurrent.futures.Future()
        self.thread = threading.Thread(
            target=self._run, args=(started,), name="metis-sync-calls", daemon=True
        )
        self.thread.start()
        try:
            self.portal = started.result()
        except BaseException:  # Ctrl-C as it starts: the loop is not left running unowned
            _stop_once_started(started, self.thread)
            raise

    def _run(self, started: concurrent.futures.Future[BlockingPortal]) -> None:
        async def serve() -> None:
            async with BlockingPortal() as portal:
                started.set_result(portal)
                await portal.sleep_until_stopped()

        try:
            anyio.run(serve)
        except BaseException as exc:  # reported to the thread that started the loop
            if not started.done():
                started.set_exception(exc)

    def call(self, function: Callable[[], Awaitable[T]]) -> T:
        """``await function()`` on the loop; an exception raised here while waiting (Ctrl-C)
        cancels it there first."""
        call = _Cancellable()
        future: concurrent.futures.Future[T] | None = None
        try:  # a Ctrl-C may land inside start_task_soon, after the task was started
            future = self.portal.start_task_soon(call.run, function)
            return _outcome(future)
        except BaseException:
            if future is None or not future.done():
                self._stop_task(call)  # its cleanup (the connection closed) first
            raise

    def iterate(
        self, open_events: Callable[[], AsyncIterator[T]], *, read_ahead: bool = True
    ) -> BlockingStream[T]:
        """:meth:`_iterate`'s items, closed at the end of a ``with`` block."""
        return BlockingStream(self._iterate(open_events, read_ahead=read_ahead))

    def _iterate(
        self, open_events: Callable[[], AsyncIterator[T]], *, read_ahead: bool = True
    ) -> Generator[T, None, None]:
        """The items of ``open_events()``, iterated on the loop in one task of their own (so
        its cancel scopes stay in the task that entered them). Up to :data:`READ_AHEAD` items
        wait for this thread, which takes all that are waiting in one crossing; without
        ``read_ahead``, an item is read only when this thread asks for it (a session's stream:
        a turn left early keeps what its caller was given, as the async form's does)."""
        send, receive = anyio.create_memory_object_stream[T](READ_AHEAD if read_ahead else 0)
        asked = None if read_ahead else anyio.Semaphore(0)

        async def produce() -> None:
            async with send:
                events = open_events()
                try:
                    while True:
                        if asked is not None:
                            await asked.acquire()
                        try:
                            event = await anext(events)
                        except StopAsyncIteration:
                            break
                        await send.send(event)
                finally:
                    await _aclose(events)

        producer = _Cancellable()
        future: concurrent.futures.Future[None] | None = None
        try:  # a Ctrl-C may land inside start_task_soon, after the task was started
            future = self.portal.start_task_soon(producer.run, produce)
            while batch := self.portal.call(_waiting, receive, asked):
                yield from batch
            _outcome(future)  # the error that ended the events, if one did
        finally:
            if future is None or not future.done():  # left early, or interrupted
                self._stop_task(producer)
            self._close(receive)

    def _stop_task(self, task: _Cancellable) -> None:
        """Cancel ``task`` on the loop and wait for its cleanup (started or not: a task not yet
        running ends as it starts)."""
        try:
            self.portal.call(task.cancel)
        except RuntimeError:  # the loop has stopped (interpreter exit): nothing runs there
            return
        task.finished.wait(STOP_WAIT_SECONDS)

    def _close(self, receive: MemoryObjectReceiveStream[T]) -> None:
        """On the loop's thread: a receive interrupted there may still be waking up."""
        try:
            self.portal.call(receive.close)
        except RuntimeError:  # the loop has stopped: nothing waits on it any more
            receive.close()

    def stop(self) -> None:
        """Cancel the calls in flight, close the loop's adapters, end the thread."""
        try:
            self.portal.call(self.portal.stop, True)
        except RuntimeError:  # already stopped
            return
        self.thread.join(STOP_WAIT_SECONDS)


def _stop_once_started(
    started: concurrent.futures.Future[BlockingPortal], thread: threading.Thread
) -> None:
    """Stop a loop whose start was interrupted, once it is up (a second interrupt leaves it)."""
    try:
        portal = started.result(STOP_WAIT_SECONDS)
        portal.call(portal.stop, True)
    except BaseException:  # it failed to start, or the wait was interrupted again
        return
    thread.join(STOP_WAIT_SECONDS)


class _Cancellable:
    """Runs one awaitable in a cancel scope that a thread outside the loop can cancel."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.cancelled = False
        self.finished = threading.Event()

    async def run(self, function: Callable[[], Awaitable[T]]) -> T:
        try:
            with anyio.CancelScope() as self.scope:
                if self.cancelled:
                    self.scope.cancel()
                # a tool's KeyboardInterrupt or SystemExit would end the loop with it
                return await carrying(function)
            raise _Interrupted  # cancelled for the waiting thread, which raises its own
        finally:
            self.finished.set()

    def cancel(self) -> None:
        """On the loop's thread (through the portal), so it cannot race ``run``."""
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()


class _Interrupted(Exception):
    pass


def _outcome(future: concurrent.futures.Future[T]) -> T:
    """The future's result; what :func:`carrying` carried is raised as it was raised."""
    try:
        return future.result()
    except Carried as carried:
        raised = carried.raised
    raise raised


async def _waiting(receive: MemoryObjectReceiveStream[T], asked: anyio.Semaphore | None) -> list[T]:
    """The items waiting in ``receive``, after waiting for one (asked for, when ``asked``
    counts the items asked for); none at its end."""
    if asked is not None:
        asked.release()
    try:
        items = [await receive.receive()]
    except anyio.EndOfStream:
        return []
    while True:
        try:
            items.append(receive.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            return items


async def _aclose(events: AsyncIterator[object]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()


_lock = threading.RLock()  # a signal handler's call may come while this thread holds it
_loop: BackgroundLoop | None = None


def background_loop() -> BackgroundLoop:
    """The process's loop for the synchronous forms (started on first use)."""
    global _loop
    with _lock:
        if _loop is None or not _loop.thread.is_alive():
            started = BackgroundLoop()
            if _loop is None or not _loop.thread.is_alive():
                _loop = started
            else:  # a signal handler's call, run as this one started it, started one first
                started.stop()
        return _loop


def blocking_loop_for(call: str, usage: str, *, routed: bool) -> BackgroundLoop:
    """The loop the synchronous form ``call`` (``metis.complete()``, ``Session.send()``, ...)
    runs on, refused where waiting on it would deadlock: on that loop itself, or with a Router
    (``routed``) in a thread running an event loop its pools and stores may belong to.
    ``usage`` is the async form the error tells the caller to use instead."""
    if on_background_loop():
        raise BlockingCallError(
            f"{call} was called on the event loop metis runs the synchronous calls on (from a "
            "stage, a telemetry sink, a store or a run's event handler), where waiting for the "
            f"reply would wait for itself; there, use '{usage}'"
        )
    if routed and _in_event_loop():
        raise BlockingCallError(
            f"{call} with a Router, in a thread running an event loop: the router's connection "
            f"pools and shared stores may belong to this loop, which the call would block; use "
            f"'{usage}'"
        )
    return background_loop()


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    return bool(trio is not None and trio.lowlevel.in_trio_run())


def on_background_loop() -> bool:
    """Whether this thread is the one the synchronous forms' loop runs in."""
    loop = _loop
    return loop is not None and loop.thread is threading.current_thread()


def _stop_at_exit() -> None:
    global _loop
    with _lock:
        loop, _loop = _loop, None
    if loop is not None:
        loop.stop()


def _forget_after_fork() -> None:
    """In a forked child: the loop's thread was not inherited; the next call starts one."""
    global _loop, _lock
    _loop, _lock = None, threading.RLock()


atexit.register(_stop_at_exit)
os.register_at_fork(after_in_child=_forget_after_fork)
