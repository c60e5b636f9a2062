"""What httptools hands the lean transport's connection (:mod:`metis.transport.http1_protocol`)
for one response, taken as httpx's own transport (h11) takes it: interim (1xx) answers skipped;
the value of a field without the whitespace around it; ``Transfer-Encoding`` other than
``chunked`` once refused; ``Content-Length`` with ``Transfer-Encoding`` read by its chunks and the
connection not reused; a 101 the request did not ask for refused; after a HEAD, no body, and a
new parser for the next response (httptools would wait for the body the head announced). A head
httptools refuses and h11 reads is parsed again as h11 reads it
(:mod:`metis.transport.http1_repair`).
"""

from __future__ import annotations

import asyncio

import httptools
import httpx

from metis.transport.http1_repair import HEAD_END, controls_only, may_read, repaired

_NO_BODY_STATUS = (204, 304)
MAX_REPARSES = 4
"""The most times one response's head is parsed again (each time a head of it is whole: its
interim answers', its own), so that a server's bytes cost a bounded number of passes."""


class ResponseParsing:
    """httptools' callbacks, and the state of the response in flight they make."""

    parser: httptools.HttpResponseParser
    request: httpx.Request | None
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    head: bool
    complete: bool
    until_close: bool
    head_request: bool
    interim: bool
    body: list[bytes]
    buffered: int
    raw_head: list[bytes]
    framing: int
    error: Exception | None
    keep_alive: bool
    overread: bool
    fresh_parser: bool
    refusal: Exception | None
    """What httptools said of a head that is not yet whole (parsed again once it is)."""
    reparses: int
    writer: asyncio.Future[bool] | None

    def on_message_begin(self) -> None:
        if self.complete:  # a second response to one request
            self.overread = True
        else:  # (the answer after an interim one, or the head parsed again)
            self.reason = b""

    def on_status(self, reason: bytes) -> None:
        self.reason += reason  # (in the pieces that arrived, when the line spans reads)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.head:  # a trailer field, after a chunked body: not the head's
            return
        if value and value[-1] <= 32:  # whitespace around a value is not its own
            value = value.rstrip(b" \t")
        if len(name) in (14, 17):
            value = self._framing(name.lower(), value)
        self.headers.append((name, value))

    def _framing(self, name: bytes, value: bytes) -> bytes:
        """Content-Length and Transfer-Encoding, as h11 takes them: a transfer coding other
        than chunked alone is refused (httptools would hand on a gzip-coded body undecoded,
        or read an identity one until the connection closes), and so is a second field."""
        if name == b"content-length":
            self.until_close = False
            self.framing |= 1
        elif name == b"transfer-encoding":
            self.until_close = False
            value = value.lower()
            if value != b"chunked" or self.framing & 2:
                said = value.decode("latin-1")
                twice = " twice" if self.framing & 2 else ""
                self.error = httpx.RemoteProtocolError(
                    f"the server sent Transfer-Encoding: {said}{twice}; only chunked is read",
                    request=self.request,
                )
                raise self.error
            self.framing |= 2
        return value

    def on_headers_complete(self) -> None:
        if self.overread:
            return
        status = self.parser.get_status_code()
        if status < 200 and status != 101:  # an interim response: the real one follows
            self.headers = []
            self.interim = True
            return
        if status == 101 and not _asks_upgrade(self.request):  # (one that asks goes to httpx's)
            self.error = httpx.RemoteProtocolError(
                "the server switched protocols unasked (101)", request=self.request
            )
            raise self.error
        self.status = status
        self.head = True
        wake(self.writer)  # a write waiting for the server to read ends: it answered
        self.raw_head = []
        if self.head_request:  # its head says what a GET's body would be: there is none
            self.complete = True
            self.fresh_parser = True
            if _says_close(self.headers):
                self.keep_alive = False
            return
        if not self.parser.should_keep_alive() or self.framing == 3:
            self.keep_alive = False  # (both lengths: the chunks count, RFC 9112 §6.3; not reused)
        if status in _NO_BODY_STATUS:
            self.until_close = False
        # A trailer field may be folded (obs-fold), which a client must read as a space (RFC
        # 9112 §5.2) and httptools refuses unless lenient: only trailers are parsed from here.
        self.parser.set_dangerous_leniencies(lenient_headers=True)

    def on_body(self, body: bytes) -> None:
        if not self.complete:
            self.body.append(body)
            self.buffered += len(body)
        else:  # a body after a HEAD's head
            self.overread = True

    def on_message_complete(self) -> None:
        if self.overread:
            return
        if self.interim:
            self.interim = False
            return
        self.complete = True
        self.parser.set_dangerous_leniencies(lenient_headers=False)  # (the next head: strict)

    def _malformed(self, exc: Exception) -> None:
        if isinstance(exc, httptools.HttpParserUpgrade):  # a 101's head is all there is
            self.complete = self.head
            self.overread = True
        elif self.error is None:  # (a callback below may have said what was wrong)
            self.error = httpx.RemoteProtocolError(
                f"the server sent a malformed response: {exc}", request=self.request
            )
        self.keep_alive = False

    def _refused(self, exc: Exception) -> None:
        """httptools refused the response's bytes: once its head is whole, it is parsed again
        as h11 would read it (:meth:`reparse`), or it is malformed."""
        upgrade = isinstance(exc, httptools.HttpParserUpgrade)
        if self.head or self.error is not None or upgrade or self.reparses >= MAX_REPARSES:
            self._malformed(exc)
            return
        raw = b"".join(self.raw_head)
        if HEAD_END.search(raw):
            self.refusal = exc
            self.reparse()
        elif may_read(raw):  # (the rest of the head to come)
            self.refusal = exc
        else:
            self._malformed(exc)

    def reparse(self) -> None:
        """Parse the head again, rewritten as h11 reads it (metis/transport/http1_repair.py),
        or fail with what httptools said when it is not a shape h11 reads."""
        refusal, self.refusal = self.refusal, None
        raw = b"".join(self.raw_head)
        fixed = repaired(raw)
        lenient = controls_only(fixed or raw)
        if fixed is None and not lenient:
            self._malformed(refusal or ValueError("malformed"))
            return
        self.reparses += 1
        self.headers, self.interim, self.framing, self.until_close = [], False, 0, True
        self.parser = new_parser(self, lenient_headers=lenient)
        self.fresh_parser = self.fresh_parser or lenient  # (the next response: strict again)
        try:
            self.parser.feed_data(fixed or raw)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as again:
            self._refused(again)


def _asks_upgrade(request: httpx.Request | None) -> bool:
    return request is not None and "upgrade" in request.headers


def _says_close(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(n.lower() == b"connection" and b"close" in v.lower() for n, v in headers)


def new_parser(
    protocol: ResponseParsing, *, lenient_headers: bool = False
) -> httptools.HttpResponseParser:
    """An httptools parser calling ``protocol``, as lenient as h11 where h11 is
    (``lenient_headers``: control characters in field values too)."""
    parser = httptools.HttpResponseParser(protocol)
    parser.set_dangerous_leniencies(  # what h11 reads too
        lenient_optional_cr_before_lf=True,  # a bare LF ending a line of the head
        lenient_spaces_after_chunk_size=True,
        lenient_chunked_length=True,  # Transfer-Encoding with Content-Length: the chunks count
        lenient_version=True,  # HTTP/1.2, HTTP/2.0 in a status line: h11 reads any d.d
        lenient_headers=lenient_headers,
    )
    return parser


def wake(waiter: asyncio.Future[bool] | None) -> None:
    """End ``waiter``'s wait (with news, not a timeout)."""
    if waiter is not None and not waiter.done():
        waiter.set_result(False)
