"""Importing and exporting stored histories in OpenAI Chat and Anthropic Messages form."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from metis.errors import InvalidRequestError
from metis.histories import from_anthropic, from_openai_chat, to_anthropic, to_openai_chat
from metis.model import (
    Base64ImageSource,
    CacheHint,
    ImageBlock,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.content import Message, ServerToolCallBlock
from metis.model.dicts import MessageDict

CHAT: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be brief."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Weather here and there? "},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
            {
                "type": "image_url",
                "image_url": {"url": "https://example.com/a.png", "detail": "low"},
            },
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "w", "arguments": '{"city":"Paris"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "w", "arguments": '{"city":"Rome"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "18 C"},
    {"role": "tool", "tool_call_id": "call_b", "content": [{"type": "text", "text": "21 C"}]},
    {"role": "assistant", "content": "Paris 18, Rome 21."},
]


def test_an_openai_chat_history_imports_with_canonical_ids_and_parallel_results_together() -> None:
    messages = from_openai_chat(CHAT)
    assert [m.role for m in messages] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    images = [b for b in messages[1].content if isinstance(b, ImageBlock)]
    assert (
        isinstance(images[0].source, Base64ImageSource)
        and images[0].source.media_type == "image/png"
    )
    assert isinstance(images[1].source, URLImageSource)
    calls = [b for b in messages[2].content if isinstance(b, ToolUseBlock)]
    assert [c.input for c in calls] == [{"city": "Paris"}, {"city": "Rome"}]
    assert all(c.id.startswith("tu_") for c in calls)
    results = [b for b in messages[3].content if isinstance(b, ToolResultBlock)]
    assert [r.tool_use_id for r in results] == [c.id for c in calls]  # the same id, the same one
    assert [r.text for r in results] == ["18 C", "21 C"]


def test_an_openai_chat_history_round_trips_through_canonical() -> None:
    exported = to_openai_chat(from_openai_chat(CHAT))
    assert exported[0] == {"role": "system", "content": "Be brief."}
    assert exported[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,aGk="},
    }
    calls = exported[2]["tool_calls"]
    assert exported[2]["content"] is None and [c["function"]["arguments"] for c in calls] == [
        '{"city": "Paris"}',
        '{"city": "Rome"}',
    ]
    assert [m["tool_call_id"] for m in exported[3:5]] == [c["id"] for c in calls]
    assert exported[5] == {"role": "assistant", "content": "Paris 18, Rome 21."}


ANTHROPIC: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Use the tool.", "signature": "sig=="},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"city": "Paris"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "18 C"}],
            },
            {"type": "text", "text": "And tomorrow?"},
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "server_tool_use", "id": "srv_1", "name": "web_search"}],
    },
]


def test_an_anthropic_history_imports_with_provenance_and_tool_turns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="metis"):
        messages = from_anthropic(ANTHROPIC, system="Be brief.", model="claude-sonnet-4-5")
    roles = [m.role for m in messages]
    assert roles == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.USER, Role.ASSISTANT]
    thinking, redacted, call = messages[2].content
    assert isinstance(thinking, ThinkingBlock) and thinking.signature == "sig=="
    assert thinking.provider_raw is not None and thinking.provider_raw.model == "claude-sonnet-4-5"
    assert isinstance(redacted, RedactedThinkingBlock) and isinstance(call, ToolUseBlock)
    (result,) = messages[3].content
    assert isinstance(result, ToolResultBlock) and result.tool_use_id == call.id
    # a server tool's call is kept (tests/histories/test_histories_blocks.py)
    (server,) = messages[5].content
    assert isinstance(server, ServerToolCallBlock) and server.id == "srv_1"
    assert [r for r in caplog.records if getattr(r, "event", "") == "metis.lossy_projection"] == []


def test_an_anthropic_history_exports_with_results_in_user_turns() -> None:
    messages = from_anthropic(ANTHROPIC[:3], system="Be brief.")
    body = to_anthropic(messages)
    assert body["system"] == "Be brief."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert [b["type"] for b in body["messages"][2]["content"]] == ["tool_result", "text"]
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Use the tool.",
        "signature": "sig==",
    }


@pytest.mark.parametrize(
    ("history", "where"),
    [
        ([{"role": "robot", "content": "x"}], "messages[0].role"),
        ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id"),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "w", "arguments": 7}}],
                }
            ],
            "messages[0].tool_calls[0].function.arguments",
        ),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}],
            "content[0]",
        ),
        (["not a message"], "messages[0]: expected an object"),
    ],
)
def test_malformed_chat_input_is_an_invalid_request_naming_where(
    history: list[Any], where: str
) -> None:
    with pytest.raises(InvalidRequestError, match=where.replace("[", r"\[").replace("]", r"\]")):
        from_openai_chat(history)


def test_plain_dict_messages_are_typed_and_validate() -> None:
    history: list[MessageDict] = [
        {"role": "user", "content": "Hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu_1", "name": "w", "input": {}}],
        },
        {
            "role": "tool",
            "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "ok"}],
        },
    ]
    messages = [Message.model_validate(m) for m in history]
    assert messages[0].content == [TextBlock(text="Hi")]
    assert isinstance(messages[2].content[0], ToolResultBlock)


# Malformed stored histories: a classified error naming where, never a bare exception --------


def _nested(levels: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(levels):
        inner.append([])
        inner = inner[0]
    return outer


ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["\ud83d", "data:", "data:image/png;base64,", "tool_use", "text", "{"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    st.builds(lambda: _nested(150)),  # deeper than JSON may go; printable by hypothesis
    st.just("[" * 5000 + "]" * 5000),
    st.just({1: "a non-string key"}),
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value: each object member and each list item, 8 levels deep."""
    found = [path]
    if len(path) >= 8:
        return found
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*path, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, history: list[dict[str, Any]]) -> list[Any]:
    """``history`` with one to three places replaced by an odd value, or removed."""
    result: Any = copy.deepcopy(history)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(result)))
        if not path:
            result = copy.deepcopy(draw(ODD_VALUES))  # a later mutation must not change it
            continue
        parent = result
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(draw(ODD_VALUES))
        if not isinstance(result, list | dict):
            break
    return result  # type: ignore[no-any-return]


