"""Text Generation Inference's Messages API (``/v1/chat/completions``) as each release sent it,
read by the ``tgi`` stack's codec, whole and streamed. The samples are written after TGI's own
structs and handlers (huggingface/text-generation-inference ``router/src/lib.rs``,
``server.rs``, ``chat.rs``, by tag):

- 1.4.0 to 1.4.3 number each chunk's one choice (and a call fragment's ``index``) by the
  token's place in the stream; 1.4.4 on send 0.
- 1.4.0 to 2.0.1 stream the end-of-sequence token's own text (``</s>``) as the content of the
  chunk that ends with ``eos_token``; 2.0.2 on leave it out.
- a chunk has ``id: ""``, ``object: "text_completion"``, ``system_fingerprint``
  ("<version>-<docker label>"), ``logprobs`` (a float in 1.4.0 and 1.4.1, an object after,
  null unless asked), and ``delta.role`` on every chunk; the end is the chunk with a
  ``finish_reason`` (``eos_token``, ``length``, ``stop_sequence``; 2.3 on say ``stop`` for
  the end-of-sequence token) and ``[DONE]`` only from 2.2; 2.3 to 3.1 put the usage on that
  chunk, 3.2 on in a chunk of its own with no choices.
- tool calls (TGI's tool grammar): a whole reply's ``tool_calls`` is one object in 1.4.0 to
  1.4.3, a list after; ``function`` holds ``parameters`` (1.4: the call named ``tools``) or
  ``arguments`` as an object (2.0 to 3.1: named by the grammar's ``_name``), a string from
  3.2; the ``id`` is 0 (1.4) or "0". Streamed, 1.4.3 to 3.1 send ``delta.tool_calls`` as one
  object naming no function, its ``arguments`` the grammar's JSON text token by token
  (``{"function": {"_name": ..., ...}}``); 3.2 on an OpenAI-like list, the name on the first.
- 2.0.1 to 2.3.1 add a ``notify_error`` tool (``{"error": ...}``) to the grammar, for the
  model to say it calls none; its call comes as any other (``infer.rs``, ``tool_grammar.rs``),
  but a whole reply's in 2.3.1, which sends its error as the message's content.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.model.content import TextBlock, ToolUseBlock
from metis.model.events import MessageComplete
from metis.model.response import StopKind
from metis.wire.builder import MessageBuilder
from tests.helpers import checked_final, stack_codec

MODEL = "mistralai/Mistral-7B-Instruct-v0.2"


def read(reply: Any, streamed: bool) -> MessageComplete:
    codec = stack_codec("tgi")
    builder = MessageBuilder("tgi", "tgi:tgi")
    if not streamed:
        return checked_final(list(codec.parse_body(reply, builder)))  # type: ignore[no-any-return]
    parser = codec.stream_parser(builder)
    events = [event for obj in reply for event in parser.feed(obj)]
    final: MessageComplete = checked_final(events + list(parser.end()))
    return final


def chunk(
    index: int, delta: dict[str, Any], finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choice = {"index": index, "delta": {"role": "assistant", **delta}, "logprobs": None,
              "finish_reason": finish}  # fmt: skip
    return {"id": "", "object": "text_completion", "created": 1710000000, "model": MODEL,
            "system_fingerprint": "1.4.3-sha-e6bb3ff", "choices": [choice], **extra}  # fmt: skip


TOKENS = ["Deep", " learning", " is", " a", " subset", "."]


@pytest.mark.parametrize("first", [2, 0], ids=["1.4.0-1.4.3 numbered by token", "1.4.4 on"])
def test_a_text_stream_reads_whole_however_its_choices_are_numbered(first: int) -> None:
    step = 1 if first else 0
    chunks = [chunk(first + i * step, {"content": t}) for i, t in enumerate(TOKENS)]
    chunks.append(chunk(first + len(TOKENS) * step, {"content": ""}, finish="eos_token"))
    final = read(chunks, streamed=True)
    assert final.final_content == [TextBlock(text="".join(TOKENS))]
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.END_TURN, "eos_token")


@pytest.mark.parametrize("end", ["</s>", "<|eot_id|>", ""])
def test_the_end_of_sequence_token_s_own_text_is_no_text_of_the_reply(end: str) -> None:
    """1.4.0 to 2.0.1 stream the end-of-sequence token's text as the last chunk's content
    (2.0.2 on leave a special token's out); the whole reply never has it. 1.4.0 and 1.4.1 give
    ``logprobs`` as a float."""
    chunks = [chunk(0, {"content": t}) for t in TOKENS]
    chunks[0]["choices"][0]["logprobs"] = -0.31
    chunks.append(chunk(0, {"content": end}, finish="eos_token"))
    assert read(chunks, streamed=True).final_content == [TextBlock(text="".join(TOKENS))]
    cut = [*chunks[:-1], chunk(0, {"content": "!"}, finish="length")]  # a token of the reply
    assert read(cut, streamed=True).final_content == [TextBlock(text="".join(TOKENS) + "!")]


def test_usage_on_the_finish_chunk_and_in_a_chunk_of_its_own_is_read() -> None:
    usage = {"prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17}
    on_finish = [chunk(0, {"content": "Hi"}), chunk(0, {"content": "!"}, "stop", usage=usage)]
    apart = [*on_finish[:1], chunk(0, {"content": "!"}, "stop"),
             {**chunk(0, {}), "choices": [], "usage": usage}]  # fmt: skip
    for chunks in (on_finish, apart):
        final = read(chunks, streamed=True)
        assert (final.usage.input_tokens, final.usage.output_tokens) == (11, 6)
        assert final.final_content == [TextBlock(text="Hi!")]


USAGE = {"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100}


def _whole(message: dict[str, Any], finish: str = "eos_token") -> dict[str, Any]:
    return {"id": "", "object": "text_completion", "created": 1710000000, "model": MODEL,
            "system_fingerprint": "2.0.4-sha-f2a6a1a",
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "logprobs": None, "finish_reason": finish}],
            "usage": USAGE}  # fmt: skip


ARGS = {"location": "Paris, France", "format": "celsius"}


@pytest.mark.parametrize(
    ("tool_calls", "name"),
    [
        ({"id": 0, "type": "function",  # 1.4.0 to 1.4.3: one object
          "function": {"description": None, "name": "tools", "parameters": ARGS}}, "tools"),
        ([{"id": 0, "type": "function",  # 1.4.4, 1.4.5
           "function": {"description": None, "name": "tools", "parameters": ARGS}}], "tools"),
        ([{"id": "0", "type": "function",  # 2.0 to 3.1: arguments an object
           "function": {"description": None, "name": "get_weather", "arguments": ARGS}}],
         "get_weather"),
        ([{"id": "0", "type": "function",  # 3.2 on: a string
           "function": {"description": None, "name": "get_weather",
                        "arguments": json.dumps(ARGS)}}], "get_weather"),
    ],
    ids=["1.4.0-1.4.3", "1.4.4-1.4.5", "2.0-3.1", "3.2-"],
)  # fmt: skip
def test_a_whole_reply_s_tool_call_reads_in_every_release_s_shape(
    tool_calls: Any, name: str
) -> None:
    final = read(_whole({"tool_calls": tool_calls}), streamed=False)
    (call,) = final.final_content
    assert isinstance(call, ToolUseBlock) and (call.name, call.input, call.id) == (name, ARGS, "0")
    assert final.stop_reason.kind is StopKind.TOOL_USE


def _grammar_tokens(text: str) -> list[str]:
    return [text[i : i + 3] for i in range(0, len(text), 3)]


@pytest.mark.parametrize(
    ("first", "wrapped", "name"),
    [
        (5, {"function": ARGS}, "tools"),  # 1.4.3: no _name, numbered by token
        (0, {"function": {"_name": "get_weather", **ARGS}}, "get_weather"),  # 2.0 to 3.1
    ],
    ids=["1.4.3", "2.0-3.1"],
)
def test_a_streamed_grammar_call_naming_no_function_reads_as_its_call(
    first: int, wrapped: dict[str, Any], name: str
) -> None:
    step = 1 if first else 0
    tokens = _grammar_tokens(json.dumps(wrapped))
    chunks = [
        chunk(first + i * step, {"tool_calls": {"index": first + i * step, "id": "",
              "type": "function", "function": {"name": None, "arguments": t}}})
        for i, t in enumerate(tokens)
    ]  # fmt: skip
    chunks[-1]["choices"][0]["finish_reason"] = "eos_token"
    final = read(chunks, streamed=True)
    (call,) = final.final_content
    assert isinstance(call, ToolUseBlock) and (call.name, call.input) == (name, ARGS)
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.TOOL_USE, "eos_token")


def test_a_streamed_call_of_3_2_on_reads_as_openai_s() -> None:
    text = json.dumps(ARGS)
    pieces = ["{", *_grammar_tokens(text[1:])]
    chunks = [
        chunk(0, {"tool_calls": [{"index": 0, "id": "", "type": "function",
              "function": {"name": "get_weather" if i == 0 else None, "arguments": p}}]})
        for i, p in enumerate(pieces)
    ]  # fmt: skip
    chunks.append(chunk(0, {"content": ""}, "stop"))
    (call,) = read(chunks, streamed=True).final_content
    assert isinstance(call, ToolUseBlock) and (call.name, call.input) == ("get_weather", ARGS)


NOTICE = "Cannot get the weather: the request names no location."


def test_a_whole_reply_s_notify_error_call_reads_as_its_text() -> None:
    """TGI 2.0.1 to 2.3.0: the call of the grammar's own tool is the model saying it calls
    none (2.3.1 sends it as the content, as read here); the turn ended."""
    said = {"id": "0", "type": "function", "function": {"description": None,
            "name": "notify_error", "arguments": {"error": NOTICE}}}  # fmt: skip
    final = read(_whole({"content": None, "tool_calls": [said]}), streamed=False)
    assert final.final_content == [TextBlock(text=NOTICE)]
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.END_TURN, "eos_token")


def test_a_streamed_notify_error_call_reads_as_its_text() -> None:
    wrapped = {"function": {"_name": "notify_error", "error": NOTICE}}
    chunks = [
        chunk(0, {"tool_calls": {"index": 0, "id": "", "type": "function",
              "function": {"name": None, "arguments": t}}})
        for t in _grammar_tokens(json.dumps(wrapped))
    ]  # fmt: skip
    chunks[-1]["choices"][0]["finish_reason"] = "eos_token"
    final = read(chunks, streamed=True)
    assert final.final_content == [TextBlock(text=NOTICE)]
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.END_TURN, "eos_token")


def test_a_notify_error_call_with_no_message_stays_the_call_it_came_as() -> None:
    """Nothing is lost where the call is not TGI's message: it is read as a call."""
    wrapped = {"function": {"_name": "notify_error", "reason": NOTICE}}
    fragment = {"index": 0, "id": "", "type": "function",
                "function": {"name": None, "arguments": json.dumps(wrapped)}}  # fmt: skip
    chunks = [chunk(0, {"tool_calls": fragment}, "eos_token")]
    (call,) = read(chunks, streamed=True).final_content
    assert isinstance(call, ToolUseBlock) and (call.name, call.input) == (
        "notify_error",
        {"reason": NOTICE},
    )
