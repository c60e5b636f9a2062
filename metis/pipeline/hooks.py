"""Per-event hooks: the stage kind the pipeline runs in one loop per event (docs/engine.md).

A hook is a stage whose ``open(request, call)`` runs once per call, on the way in: it may
rewrite the request, and it returns a :class:`Watch`, the call's own state, or None when this
call has nothing to watch. The engine then hands every event coming back to the watches of a
stretch of the stack in one loop, innermost first, with no generator frame per hook::

    class CountDeltas(EventHook[CanonicalRequest]):
        name = "count_deltas"

        async def open(self, request, call):
            return request, Counter()

    class Counter(Watch):
        kinds = (TextDelta,)              # the events it looks at (default: every one)

        def __init__(self) -> None:
            self.deltas = 0

        def event(self, event):
            self.deltas += 1
            return event                  # passed on; a new event replaces it

        def close(self, error):
            log.info("%d deltas", self.deltas)
            return None                   # or an exception to raise instead of ``error``

``event`` returns the event to pass on (itself or a new one), None to drop it, or a list of
events to pass on in its place. ``completed(message_complete)`` is awaited once the call's
``message.complete`` has passed every watch of the stretch, before it goes further out (the
tool-id store is written there); it may return a new one to go in its place.
``close(error)`` runs once when the stream ends: ``error`` is None at a normal end, else what
ended it (cancellation included); returning an exception raises that one instead.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, ClassVar, TypeVar

import anyio

from metis.model.events import BLOCK_EVENTS, MessageComplete, MessageStart, StreamEvent
from metis.pipeline.call import Call
from metis.pipeline.stage import Inner, Stage

RequestT = TypeVar("RequestT")
Opened = list[AsyncIterator[Any]]
"""The iterators a run opened, for the pipeline to close, outermost first."""
Runner = Callable[[Any, Call, Opened], AsyncIterator[Any]]
"""Runs a stretch of the stack: (request, call, opened) -> its events."""
SYNC, ASYNC, OPEN = 0, 1, 2
"""Request steps: a transform's ``rewrite``, an async one's, a hook's ``open``."""
Steps = tuple[tuple[int, Callable[..., Any]], ...]

BATCHES = "yields_batches"
"""The mark of a runner whose items are batches (lists of events), not events: the send
loop's, and what a wrapper that ``takes_batches`` makes of it."""


def yields_batches(runner: Runner) -> bool:
    return bool(getattr(runner, BATCHES, False))


def flattened(inside: Runner) -> Runner:
    """``inside`` (a runner of batches) one event at a time, for a wrapper that looks at
    events, or for whoever runs the stack without its outermost segment."""

    def run(request: Any, call: Call, opened: Opened) -> AsyncIterator[Any]:
        position = len(opened)  # outermost first: before what ``inside`` opens
        iterator = _each_event(inside(request, call, opened))
        opened.insert(position, iterator)
        return iterator

    return run


async def _each_event(batches: AsyncIterator[list[StreamEvent]]) -> AsyncIterator[StreamEvent]:
    async for batch in batches:
        for event in batch:
            yield event


Passed = StreamEvent | list[StreamEvent] | None
"""What a watch makes of one event: the event (or a new one), a list of events, or None."""


class Watch:
    """One call's state for a hook. Subclass and override what the hook needs."""

    kinds: ClassVar[tuple[type[StreamEvent], ...] | None] = None
    """The event classes ``event`` is called for (None: every event; ``()``: none, for a
    watch that only wants ``completed`` or ``close``). The engine calls a watch only for the
    events it looks at: a text delta costs nothing to a watch of tool calls."""

    def event(self, event: StreamEvent) -> Passed:
        """The event to pass on (itself or a new one), None to drop it, or a list of events
        to pass on in its place."""
        return event

    async def completed(self, event: MessageComplete) -> MessageComplete | None:
        """The call's ``message.complete`` passed every watch of its stretch: await what must
        be done before it goes out (a store write), and return a new one to put in its place
        (None: it goes as it is)."""
        return None

    def close(self, error: BaseException | None) -> BaseException | None:
        """The call ended (``error`` is why, None at a normal end): the exception to raise
        in its place, or None to leave it as it is."""
        return None