def _imported_or_refused(load: Any, history: Any, export: Any, **extra: Any) -> None:
    try:
        messages = load(history, **extra)
        export(messages)
    except InvalidRequestError as error:
        assert error.message.startswith(("messages", "system")), error.message
        assert error.error_class.value == "invalid_request"


@settings(deadline=None)
@given(mutated(CHAT))
def test_a_mutated_chat_history_imports_or_is_refused_naming_where(history: Any) -> None:
    _imported_or_refused(from_openai_chat, history, to_openai_chat)


@settings(deadline=None)
@given(mutated(ANTHROPIC), st.one_of(st.none(), ODD_VALUES))
def test_a_mutated_anthropic_history_imports_or_is_refused_naming_where(
    history: Any, system: Any
) -> None:
    _imported_or_refused(from_anthropic, history, to_anthropic, system=system)


@pytest.mark.parametrize(
    ("load", "history", "where"),
    [
        (from_openai_chat, [{"role": "assistant", "tool_calls": True}], "messages[0].tool_calls"),
        (
            from_openai_chat,
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": 5}}]}],
            "messages[0].tool_calls[0].function.name",
        ),
        (
            from_openai_chat,
            [{"role": "user", "content": [{"type": "text", "text": None}]}],
            "messages[0].content[0].text",
        ),
        (
            from_anthropic,
            [{"role": "assistant", "content": [{"type": "thinking", "signature": 7}]}],
            "messages[0].content[0].signature",
        ),
        (
            from_anthropic,
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {1: 2}}]}],
            "messages[0].content[0].input",
        ),
        (
            from_anthropic,
            [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}],
            "messages[0].content[0].source",
        ),
        (  # a misspelt key: the text is missing, not an empty text sent as nothing
            from_openai_chat,
            [{"role": "user", "content": [{"type": "text", "txt": "Hello"}]}],
            "messages[0].content[0].text: missing",
        ),
        (
            from_anthropic,
            [{"role": "user", "content": [{"type": "text", "txt": "Hello"}]}],
            "messages[0].content[0].text: missing",
        ),
        (from_openai_chat, 42, "messages: expected a list"),
        (from_anthropic, [{"role": _nested(5000)}], "messages[0].role: expected user, assistant"),
        (from_openai_chat, [{"role": _nested(5000)}], "messages[0].role: expected system"),
    ],
)
def test_a_malformed_field_is_an_invalid_request_naming_the_message_and_field(
    load: Any, history: Any, where: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        load(history)
    assert where in caught.value.message


@pytest.mark.parametrize("export", [to_openai_chat, to_anthropic])
def test_exports_take_message_dicts_and_refuse_what_is_not_a_message_naming_it(
    export: Any,
) -> None:
    assert export([{"role": "user", "content": "Hi"}]) == export([Message.user("Hi")])
    with pytest.raises(InvalidRequestError, match=r"messages\[1\]"):
        export([Message.user("Hi"), {"role": "robot", "content": "x"}])
    with pytest.raises(InvalidRequestError, match=r"messages\[0\]"):
        export(["Hi"])
    nan = Message.assistant(ToolUseBlock(id="tu_1", name="w", input={"x": float("nan")}))
    with pytest.raises(InvalidRequestError, match=r"messages\[0\]\.content\[0\]\.input\.x"):
        export([nan])


@pytest.mark.parametrize("export", [to_openai_chat, to_anthropic])
@pytest.mark.parametrize(
    ("message", "said"),
    [
        (
            {"role": "user", "content": [{"type": "text", "text": "x", "citatons": None}]},
            "messages[0].content[0]: unknown key 'citatons'; did you mean 'citations'?",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "image", "source": {"type": "url", "url": "u", "ulr": 1}}],
            },
            "messages[0].content[0].source: unknown key 'ulr'; did you mean 'url'?",
        ),
        (
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": "x",
                        "provider_raw": {"provider": "a", "modle": "m"},
                    }
                ],
            },
            "messages[0].content[0].provider_raw: unknown key 'modle'; did you mean 'model'?",
        ),
    ],
)
def test_an_export_refuses_a_misspelt_key_of_a_message_dict_naming_it(
    export: Any, message: dict[str, Any], said: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        export([message])
    assert said in caught.value.message


def test_the_warn_for_a_dropped_part_names_its_type_printably(
    caplog: pytest.LogCaptureFixture,
) -> None:
    odd = "half \ud83d" + "x" * 500
    history = [{"role": "user", "content": [{"type": odd}, {"type": ["a", "list"]}]}]
    with caplog.at_level(logging.WARNING, logger="metis"):
        assert from_openai_chat(history)[0].content == []
    first, second = (r.getMessage() for r in caplog.records)
    first.encode("utf-8")  # no lone surrogate in a log line
    assert "half \ufffd" in first and len(first) < 200
    assert second.startswith("dropped list at messages[0].content[1]")


def test_an_anthropic_blocks_cache_mark_is_its_cache_hint() -> None:
    """A message's own block keeps its ``cache_control`` as its hint (TTL included); the system
    prompt's, a tool result's parts and a thinking block do not (the system is sent as one
    text; Anthropic takes no mark on thinking)."""
    part = {"type": "text", "text": "2 C", "cache_control": {"type": "ephemeral"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [part]}
    marked = {"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    call = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    messages = from_anthropic(
        [
            {"role": "user", "content": [marked]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "cache_control": {"type": "ephemeral"}},
                    {**call, "cache_control": {"type": "ephemeral"}},
                ],
            },
            {"role": "user", "content": [result]},
        ],
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    )
    hints = [[block.cache for block in message.content] for message in messages]
    assert hints == [[None], [CacheHint(ttl="1h")], [None, CacheHint()], [None]]
    (returned,) = messages[3].content
    assert isinstance(returned, ToolResultBlock) and not isinstance(returned.content, str)
    assert returned.content[0].cache is None
    said = {
        ".type: expected ephemeral, got 'persistent'": {"type": "persistent"},
        ".type: expected ephemeral, got nothing": {"ttl": "1h"},
        ".ttl: expected 5m or 1h, got '2h'": {"type": "ephemeral", "ttl": "2h"},
        ": expected {'type': 'ephemeral'}, got str": "yes",
    }
    for message, wrong in said.items():
        with pytest.raises(InvalidRequestError) as refused:
            from_anthropic([{"role": "user", "content": [{**marked, "cache_control": wrong}]}])
        assert f"messages[0].content[0].cache_control{message}" in str(refused.value)


