"""The sans-IO Server-Sent Events decoder."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metis.errors import ProtocolError
from metis.wire.framing.sse import MAX_LINE_LENGTH, SSEDecoder, SSEEvent


def decode(*chunks: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events


def data_of(*chunks: bytes) -> list[str]:
    return [e.data for e in decode(*chunks)]


def test_single_event() -> None:
    assert decode(b'data: {"a": 1}\n\n') == [SSEEvent('{"a": 1}')]


def test_feed_returns_events_as_soon_as_complete() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: one\n") == []
    assert decoder.feed(b"\n") == [SSEEvent("one")]
    assert decoder.feed(b"data: two\n\ndata: thr") == [SSEEvent("two")]
    assert decoder.feed(b"ee\n\n") == [SSEEvent("three")]
    assert decoder.close() == []


def test_multi_line_data_joins_with_newline() -> None:
    assert data_of(b"data: first\ndata: second\ndata:third\n\n") == ["first\nsecond\nthird"]


def test_comments_are_ignored() -> None:
    stream = b": keep-alive\ndata: x\n:another\n\n: ping\n\n"
    assert decode(stream) == [SSEEvent("x")]


def test_event_and_id_fields() -> None:
    stream = (
        b"event: message_start\nid: 7\ndata: {}\n\n"
        b"event: content_block_delta\ndata: {}\n\n"
        b"data: {}\n\n"
    )
    assert decode(stream) == [
        SSEEvent("{}", "message_start", "7"),
        SSEEvent("{}", "content_block_delta", None),
        SSEEvent("{}", None, None),
    ]


def test_event_without_data_is_dropped_and_resets_fields() -> None:
    stream = b"event: ping\nid: 1\n\ndata: x\n\n"
    assert decode(stream) == [SSEEvent("x", None, None)]


def test_id_with_null_is_ignored() -> None:
    assert decode(b"id: a\x00b\ndata: x\n\n") == [SSEEvent("x")]


def test_empty_event_name_is_none() -> None:
    assert decode(b"event:\ndata: x\n\n") == [SSEEvent("x")]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_ends(eol: bytes) -> None:
    stream = eol.join([b"event: e", b"data: a", b"data: b", b"", b"data: c", b"", b""])
    assert decode(stream) == [SSEEvent("a\nb", "e"), SSEEvent("c")]


def test_mixed_line_ends() -> None:
    assert data_of(b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r") == ["a\nb\nc", "d"]


def test_gemini_crlf_separators() -> None:
    stream = b'data: {"n": 1}\r\n\r\ndata: {"n": 2}\r\n\r\n'
    assert data_of(stream) == ['{"n": 1}', '{"n": 2}']


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    # Were the LF counted as a second line end, the empty line would dispatch "a" alone.
    assert data_of(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == ["a\nb"]


def test_cr_at_chunk_end_then_empty_chunk_then_lf() -> None:
    assert data_of(b"data: a\r", b"", b"\ndata: b\r\n\r\n") == ["a\nb"]


def test_lone_cr_at_chunk_end_is_a_line_end() -> None:
    assert data_of(b"data: a\r", b"data: b\r", b"\r") == ["a\nb"]


@pytest.mark.parametrize("text", ["é", "€", "😀", "naïve ✓ 🎉"])
def test_utf8_character_split_across_chunks(text: str) -> None:
    stream = f"data: {text}\n\n".encode()
    for cut in range(len(stream) + 1):
        assert data_of(stream[:cut], stream[cut:]) == [text], cut
    assert data_of(*(stream[i : i + 1] for i in range(len(stream)))) == [text]


def test_unicode_line_separators_are_not_line_ends() -> None:
    # U+2028, U+0085 and friends may appear raw inside JSON strings; str.splitlines would cut.
    text = "a\u2028b\x85c\x0bd\x0ce\x1cf"
    assert data_of(f"data: {text}\n\n".encode()) == [text]


def test_bom_is_skipped() -> None:
    assert decode(b"\xef\xbb\xbfdata: x\n\n") == [SSEEvent("x")]


def test_bom_split_across_chunks_is_skipped() -> None:
    assert data_of(b"\xef", b"\xbb", b"\xbfdata: x\n\n") == ["x"]


def test_only_the_leading_bom_is_skipped() -> None:
    # A second BOM makes the first field name "\ufeffdata", an unknown field.
    assert data_of(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: \xef\xbb\xbfy\n\n") == ["\ufeffy"]


def test_padding_after_json_is_kept() -> None:
    assert data_of(b'data: {"type":"ping"}      \n\n') == ['{"type":"ping"}      ']


def test_field_without_space() -> None:
    assert decode(b"event:e\ndata:x\n\n") == [SSEEvent("x", "e")]


def test_only_one_leading_space_is_stripped() -> None:
    assert data_of(b"data:   x\n\n") == ["  x"]


def test_colon_in_value_is_kept() -> None:
    assert data_of(b'data: {"a": "b:c"}\n\n') == ['{"a": "b:c"}']


def test_empty_data_line() -> None:
    assert data_of(b"data:\n\n") == [""]
    assert data_of(b"data\n\n") == [""]  # a line without a colon: the field with value ""
    assert data_of(b"data:\ndata:\n\n") == ["\n"]


def test_unknown_fields_are_ignored() -> None:
    assert decode(b"retry: 1000\nfoo: bar\ndata: x\nbaz\n\n") == [SSEEvent("x")]


def test_final_event_without_blank_line_is_dispatched_on_close() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\nevent: e\ndata: b") == [SSEEvent("a")]
    assert decoder.close() == [SSEEvent("b", "e")]


def test_final_event_with_single_newline_is_dispatched_on_close() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.close() == [SSEEvent("a")]


def test_close_without_pending_data_gives_nothing() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a\n\nevent: e\n: comment")
    assert decoder.close() == []


def test_decoder_is_reusable_after_close() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a")
    assert decoder.close() == [SSEEvent("a")]
    assert decoder.feed(b"\xef\xbb\xbfdata: b\n\n") == [SSEEvent("b")]


def test_invalid_utf8_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="invalid UTF-8"):
        decode(b"data: \xff\xfe\n\n")


def test_invalid_utf8_split_across_chunks_raises() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: \xc3")
    with pytest.raises(ProtocolError, match="invalid UTF-8"):
        decoder.feed(b"(\n\n")


def test_stream_ending_inside_a_utf8_character_raises_on_close() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: \xf0\x9f\x98")
    with pytest.raises(ProtocolError, match="UTF-8"):
        decoder.close()


def test_over_long_line_raises() -> None:
    decoder = SSEDecoder(max_line_length=100)
    decoder.feed(b"data: " + b"x" * 50)
    with pytest.raises(ProtocolError, match="line end"):
        decoder.feed(b"x" * 60)


def test_over_long_line_raises_at_default_limit() -> None:
    decoder = SSEDecoder()
    piece = b"x" * (1024 * 1024)
    for _ in range(MAX_LINE_LENGTH // len(piece)):
        assert decoder.feed(piece) == []
    with pytest.raises(ProtocolError, match="16 MiB"):
        decoder.feed(b"x")


def test_long_lines_within_limit_are_fine() -> None:
    decoder = SSEDecoder(max_line_length=100)
    for _ in range(10):
        assert decoder.feed(b"data: " + b"x" * 90 + b"\n\n") == [SSEEvent("x" * 90)]


def test_limit_counts_the_unfinished_line_after_a_line_end() -> None:
    decoder = SSEDecoder(max_line_length=100)
    with pytest.raises(ProtocolError):
        decoder.feed(b"data: a\n\n" + b"x" * 101)


STREAM = (
    "\ufeff: hello\r\n"
    "event: message_start\r\n"
    "id: 1\r\n"
    'data: {"type":"message_start"}   \r\n'
    "\r\n"
    "data: line one é\n"
    "data:line two 😀\n"
    "\n"
    "retry: 10\r"
    "event: x\r"
    "data: cr €\r"
    "\r"
    "data: [DONE]\n"
    "\n"
    "data: tail"
).encode()

EXPECTED = [
    SSEEvent('{"type":"message_start"}   ', "message_start", "1"),
    SSEEvent("line one é\nline two 😀"),
    SSEEvent("cr €", "x"),
    SSEEvent("[DONE]"),
    SSEEvent("tail"),
]


def test_fixed_stream_in_one_chunk() -> None:
    assert decode(STREAM) == EXPECTED


def test_every_split_into_two_chunks() -> None:
    for i in range(len(STREAM) + 1):
        assert decode(STREAM[:i], STREAM[i:]) == EXPECTED, i


def test_every_split_into_three_chunks() -> None:
    n = len(STREAM)
    for i in range(n + 1):
        for j in range(i, n + 1):
            assert decode(STREAM[:i], STREAM[i:j], STREAM[j:]) == EXPECTED, (i, j)


def test_byte_at_a_time() -> None:
    assert decode(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=20))
def test_any_chunking(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(STREAM)]
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    assert decode(*chunks) == EXPECTED
