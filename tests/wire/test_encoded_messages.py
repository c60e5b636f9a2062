"""A history message's wire form is kept for the next call, and never given for an edited
message, another provider, or a message whose encoding dropped something."""

from __future__ import annotations

from metis.model import CanonicalRequest, Message, TextBlock, ToolUseBlock
from metis.model.content import OpaqueBlock, ProviderRaw
from metis.wire.anthropic import encode
from metis.wire.openai_chat import OpenAIChatCodec
from tests.helpers import make_call


def _request(*messages: Message) -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-x", messages=list(messages), max_output_tokens=100
    )


def _texts(body: dict) -> list[str]:
    return [b.get("text", b["type"]) for m in body["messages"] for b in m["content"]]


def test_an_edited_message_is_encoded_anew() -> None:
    first, answer = Message.user("one"), Message.assistant("two")
    assert _texts(encode(_request(first, answer, Message.user("three")), make_call())) == [
        "one",
        "two",
        "three",
    ]
    edited = first.model_copy(update={"content": [TextBlock(text="changed")]})
    again = encode(_request(edited, answer, Message.user("three")), make_call())
    assert _texts(again) == ["changed", "two", "three"]


def test_a_message_changed_in_place_is_encoded_anew() -> None:
    message = Message.user("one")
    encode(_request(message), make_call())
    message.content[0] = TextBlock(text="other")
    assert _texts(encode(_request(message), make_call())) == ["other"]


def test_a_kept_wire_form_is_not_changed_by_what_a_later_body_does() -> None:
    first, second = Message.user("one"), Message.user("two")
    body = encode(_request(first, second), make_call())
    body["messages"][0]["content"].append({"type": "text", "text": "edited in place"})
    assert _texts(encode(_request(first), make_call())) == ["one"]
    assert _texts(encode(_request(second), make_call())) == ["two"]


def test_the_same_message_goes_to_each_provider_in_its_own_form() -> None:
    item = {"type": "mcp_call", "id": "x1"}
    raw = ProviderRaw(provider="anthropic", model="claude-x", data={"item": item})
    opaque = OpaqueBlock(kind="mcp_call", provider_raw=raw)
    message = Message.assistant(TextBlock(text="hi"), opaque)
    own = make_call()
    assert encode(_request(message), own)["messages"][0]["content"][1] == item
    other = make_call(provider="vertex_anthropic")
    assert len(encode(_request(message), other)["messages"][0]["content"]) == 1
    assert [d.block_type for d in other.drops.warnings] == ["mcp_call"]
    assert encode(_request(message), make_call())["messages"][0]["content"][1] == item


def test_a_drop_is_reported_on_every_call_that_sends_the_message() -> None:
    raw = ProviderRaw(provider="openai", model="gpt-x", data={"item": {"type": "x"}})
    message = Message.assistant(TextBlock(text="hi"), OpaqueBlock(kind="x", provider_raw=raw))
    for _ in range(2):
        call = make_call()
        encode(_request(message), call)
        assert [d.block_type for d in call.drops.warnings] == ["x"]


def test_tool_calls_keep_their_ids_per_message() -> None:
    use = ToolUseBlock(id="toolu_1", name="f", input={})
    message = Message.assistant(use)
    encode(_request(Message.user("q"), message), make_call())
    renamed = message.model_copy(update={"content": [use.model_copy(update={"id": "toolu_2"})]})
    body = encode(_request(Message.user("q"), renamed), make_call())
    assert body["messages"][1]["content"][0]["id"] == "toolu_2"


def test_each_chat_codec_and_each_edit_gets_its_own_wire_messages() -> None:
    plain = OpenAIChatCodec()
    deepseek = plain.configured(reasoning_field="reasoning_content", reasoning_placeholder=" ")
    use = ToolUseBlock(id="call_1", name="f", input={"a": 1})
    history = [Message.user("q"), Message.assistant(use)]
    for codec, field in [(plain, None), (deepseek, " "), (plain, None)]:
        body = codec.encode(_request(*history), make_call(provider="openai"))
        assert body["messages"][1].get("reasoning_content") == field
    edited = history[1].model_copy(update={"content": [TextBlock(text="no call")]})
    body = plain.encode(_request(history[0], edited), make_call(provider="openai"))
    assert body["messages"][1] == {"role": "assistant", "content": "no call"}


def test_a_history_sent_again_is_read_whole_but_its_list_is_the_calls_own() -> None:
    history = [Message.user("q"), Message.assistant("a"), Message.user("again")]
    body = encode(_request(*history), make_call())
    body["messages"].append({"role": "user", "content": [{"type": "text", "text": "extra"}]})
    again = encode(_request(*history), make_call())
    assert _texts(again) == ["q", "a", "again"]
    assert all(a is b for a, b in zip(again["messages"], body["messages"][:3], strict=True))


def test_a_history_goes_to_each_model_in_its_own_form() -> None:
    history = [Message.user("q")]
    first = encode(_request(*history), make_call())
    other = encode(_request(*history), make_call(model="anthropic:claude-y"))
    assert other["messages"] == first["messages"]
    assert other["messages"][0] is not first["messages"][0]
