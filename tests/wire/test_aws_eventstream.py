"""The AWS event-stream decoder: frames under every chunk split, both CRCs checked, a cut-off
frame refused, exception frames classified; and the decode stage's eventstream format."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metis.errors import (
    AdapterError,
    AuthError,
    ErrorClass,
    InvalidRequestError,
    OverloadedError,
    ProtocolError,
    RateLimitError,
    ServerError,
)
from metis.pipeline.request import WireRequest
from metis.stages.codec.decode import Decode
from metis.wire.framing.aws_eventstream import (
    EventStreamDecoder,
    Frame,
    encode_frame,
    event_frame,
    exception_frame,
    frame_object,
)
from tests.helpers import make_call

EVENTS = [
    ("messageStart", {"role": "assistant"}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Bonjour, ça va ?"}}),
    ("contentBlockStop", {"contentBlockIndex": 0}),
    ("messageStop", {"stopReason": "end_turn"}),
    ("metadata", {"usage": {"inputTokens": 3, "outputTokens": 4}}),
]
STREAM = b"".join(event_frame(kind, payload) for kind, payload in EVENTS)


def objects(frames: list[Frame]) -> list[dict[str, Any]]:
    return [frame_object(frame) for frame in frames]


def test_every_split_into_two_chunks_gives_the_same_frames() -> None:
    want = [{kind: payload} for kind, payload in EVENTS]
    for cut in range(len(STREAM) + 1):
        decoder = EventStreamDecoder()
        got = decoder.feed(STREAM[:cut]) + decoder.feed(STREAM[cut:])
        decoder.close()
        assert objects(got) == want, cut


def test_one_byte_at_a_time_gives_the_same_frames() -> None:
    decoder = EventStreamDecoder()
    got = [frame for i in range(len(STREAM)) for frame in decoder.feed(STREAM[i : i + 1])]
    decoder.close()
    assert objects(got) == [{kind: payload} for kind, payload in EVENTS]


def test_headers_of_every_type_are_read_as_botocore_reads_them() -> None:
    botocore = pytest.importorskip("botocore.eventstream")
    headers = (
        b"\x01a\x00"  # bool true
        + b"\x01b\x01"  # bool false
        + b"\x01c\x02\xff"  # byte -1
        + b"\x01d\x03\x01\x00"  # short 256
        + b"\x01e\x04"
        + struct.pack(">i", -7)
        + b"\x01f\x05"
        + struct.pack(">q", 1 << 40)
        + b"\x01g\x06\x00\x02\x00\x01"  # bytes
        + b"\x01h\x07\x00\x03abc"  # string
        + b"\x01i\x08"
        + struct.pack(">q", 1700000000000)  # timestamp
        + b"\x01j\x09"
        + bytes(range(16))  # uuid
    )
    payload = b'{"x":1}'
    total = 16 + len(headers) + len(payload)
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    frame = prelude + headers + payload
    frame += struct.pack(">I", zlib.crc32(frame))
    (mine,) = EventStreamDecoder().feed(frame)
    buffer = botocore.EventStreamBuffer()
    buffer.add_data(frame)
    (theirs,) = list(buffer)
    assert mine.payload == theirs.payload
    for name in "abcdefgh":
        assert mine.headers[name] == theirs.headers[name], name
    assert mine.headers["j"] == bytes(range(16))


@pytest.mark.parametrize("where", ["prelude", "message"])
def test_a_corrupted_crc_is_a_protocol_error(where: str) -> None:
    frame = bytearray(event_frame("messageStart", {"role": "assistant"}))
    frame[8 if where == "prelude" else -1] ^= 0x01
    decoder = EventStreamDecoder()
    with pytest.raises(ProtocolError, match=f"{where} CRC"):
        decoder.feed(bytes(frame))


def test_a_corrupted_payload_fails_the_message_crc() -> None:
    frame = bytearray(event_frame("messageStart", {"role": "assistant"}))
    frame[-8] ^= 0x20
    with pytest.raises(ProtocolError, match="message CRC"):
        EventStreamDecoder().feed(bytes(frame))


def test_frames_before_a_corrupt_one_are_kept() -> None:
    good = event_frame("messageStart", {"role": "assistant"})
    bad = bytearray(event_frame("messageStop", {"stopReason": "end_turn"}))
    bad[-1] ^= 0xFF
    decoder = EventStreamDecoder()
    assert objects(decoder.feed(good)) == [{"messageStart": {"role": "assistant"}}]
    with pytest.raises(ProtocolError, match="frame 2 is corrupt"):
        decoder.feed(bytes(bad))


@pytest.mark.parametrize("then", ["feed", "close"])
def test_frames_before_a_corrupt_one_in_the_same_chunk_are_kept(then: str) -> None:
    # The whole chunk was refused: the frames before the corrupt one, whole and checked, lost.
    good = event_frame("messageStart", {"role": "assistant"})
    bad = bytearray(event_frame("messageStop", {"stopReason": "end_turn"}))
    bad[-1] ^= 0xFF
    decoder = EventStreamDecoder()
    assert objects(decoder.feed(good + bytes(bad) + good)) == [
        {"messageStart": {"role": "assistant"}}
    ]
    with pytest.raises(ProtocolError, match="frame 2 is corrupt"):
        decoder.feed(good) if then == "feed" else decoder.close()


def test_a_truncated_frame_is_refused_when_the_body_ends() -> None:
    decoder = EventStreamDecoder()
    frames = decoder.feed(STREAM[:-5])
    assert len(frames) == len(EVENTS) - 1
    with pytest.raises(ProtocolError, match="ended inside a frame"):
        decoder.close()


def test_impossible_lengths_are_refused_before_buffering_them() -> None:
    prelude = struct.pack(">II", 1 << 31, 0)
    prelude += struct.pack(">I", zlib.crc32(prelude))
    with pytest.raises(ProtocolError, match="impossible"):
        EventStreamDecoder().feed(prelude)


def _frame_with_headers(headers: bytes) -> bytes:
    prelude = struct.pack(">II", 16 + len(headers), len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    frame = prelude + headers
    return frame + struct.pack(">I", zlib.crc32(frame))


@settings(deadline=None)
@given(headers=st.binary(max_size=64))
def test_any_header_bytes_parse_or_are_malformed_headers(headers: bytes) -> None:
    """Header blocks are read with explicit bounds: whatever the bytes, a frame's headers
    parse or are a ProtocolError, never an IndexError or struct.error."""
    try:
        EventStreamDecoder().feed(_frame_with_headers(headers))
    except ProtocolError as error:
        assert "malformed headers" in error.message


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        (b"\x05ab", "a header name runs past"),
        (b"\x01h", "a header name runs past"),
        (b"\x01h\x07\x00", "a header value runs past"),
        (b"\x01h\x04\x00\x00", "a header value runs past"),
        (b"\x01h\x0b", "unknown header value type 11"),
        (b"\x01\xff\x00", "a header is not UTF-8"),
        (b"\x01h\x07\x00\x01\xff", "a header is not UTF-8"),
    ],
)
def test_malformed_headers_say_what_is_wrong(headers: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=f"malformed headers: {why}"):
        EventStreamDecoder().feed(_frame_with_headers(headers))


def test_headers_that_run_past_their_length_are_a_protocol_error() -> None:
    headers = b"\x01h\x07\x00\x09abc"  # says 9 bytes, has 3
    total = 16 + len(headers)
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    frame = prelude + headers
    frame += struct.pack(">I", zlib.crc32(frame))
    with pytest.raises(ProtocolError, match="malformed headers"):
        EventStreamDecoder().feed(frame)


@pytest.mark.parametrize(
    ("exception", "error_type", "error_class"),
    [
        ("throttlingException", RateLimitError, ErrorClass.RATE_LIMIT),
        ("serviceUnavailableException", OverloadedError, ErrorClass.OVERLOADED),
        ("modelStreamErrorException", ServerError, ErrorClass.SERVER_ERROR),
        ("internalServerException", ServerError, ErrorClass.SERVER_ERROR),
        ("validationException", InvalidRequestError, ErrorClass.INVALID_REQUEST),
        ("accessDeniedException", AuthError, ErrorClass.AUTH),
    ],
)
def test_exception_frames_are_classified(
    exception: str, error_type: type[AdapterError], error_class: ErrorClass
) -> None:
    (frame,) = EventStreamDecoder().feed(exception_frame(exception, "it went wrong"))
    with pytest.raises(error_type) as caught:
        frame_object(frame)
    assert caught.value.error_class is error_class
    assert caught.value.provider_code == exception
    assert caught.value.message == "it went wrong"


def test_a_validation_exception_about_length_is_a_context_overflow() -> None:
    (frame,) = EventStreamDecoder().feed(
        exception_frame("validationException", "Input is too long for requested model.")
    )
    with pytest.raises(AdapterError) as caught:
        frame_object(frame)
    assert caught.value.error_class is ErrorClass.CONTEXT_OVERFLOW


def test_an_event_without_a_type_or_with_bad_json_is_a_protocol_error() -> None:
    untyped = encode_frame({":message-type": "event"}, b"{}")
    (frame,) = EventStreamDecoder().feed(untyped)
    with pytest.raises(ProtocolError, match="event-type"):
        frame_object(frame)
    (frame,) = EventStreamDecoder().feed(
        encode_frame({":message-type": "event", ":event-type": "x"}, b"[1]")
    )
    with pytest.raises(ProtocolError, match="JSON list"):
        frame_object(frame)


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


@pytest.mark.anyio
async def test_the_decode_stage_yields_events_then_raises_an_in_stream_exception() -> None:
    body = STREAM[: len(event_frame(*EVENTS[0]))] + exception_frame(
        "throttlingException", "Too many requests, please wait before trying again."
    )
    stage = Decode(format="eventstream")
    request = WireRequest(url="https://example.test", body={}, stream=True)
    got: list[dict[str, Any]] = []
    with pytest.raises(RateLimitError):
        async for obj in stage(request, make_call(), lambda r, c: _chunks(body[:9], body[9:])):
            got.append(obj)
    assert got == [{"messageStart": {"role": "assistant"}}]


@pytest.mark.anyio
async def test_the_decode_stage_yields_the_events_before_a_corrupt_frame_then_raises() -> None:
    first = STREAM[: len(event_frame(*EVENTS[0]))]
    bad = bytearray(event_frame(*EVENTS[1]))
    bad[-1] ^= 0xFF
    stage = Decode(format="eventstream")
    request = WireRequest(url="https://example.test", body={}, stream=True)
    got: list[dict[str, Any]] = []
    with pytest.raises(ProtocolError, match="frame 2 is corrupt"):
        async for obj in stage(request, make_call(), lambda r, c: _chunks(first + bytes(bad))):
            got.append(obj)
    assert got == [{"messageStart": {"role": "assistant"}}]


@pytest.mark.anyio
async def test_the_decode_stage_refuses_a_stream_cut_mid_frame() -> None:
    stage = Decode(format="eventstream")
    request = WireRequest(url="https://example.test", body={}, stream=True)
    with pytest.raises(ProtocolError, match="ended inside a frame"):
        async for _ in stage(request, make_call(), lambda r, c: _chunks(STREAM[:-1])):
            pass


def test_the_json_payload_survives_as_sent() -> None:
    (frame,) = EventStreamDecoder().feed(event_frame("x", {"a": 'é\n"', "n": [1, 2]}))
    assert json.loads(frame.payload) == {"a": 'é\n"', "n": [1, 2]}


def test_a_large_frame_in_small_chunks_is_joined_once_whole() -> None:
    text = "x" * (1 << 20)
    body = event_frame("contentBlockDelta", {"delta": {"text": text}}) + STREAM
    decoder = EventStreamDecoder()
    got = [f for i in range(0, len(body), 1000) for f in decoder.feed(body[i : i + 1000])]
    decoder.close()
    assert frame_object(got[0]) == {"contentBlockDelta": {"delta": {"text": text}}}
    assert len(got) == 1 + len(EVENTS)


def _raw_event_frame(event_type: str, payload: bytes) -> bytes:
    headers = {":message-type": "event", ":event-type": event_type}
    return encode_frame({**headers, ":content-type": "application/json"}, payload)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b'{"usage": {"inputTokens": NaN}}', "NaN is not a JSON number"),
        (b'{"usage": {"inputTokens": Infinity}}', "Infinity"),
        (b'{"x": ' + b"[" * 150 + b"]" * 150 + b"}", "nested deeper than 100 levels"),
        (b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested deeper than 100 levels"),
    ],
    ids=["nan", "infinity", "deep", "very-deep"],
)
def test_a_frame_holding_json_past_the_limits_is_refused_as_every_framing_does(
    payload: bytes, why: str
) -> None:
    # json.loads took NaN and nesting up to Python's recursion limit here (and said "invalid
    # JSON" past it); the SSE and NDJSON framings refuse both (metis/wire/json_limits.py).
    (frame,) = EventStreamDecoder().feed(_raw_event_frame("metadata", payload))
    with pytest.raises(ProtocolError, match=f"JSON metis refuses: {why}"):
        frame_object(frame)


@pytest.mark.parametrize(
    "inner", [b'{"type": "message_stop", "x": ' + b"[" * 150 + b"]" * 150 + b"}", b'{"n": NaN}']
)
def test_a_bedrock_anthropic_chunk_holding_json_past_the_limits_is_refused(inner: bytes) -> None:
    import base64

    from metis.wire.anthropic.bedrock import unwrap_chunk

    chunk = {"bytes": base64.b64encode(inner).decode()}
    with pytest.raises(ProtocolError, match="JSON metis refuses"):
        unwrap_chunk(chunk, "bedrock_anthropic")
