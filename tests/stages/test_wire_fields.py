"""The wire_fields stage: declarative rename / drop / set on the provider's JSON body."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from metis.errors import StackError
from metis.pipeline.pipeline import Pipeline
from metis.pipeline.registry import stages
from metis.pipeline.request import WireRequest
from metis.stacks.loader import parse_stack
from metis.stages.edits.wire_fields import WireFields, parse_path

from ..helpers import drive, make_call

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)


def wire(body: dict[str, Any], stream: bool = True) -> WireRequest:
    return WireRequest(url="https://llm.example/v1/chat/completions", body=body, stream=stream)


def body() -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_completion_tokens": 256,
        "stream": True,
        "stream_options": {"include_usage": True},
        "parallel_tool_calls": False,
        "tools": [
            {"type": "function", "function": {"name": "a", "parameters": {}, "strict": True}},
            {"type": "function", "function": {"name": "b", "parameters": {}}},
        ],
        "reasoning_effort": "low",
    }


def edit(original: dict[str, Any], **options: Any) -> dict[str, Any]:
    """The edited body; asserts the original came through untouched."""
    before = copy.deepcopy(original)
    out = WireFields(**options).apply(wire(original)).body
    assert original == before
    return out


# Building ---------------------------------------------------------------------------------


def test_the_registry_builds_it_by_name() -> None:
    stage = stages.build("wire_fields", {"rename": {"max_completion_tokens": "max_tokens"}})
    assert isinstance(stage, WireFields)
    assert "max_tokens" in repr(stage)


def test_it_has_no_options_it_does_nothing() -> None:
    request = wire(body())
    assert WireFields().apply(request) is request


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"rename": {"a..b": "c"}}, "empty segment"),
        ({"rename": {"": "c"}}, "non-empty"),
        ({"rename": {"tools.*.x": "y"}}, "'\\*' is not allowed"),
        ({"rename": {"a": "b.*"}}, "'\\*' is not allowed"),
        ({"rename": {"a": "a.b"}}, "one holds the other"),
        ({"rename": {"a.b": "a"}}, "one holds the other"),
        ({"drop": ["stream_options."]}, "empty segment"),
        ({"set": {".x": 1}}, "empty segment"),
        ({"drop": "stream_options"}, "drop"),
        ({"rename": {"a": 3}}, "rename"),
        ({"remove": ["x"]}, "unknown option 'remove'"),
    ],
)
def test_malformed_options_fail_when_the_stage_is_built(
    options: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(StackError, match=complaint) as caught:
        WireFields(**options)
    assert "wire_fields" in str(caught.value)


def test_paths_are_split_on_dots() -> None:
    assert parse_path("tools.*.function.strict") == ("tools", "*", "function", "strict")
    with pytest.raises(ValueError):
        parse_path("a.*", wildcards=False)


def test_a_stack_names_it_after_encode_and_it_fits_there() -> None:
    spec = parse_stack(
        {
            "name": "x",
            "endpoint": {"base_url": "http://x", "path": "/v1/chat/completions"},
            "stages": [
                "invariants",
                {"encode": {"codec": "openai_chat"}},
                {"wire_fields": {"drop": ["stream_options"]}},
                {"normalize": {"codec": "openai_chat"}},
                {"decode": {"format": "sse"}},
                "transport",
            ],
        }
    )
    assert "wire_fields" in spec.build_pipeline().names()


def test_before_encode_it_is_refused_and_named() -> None:
    stack = {
        "name": "x",
        "endpoint": {"base_url": "http://x", "path": "/v1"},
        "stages": [
            "invariants",
            {"wire_fields": {"drop": ["stream_options"]}},
            {"encode": {"codec": "openai_chat"}},
            {"normalize": {"codec": "openai_chat"}},
            {"decode": {"format": "sse"}},
            "transport",
        ],
    }
    # Refused when the stack is read, by the skeleton's order rule, naming the stage ...
    with pytest.raises(StackError, match=r"'wire_fields'.*rule edits-between-encode-and-retry"):
        parse_stack(stack)
    # ... and, for a pipeline put together in code, by the types its neighbours take.
    encode, normalize, decode, transport = (
        parse_stack({**stack, "stages": stack["stages"][:1] + stack["stages"][2:]})
        .build_pipeline()
        .stages[1:]
    )
    with pytest.raises(StackError, match="wire_fields"):
        Pipeline([WireFields(drop=["stream_options"]), encode, normalize, decode, transport])


# rename -----------------------------------------------------------------------------------


def test_rename_moves_a_top_level_field() -> None:
    out = edit(body(), rename={"max_completion_tokens": "max_tokens"})
    assert out["max_tokens"] == 256 and "max_completion_tokens" not in out


def test_rename_into_a_nested_field_makes_its_parents() -> None:
    out = edit(body(), rename={"reasoning_effort": "reasoning.effort"})
    assert out["reasoning"] == {"effort": "low"} and "reasoning_effort" not in out


def test_rename_joins_an_existing_parent_and_replaces_the_value_there() -> None:
    original = {**body(), "reasoning": {"effort": "high", "exclude": False}}
    out = edit(original, rename={"reasoning_effort": "reasoning.effort"})
    assert out["reasoning"] == {"effort": "low", "exclude": False}


def test_rename_replaces_a_parent_that_is_not_a_mapping() -> None:
    out = edit({"a": 1, "b": "text"}, rename={"a": "b.c"})
    assert out == {"b": {"c": 1}}


def test_rename_out_of_a_nested_field() -> None:
    out = edit({"options": {"n": 4, "keep": 1}}, rename={"options.n": "num"})
    assert out == {"options": {"keep": 1}, "num": 4}


def test_rename_of_an_absent_field_is_no_edit() -> None:
    request = wire({"model": "m"})
    stage = WireFields(rename={"max_completion_tokens": "max_tokens"})
    assert stage.apply(request) is request


# drop -------------------------------------------------------------------------------------


def test_drop_removes_top_level_fields() -> None:
    out = edit(body(), drop=["stream_options", "parallel_tool_calls"])
    assert "stream_options" not in out and "parallel_tool_calls" not in out
    assert out["model"] == "m"


def test_drop_with_a_wildcard_reaches_every_list_item() -> None:
    original = body()
    out = edit(original, drop=["tools.*.function.strict"])
    assert [t["function"] for t in out["tools"]] == [
        {"name": "a", "parameters": {}},
        {"name": "b", "parameters": {}},
    ]
    # The untouched tool is shared, not copied; the edited one is new.
    assert out["tools"][1] is original["tools"][1]
    assert out["tools"][0] is not original["tools"][0]
    assert out["messages"] is original["messages"]


def test_drop_with_a_wildcard_reaches_every_mapping_value() -> None:
    original = {"extra": {"x": {"secret": 1, "k": 2}, "y": {"k": 3}}}
    assert edit(original, drop=["extra.*.secret"]) == {"extra": {"x": {"k": 2}, "y": {"k": 3}}}


def test_drop_a_whole_level_with_a_trailing_wildcard() -> None:
    assert edit({"a": [1, 2], "b": {"c": 1}}, drop=["a.*", "b.*"]) == {"a": [], "b": {}}


def test_drop_by_list_index() -> None:
    out = edit(body(), drop=["tools.0", "messages.5"])
    assert [t["function"]["name"] for t in out["tools"]] == ["b"]
    assert len(out["messages"]) == 1


def test_drop_of_what_is_not_there_is_no_edit() -> None:
    request = wire({"model": "m", "tools": "not a list", "n": 3})
    stage = WireFields(drop=["stream_options", "tools.*.function.strict", "n.x", "model.x"])
    assert stage.apply(request) is request


# set --------------------------------------------------------------------------------------


def test_set_adds_a_field_and_its_parents() -> None:
    out = edit(body(), set={"usage": {"include": True}, "provider.sort": "throughput"})
    assert out["usage"] == {"include": True}
    assert out["provider"] == {"sort": "throughput"}


def test_set_over_a_wildcard_writes_only_existing_items() -> None:
    out = edit(body(), set={"tools.*.function.strict": False, "nothing.*.x": 1})
    assert [t["function"]["strict"] for t in out["tools"]] == [False, False]
    assert "nothing" not in out


def test_below_a_wildcard_an_item_that_is_no_mapping_is_left_alone() -> None:
    out = edit({"tools": ["odd", {"f": {}}, {}]}, set={"tools.*.f.strict": False})
    assert out == {"tools": ["odd", {"f": {"strict": False}}, {"f": {"strict": False}}]}


def test_set_never_grows_a_list() -> None:
    request = wire({"tools": [{"a": 1}]})
    assert WireFields(set={"tools.3.strict": False}).apply(request) is request
    out = edit({"tools": [{"a": 1}]}, set={"tools.0.strict": False})
    assert out == {"tools": [{"a": 1, "strict": False}]}


def test_set_of_an_equal_value_is_no_edit() -> None:
    request = wire({"usage": {"include": True}, "tools": [{"strict": False}]})
    stage = WireFields(set={"usage": {"include": True}, "tools.*.strict": False})
    assert stage.apply(request) is request


def test_each_body_gets_its_own_copy_of_a_set_value() -> None:
    stage = WireFields(set={"usage": {"include": True}})
    first = stage.apply(wire({})).body
    first["usage"]["include"] = "changed"
    second = stage.apply(wire({})).body
    assert second["usage"] == {"include": True}
    assert stage.options.set == {"usage": {"include": True}}


# All together ----------------------------------------------------------------------------


def test_edits_run_rename_then_drop_then_set() -> None:
    out = edit(
        {"a": 1, "b": 2},
        rename={"a": "c"},
        drop=["c"],  # drops what rename made
        set={"a": "fixed"},  # and set writes where rename took from
    )
    assert out == {"b": 2, "a": "fixed"}


def test_the_request_keeps_everything_but_its_body() -> None:
    request = WireRequest(
        url="https://x/v1", body=body(), headers={"authorization": "Bearer k"}, stream=True
    )
    out = WireFields(drop=["stream_options"]).apply(request)
    assert out is not request
    assert (out.url, out.headers, out.stream, out.method) == (
        request.url,
        request.headers,
        request.stream,
        request.method,
    )


@pytest.mark.anyio
async def test_as_a_stage_it_hands_the_edited_request_inward_and_items_pass_untouched() -> None:
    stage = WireFields(rename={"max_completion_tokens": "max_tokens"}, drop=["stream_options"])
    items = [object(), object()]
    original = body()
    seen, out = await drive(stage, wire(original), make_call(provider="x"), items)
    assert out == items
    assert seen[0].body["max_tokens"] == 256
    assert "stream_options" not in seen[0].body
    assert original["max_completion_tokens"] == 256 and "stream_options" in original