class EventHook(Stage[RequestT, RequestT, StreamEvent, StreamEvent]):
    """A stage that sees each event on its way out, run in the engine's one loop."""

    async def open(self, request: RequestT, call: Call) -> tuple[RequestT, Watch | None]:
        """At the call's start: the request to pass inward and the call's watch (None to
        watch nothing)."""
        raise NotImplementedError(f"hook {self.name!r} does not implement open")

    def __call__(
        self, request: RequestT, call: Call, inner: Inner[RequestT, StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        """The hook on its own, as the first engine ran stages: for a pipeline of its own
        or a test (``stage(request, call, inner)``)."""

        def inside(inner_request: RequestT, inner_call: Call, opened: Opened) -> Any:
            return inner(inner_request, inner_call)

        return run_segment(((OPEN, self.open),), inside, request, call, [])


_COMPLETED = Watch.completed
EVENT_CLASSES: tuple[type[StreamEvent], ...] = (MessageStart, *BLOCK_EVENTS, MessageComplete)


def _looks_at(watch: Watch, cls: type) -> bool:
    return watch.kinds is None or cls in watch.kinds


Table = dict[type, tuple[Callable[[StreamEvent], Passed], ...]]
Layout = tuple[tuple[type, tuple[int, ...]], ...]
_NO_WATCH: Table = {cls: () for cls in EVENT_CLASSES if cls is not MessageComplete}
_LAYOUTS: dict[tuple[Any, ...], Layout] = {}


def _layout(watches: list[Watch]) -> Layout:
    """For each event class of a table, the positions of the watches that look at it: the
    same for every call whose watches look at the same classes (kept, by their ``kinds``)."""
    kinds = tuple(w.kinds for w in watches)
    try:
        return _LAYOUTS[kinds]
    except KeyError:
        pass
    except TypeError:  # a watch's own unhashable ``kinds``: worked out for this call alone
        return _laid_out(watches)
    if len(_LAYOUTS) >= 256:
        _LAYOUTS.clear()
    layout = _LAYOUTS[kinds] = _laid_out(watches)
    return layout


def _laid_out(watches: list[Watch]) -> Layout:
    return tuple(
        (cls, tuple(i for i, w in enumerate(watches) if _looks_at(w, cls)))
        for cls in EVENT_CLASSES
        if cls is not MessageComplete
    )


class Watches:
    """The watches of one stretch of the stack for one call, innermost first.

    ``table`` maps each event class but ``message.complete`` to the ``event`` methods of the
    watches that look at it (an empty tuple: none does, and the event goes on as it is); the
    engine's loop calls them itself for the usual event. ``message.complete``, a class the
    table does not map, and an event a watch dropped or spread go the long way
    (:meth:`passed`, :meth:`passed_on`)."""

    __slots__ = ("all", "completing", "table")

    table: Table

    def __init__(self, watches: Sequence[Watch]) -> None:
        self.all = every = list(watches)
        self.completing = [w.completed for w in every if type(w).completed is not _COMPLETED]
        if not every:
            self.table = _NO_WATCH  # (never written to)
            return
        seen = [w.event for w in every].__getitem__
        self.table = {cls: tuple(map(seen, looking)) for cls, looking in _layout(every)}

    def __bool__(self) -> bool:
        return bool(self.all)

    async def passed(self, event: StreamEvent) -> list[StreamEvent]:
        """What goes on in place of ``event``: it through every watch that looks at it."""
        return await self._completed(self.through(0, [event]))

    async def passed_on(
        self, see: Callable[[StreamEvent], Passed], out: Passed
    ) -> list[StreamEvent]:
        """What goes on after the watch whose ``see`` dropped an event (``out`` None) or put
        several in its place (a list): each through the watches outside it."""
        position = self.all.index(see.__self__) + 1  # type: ignore[attr-defined]
        return await self._completed(self.through(position, spilled(out)))

    def through(self, start: int, pending: list[StreamEvent]) -> list[StreamEvent]:
        """``pending`` through the watches from ``start`` outward, each event through those
        that look at its class."""
        for watch in self.all[start:]:
            passed: list[StreamEvent] = []
            for one in pending:
                if not _looks_at(watch, one.__class__):
                    passed.append(one)
                    continue
                result = watch.event(one)
                if result is None:
                    continue
                if result.__class__ is list:
                    passed.extend(result)
                else:
                    passed.append(result)  # type: ignore[arg-type]
            pending = passed
        return pending

    async def _completed(self, out: list[StreamEvent]) -> list[StreamEvent]:
        if self.completing:
            for i, one in enumerate(out):
                if one.__class__ is MessageComplete:
                    out[i] = await self.completed(one)
        return out

    async def completed(self, event: MessageComplete) -> MessageComplete:
        """``event`` through every watch's ``completed``, innermost first."""
        for completed in self.completing:
            replaced = await completed(event)
            if replaced is not None:
                event = replaced
        return event

    def close(self, error: BaseException | None) -> BaseException | None:
        """Every watch's ``close``, innermost first; each sees the error as the ones inside
        it left it. Returns the error to raise (None at a normal end that stays normal)."""
        for watch in self.all:
            try:
                replaced = watch.close(error)
            except Exception as exc:  # a watch's own verdict (invariants at the end): it goes on
                replaced = exc
            if replaced is not None:
                error = replaced
        return error


async def take_steps(steps: Steps, request: Any, call: Call) -> tuple[Any, list[Watch]]:
    """The request after every step, and the watches the hooks opened (innermost first)."""
    watches: list[Watch] = []
    for kind, step in steps:
        if kind == SYNC:
            request = step(request, call)
        elif kind == ASYNC:
            request = await step(request, call)
        else:
            request, watch = await step(request, call)
            if watch is not None:
                watches.append(watch)
    watches.reverse()
    return request, watches


Start = Callable[[Any], Awaitable[tuple[Any, Call, Watch]]]
"""Opens a call: (request) -> (the request, its call, the watch of whoever asked for it)."""


async def run_segment(
    steps: Steps,
    inside: Runner,
    request: Any,
    call: Call | None,
    opened: Opened,
    start: Start | None = None,
) -> AsyncGenerator[Any, None]:
    """One segment: its steps, what is inside it, its watches over the events, in one frame.
    The outermost segment of a call may be given ``start``: it opens the call (and gives the
    watch of whoever asked for it, outermost of all), and every iterator the call opened is
    closed when it ends, however it ends (:meth:`metis.pipeline.pipeline.Pipeline.stream`)."""
    watches = Watches(())
    try:
        if start is not None:
            request, call, own = await start(request)
            watches = Watches([own])
        assert call is not None
        request, opened_watches = await take_steps(steps, request, call)
        watches = Watches([*opened_watches, *watches.all])
        table, plain = watches.table, not watches.all
        async for item in inside(request, call, opened):
            # An item is an event, or a batch of them (a list: those of one chunk, from
            # the send loop); each is handed on alone, in order.
            for event in item if item.__class__ is list else (item,):
                if plain:
                    yield event
                    continue
                sees = table.get(event.__class__)
                if sees is None:  # message.complete, or an event of a class of its own
                    for passed in await watches.passed(event):
                        yield passed
                    continue
                out: Passed = event
                for see in sees:  # the usual event: through the watches that look at it
                    out = see(out)  # type: ignore[arg-type]
                    if out is None or out.__class__ is list:
                        break
                else:
                    yield out
                    continue
                for passed in await watches.passed_on(see, out):  # dropped, or several
                    yield passed
    except BaseException as exc:
        replaced = ended(watches, exc)
        if replaced is exc:
            raise
        raise replaced  # noqa: B904 - its own cause, if it has one, or this error as context
    finally:
        if start is not None:
            await close_all(opened)
    closed = watches.close(None)
    if closed is not None:
        raise closed


async def close_all(opened: Opened) -> None:
    """Close every iterator a call opened, outermost first, even when the caller was
    cancelled: the transport's connection is released however the caller left."""
    with anyio.CancelScope(shield=True):
        for iterator in opened:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()


def spilled(out: Any) -> list[StreamEvent]:
    return [] if out is None else out


def ended(watches: Watches, error: BaseException) -> BaseException:
    """What to raise when ``error`` ended a stream: the error, or what a watch put in its
    place (only for an Exception: cancellation and closing go on as they are)."""
    replaced = watches.close(error)
    if replaced is None or not isinstance(error, Exception):
        return error
    return replaced
