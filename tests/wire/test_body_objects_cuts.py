"""metis.wire.framing.objects.BodyObjects: the objects of a body (and the error it ends in) do
not depend on how its bytes are cut, and its fast paths (the usual line or event parsed at
once, NDJSON lines parsed as bytes) give what the long way gives: each object read alone
through ``parse_object``, the classified reader of one object."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metis.errors import AdapterError
from metis.wire.framing.objects import BodyObjects, parse_object

_TEXT = st.text(alphabet='ab é\u2028😀"\\{}[]\n', max_size=6)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_OBJECTS = st.dictionaries(st.sampled_from(["type", "text", "n", "é"]), _VALUES, max_size=4)
_ODD_LINES = st.sampled_from(
    [
        b'{"a": NaN}',  # refused by the limits
        b'{"a": "\xff"}',  # invalid UTF-8 in a string
        b'{"a": 1}\xff',  # invalid UTF-8 after the object
        b"[1, 2]",  # not an object
        b'{"a": "\\ud800"}',  # a lone surrogate escape
        b"  " + b"[" * 60 + b"]" * 60,  # nested, not an object
        b'{"deep":' + b"[" * 101 + b"]" * 101 + b"}",  # deeper than the limit
        b'{"ok":' + b"[" * 99 + b"]" * 99 + b"}",  # within it
        b"\xef\xbb\xbf{}",  # a BOM
        b'  {"lead": 1}',
    ]
)


def _line(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _read(
    body: bytes, cuts: list[int], fmt: str, objects: BodyObjects | None = None
) -> tuple[list[Any], str]:
    """The objects of ``body`` cut at ``cuts``, and the error it ends in; with ``objects``
    given, read by ``each`` instead of ``feed``."""
    lazy = objects is not None
    if objects is None:
        objects = BodyObjects(fmt, streamed=True, content_type="application/x-ndjson")
    out: list[Any] = []
    bounds = sorted({min(cut, len(body)) for cut in cuts})
    pieces = [body[i:j] for i, j in zip([0, *bounds], [*bounds, len(body)], strict=True)]
    try:
        for piece in pieces:
            out += objects.each(piece) if lazy else objects.feed(piece)
            if objects.failed is not None:
                raise objects.failed
        out += objects.close()
    except AdapterError as error:
        return out, str(error)
    return out, ""


def _long_way(lines: list[bytes]) -> tuple[list[Any], str]:
    out: list[Any] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return out, "invalid UTF-8"
        try:
            out.append(parse_object(text, "ndjson"))
        except AdapterError as error:
            return out, str(error)
    return out, ""


@settings(deadline=None)
@given(
    lines=st.lists(_OBJECTS.map(_line) | _ODD_LINES, min_size=1, max_size=6),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    crlf=st.booleans(),
)
def test_ndjson_objects_do_not_depend_on_the_cuts_and_match_the_long_way(
    lines: list[bytes], cuts: list[int], crlf: bool
) -> None:
    body = (b"\r\n" if crlf else b"\n").join(lines) + b"\n"
    whole = _read(body, [], "ndjson")
    assert _read(body, cuts, "ndjson") == whole
    taken = BodyObjects("ndjson", streamed=True, content_type="application/x-ndjson")
    assert _read(body, cuts, "ndjson", taken) == whole  # one at a time, as the send loop reads
    expected, error = _long_way([line + b"\r" if crlf else line for line in lines])
    assert whole[0] == expected
    assert bool(whole[1]) == bool(error)
    if error and error != "invalid UTF-8":
        assert whole[1].rstrip() == error.rstrip()  # the snippet may keep the line's CR


@settings(deadline=None)
@given(
    objects=st.lists(_OBJECTS, min_size=1, max_size=6),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    named=st.booleans(),
)
def test_sse_objects_do_not_depend_on_the_cuts(
    objects: list[dict[str, Any]], cuts: list[int], named: bool
) -> None:
    event = b"event: e\n" if named else b""
    body = b"".join(event + b"data: " + _line(obj) + b"\n\n" for obj in objects)
    assert _read(body, cuts, "sse") == (objects, "")


@settings(deadline=None)
@given(
    datas=st.lists(
        _OBJECTS.map(_line) | _ODD_LINES | st.sampled_from([b"[DONE]", b"", b"[1]"]),
        min_size=1,
        max_size=8,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    end=st.sampled_from([b"\n", b"\r\n"]),
    fmt=st.sampled_from(["sse", "ndjson"]),
)
def test_objects_taken_one_at_a_time_are_those_a_chunk_gives_at_once(
    datas: list[bytes], cuts: list[int], end: bytes, fmt: str
) -> None:
    body = b"".join((b"data: " if fmt == "sse" else b"") + data + end + end for data in datas)
    taken = BodyObjects(fmt, streamed=True, content_type="text/event-stream")
    assert _read(body, cuts, fmt, taken) == _read(body, cuts, fmt)
    whole = BodyObjects(fmt, streamed=True, content_type="text/event-stream")
    assert _read(body, [], fmt, whole) == _read(body, [], fmt)
    assert (whole.done, whole.ignored) == _done(body, fmt)


def _done(body: bytes, fmt: str) -> tuple[bool, int]:
    objects = BodyObjects(fmt, streamed=True, content_type="text/event-stream")
    with contextlib.suppress(AdapterError):
        objects.feed(body)
    return objects.done, objects.ignored


@pytest.mark.parametrize(
    ("fmt", "read"),
    [
        ("sse", b'data: {"a":1}\n\ndata: {"a":\n\ndata: {"a":3}\n\n'),
        ("ndjson", b'{"a":1}\n{"a":\n{"a":3}\n'),
    ],
)
def test_an_object_of_a_read_is_parsed_only_once_the_one_before_it_is_taken(
    fmt: str, read: bytes
) -> None:
    objects = BodyObjects(fmt, streamed=True, content_type="text/event-stream")
    taken = iter(objects.each(read))
    assert next(taken) == {"a": 1}
    assert objects.failed is None and not objects.halted  # the second not parsed yet
    assert list(taken) == []
    assert objects.halted and objects.failed is not None
    assert f"invalid JSON in its {fmt} stream" in str(objects.failed)
    assert '{"a":' in str(objects.failed)  # the line named


def test_the_events_after_done_are_counted_not_parsed_however_they_are_taken() -> None:
    body = b'data: {"a":1}\n\ndata: [DONE]\n\ndata: {"late":1}\n\ndata: {\n\n'
    for lazy in (False, True):
        objects = BodyObjects("sse", streamed=True, content_type="text/event-stream")
        first = list(objects.each(body) if lazy else objects.feed(body))
        assert first == [{"a": 1}]
        assert (objects.done, objects.halted, objects.ignored) == (True, True, 2)
        assert list(objects.each(b'data: {"later":1}\n\n')) == []
        assert objects.ignored == 3


def test_a_blank_first_chunk_is_kept_for_the_chunk_that_says_what_the_body_is() -> None:
    # It was dropped: the error named a line one blank shorter than the one sent (the
    # ndjson search above found it with the cut [1]).
    line = b"  " + b"[" * 60 + b"]" * 60
    whole = BodyObjects("ndjson", streamed=True)
    cut = BodyObjects("ndjson", streamed=True)
    whole.feed(line + b"\n")
    cut.feed(line[:1])
    cut.feed(line[1:] + b"\n")
    assert whole.failed is not None
    assert str(cut.failed) == str(whole.failed)


def test_an_endless_blank_body_is_not_held() -> None:
    objects = BodyObjects("sse", streamed=True, content_type="text/event-stream")
    for _ in range(10_000):
        assert objects.feed(b"      \n") == []
    assert objects.close() == []


@pytest.mark.parametrize("fmt", ["sse", "ndjson"])
@pytest.mark.parametrize("lazy", [False, True])
def test_the_shortest_object_nested_one_level_too_deep_is_refused(fmt: str, lazy: bool) -> None:
    # 205 characters: past the length under which the bracket count is skipped (202), and
    # within jiter's own nesting limit, so only metis's count refuses it.
    deep = b'{"":' + b"[" * 100 + b"]" * 100 + b"}"
    within = b'{"":' + b"[" * 99 + b"]" * 99 + b"}"
    body = b"".join(
        (b"data: " if fmt == "sse" else b"") + line + b"\n\n" for line in (within, deep)
    )
    out, error = _read(body, [], fmt, BodyObjects(fmt, streamed=True) if lazy else None)
    assert len(deep) == 205
    assert len(out) == 1
    assert "nested deeper than 100 levels" in error
