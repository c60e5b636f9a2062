"""The data-only SSE framer of the decode stage, checked against the full decoder (sse.py)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metis.errors import ProtocolError
from metis.wire.framing.sse import SSEDecoder
from metis.wire.framing.sse_data import SSEDataDecoder


def data_of(*chunks: bytes, decoder: SSEDataDecoder | None = None) -> list[str]:
    decoder = decoder or SSEDataDecoder()
    out: list[str] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


def reference(*chunks: bytes) -> list[str]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return [event.data for event in [*events, *decoder.close()]]


def bytewise(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


def test_one_event_per_chunk_and_many_per_chunk() -> None:
    body = b'data: {"a":1}\n\nevent: x\ndata: {"b":2}\n\ndata:{"c":3}\n\n'
    assert data_of(body) == ['{"a":1}', '{"b":2}', '{"c":3}']
    assert data_of(*body.splitlines(keepends=True)) == ['{"a":1}', '{"b":2}', '{"c":3}']


def test_feed_returns_data_as_soon_as_its_event_ends() -> None:
    decoder = SSEDataDecoder()
    assert decoder.feed(b"data: one\n") == []
    assert decoder.feed(b"\n") == ["one"]
    assert decoder.feed(b"data: two\n\ndata: thr") == ["two"]
    assert decoder.feed(b"ee\n\n") == ["three"]
    assert decoder.close() == []


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_every_line_end(end: bytes) -> None:
    body = b"event: e" + end + b"data: x" + end + end + b"data: y" + end + b"data: z" + end + end
    assert data_of(body) == ["x", "y\nz"]
    assert data_of(*bytewise(body)) == ["x", "y\nz"]


def test_a_crlf_split_across_chunks_is_one_line_end() -> None:
    assert data_of(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n") == ["a", "b"]
    assert data_of(b"data: a\r", b"\r", b"data: b\r", b"\r") == ["a", "b"]  # CR CR: blank line


def test_a_character_split_across_chunks() -> None:
    body = 'data: {"t":"Température ~18°C 日本 😀"}\n\n'.encode()
    for cut in range(len(body) + 1):
        assert data_of(body[:cut], body[cut:]) == ['{"t":"Température ~18°C 日本 😀"}']
    assert data_of(*bytewise(body)) == ['{"t":"Température ~18°C 日本 😀"}']


def test_comments_keep_alives_and_fields_without_data() -> None:
    body = b": keep-alive\n\n:ping\ndata: x\n: note\nid: 7\nretry: 10\n\nevent: ping\n\n\n\n"
    assert data_of(body) == ["x"]
    assert data_of(*bytewise(body)) == ["x"]


def test_data_field_forms() -> None:
    assert data_of(b"data\n\n") == [""]
    assert data_of(b"data:\n\n") == [""]
    assert data_of(b"data:  two spaces\n\n") == [" two spaces"]
    assert data_of(b"datum: no\n\ndata:yes\n\n") == ["yes"]
    assert data_of(b"event: a\ndata: 1\ndata: 2\n\n") == ["1\n2"]
    assert data_of(b"data: 1\nevent: a\n\n") == ["1"]


def test_a_leading_bom_is_skipped_once() -> None:
    assert data_of(b"\xef\xbb\xbfdata: x\n\n") == ["x"]
    assert data_of(b"\xef", b"\xbb", b"\xbfdata: x\n\n") == ["x"]
    assert data_of(b"data: \xef\xbb\xbfx\n\n") == ["\ufeffx"]  # not at the start: data


def test_a_final_event_without_its_blank_line() -> None:
    assert data_of(b"data: x\n\ndata: last\n") == ["x", "last"]
    assert data_of(b"data: x\n\ndata: last") == ["x", "last"]


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="invalid UTF-8"):
        data_of(b"data: \xff\n\n")
    with pytest.raises(ProtocolError, match="invalid UTF-8"):
        data_of(b"data: \xe2\x82", b"x\n\n")


def test_a_body_ending_inside_a_character_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="middle of a UTF-8 character"):
        data_of(b"data: x\n\n\xe2\x82")


def test_a_line_too_long_is_refused_however_it_arrives() -> None:
    with pytest.raises(ProtocolError, match="longer than 16 chars"):
        data_of(b"data: " + b"x" * 20, decoder=SSEDataDecoder(max_line_length=16))
    decoder = SSEDataDecoder(max_line_length=16)
    decoder.feed(b"data: 1\ndata: 2\n")  # short lines of one event: fine
    with pytest.raises(ProtocolError, match="longer than"):
        for _ in range(20):
            decoder.feed(b"x")
    many_lines = SSEDataDecoder(max_line_length=16)
    for _ in range(100):  # an event of many short lines is not one long line
        many_lines.feed(b"data: 0123456789\n")
    assert many_lines.feed(b"\n") == ["\n".join(["0123456789"] * 100)]


_line_end = st.sampled_from(["\n", "\r\n", "\r"])
_value = st.text(
    alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12
)
_line = st.one_of(
    st.builds(lambda v: f"data: {v}", _value),
    st.builds(lambda v: f"data:{v}", _value),
    st.just("data"),
    st.builds(lambda v: f"event: {v}", _value),
    st.builds(lambda v: f"id: {v}", _value),
    st.builds(lambda v: f": {v}", _value),
    st.just(""),
)


@settings(deadline=None)
@given(
    lines=st.lists(st.tuples(_line, _line_end), max_size=14),
    cuts=st.lists(st.integers(0, 400), max_size=8),
    bom=st.booleans(),
)
def test_same_data_as_the_full_decoder_however_the_body_is_cut(
    lines: list[tuple[str, str]], cuts: list[int], bom: bool
) -> None:
    body = ("\ufeff" if bom else "") + "".join(line + end for line, end in lines)
    raw = body.encode()
    bounds = sorted({0, len(raw), *(c for c in cuts if c <= len(raw))})
    chunks = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    assert data_of(*chunks) == reference(*chunks) == reference(raw)


def test_an_event_of_many_lines_too_long_is_refused_as_it_grows() -> None:
    """Each line short, the event never ended: held up to the event's limit, then refused,
    by both decoders, however the lines arrive (not read whole first: a runaway upstream)."""
    lines = b"data: 0123456789\n" * 20
    for chunks in ([lines], bytewise(lines)):
        decoder = SSEDataDecoder(max_event_length=100)
        reference_decoder = SSEDecoder(max_event_length=100)
        with pytest.raises(ProtocolError, match="event longer than 100 chars"):
            for chunk in chunks:
                decoder.feed(chunk)
        with pytest.raises(ProtocolError, match="event longer than 100 chars"):
            for chunk in chunks:
                reference_decoder.feed(chunk)
    within = SSEDataDecoder(max_event_length=100)
    for _ in range(50):  # events under the limit, however many, are fine
        two_lines = within.feed(b"data: 0123456789\ndata: 0123456789\n\n")
        assert two_lines == ["0123456789\n0123456789"]


_plain_event = st.builds(lambda v: f"data: {v}", _value)
_odd_event = st.one_of(
    st.builds(lambda v: f"data:{v}", _value),
    st.builds(lambda v: f"event: e\ndata: {v}", _value),
    st.builds(lambda v: f"data: {v}\ndata: {v}", _value),
    st.builds(lambda v: f": {v}", _value),
    st.builds(lambda v: f"error: {v}", _value),
    st.just("data: a\rdata: b"),
    st.just(""),
)


@settings(deadline=None)
@given(
    events=st.lists(
        st.one_of(_plain_event, _plain_event, _plain_event, _odd_event), min_size=3, max_size=40
    ),
    end=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(0, 2000), max_size=6),
)
def test_a_read_of_many_events_gives_what_the_full_decoder_gives(
    events: list[str], end: str, cuts: list[int]
) -> None:
    """A large read brings many whole events, mostly one ``data:`` line each, which the
    decoder takes by one split of the chunk: the same data, whatever the cuts and line ends,
    as the full decoder reads and as a byte at a time gives (an odd event among them sends
    the chunk the long way; an ``error:`` field is read by this decoder alone)."""
    body = "".join(event.replace("\n", end) + end + end for event in events)
    raw = body.encode()
    bounds = sorted({0, len(raw), *(c for c in cuts if c <= len(raw))})
    chunks = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    assert data_of(*chunks) == data_of(raw) == data_of(*bytewise(raw))
    if not any(event.startswith("error:") for event in events):
        assert data_of(raw) == reference(raw)


@pytest.mark.parametrize("odd", [b"data: a\rdata: b", b"data: a\ndata: b", b": note\ndata: a"])
def test_a_line_end_inside_an_event_of_a_run_is_read_as_one(odd: bytes) -> None:
    for end in (b"\r\n", b"\n"):
        body = end.join([b"data: 1", b"", b"data: 2", b"", odd, b"", b"data: 3", b"", b""])
        assert data_of(body) == reference(body) == ["1", "2", "a\nb" if b"b" in odd else "a", "3"]


def test_a_run_of_plain_events_and_the_event_held_across_reads() -> None:
    body = b"".join(b'data: {"n":%d}\r\n\r\n' % n for n in range(50))
    cut = len(body) // 2 + 3  # inside an event
    decoder = SSEDataDecoder()
    first = decoder.feed(body[:cut])
    second = decoder.feed(body[cut:])
    assert [*first, *second, *decoder.close()] == [f'{{"n":{n}}}' for n in range(50)]
    assert len(first) == 25


_typed_event = st.builds(
    lambda n, v: f"event: {n}\ndata: {v}", st.sampled_from(["a", "", "x y"]), _value
)
_odd_typed = st.one_of(
    _odd_event,
    st.builds(lambda v: f"event: e\ndata:{v}", _value),
    st.builds(lambda v: f"event: e\ndata:  {v}", _value),
    st.builds(lambda v: f"event: e\ndata: {v}\ndata: {v}", _value),
    st.builds(lambda v: f"event: e\nid: 1\ndata: {v}", _value),
    st.builds(lambda v: f"id: 1\ndata: {v}", _value),
    st.just("event: e"),
    st.just("event: e\ndata: a\n"),
)


@settings(deadline=None)
@given(
    events=st.lists(
        st.one_of(_typed_event, _typed_event, _typed_event, _odd_typed), min_size=3, max_size=40
    ),
    end=st.sampled_from(["\n", "\n", "\r\n"]),
    cuts=st.lists(st.integers(0, 2000), max_size=6),
)
def test_a_read_of_many_typed_events_gives_what_the_full_decoder_gives(
    events: list[str], end: str, cuts: list[int]
) -> None:
    """Anthropic's and Responses' events, an ``event:`` line then a ``data:`` line, many a
    read: taken by one search of the run, the same data as the full decoder and a byte at a
    time give, whatever the cuts, with odd events among them (then read line by line)."""
    body = "".join(event.replace("\n", end) + end + end for event in events)
    raw = body.encode()
    bounds = sorted({0, len(raw), *(c for c in cuts if c <= len(raw))})
    chunks = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    assert data_of(*chunks) == data_of(raw) == data_of(*bytewise(raw))
    if not any(event.startswith("error:") for event in events):
        assert data_of(raw) == reference(raw)


def test_a_run_of_typed_events_is_not_read_block_by_block(monkeypatch: pytest.MonkeyPatch) -> None:
    from metis.wire.framing import sse_data

    blocks: list[str] = []
    by_block = sse_data._data

    def counted(given: list[str]) -> list[str]:
        blocks.extend(given)
        return by_block(given)

    monkeypatch.setattr(sse_data, "_data", counted)
    body = b"".join(b'event: delta\ndata: {"n":%d}\n\n' % n for n in range(50))
    cut = len(body) // 2 + 3  # inside an event
    decoder = SSEDataDecoder()
    got = [*decoder.feed(body[:cut]), *decoder.feed(body[cut:]), *decoder.close()]
    assert got == [f'{{"n":{n}}}' for n in range(50)]
    assert len(blocks) <= 4  # the reads' first and last events only, not the 50
