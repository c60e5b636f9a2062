"""The stop a Chat Completions pass-through relay reads for the metrics is the one the
translated path reads of the same answer (metis/wire/openai_chat/read.py): ``stop`` on a
reply with tool calls is ``tool_use`` (a named tool_choice answered by a compatible server),
``stop`` on a refusal is ``refusal``; as a stream and as a whole body."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from metis.errors import ProtocolError
from metis.gateway.relay import ChatRelay
from metis.model.events import MessageComplete
from metis.model.response import StopKind, StopReason
from metis.wire.builder import MessageBuilder
from metis.wire.openai_chat import OpenAIChatCodec

CALL = {"index": 0, "id": "call_1", "type": "function"}
CALL_START = {**CALL, "function": {"name": "get_weather", "arguments": ""}}
FRAGMENT = {"index": 0, "function": {"arguments": '{"city": "Paris"}'}}


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}


def chunks(case: str, finish: str) -> list[dict[str, Any]]:
    first = chunk({"role": "assistant", "content": None, "refusal": None})
    if case == "tool calls":
        body = [chunk({"tool_calls": [CALL_START]}), *[chunk({"tool_calls": [FRAGMENT]})] * 3]
    elif case == "refusal":
        body = [chunk({"refusal": "I can't"}), chunk({"refusal": " help with that."})]
    else:
        body = [chunk({"content": "Hi"}), chunk({"content": ' "refusal": "no"'})]
    return [first, *body, chunk({}, finish)]


def whole(case: str, finish: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    if case == "tool calls":
        function = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
        message["tool_calls"] = [{"id": "call_1", "type": "function", "function": function}]
    elif case == "refusal":
        message["refusal"] = "I can't help with that."
    else:
        message["content"] = "Hi"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return {"id": "c1", "object": "chat.completion", "model": "m", "choices": [choice]}


def sse(objects: list[dict[str, Any]]) -> Iterator[bytes]:
    for obj in objects:
        yield f"data: {json.dumps(obj)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def translated_stream(objects: list[dict[str, Any]]) -> StopReason:
    parser = OpenAIChatCodec().stream_parser(MessageBuilder("openai", "m"))
    events = [event for obj in objects for event in parser.feed(obj)]
    events += parser.end()
    return unexplained(next(e.stop_reason for e in events if isinstance(e, MessageComplete)))


def translated_whole(body: dict[str, Any]) -> StopReason:
    events = OpenAIChatCodec().parse_body(body, MessageBuilder("openai", "m"))
    return unexplained(next(e.stop_reason for e in events if isinstance(e, MessageComplete)))


def unexplained(stop: StopReason) -> StopReason:
    """The stop without a refusal's words: the relay passes them on as they came and reads
    the stop only for its kind (the translated path keeps them as its explanation)."""
    return stop.model_copy(update={"explanation": None})


CASES = [
    ("tool calls", "stop", StopKind.TOOL_USE),
    ("tool calls", "tool_calls", StopKind.TOOL_USE),
    ("refusal", "stop", StopKind.REFUSAL),
    ("text", "stop", StopKind.END_TURN),
    ("text", "length", StopKind.MAX_TOKENS),
    ("refusal", "content_filter", None),
]


@pytest.mark.parametrize(("case", "finish", "kind"), CASES)
def test_the_chat_relay_reads_the_stop_the_translated_path_reads(
    case: str, finish: str, kind: StopKind | None
) -> None:
    objects = chunks(case, finish)
    relay = ChatRelay("fast", include_usage=True)
    sent = b"".join(sse(objects))
    relayed = b"".join(relay.feed(sent[i : i + 50]) for i in range(0, len(sent), 50))
    relayed += relay.end()
    assert relay.stop == translated_stream(objects)
    assert relay.stop is not None and (kind is None or relay.stop.kind is kind)
    assert relayed == sent.replace(b'"model": "m"', b'"model":"fast"')

    body = whole(case, finish)
    answer = ChatRelay("fast", include_usage=True)
    answer.whole(json.dumps(body).encode())
    assert answer.stop == translated_whole(body)


def test_only_the_first_tool_call_chunk_of_a_stream_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cost per stream: of a tool call's many argument chunks one is parsed for the
    stop, and a stream of text has none parsed but its finish."""
    import metis.gateway.relay as relay_module

    parsed: list[bytes] = []
    fields = relay_module._fields

    def counted(raw: bytes) -> tuple[str, Any]:
        parsed.append(raw)
        return fields(raw)

    monkeypatch.setattr(relay_module, "_fields", counted)
    objects = chunks("tool calls", "stop")
    objects[2:2] = [chunk({"tool_calls": [FRAGMENT]})] * 100
    relay = ChatRelay("fast", include_usage=True)
    for piece in sse(objects):
        relay.feed(piece)
    assert relay.stop is not None and relay.stop.kind is StopKind.TOOL_USE
    assert len(parsed) == 2  # the first tool call's chunk, the finish's
    parsed.clear()
    text = ChatRelay("fast", include_usage=True)
    for piece in sse([chunk({"content": "Hi"})] * 100 + [chunk({}, "stop")]):
        text.feed(piece)
    assert len(parsed) == 1