class _Function(BaseModel):  # the shapes of the official SDKs' own objects (pydantic models)
    name: str
    arguments: str


class _ToolCall(BaseModel):
    id: str
    type: str
    function: _Function


class _ChatMessage(BaseModel):
    role: str
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Block(BaseModel):
    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None


def test_an_sdks_own_objects_in_a_stored_history_are_read_as_their_dicts() -> None:
    """The SDKs' habit: the reply appended as it came (``completion.choices[0].message``, an
    Anthropic ``response.content``) was 'expected an object, got ChatCompletionMessage'."""
    from metis import Message, ToolUseBlock

    call = _ToolCall(
        id="call_1", type="function", function=_Function(name="get_weather", arguments="{}")
    )
    said = _ChatMessage(role="assistant", tool_calls=[call])
    chat = from_openai_chat(
        [
            {"role": "user", "content": "Hi"},
            said,
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
        ]
    )
    assert isinstance(chat[1].content[0], ToolUseBlock) and chat[1].content[0].name == "get_weather"
    content = [
        _Block(type="text", text="Let me check."),
        _Block(type="tool_use", id="toolu_1", name="get_weather", input={"city": "Oslo"}),
    ]
    claude = from_anthropic(
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": content}]
    )
    assert [type(b).__name__ for b in claude[1].content] == ["TextBlock", "ToolUseBlock"]
    with pytest.raises(InvalidRequestError, match=r"messages\[0\]: a metis Message already"):
        from_openai_chat([Message.user("Hi")])


def test_a_calls_arguments_that_are_not_json_are_kept_as_they_came() -> None:
    """OpenAI takes back a call whose arguments are not a JSON object (a model wrote them so):
    the input is empty, the text kept for OpenAI (its encoder sends it back as it came)."""
    said = {"id": "c", "type": "function", "function": {"name": "w", "arguments": "{oops"}}
    (message,) = from_openai_chat([{"role": "assistant", "tool_calls": [said]}])
    (call,) = message.content
    assert isinstance(call, ToolUseBlock) and call.input == {} and call.input_error
    assert call.provider_raw is not None and call.provider_raw.data == {"arguments": "{oops"}
