"""A session's synchronous forms: each runs its async twin on the loop the one-line calls
run theirs on (docs/calls.md), so they work in scripts, threads and notebooks, and Ctrl-C
cancels the turn."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Self, Unpack

from metis.calls.background import BackgroundLoop, BlockingStream, blocking_loop_for
from metis.calls.request import MessagesLike, ModelLike, ModelOptions
from metis.model.events import StreamEvent
from metis.model.response import CanonicalResponse
from metis.routing.router import Router
from metis.sessions.agent import DEFAULT_MAX_STEPS
from metis.sessions.events import AskedT, RunEvent, RunResult
from metis.sessions.stream import TurnStream

EventHandler = Callable[[StreamEvent | RunEvent], Awaitable[None] | None]


class BlockingForms:
    """``send``, ``stream``, ``run`` and ``stream_run`` for code without an event loop (a
    Session's)."""

    if TYPE_CHECKING:

        @property
        def model(self) -> ModelLike: ...

        async def asend(
            self, message: MessagesLike | None = None, **options: Unpack[ModelOptions]
        ) -> CanonicalResponse: ...

        def astream(
            self, message: MessagesLike | None = None, **options: Unpack[ModelOptions]
        ) -> TurnStream[StreamEvent]: ...

        async def arun(
            self,
            message: MessagesLike | None = None,
            *,
            max_steps: int = DEFAULT_MAX_STEPS,
            tool_timeout_seconds: float | None = None,
            output_type: type[AskedT] | None = None,
            on_event: EventHandler | None = None,
            **options: Unpack[ModelOptions],
        ) -> RunResult[AskedT]: ...

        def astream_run(
            self,
            message: MessagesLike | None = None,
            *,
            max_steps: int = DEFAULT_MAX_STEPS,
            tool_timeout_seconds: float | None = None,
            output_type: type[Any] | None = None,
            **options: Unpack[ModelOptions],
        ) -> TurnStream[StreamEvent | RunEvent]: ...

        def _checked(self, what: str, options: Mapping[str, Any]) -> ModelOptions: ...

        async def aclose(self) -> None: ...

        def cancel(self) -> bool: ...

        def _left(self) -> bool: ...

    def send(
        self, message: MessagesLike | None = None, **options: Unpack[ModelOptions]
    ) -> CanonicalResponse:
        """:meth:`asend` for code without an event loop (run on metis's own, as
        ``metis.complete``; Ctrl-C cancels the turn)."""
        self._checked("send", options)
        loop = blocking_loop("send", self.model)
        return loop.call(functools.partial(self.asend, message, **options))

    def stream(
        self, message: MessagesLike | None = None, **options: Unpack[ModelOptions]
    ) -> BlockingStream[StreamEvent]:
        """:meth:`astream` for code without an event loop (``with session.stream(...) as
        events:`` ends the turn at the block's end, as ``async with`` does)."""
        self._checked("stream", options)
        loop = blocking_loop("stream", self.model)
        return loop.iterate(functools.partial(self.astream, message, **options), read_ahead=False)

    def run(
        self,
        message: MessagesLike | None = None,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        tool_timeout_seconds: float | None = None,
        output_type: type[AskedT] | None = None,
        on_event: EventHandler | None = None,
        **options: Unpack[ModelOptions],
    ) -> RunResult[AskedT]:
        """:meth:`arun` for code without an event loop (``on_event`` is called on metis's
        loop, between the run's steps as they happen)."""
        self._checked("run", options)
        loop = blocking_loop("run", self.model)
        run = functools.partial(
            self.arun,
            message,
            max_steps=max_steps,
            tool_timeout_seconds=tool_timeout_seconds,
            output_type=output_type,
            on_event=on_event,
            **options,
        )
        return loop.call(run)

    def stream_run(
        self,
        message: MessagesLike | None = None,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        tool_timeout_seconds: float | None = None,
        output_type: type[Any] | None = None,
        **options: Unpack[ModelOptions],
    ) -> BlockingStream[StreamEvent | RunEvent]:
        """:meth:`astream_run` for code without an event loop: the run's events as they
        happen, ending with ``run.complete`` (its ``result``); leaving the loop early (or
        Ctrl-C) cancels the run, and the history stays valid."""
        self._checked("run", options)
        loop = blocking_loop("run", self.model)
        run = functools.partial(
            self.astream_run,
            message,
            max_steps=max_steps,
            tool_timeout_seconds=tool_timeout_seconds,
            output_type=output_type,
            **options,
        )
        return loop.iterate(run, read_ahead=False)

    def close(self) -> None:
        """:meth:`aclose` for code without an event loop: what providers keep open for the
        session (a WebSocket stack's connection) is closed on metis's loop, where the
        synchronous turns opened it. ``with Session(...) as session:`` calls it at the end."""
        blocking_loop("close", self.model).call(self.aclose)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._left():  # else a turn's stream left unclosed: it ends once closed
            self.close()


def blocking_loop(what: str, model: ModelLike) -> BackgroundLoop:
    """metis's loop for ``Session.<what>()``; refused where waiting on it would deadlock."""
    usage = f"await session.a{what}(...)"
    return blocking_loop_for(f"Session.{what}()", usage, routed=isinstance(model, Router))