def translated_end(objects: list[dict[str, Any]], marked: bool) -> StopReason | None:
    """The translated path's stop for a stream that ends after ``objects`` (``marked``: with
    ``[DONE]``); None where it reads the stream as cut short."""
    parser = OpenAIChatCodec().stream_parser(MessageBuilder("openai", "m"))
    events = [event for obj in objects for event in parser.feed(obj)]
    try:
        events += parser.end_marked() if marked else parser.end()
    except ProtocolError:
        return None
    return next(e.stop_reason for e in events if isinstance(e, MessageComplete))


USAGE_ONLY = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": []}
USAGE_ONLY["usage"] = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


@pytest.mark.parametrize("case", ["text", "tool calls"])
@pytest.mark.parametrize("marked", [True, False])
@pytest.mark.parametrize("usage", [True, False])
def test_a_stream_with_no_finish_reason_ends_as_the_translated_path_ends_it(
    case: str, marked: bool, usage: bool
) -> None:
    """A server that never names a finish_reason (``null`` on its last chunk), then
    ``[DONE]``: the translated path reads a whole reply (ended by its tool calls, or as a
    turn's end), and so does the relay (it read the stream as cut short, and the gateway
    ended it with an error event). Without ``[DONE]`` both read it as cut short."""
    objects = chunks(case, "stop")
    objects[-1] = chunk({}, None)
    if usage:
        objects.append(USAGE_ONLY)
    sent = b"".join(sse(objects))
    if not marked:
        sent = sent.removesuffix(b"data: [DONE]\n\n")
    relay = ChatRelay("fast", include_usage=True)
    relayed = b"".join(relay.feed(sent[i : i + 40]) for i in range(0, len(sent), 40))
    relayed += relay.end()
    expected = translated_end(objects, marked)
    assert relay.finished is (expected is not None)
    assert relay.stop == expected
    if marked:
        kind = StopKind.TOOL_USE if case == "tool calls" else StopKind.END_TURN
        assert expected is not None and expected.kind is kind
    assert relayed == sent.replace(b'"model": "m"', b'"model":"fast"')


def test_done_held_to_the_end_of_the_stream_ends_it_too() -> None:
    relay = ChatRelay("fast", include_usage=True)
    relay.feed(b"".join(sse([chunk({"content": "Hi"})])).removesuffix(b"\n\n"))
    assert relay.end() == b"data: [DONE]\n\n"
    assert relay.finished and relay.stop == StopReason(kind=StopKind.END_TURN)


@pytest.mark.parametrize("case", ["text", "tool calls"])
def test_a_whole_answer_with_no_finish_reason_stops_as_the_translated_path_reads_it(
    case: str,
) -> None:
    """A whole body is whole: the translated path reads its ``null`` finish_reason as a
    provider-specific stop; the relay read no stop, and the pass-through call was told to
    the telemetry as cancelled."""
    body = whole(case, "stop")
    body["choices"][0]["finish_reason"] = None
    relay = ChatRelay("fast", include_usage=True)
    relay.whole(json.dumps(body).encode())
    assert relay.stop is not None and relay.stop == translated_whole(body)
