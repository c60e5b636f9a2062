"""A request's body, sent by httpx without an async generator.

httpx sends a body given as bytes through ``ByteStream.__aiter__``, an async generator. A call
cancelled while its body is being written leaves that generator suspended; under trio, whose
event loop finalizes async generators itself, it is then garbage collected unfinished and
trio says so with a ``ResourceWarning`` (one per cancelled call: a streamed call, ``complete``,
``count_tokens``). :func:`sent_once` gives the request a body that iterates the same bytes
with a plain iterator, which has nothing to finalize.
"""

from __future__ import annotations

import httpx


class _Once:
    """The one chunk of a body, as an async iterator that is not a generator."""

    __slots__ = ("_body",)

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body

    def __aiter__(self) -> _Once:
        return self

    async def __anext__(self) -> bytes:
        body, self._body = self._body, None
        if body is None:
            raise StopAsyncIteration
        return body


class OnceBody(httpx.ByteStream):
    """httpx's body of bytes, iterated asynchronously without a generator."""

    def __init__(self, body: bytes) -> None:
        super().__init__(body)
        self.body = body

    def __aiter__(self) -> _Once:
        return _Once(self.body)


def sent_once(request: httpx.Request) -> httpx.Request:
    """``request``, its body of bytes (httpx's own ``ByteStream``) made a :class:`OnceBody`;
    a request of another client, or with a streamed body, is left as it is."""
    if type(request.stream) is httpx.ByteStream:
        request.stream = OnceBody(request.content)
    return request
