"""The readers' fast paths give what the general way gives (benchmarks/README.md says what
they are for): the schema codec's unrolled two-step paths and its reading of a part that is
its text alone; the nesting limit checked on a parsed value; ``clean_value`` building nothing
for a clean value. (That an adapter loads only the codec packages its stack uses is checked in
tests/project/test_import_cost.py.)"""

from __future__ import annotations

import copy
import json
from importlib.resources import files
from typing import Any

import pytest
import yaml

from metis.model.events import MessageComplete, TextDelta, ThinkingDelta
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from metis.wire.json_limits import MAX_DEPTH, JSONLimitError, loads, nested_deeper, too_deep
from metis.wire.schema import SchemaCodec
from metis.wire.schema.paths import compile_path, getter, resolve
from metis.wire.unicode_text import clean_value

GEMINI_SETTINGS: dict[str, Any] = yaml.safe_load(
    files("metis.stacks.builtin").joinpath("gemini.yaml").read_text()
)["codec_settings"]

OBJECTS: list[Any] = [
    None,
    "text",
    [],
    {},
    {"a": None},
    {"a": "x"},
    {"a": []},
    {"a": [{"b": 1}]},
    {"a": [{"b": 1}, {"b": 2}]},
    {"a": {"b": 3, "0": 4, "-1": 5}},
    {"a": {"0": "by key"}},
    {"a": [[1], [2]]},
    [{"a": 1}],
]


@pytest.mark.parametrize("path", ["a.b", "a.0", "a.-1", "a.1", "a.5", "0.a"])
def test_a_two_step_path_reads_what_the_general_walk_reads(path: str) -> None:
    compiled = compile_path(path)
    get = getter(compiled)
    for obj in OBJECTS:
        assert get(obj) == resolve(obj, compiled), (path, obj)


def gemini(block_detect: dict[str, Any] | None = None) -> SchemaCodec:
    settings = copy.deepcopy(GEMINI_SETTINGS)
    if block_detect is not None:
        settings["response_schema"]["block_detect"] = block_detect
    built = get_codec("schema", settings)
    assert isinstance(built, SchemaCodec)
    return built


def chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": list(parts), "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2},
        "responseId": "r1",
        "modelVersion": "gemini-x",
    }


def streamed(codec: SchemaCodec, objects: list[dict[str, Any]]) -> list[Any]:
    parser = codec.stream_parser(MessageBuilder("gemini", "gemini:x"))
    events = [event for obj in objects for event in parser.feed(json.loads(json.dumps(obj)))]
    events += parser.end()
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    return events


def test_parts_that_are_their_text_alone_stream_as_text() -> None:
    objects = [chunk({"text": "Hel"}), chunk({"text": "lo"}), chunk({"text": ""}, finish="STOP")]
    events = streamed(gemini(), objects)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert [block.type for block in final.final_content] == ["text"]


def test_a_text_alone_after_a_thought_opens_a_new_text_block() -> None:
    events = streamed(
        gemini(),
        [
            chunk({"text": "plan", "thought": True}),
            chunk({"text": "Hi"}),
            chunk({"text": "hm", "thought": True}),
            chunk({"text": "there"}, finish="STOP"),
        ],
    )
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert [block.type for block in final.final_content] == [
        "thinking",
        "text",
        "thinking",
        "text",
    ]


def test_a_lone_text_key_goes_by_the_rules_when_they_call_it_something_else() -> None:
    codec = gemini({"thinking": {"key": "text"}, "text": {"key": "text"}})
    events = streamed(codec, [chunk({"text": "pondering"}), chunk({"text": "on"}, finish="STOP")])
    assert [e.thinking for e in events if isinstance(e, ThinkingDelta)] == ["pondering", "on"]
    assert not [e for e in events if isinstance(e, TextDelta)]


def nest(depth: int) -> Any:
    value: Any = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value, "s": "[[{{"}
    return value


@pytest.mark.parametrize("depth", [0, 1, 2, 99, 100, 101, 150, 250])
def test_the_depth_of_a_parsed_value_is_the_depth_of_its_text(depth: int) -> None:
    value = nest(depth)
    assert nested_deeper(value) is too_deep(json.dumps(value)) is (depth > MAX_DEPTH)


@pytest.mark.parametrize("depth", [102, 150, 250, 5000])
def test_a_reply_nested_too_deep_is_refused_however_deep(depth: int) -> None:
    text = '{"k": [' * (depth // 2) + "1" + "]}" * (depth // 2)
    with pytest.raises(JSONLimitError):
        loads(text)


def test_a_long_shallow_reply_parses() -> None:
    reply = {"content": [{"d": i, "t": [i]} for i in range(500)], "text": "{[" * 300}
    assert loads(json.dumps(reply)) == reply


def test_clean_value_hands_back_a_clean_value_itself_and_cleans_a_copy_otherwise() -> None:
    clean_input = {"city": "Paris", "days": [{"d": 1, "note": "café"}], "n": None}
    assert clean_value(clean_input) is clean_input
    dirty = {"a": [{"b": "x\ud83d"}], "\udc00key": "ok", "c": "\ud83d\ude00"}
    cleaned = clean_value(dirty)
    assert cleaned == {"a": [{"b": "x\ufffd"}], "\ufffdkey": "ok", "c": "\U0001f600"}
    assert dirty["a"] == [{"b": "x\ud83d"}]  # the given value is left as it was
