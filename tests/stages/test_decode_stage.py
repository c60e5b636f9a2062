"""The ``decode`` stage, driven directly with a fake transport inside it (no event loop's
behaviour is involved: it runs under asyncio alone, tests/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

from metis.errors import ProtocolError, StackError
from metis.pipeline.call import Call
from metis.pipeline.request import ResponseHead, ResponseItem, WireRequest
from metis.stages.codec.decode import Decode, WholeBody

from ..helpers import make_call

pytestmark = [pytest.mark.anyio, pytest.mark.backend_independent]  # a stage fed from memory


def streaming(stream: bool = True) -> WireRequest:
    return WireRequest(url="http://x", body={}, stream=stream)


async def run(
    stage: Decode,
    chunks: Iterable[bytes],
    request: WireRequest | None = None,
    content_type: str | None = None,
) -> list[dict[str, Any]]:
    request = request or streaming()
    seen: list[WireRequest] = []
    the_call = make_call()

    async def inner(inner_request: WireRequest, call: Call) -> AsyncIterator[ResponseItem]:
        seen.append(inner_request)
        assert call is the_call
        yield ResponseHead(200, content_type)  # as the transport does, before any bytes
        for chunk in chunks:
            yield chunk

    out = [item async for item in stage(request, the_call, inner)]
    assert seen == [request] and seen[0] is request  # passed through unchanged
    return out


def cut(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


# SSE ---------------------------------------------------------------------------------------

OPENAI_STREAM = (
    b'data: {"id":"c1","choices":[{"delta":{"content":"Hel"}}]}\n\n'
    b'data: {"id":"c1","choices":[{"delta":{"content":"lo \xc3\xa9"}}]}\n\n'
    b"data: [DONE]\n\n"
)
OPENAI_ITEMS = [
    {"id": "c1", "choices": [{"delta": {"content": "Hel"}}]},
    {"id": "c1", "choices": [{"delta": {"content": "lo é"}}]},
]


async def test_sse_yields_objects_and_skips_done() -> None:
    assert await run(Decode(format="sse"), [OPENAI_STREAM]) == OPENAI_ITEMS


async def test_sse_is_the_default_format() -> None:
    assert await run(Decode(), [OPENAI_STREAM]) == OPENAI_ITEMS


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
async def test_sse_any_chunk_size(size: int) -> None:
    assert await run(Decode(format="sse"), cut(OPENAI_STREAM, size)) == OPENAI_ITEMS


async def test_sse_anthropic_style_events_with_padding_and_crlf() -> None:
    stream = (
        b'event: message_start\r\ndata: {"type":"message_start"}\r\n\r\n'
        b'event: ping\r\ndata: {"type": "ping"}      \r\n\r\n'
        b": comment\r\n\r\n"
    )
    items = await run(Decode(format="sse"), cut(stream, 5))
    assert items == [{"type": "message_start"}, {"type": "ping"}]


async def test_sse_final_event_without_blank_line() -> None:
    items = await run(Decode(format="sse"), [b'data: {"a": 1}\n\ndata: {"b": 2}'])
    assert items == [{"a": 1}, {"b": 2}]


async def test_sse_multi_line_data_is_one_document() -> None:
    items = await run(Decode(format="sse"), [b'data: {"a":\ndata: 1}\n\n'])
    assert items == [{"a": 1}]


async def test_sse_blank_data_is_skipped() -> None:
    assert await run(Decode(format="sse"), [b"data:\n\ndata: {}\n\n"]) == [{}]


async def test_sse_invalid_json_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError, match=r"invalid JSON in its sse stream: \{not json"):
        await run(Decode(format="sse"), [b'data: {"a": 1}\n\n', b"data: {not json\n\n"])


async def test_sse_invalid_json_message_is_truncated() -> None:
    with pytest.raises(ProtocolError) as info:
        await run(Decode(format="sse"), [b"data: {" + b"x" * 1000 + b"\n\n"])
    assert len(info.value.message) < 300


async def test_sse_non_object_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="object"):
        await run(Decode(format="sse"), [b"data: [1, 2]\n\n"])


async def test_sse_invalid_utf8_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        await run(Decode(format="sse"), [b'data: {"a": "\xff"}\n\n'])


async def test_items_arrive_before_the_stream_ends() -> None:
    stage = Decode(format="sse")
    sent: list[int] = []

    async def inner(request: WireRequest, call: Any) -> AsyncIterator[bytes]:
        for i in range(3):
            sent.append(i)
            yield f'data: {{"n": {i}}}\n\n'.encode()

    async for item in stage(streaming(), make_call(), inner):
        assert sent[-1] == item["n"]


# Whole bodies ------------------------------------------------------------------------------

BODY = {"id": "r1", "content": [{"type": "text", "text": "héllo 😀"}], "usage": {"n": 3}}
BODY_BYTES = json.dumps(BODY, ensure_ascii=False).encode()


@pytest.mark.parametrize("fmt", ["sse", "ndjson", "json"])
async def test_non_stream_body_is_one_json_document(fmt: str) -> None:
    # Split in the middle of multi-byte characters too.
    items = await run(Decode(format=fmt), cut(BODY_BYTES, 3), streaming(False))
    assert items == [BODY]


async def test_json_format_with_stream_is_one_document() -> None:
    assert await run(Decode(format="json"), cut(BODY_BYTES, 5)) == [BODY]


async def test_non_stream_body_with_bom() -> None:
    assert await run(Decode(), [b"\xef\xbb\xbf" + BODY_BYTES], streaming(False)) == [BODY]


async def test_non_stream_invalid_json() -> None:
    with pytest.raises(ProtocolError, match="invalid JSON"):
        await run(Decode(), [b'{"a": ', b"1"], streaming(False))


async def test_non_stream_empty_body() -> None:
    with pytest.raises(ProtocolError, match="invalid JSON"):
        await run(Decode(), [], streaming(False))


async def test_non_stream_not_an_object() -> None:
    with pytest.raises(ProtocolError, match="list"):
        await run(Decode(format="json"), [b"[1]"], streaming(False))


async def test_non_stream_invalid_utf8() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        await run(Decode(format="json"), [b'{"a": "\xc3("}'], streaming(False))


async def test_deeply_nested_json_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        await run(Decode(format="json"), [b"[" * 200_000], streaming(False))


# NDJSON ------------------------------------------------------------------------------------

NDJSON = b'{"a": 1}\n{"b": "\xc3\xa9"}\r\n\n  \r\n{"c": [1, 2]}\r\n{"d": null}'
NDJSON_ITEMS = [{"a": 1}, {"b": "é"}, {"c": [1, 2]}, {"d": None}]


async def test_ndjson() -> None:
    assert await run(Decode(format="ndjson"), [NDJSON]) == NDJSON_ITEMS


@pytest.mark.parametrize("size", [1, 2, 3, 10])
async def test_ndjson_any_chunk_size(size: int) -> None:
    assert await run(Decode(format="ndjson"), cut(NDJSON, size)) == NDJSON_ITEMS


async def test_ndjson_every_split_into_two_chunks() -> None:
    stage = Decode(format="ndjson")
    for i in range(len(NDJSON) + 1):
        assert await run(stage, [NDJSON[:i], NDJSON[i:]]) == NDJSON_ITEMS, i


async def test_ndjson_with_bom_and_trailing_newline() -> None:
    items = await run(Decode(format="ndjson"), [b"\xef\xbb", b'\xbf{"a": 1}\n'])
    assert items == [{"a": 1}]


async def test_ndjson_invalid_json() -> None:
    with pytest.raises(ProtocolError, match="invalid JSON in its ndjson stream: nope"):
        await run(Decode(format="ndjson"), [b'{"a": 1}\nnope\n'])


async def test_ndjson_not_an_object() -> None:
    with pytest.raises(ProtocolError, match="object"):
        await run(Decode(format="ndjson"), [b'"text"\n'])


async def test_ndjson_invalid_utf8() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        await run(Decode(format="ndjson"), [b'{"a": "\xff"}\n'])


# Options -----------------------------------------------------------------------------------


def test_unknown_format_is_a_stack_error() -> None:
    with pytest.raises(StackError, match="'decode'"):
        Decode(format="xml")


def test_unknown_option_is_a_stack_error() -> None:
    with pytest.raises(StackError, match="'decode'") as info:
        Decode(bogus=1)
    assert "bogus" in str(info.value)


def test_options_and_signature() -> None:
    assert Decode(format="ndjson").options.format == "ndjson"
    signature = Decode.signature()
    assert signature.request_in is WireRequest
    assert signature.items_in == bytes | ResponseHead
    assert signature.items_out == dict[str, Any]


# A streamed request answered with a whole JSON body ------------------------------------------


@pytest.mark.parametrize("fmt", ["sse", "ndjson"])
@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
async def test_a_json_answer_to_a_streamed_request_is_one_whole_body(
    fmt: str, content_type: str
) -> None:
    pretty = json.dumps(BODY, ensure_ascii=False, indent=2).encode()  # lines are not documents
    out = await run(Decode(format=fmt), cut(pretty, 7), content_type=content_type)
    assert out == [BODY] and type(out[0]) is WholeBody


@pytest.mark.parametrize(
    ("fmt", "content_type", "body"),
    [
        ("sse", "text/event-stream; charset=utf-8", OPENAI_STREAM),
        ("sse", None, OPENAI_STREAM),
        ("ndjson", "application/x-ndjson", b'{"a": 1}\n{"b": 2}\n'),
    ],
)
async def test_stream_content_types_are_read_as_streams(
    fmt: str, content_type: str | None, body: bytes
) -> None:
    out = await run(Decode(format=fmt), cut(body, 5), content_type=content_type)
    assert len(out) == 2 and all(type(item) is dict for item in out)


async def test_an_event_stream_labelled_as_json_is_still_read_as_a_stream() -> None:
    out = await run(Decode(format="sse"), cut(OPENAI_STREAM, 9), content_type="application/json")
    assert out == OPENAI_ITEMS and all(type(item) is dict for item in out)


async def test_ndjson_labelled_as_json_is_still_read_line_by_line() -> None:
    body = b'{"a": 1}\n{"b": 2}\n'
    out = await run(Decode(format="ndjson"), cut(body, 4), content_type="application/json")
    assert out == [{"a": 1}, {"b": 2}] and all(type(item) is dict for item in out)


async def test_an_invalid_whole_json_answer_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="invalid JSON"):
        await run(Decode(format="sse"), [b'{"id": "x", '], content_type="application/json")
