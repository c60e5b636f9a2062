"""A kept wire form (and a history's kept record) is not given for a message whose block
holds a container changed in place since it was kept: ``block.input["x"] = 2`` on a tool
call, an item appended to a tool result's nested content, a ProviderRaw payload changed, a
citation's raw data changed. The next call sends what the message holds now, in every codec
that keeps wire forms (Anthropic's and OpenAI Chat's), and a history's kept values
(``History.kept``) are made again."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from metis.model import (
    CanonicalRequest,
    Message,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.citation import Citation
from metis.model.content import OpaqueBlock, ProviderRaw
from metis.model.history import history_of
from metis.model.memo import MessageMemo
from metis.wire.anthropic import encode as anthropic_encode
from metis.wire.openai_chat import OpenAIChatCodec
from tests.helpers import make_call


def chat_encode(request: CanonicalRequest, call: Any) -> dict[str, Any]:
    return OpenAIChatCodec().encode(request, call)


ENCODERS = {
    "anthropic": (anthropic_encode, "anthropic", "anthropic:claude-x"),
    "openai": (chat_encode, "openai", "openai:gpt-x"),
}


def request(model: str, *messages: Message) -> CanonicalRequest:
    return CanonicalRequest(model=model, messages=list(messages), max_output_tokens=100)


def sent(name: str, *messages: Message) -> str:
    encode, provider, model = ENCODERS[name]
    body = encode(request(model, *messages), make_call(provider=provider, model=model))
    return json.dumps(body["messages"]).replace('\\"', '"').replace(" ", "")


def tool_call() -> tuple[list[Message], ToolUseBlock]:
    use = ToolUseBlock(id="call_1", name="f", input={"x": 1, "deep": {"list": [1]}})
    return [Message.user("q"), Message.assistant(use)], use


@pytest.mark.parametrize("name", ENCODERS)
def test_a_tool_call_input_changed_in_place_is_sent_as_it_is_now(name: str) -> None:
    history, use = tool_call()
    assert '"x":1' in sent(name, *history)
    use.input["x"] = 2
    assert '"x":2' in sent(name, *history)
    use.input["deep"]["list"].append(7)  # a change deeper down
    assert "[1,7]" in sent(name, *history)


@pytest.mark.parametrize("name", ENCODERS)
def test_a_tool_results_nested_content_changed_in_place_is_sent_as_it_is_now(name: str) -> None:
    history, _ = tool_call()
    result = ToolResultBlock(tool_use_id="call_1", content=[TextBlock(text="one")])
    history.append(Message.user(result))
    assert "two" not in sent(name, *history)
    assert isinstance(result.content, list)
    result.content.append(TextBlock(text="two"))
    assert "two" in sent(name, *history)


def test_a_provider_raw_payload_changed_in_place_is_sent_as_it_is_now() -> None:
    item = {"type": "mcp_call", "id": "x1", "arguments": "a"}
    raw = ProviderRaw(provider="anthropic", model="claude-x", data={"item": item})
    message = Message.assistant(
        TextBlock(text="hi"), OpaqueBlock(kind="mcp_call", provider_raw=raw)
    )
    assert '"arguments":"a"' in sent("anthropic", message)
    item["arguments"] = "b"
    assert '"arguments":"b"' in sent("anthropic", message)


def test_a_history_record_keeps_no_value_past_a_nested_change() -> None:
    history, use = tool_call()
    record = history_of(history)
    assert record.kept("k", lambda: "made for x=1") == "made for x=1"
    use.input["x"] = 2
    again = history_of(history)
    assert again.kept("k", lambda: "made for x=2") == "made for x=2"


def test_an_unchanged_history_still_finds_its_kept_forms() -> None:
    """The check costs a comparison, not the keeping: the same objects, unchanged, find
    the same wire messages (the very dicts)."""
    history, _ = tool_call()
    encode, provider, model = ENCODERS["anthropic"]
    first = encode(request(model, *history), make_call(provider=provider, model=model))
    again = encode(request(model, *history), make_call(provider=provider, model=model))
    assert all(a is b for a, b in zip(first["messages"], again["messages"], strict=True))
    assert history_of(history) is history_of(list(history))


@pytest.mark.parametrize("name", ENCODERS)
def test_a_tool_definitions_schema_changed_in_place_is_sent_as_it_is_now(name: str) -> None:
    """Tool definitions are encoded for each call (nothing of them is kept): checked so it
    stays true."""
    encode, provider, model = ENCODERS[name]
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    tool = ToolDefinition(name="f", description="d", input_schema=schema)
    asked = request(model, Message.user("q")).model_copy(update={"tools": [tool]})
    first = json.dumps(encode(asked, make_call(provider=provider, model=model))["tools"])
    schema["properties"]["b"] = {"type": "integer"}
    again = json.dumps(encode(asked, make_call(provider=provider, model=model))["tools"])
    assert '"b"' not in first and '"b"' in again


def test_a_message_holding_what_cannot_be_copied_is_encoded_each_time_and_kept_nowhere() -> None:
    lock = threading.Lock()
    use = ToolUseBlock(id="call_1", name="f", input={"x": 1, "lock": lock})
    message = Message.assistant(use)
    memo: MessageMemo[str] = MessageMemo()
    assert memo.get_or_make(message, None, lambda: "one") == "one"
    assert len(memo) == 0 and memo.get_or_make(message, None, lambda: "two") == "two"
    record = history_of([message])
    record.keep("k", "v")
    assert record.found("k") is None and not record.describes([message])


def test_a_change_deep_in_a_tool_results_part_misses_and_an_equal_replacement_finds() -> None:
    """A citation's payload inside a text inside a tool result's parts: changed in place, the
    kept value is not given; a block replaced by an equal one still finds it (what the
    message holds is what it held)."""
    payload = {"page": 1}
    cited = Citation(
        kind="url", url="https://a", provider_raw=ProviderRaw(provider="x", data=payload)
    )
    part = TextBlock(text="one", citations=[cited])
    message = Message.user(ToolResultBlock(tool_use_id="call_1", content=[part]))
    memo: MessageMemo[str] = MessageMemo()
    memo.put(message, None, "kept")
    assert memo.get(message, None) == "kept"
    message.content[0] = message.content[0].model_copy(deep=True)
    assert memo.get(message, None) == "kept"
    payload["page"] = 2  # the old block's payload: the message no longer holds it
    assert memo.get(message, None) == "kept"
    inner = message.content[0]
    assert isinstance(inner, ToolResultBlock) and isinstance(inner.content, list)
    [copied] = inner.content[0].citations or []
    assert copied.provider_raw is not None
    copied.provider_raw.data["page"] = 3
    assert memo.get(message, None) is None
