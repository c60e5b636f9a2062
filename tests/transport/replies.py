"""The crafted replies of the differential test (tests/transport/test_lean_vs_httpx.py): every
shape of an HTTP/1.1 response head and body a server may send, well-formed or not."""

from __future__ import annotations

import gzip
import zlib

from .replay import Reply, reply

OK = b"HTTP/1.1 200 OK\r\n"
CHUNKED = OK + b"Transfer-Encoding: chunked\r\n\r\n"
HELLO = b"hello"


def _length(body: bytes, *head: bytes) -> bytes:
    return OK + b"".join(head) + b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


def _zstd(data: bytes) -> bytes:
    try:
        import zstandard
    except ImportError:
        return data
    return zstandard.ZstdCompressor().compress(data)


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


_MANY = b"".join(b"X-Header-%d: value %d\r\n" % (n, n) for n in range(500))
_HUGE = b"X-Huge: " + b"a" * (120 * 1024) + b"\r\n"

REPLIES: dict[str, Reply] = {
    # status lines
    "plain": reply(_length(HELLO)),
    "reason empty": reply(b"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n"),
    "reason absent": reply(b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"),
    "reason utf-8": reply("HTTP/1.1 200 Très bien\r\nContent-Length: 0\r\n\r\n".encode()),
    "reason latin-1": reply(
        "HTTP/1.1 200 Très bien\r\nContent-Length: 0\r\n\r\n".encode("latin-1")
    ),
    "reason with tab": reply(b"HTTP/1.1 200 O\tK\r\nContent-Length: 0\r\n\r\n"),
    "status 599": reply(b"HTTP/1.1 599 Odd\r\nContent-Length: 0\r\n\r\n"),
    "status two digits": reply(b"HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n"),
    "status four digits": reply(b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"),
    "http/1.0 keep-alive": reply(
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"
    ),
    "http/1.0 no length": reply(b"HTTP/1.0 200 OK\r\n\r\nuntil close", close=True),
    "version 2.0": reply(b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", close=True),
    "version 1.2": reply(b"HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n"),
    "version lower case": reply(b"http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", close=True),
    "reason with lone CR": reply(b"HTTP/1.1 200 O\rK\r\nContent-Length: 0\r\n\r\n", close=True),
    "CRLF before the status line": reply(b"\r\n" + _length(b"ok"), close=True),
    "bare LF line ends": reply(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"),
    "not http": reply(b"SSH-2.0-OpenSSH_9.6\r\n", close=True),
    # header shapes
    "header repeated": reply(_length(b"", b"Set-Cookie: a=1\r\n", b"Set-Cookie: b=2\r\n")),
    "header value padded": reply(_length(b"", b"X-Padded:   some value \t \r\n")),
    "header value empty": reply(_length(b"", b"X-Empty:\r\n", b"X-Blank: \r\n")),
    "header value utf-8": reply(_length(b"", "X-Name: Müller\r\n".encode())),
    "header value latin-1": reply(_length(b"", "X-Name: Müller\r\n".encode("latin-1"))),
    "header name mixed case": reply(_length(b"", b"x-LoWeR: v\r\n")),
    "header space before colon": reply(_length(b"", b"X-Bad : v\r\n")),
    "header without colon": reply(_length(b"", b"X-Bad\r\n")),
    "header value NUL": reply(_length(b"", b"X-Bad: a\0b\r\n")),
    "header value control character": reply(_length(b"", b"X-A: a\x01b\r\n")),
    "header value DEL": reply(_length(b"", b"X-A: a\x7fb\r\n")),
    "header value tab": reply(_length(b"", b"X-A: a\tb\r\n")),
    "header value lone CR": reply(_length(b"", b"X-A: a\rb\r\n"), close=True),
    "header name utf-8": reply(_length(b"", "X-Ä: a\r\n".encode()), close=True),
    "obs-fold": reply(_length(b"", b"X-Folded: one\r\n  two\r\n\tthree\r\n")),
    "obs-fold first line": reply(OK + b" X-Folded: one\r\nContent-Length: 0\r\n\r\n"),
    "obs-fold in pieces": reply(OK + b"X-Folded: one\r\n", b" two\r\nContent-Length: 2\r\n\r\nok"),
    "obs-fold after 100": reply(
        b"HTTP/1.1 100 Continue\r\n\r\n"
        + OK
        + b"X-Folded: one\r\n two\r\nContent-Length: 0\r\n\r\n"
    ),
    "obs-fold of a length": reply(OK + b"Content-Length:\r\n 5\r\n\r\nhello"),
    "many headers": reply(_length(HELLO, _MANY)),
    "head over 100 KiB": reply(_length(HELLO, _HUGE)),
    # Content-Length
    "length repeated identical": reply(OK + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"),
    "length list identical": reply(OK + b"Content-Length: 5, 5\r\n\r\nhello"),
    "length conflicting": reply(OK + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello"),
    "length repeated in pieces": reply(
        OK + b"Content-Length: 5\r\n", b"Content-Length: 5\r\n\r\n", b"hello"
    ),
    "length repeated, folded field too": reply(
        OK + b"Content-Length: 2\r\nX-F: a\r\n b\r\ncontent-length: 2\r\n\r\nok"
    ),
    "length empty": reply(OK + b"Content-Length: \r\n\r\nhello", close=True),
    "length 5 and 05": reply(
        OK + b"Content-Length: 5\r\nContent-Length: 05\r\n\r\nhello", close=True
    ),
    "length list conflicting": reply(OK + b"Content-Length: 5, 6\r\n\r\nhello"),
    "length with spaces": reply(OK + b"Content-Length:   5  \r\n\r\nhello"),
    "length with plus sign": reply(OK + b"Content-Length: +5\r\n\r\nhello", close=True),
    "length negative": reply(OK + b"Content-Length: -5\r\n\r\nhello", close=True),
    "length not a number": reply(OK + b"Content-Length: five\r\n\r\nhello", close=True),
    "length leading zeros": reply(OK + b"Content-Length: 005\r\n\r\nhello"),
    "length huge": reply(OK + b"Content-Length: 99999999999999999999999\r\n\r\nhi", close=True),
    "length and chunked": reply(
        OK + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    ),
    "body shorter than length": reply(OK + b"Content-Length: 10\r\n\r\nhello", close=True),
    "body longer than length": reply(OK + b"Content-Length: 2\r\n\r\nokEXTRA"),
    "body longer, then close": reply(OK + b"Content-Length: 2\r\n\r\nokEXTRA", close=True),
    # chunked
    "chunked": reply(CHUNKED + b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
    "chunked in pieces": reply(CHUNKED, b"5\r\nhe", b"llo\r\n", b"0\r\n", b"\r\n"),
    "chunk extensions": reply(CHUNKED + b"5;name=value\r\nhello\r\n0;last=1\r\n\r\n"),
    "chunk extension quoted": reply(CHUNKED + b'5;a="b;c"\r\nhello\r\n0\r\n\r\n'),
    "chunk size leading zeros": reply(CHUNKED + b"0005\r\nhello\r\n000\r\n\r\n"),
    "chunk size uppercase hex": reply(CHUNKED + b"A\r\n0123456789\r\n0\r\n\r\n"),
    "chunk size lowercase hex": reply(CHUNKED + b"a\r\n0123456789\r\n0\r\n\r\n"),
    "chunk size space before CRLF": reply(CHUNKED + b"5 \r\nhello\r\n0\r\n\r\n"),
    "chunk size not hex": reply(CHUNKED + b"5g\r\nhello\r\n0\r\n\r\n", close=True),
    "chunk size overflow": reply(CHUNKED + b"fffffffffffffffffffff\r\nhello", close=True),
    "chunk without CRLF after data": reply(CHUNKED + b"5\r\nhelloX0\r\n\r\n", close=True),
    "chunk lines bare LF": reply(CHUNKED + b"5\nhello\n0\n\n", close=True),
    "chunk extension after spaces": reply(CHUNKED + b"5 ; a=b\r\nhello\r\n0\r\n\r\n", close=True),
    "chunk size tab": reply(CHUNKED + b"5\t\r\nhello\r\n0\r\n\r\n", close=True),
    "trailer without colon": reply(CHUNKED + b"5\r\nhello\r\n0\r\nbad\r\n\r\n", close=True),
    "trailer folded": reply(CHUNKED + b"5\r\nhello\r\n0\r\nX-T: a\r\n b\r\n\r\n"),
    "trailer folded in pieces": reply(CHUNKED + b"5\r\nhello\r\n0\r\nX-T: a\r\n", b"\tb\r\n\r\n"),
    "trailers": reply(CHUNKED + b"5\r\nhello\r\n0\r\nX-Trailer: t\r\nServer-Timing: a\r\n\r\n"),
    "transfer-encoding uppercase": reply(
        OK + b"Transfer-Encoding: CHUNKED\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    ),
    "transfer-encoding twice": reply(
        OK + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n",
        close=True,
    ),
    "transfer-encoding gzip, chunked": reply(
        OK + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", close=True
    ),
    "transfer-encoding with parameter": reply(
        OK + b"Transfer-Encoding: chunked;q=1\r\n\r\n5\r\nhello\r\n0\r\n\r\n", close=True
    ),
    "transfer-encoding identity": reply(
        OK + b"Transfer-Encoding: identity\r\n\r\nhello", close=True
    ),
    # interim answers and bodiless statuses
    "100 then 200": reply(b"HTTP/1.1 100 Continue\r\n\r\n" + _length(b"ok")),
    "103 with headers then 200": reply(
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n" + _length(b"ok")
    ),
    "interim with a length": reply(
        b"HTTP/1.1 100 Continue\r\nContent-Length: 3\r\n\r\n" + _length(b"ok")
    ),
    "two interim then 200": reply(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n" + _length(b"ok")
    ),
    "interim, then close": reply(b"HTTP/1.1 100 Continue\r\n\r\n", close=True),
    "101 unasked": reply(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        b"\x81\x02hi"
    ),
    "204": reply(b"HTTP/1.1 204 No Content\r\n\r\n"),
    "204 with a length": reply(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"),
    "204 with a body": reply(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello"),
    "304 with a body": reply(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\nhello"),
    "204 chunked": reply(b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n"),
    "HEAD": reply(OK + b"Content-Length: 5\r\n\r\n", method="HEAD"),
    "HEAD chunked": reply(CHUNKED, method="HEAD"),
    "HEAD no length": reply(OK + b"\r\n", method="HEAD"),
    # connection handling
    "close without length": reply(OK + b"Connection: close\r\n\r\nuntil close", close=True),
    "no length, close": reply(OK + b"\r\nuntil close", close=True),
    "close with length": reply(_length(HELLO, b"Connection: close\r\n")),
    "close, mixed case": reply(_length(HELLO, b"Connection: Keep-Alive, CLOSE\r\n")),
    "closed before a byte": reply(close=True),
    "closed mid status line": reply(b"HTTP/1.1 20", close=True),
    "closed mid head": reply(OK + b"Content-Len", close=True),
    "closed mid chunk": reply(CHUNKED + b"5\r\nhel", close=True),
    "closed mid chunk size": reply(CHUNKED + b"5\r\nhello\r\n1", close=True),
    "closed before last chunk": reply(CHUNKED + b"5\r\nhello\r\n", close=True),
    "closed mid trailers": reply(CHUNKED + b"5\r\nhello\r\n0\r\nX-T: 1\r\n", close=True),
    # content codings (decoded by httpx's Response on both)
    "gzip": reply(_length(gzip.compress(HELLO), b"Content-Encoding: gzip\r\n")),
    "deflate": reply(_length(zlib.compress(HELLO), b"Content-Encoding: deflate\r\n")),
    "raw deflate": reply(_length(_raw_deflate(HELLO), b"Content-Encoding: deflate\r\n")),
    "br": reply(_length(b"\x0b\x02\x80hello\x03", b"Content-Encoding: br\r\n")),
    "zstd": reply(_length(_zstd(HELLO), b"Content-Encoding: zstd\r\n")),
    "gzip, deflate": reply(
        _length(zlib.compress(gzip.compress(HELLO)), b"Content-Encoding: gzip, deflate\r\n")
    ),
    "gzip twice, two fields": reply(
        _length(
            gzip.compress(gzip.compress(HELLO)),
            b"Content-Encoding: gzip\r\n",
            b"Content-Encoding: gzip\r\n",
        )
    ),
    "gzip chunked": reply(
        OK
        + b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n%b\r\n0\r\n\r\n" % (len(gzip.compress(HELLO)), gzip.compress(HELLO))
    ),
    "gzip not gzip": reply(_length(HELLO, b"Content-Encoding: gzip\r\n")),
    "unknown coding": reply(_length(HELLO, b"Content-Encoding: compress\r\n")),
}
