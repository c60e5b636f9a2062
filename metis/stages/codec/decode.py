"""The ``decode`` stage: the provider's response bytes become the JSON objects it sent.

It sits just outside the transport and leaves the request alone. A streamed body is split
into its documents by ``format``, the stack's ``framing``: ``sse`` (Server-Sent Events, each
event's data one JSON object; OpenAI's ``[DONE]`` terminator ends it, and events after it are
ignored), ``ndjson`` (one object per line) or ``eventstream`` (AWS's binary frames,
metis/wire/framing/aws_eventstream.py). A body that is not streamed, or whose format is
``json``, is one JSON document, parsed once at the end. Anything that is not a JSON object,
and JSON beyond :mod:`metis.wire.json_limits` (NaN, Infinity, nesting deeper than 100
levels), raises :class:`~metis.errors.ProtocolError`.

A streamed request answered with a whole JSON body (``content-type: application/json``, as
some proxies and servers do) is read as that one document, yielded as a :class:`WholeBody` so
that ``normalize`` reads it as a complete reply. A stream mislabelled as JSON is still read as
its format says: SSE never opens with ``{``, and NDJSON is one document per line.

The splitting is :class:`metis.wire.framing.objects.BodyObjects`, sans-IO: the provider's
send loop feeds it in its own loop, and this stage, run on its own, does the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

from metis.errors import ProtocolError
from metis.pipeline.call import Call
from metis.pipeline.request import ResponseHead, ResponseItem, WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage
from metis.stages.options import DecodeOptions
from metis.wire.framing.objects import BodyObjects, WholeBody
from metis.wire.response_reader import MAX_IGNORED_AFTER_END, warn_ignored_after_end

__all__ = ["Decode", "WholeBody"]

Read = Callable[[], Awaitable[bytes | None]]


class Decode(Stage[WireRequest, WireRequest, ResponseItem, dict[str, Any]]):
    name = "decode"
    role = "framing"

    Options = DecodeOptions

    options: DecodeOptions
    _secrets: tuple[str, ...] = ()

    def bind(self, services: StageServices) -> None:
        self._secrets = services.secrets

    def objects(self, request: WireRequest, content_type: str | None) -> BodyObjects:
        """The splitter of one answer's body."""
        return BodyObjects(self.options.format, streamed=request.stream, content_type=content_type)

    async def after_done(self, objects: BodyObjects, read: Read, call: Call) -> None:
        """Read on after ``[DONE]``, parsing nothing: one WARN if anything came, and no more
        than ``MAX_IGNORED_AFTER_END`` events."""
        warned = False
        while True:
            if objects.ignored and not warned:
                warn_ignored_after_end(call, "data: [DONE]")
                warned = True
            if objects.ignored > MAX_IGNORED_AFTER_END:
                return
            chunk = await read()
            if chunk is None:
                return
            try:
                objects.feed(chunk)
            except ProtocolError as error:
                warn_ignored_after_end(call, "data: [DONE]", error, self._secrets)
                return

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[WireRequest, ResponseItem]
    ) -> AsyncIterator[dict[str, Any]]:
        items = inner(request, call)
        first = await anext(items, None)
        content_type = first.content_type if isinstance(first, ResponseHead) else None
        objects = self.objects(request, content_type)
        chunks = cast(AsyncIterator[bytes], items)  # after the head, only body bytes
        chunk = first if not isinstance(first, ResponseHead) else await anext(chunks, None)
        while chunk is not None:
            for obj in objects.feed(chunk):
                yield obj
            if objects.halted:
                if objects.failed is not None:
                    raise objects.failed
                await self.after_done(objects, lambda: anext(chunks, None), call)
                return
            chunk = await anext(chunks, None)
        for obj in objects.close():
            yield obj
