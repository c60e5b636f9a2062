"""The provider's send path as one loop: send, frame, read, in one generator frame.

The innermost segment of a provider stack (its auth steps, ``telemetry``, and the send path
``normalize``, ``decode``, ``transport``) runs here as one async generator: the request steps
(each auth step signs or addresses the attempt; hooks open), the transport's exchange (the
request, its redirects, the head in time), then one loop that reads a chunk, splits it into
the provider's objects (the framing), reads each into canonical events (the reader) and hands
them through the watches, innermost first. No stage of the send path is a frame of its own.

The parts are the send path's stages, found by their ``role`` (``reader``, ``framing``,
``transport``): anything else in their place (a transport of your own) runs as a stage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

import anyio

from metis.errors import CancelledError
from metis.model.events import StreamEvent
from metis.pipeline.call import Call
from metis.pipeline.hooks import BATCHES, Opened, Runner, Steps, Watches, ended, take_steps
from metis.pipeline.request import WireRequest


class Exchange(Protocol):
    """One request in flight: its answer's content type and a way to read its body."""

    content_type: str | None
    read: Callable[[], Awaitable[bytes | None]]
    clock: Any
    """The read clock: ``received`` is set once body bytes have arrived."""

    def translate(self, error: Exception) -> Exception:
        """An HTTP client's failure as the classified error it stands for."""
        ...

    async def aclose(self) -> None: ...


class Objects(Protocol):
    """A body's objects as its framing delimits them (:class:`BodyObjects`)."""

    halted: bool
    done: bool
    failed: Exception | None

    def feed(self, chunk: bytes) -> list[dict[str, Any]]: ...

    def each(self, chunk: bytes) -> Iterable[dict[str, Any]]: ...

    def close(self) -> list[dict[str, Any]]: ...


class CallReader(Protocol):
    """One call's reading (the sans-IO ``ResponseReader`` of metis/wire/response_reader.py,
    driven for the call): provider objects in, canonical events out."""

    reading: bool
    """False once enough was read after the message ended: stop reading."""

    def feed(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        """One object of a stream, as it arrives."""
        ...

    def feed_into(self, objects: Iterable[dict[str, Any]], events: list[StreamEvent]) -> None:
        """Each of ``objects`` as ``feed`` reads it, its events added to ``events`` as made."""
        ...

    def read(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        """Any object: a whole reply, or one of a stream."""
        ...

    def finish(self, marked: bool = False) -> Sequence[StreamEvent]: ...

    def ended(self, error: Exception) -> tuple[Sequence[StreamEvent], Exception | None]:
        """The events that end a message cut short by ``error``, and the error to raise
        (None when the ending is the whole answer: a cancelled call)."""
        ...


class TransportPart(Protocol):
    async def open(self, request: WireRequest, call: Call) -> Exchange: ...


class FramingPart(Protocol):
    def objects(self, request: WireRequest, content_type: str | None) -> Objects: ...

    async def after_done(
        self, objects: Objects, read: Callable[[], Awaitable[bytes | None]], call: Call
    ) -> None: ...


class ReaderPart(Protocol):
    def reader(self, request: WireRequest, call: Call) -> CallReader: ...


def provider_tail(stages: tuple[Any, ...], steps: Steps) -> Runner | None:
    """The send path's runner when ``stages`` are exactly the provider's reader, framing and
    transport (with ``steps``, the segment's auth steps and hooks, before them), else None."""
    if len(stages) != 3:
        return None
    reader, framing, transport = stages
    roles = tuple(getattr(stage, "role", None) for stage in stages)
    if roles != ("reader", "framing", "transport"):
        return None
    return send_path(steps, reader, framing, transport)


def send_path(
    steps: Steps, reader: ReaderPart, framing: FramingPart, transport: TransportPart
) -> Runner:
    """The runner of a provider stack's innermost segment."""

    def run(request: Any, call: Call, opened: Opened) -> AsyncIterator[Any]:
        iterator = _send(steps, reader, framing, transport, request, call)
        opened.append(iterator)
        return iterator

    setattr(run, BATCHES, True)  # the events of a chunk, in one list
    return run


async def _send(
    steps: Steps,
    reader_part: ReaderPart,
    framing: FramingPart,
    transport: TransportPart,
    request: WireRequest,
    call: Call,
) -> AsyncIterator[list[StreamEvent]]:
    request, opened = await take_steps(steps, request, call)
    watches = Watches(opened)  # the attempt's watches: telemetry's, with a sink
    reader = reader_part.reader(request, call)
    exchange: Exchange | None = None
    batch: list[StreamEvent] = []  # the events of this chunk, handed on together
    try:
        try:
            exchange = await transport.open(request, call)
            objects = framing.objects(request, exchange.content_type)
            read, clock, cancel, plain = exchange.read, exchange.clock, call.cancel, not watches
            while (chunk := await read()) is not None:
                clock.received = True
                if cancel.cancelled:
                    raise CancelledError("the call was cancelled")
                if plain:  # no watch in the send path (no telemetry sink)
                    reader.feed_into(objects.each(chunk), batch)  # added as made: see the except
                else:
                    await _watched(objects.each(chunk), reader, watches, batch)
                if batch:
                    out, batch = batch, []
                    yield out
                if objects.halted or not reader.reading:
                    await _halted(objects, framing, read, call)
                    break
            else:
                await _closed(objects, reader, watches, batch)  # a whole reply comes here
            batch.extend(await _through(watches, *reader.finish(objects.done)))
            if batch:
                out, batch = batch, []
                yield out
        except Exception as exc:
            error = exchange.translate(exc) if exchange is not None else exc
            events, raised = reader.ended(error)
            out, batch = batch, []  # what the chunk made before the error goes first
            out.extend(await _through(watches, *events))
            if out:
                yield out
            if raised is not None:
                raise raised from raised.__cause__
    except BaseException as exc:
        replaced = ended(watches, exc)
        if replaced is exc:
            raise
        raise replaced  # noqa: B904 - its own cause, if it has one, or this error as context
    finally:
        if exchange is not None:
            with anyio.CancelScope(shield=True):
                await exchange.aclose()
    closed = watches.close(None)
    if closed is not None:
        raise closed


async def _watched(
    objects: Iterable[dict[str, Any]],
    reader: CallReader,
    watches: Watches,
    batch: list[StreamEvent],
) -> None:
    """The events of ``objects`` through the send path's watches, added to ``batch`` as they
    pass (so what was made before a watch fails is in it)."""
    table = watches.table
    for obj in objects:
        for event in reader.feed(obj):
            if table.get(event.__class__) == ():  # no watch looks at it
                batch.append(event)
            else:
                batch += await watches.passed(event)


async def _closed(
    objects: Objects, reader: CallReader, watches: Watches, batch: list[StreamEvent]
) -> None:
    """The objects the body's end completes (a whole reply, given only at the end)."""
    for obj in objects.close():
        batch.extend(await _through(watches, *reader.read(obj)))


async def _halted(
    objects: Objects, framing: FramingPart, read: Callable[[], Awaitable[bytes | None]], call: Call
) -> None:
    """Reading stopped early: a failed object is raised, ``[DONE]`` read past."""
    if objects.failed is not None:
        raise objects.failed
    if objects.done:
        await framing.after_done(objects, read, call)


async def _through(watches: Watches, *events: StreamEvent) -> list[StreamEvent]:
    """``events`` through the watches (the end of the message, mostly)."""
    out: list[StreamEvent] = []
    for event in events:
        out.extend(await watches.passed(event))
    return out
