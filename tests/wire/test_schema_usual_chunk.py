"""The schema codec's usual streamed chunk (metis/wire/schema/usual.py), read at once, gives
what the long way gives: the same events, the same final message, the same error, whatever
comes before and after it and however it differs from the usual one."""

from __future__ import annotations

import copy
import json
from importlib.resources import files
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from metis.errors import AdapterError
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from metis.wire.schema import SchemaCodec
from metis.wire.schema.usual import UsualChunk

GEMINI_SETTINGS: dict[str, Any] = yaml.safe_load(
    files("metis.stacks.builtin").joinpath("gemini.yaml").read_text()
)["codec_settings"]


def codec(name: str = "gemini", **changes: Any) -> SchemaCodec:
    given_settings = copy.deepcopy(GEMINI_SETTINGS)
    given_settings["name"] = name  # another name: the same format without Gemini's extras
    for key, value in changes.items():
        given_settings["response_schema"][key] = value
    built = get_codec("schema", given_settings)
    assert isinstance(built, SchemaCodec)
    return built


def usual(text: str = "w", index: int = 0) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": index}],
        "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2, "totalTokenCount": 6},
        "modelVersion": "gemini-x",
        "responseId": "r1",
    }


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def change(obj: dict[str, Any]) -> dict[str, Any]:
        target: Any = obj
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        return obj

    return change


_CANDIDATE = ("candidates", 0)
_PART = (*_CANDIDATE, "content", "parts", 0)
CHANGES = [
    _set((*_CANDIDATE, "finishReason"), "STOP"),
    _set((*_CANDIDATE, "finishReason"), None),
    _set((*_CANDIDATE, "finishReason"), 7),
    _set((*_CANDIDATE, "finishReason"), "MAX_TOKENS"),
    _set(("promptFeedback",), {"blockReason": "SAFETY"}),
    _set(("error",), {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}),
    _set(("error",), "not an object"),
    _set((*_CANDIDATE, "index"), 1),
    _set((*_CANDIDATE, "index"), "0"),
    _set((*_CANDIDATE, "index"), True),
    _set((*_CANDIDATE, "groundingMetadata"), {"groundingChunks": []}),
    _set((*_CANDIDATE, "urlContextMetadata"), {"urlMetadata": []}),
    _set((*_CANDIDATE, "content"), None),
    _set((*_CANDIDATE, "content"), "text"),
    _set((*_CANDIDATE, "content", "parts"), []),
    _set((*_CANDIDATE, "content", "parts"), "w"),
    _set((*_CANDIDATE, "content", "parts"), [{"text": "a"}, {"text": "b"}]),
    _set((*_PART, "text"), ""),
    _set((*_PART, "text"), 5),
    _set((*_PART, "text"), None),
    _set((*_PART, "thought"), True),
    _set((*_PART, "thoughtSignature"), "c2ln"),
    _set(_PART, {"functionCall": {"name": "f", "args": {"a": 1}}}),
    _set(_PART, {"functionCall": {"name": "f", "willContinue": True}}),
    _set(_PART, {"functionCall": {"partialArgs": [{"jsonPath": "$.a", "numberValue": 2}]}}),
    _set(_PART, {"executableCode": {"language": "PYTHON", "code": "1"}}),
    _set(_PART, "a part"),
    _set(("usageMetadata",), None),
    _set(("usageMetadata",), "many"),
    _set(("usageMetadata",), {"promptTokenCount": -1}),
    _set(("usageMetadata",), {"promptTokenCount": 9, "candidatesTokenCount": 5}),
    _set(("candidates",), []),
    _set(("candidates",), None),
    _set(("candidates",), {"0": {}}),
    _set(("candidates",), [None]),
    lambda obj: {**obj, "candidates": [*obj["candidates"], obj["candidates"][0]]},
    lambda obj: {k: v for k, v in obj.items() if k != "usageMetadata"},
    lambda obj: {k: v for k, v in obj.items() if k != "candidates"},
]


def read(built: SchemaCodec, objects: list[dict[str, Any]]) -> tuple[list[Any], str | None]:
    """Every event the objects and the end make, and the error, if any, they end in."""
    parser = built.stream_parser(MessageBuilder("gemini", "gemini:x"))
    events: list[Any] = []
    try:
        for obj in objects:
            events += parser.feed(json.loads(json.dumps(obj)))
        events += parser.end()
    except AdapterError as error:
        parser.read_pending_usage()
        return events, f"{type(error).__name__}: {error}"
    return events, None


def long_way(built: SchemaCodec) -> SchemaCodec:
    slow = copy.copy(built)
    slow._usual = None
    return slow


_step = st.one_of(
    st.builds(usual, st.sampled_from(["w", " x", "é", "😀", "\ud83d"])),
    st.builds(
        lambda change, text: change(usual(text)),
        st.sampled_from(CHANGES),
        st.sampled_from(["w", "y"]),
    ),
)


@settings(deadline=None)  # its size: tests/conftest.py (METIS_FULL_SEARCH)
@given(steps=st.lists(_step, max_size=12), name=st.sampled_from(["gemini", "mine"]))
def test_the_usual_chunk_read_at_once_gives_what_the_long_way_gives(
    steps: list[dict[str, Any]], name: str
) -> None:
    built = codec(name)
    objects = [usual("Hi"), *steps, _set((*_CANDIDATE, "finishReason"), "STOP")(usual("."))]
    assert read(built, objects) == read(long_way(built), objects)


def test_the_gemini_stream_has_a_usual_chunk_and_reads_it_at_once() -> None:
    built = codec()
    assert built._usual is not None
    parser = built.stream_parser(MessageBuilder("gemini", "gemini:x"))
    parser.feed(usual("Hel"))
    parser._error = None  # the long way would fail on this: the chunk below never takes it
    (delta,) = parser.feed(usual("lo"))
    assert delta.text == "lo"


@pytest.mark.parametrize(
    "changes",
    [
        {"content_path": "content.parts"},  # not under the candidate: no envelope
        {"content_mode": "separate"},
        {"usage_path": "candidates.0.usage"},
        {"finish_reason_path": ["candidates.0.finish.reason"]},
        {"finish_reason_path": ["candidates.1.finishReason", "candidates.0.finishReason"]},
        {"dropped_fields": ["candidates.0.content.role", "candidates.0.x"]},
    ],
)
def test_a_shape_without_a_usual_chunk_is_read_the_long_way(changes: dict[str, Any]) -> None:
    built = codec(**changes)
    assert built._usual is None


def test_a_text_key_echoed_back_has_no_usual_chunk() -> None:
    stream = codec().schema.stream
    assert UsualChunk.of(stream, None, ("error",), None) is None
    assert UsualChunk.of(stream, "text", ("error", "inner"), None) is None
    assert UsualChunk.of(stream, "text", ("error",), None) is not None
