"""Gemini's streamed function call arguments (``streamFunctionCallArguments``, Vertex AI and
Gemini 3): a call named in one part with ``willContinue``, its arguments in ``partialArgs``
pieces by JSON path, ended by a part without ``willContinue``, is read as one whole call with
all its arguments and the first part's thought signature; never a protocol error. A call the
reply never ended is kept with what arrived; a malformed path is a protocol error naming it."""

from __future__ import annotations

from typing import Any

import pytest

from metis.errors import ProtocolError
from metis.model import ToolUseBlock
from metis.model.response import StopKind
from metis.wire.builder import MessageBuilder

from ..helpers import checked_final, stack_codec

MODEL = "vertex:gemini-3-pro-preview"
SIGNATURE = "U3RyZWFtZWRDYWxsU2lnbmF0dXJl"


def _chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 20}}


def _piece(path: str, more: bool = True, **value: Any) -> dict[str, Any]:
    return {"functionCall": {"partialArgs": [{"jsonPath": path, **value}], "willContinue": more}}


def _read(*chunks: dict[str, Any]) -> list[ToolUseBlock]:
    builder = MessageBuilder("vertex", MODEL)
    parser = stack_codec("gemini").stream_parser(builder)
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    events += parser.end()
    final = checked_final(events)
    assert final.stop_reason.kind is StopKind.TOOL_USE
    return [b for b in final.final_content if isinstance(b, ToolUseBlock)]


def _named(name: str, **extra: Any) -> dict[str, Any]:
    return {"functionCall": {"name": name, "willContinue": True}, **extra}


def test_a_streamed_call_is_read_whole_with_its_signature() -> None:
    calls = _read(
        _chunk(_named("plan_trip", thoughtSignature=SIGNATURE)),
        _chunk(_piece("$.city", stringValue="San ", willContinue=True)),
        _chunk(_piece("$.city", stringValue="Francisco")),
        _chunk(_piece("$.stops[0].name", stringValue="Pier 39")),
        _chunk(_piece("$.stops[0].hours", numberValue=1.5)),
        _chunk(_piece("$.stops[1].name", stringValue="Presidio")),
        _chunk(_piece("$.stops[1].open", boolValue=True)),
        _chunk(_piece("$.note", nullValue=None)),
        _chunk({"functionCall": {}}),
        _chunk({"text": ""}, finish="STOP"),
    )
    (call,) = calls
    assert call.name == "plan_trip" and call.input_error is None
    assert call.input == {
        "city": "San Francisco",
        "stops": [{"name": "Pier 39", "hours": 1.5}, {"name": "Presidio", "open": True}],
        "note": None,
    }
    assert call.provider_raw is not None
    assert call.provider_raw.data == {"thoughtSignature": SIGNATURE}


def test_calls_one_after_another_and_one_ended_by_its_last_piece() -> None:
    calls = _read(
        _chunk({"functionCall": {"name": "read_theme"}}),
        _chunk(_named("read_screen")),
        _chunk(_piece("$.id", stringValue="A")),
        _chunk({"functionCall": {}}),
        _chunk(_named("read_screen")),
        _chunk(_piece("$.id", more=False, stringValue="B")),
        _chunk(_named("read_screen")),
        _chunk(_piece("$.id", stringValue="C")),
        _chunk(_named("read_screen")),  # the previous one was never ended
        _chunk(_piece("$['id']", stringValue="D")),
        _chunk({"text": "Done."}, finish="STOP"),
    )
    assert [(c.name, c.input) for c in calls] == [
        ("read_theme", {}),
        ("read_screen", {"id": "A"}),
        ("read_screen", {"id": "B"}),
        ("read_screen", {"id": "C"}),
        ("read_screen", {"id": "D"}),
    ]


def test_a_call_the_reply_never_ended_keeps_what_arrived() -> None:
    (call,) = _read(
        _chunk(_named("write_items")),
        _chunk(_piece("$.items[0]", stringValue="apple"), finish="STOP"),
    )
    assert call.input == {"items": ["apple"]}


@pytest.mark.parametrize("path", ["city", "$.", "$..x", 7])
def test_a_malformed_path_is_a_protocol_error_naming_it(path: Any) -> None:
    with pytest.raises(ProtocolError, match="partialArgs"):
        _read(_chunk(_named("f")), _chunk(_piece(path, stringValue="x"), finish="STOP"))


def test_pending_says_whether_a_call_is_open() -> None:
    """``pending``, read for every chunk by the usual chunk's test, follows the open call."""
    from metis.wire.schema.gemini_call_args import StreamedCallArgs

    args = StreamedCallArgs("gemini chunk")
    assert not args.pending
    named = {"functionCall": {"name": "f", "willContinue": True}}
    assert args.feed(named) == ([], True) and args.pending
    assert args.feed(_piece("$.a", stringValue="x"))[1] and args.pending
    assert args.feed({"text": "hi"}) != ([], False) and not args.pending  # another part ends it
    assert args.feed(named)[1] and args.pending
    assert args.feed(_piece("$.b", more=False, numberValue=1))[1] and not args.pending
    assert args.feed(named)[1] and args.flush() and not args.pending
