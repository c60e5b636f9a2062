"""Gemini's streamed function call arguments (``streamFunctionCallArguments``, Vertex AI and
Gemini 3): a call named in one part with ``willContinue``, its arguments in ``partialArgs``
pieces by JSON path, ended by a part without ``willContinue``, is read as one whole call with
all its arguments and the first part's thought signature; never a protocol error. A call the
reply never ended is kept with what arrived; a malformed path is a protocol error naming it."""

from __future__ import annotations

from typing import Any

import pytest

from metis.errors import ProtocolError
from metis.model import MessageComplete, ToolUseBlock
from metis.model.response import StopKind
from metis.stacks.loader import load_stack
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import MessageBuilder
from metis.wire.codec import Codec, get_codec

MODEL = "vertex:gemini-3-pro-preview"
SIGNATURE = "U3RyZWFtZWRDYWxsU2lnbmF0dXJl"


def _codec() -> Codec:
    (encode,) = [s for s in load_stack("gemini").stages if s.name == "encode"]
    return get_codec("schema", encode.options["settings"])


def _chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 20}}


def _piece(path: str, more: bool = True, **value: Any) -> dict[str, Any]:
    return {"functionCall": {"partialArgs": [{"jsonPath": path, **value}], "willContinue": more}}


def _read(*chunks: dict[str, Any]) -> list[ToolUseBlock]:
    builder = MessageBuilder("vertex", MODEL)
    parser = _codec().stream_parser(builder)
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    events += parser.end()
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
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
