"""Every reader keeps what it cannot read (docs/contract.md §8, issue 22 item 9): a Gemini or
Vertex part, a Converse block, an OpenAI Chat content chunk or ``reasoning_details`` entry, an
Ollama message field with no canonical meaning is an opaque block with its provenance, streamed
and whole, with no WARN; it goes back as it came only to the provider (and platform) that made
it, and anywhere else it is left out with one WARN. The Anthropic and Responses readers do the
same (tests/wire/test_opaque_blocks.py, tests/wire/test_openai_responses_codec.py).

Wire samples: google-genai ``Part.inline_data`` (``Blob{mimeType, data}``: the audio a Gemini
speech model made; an image is an image block, tests/wire/test_gemini_images.py); botocore
bedrock-runtime ``ContentBlock.image``, ``ContentBlockStart.image`` (``ImageBlockStart{format}``)
and ``ContentBlockDelta.image`` (``ImageBlockDelta{source}``); Mistral's ``ReferenceChunk``
(``{"type": "reference", "reference_ids": [...]}``) in a Chat ``content`` list; Ollama's
``Message.images`` (base64 images, ollama/api/types.go).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from metis.model import CanonicalRequest, Message, OpaqueBlock, ProviderRaw, TextBlock
from metis.model.events import MessageComplete
from metis.model.response import StopKind, StopReason
from metis.stacks.loader import load_stack
from metis.stages.policy.invariants import StreamChecker
from metis.wire.anthropic import codec as anthropic
from metis.wire.bedrock_converse import codec as converse
from metis.wire.builder import MessageBuilder
from metis.wire.codec import Codec, get_codec
from metis.wire.ollama import codec as ollama
from metis.wire.openai_chat import codec as openai_chat

from ..helpers import make_call

PNG = "iVBORw0KGgo="


def _gemini() -> Codec:
    (encode,) = [s for s in load_stack("gemini").stages if s.name == "encode"]
    return get_codec("schema", encode.options["settings"])


def _gemini_chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 5}}


INLINE = {"inlineData": {"mimeType": "audio/L16;codec=pcm;rate=24000", "data": PNG}}
CONVERSE_IMAGE = {"image": {"format": "png", "source": {"bytes": PNG}}}
REFERENCE = {"type": "reference", "reference_ids": [0, 2]}


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}


def _ollama_line(message: dict[str, Any], done: bool = False) -> dict[str, Any]:
    line: dict[str, Any] = {"model": "m", "message": {"role": "assistant", **message}}
    if done:
        return {**line, "done": True, "done_reason": "stop", "eval_count": 4}
    return {**line, "done": False}


@dataclass(frozen=True)
class Reader:
    provider: str
    make: Callable[[], Codec]
    stream: list[dict[str, Any]]
    whole: dict[str, Any]
    kind: str
    item: dict[str, Any]
    sent: Callable[[dict[str, Any]], Any]
    """Where the assistant turn's blocks are in a request body."""
    place: str | None = None


READERS = {
    "gemini": Reader(
        "gemini",
        _gemini,
        [_gemini_chunk({"text": "A cat."}), _gemini_chunk(INLINE, finish="STOP")],
        _gemini_chunk({"text": "A cat."}, INLINE, finish="STOP"),
        "inlineData",
        INLINE,
        lambda body: body["contents"][1]["parts"],
    ),
    "bedrock": Reader(
        "bedrock",
        lambda: converse,
        [
            {"messageStart": {"role": "assistant"}},
            {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "A cat."}}},
            {"contentBlockStop": {"contentBlockIndex": 0}},
            {"contentBlockStart": {"contentBlockIndex": 1, "start": {"image": {"format": "png"}}}},
            *[
                {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"image": {"source": p}}}}
                for p in ({"bytes": PNG[:4]}, {"bytes": PNG[4:]})
            ],
            {"contentBlockStop": {"contentBlockIndex": 1}},
            {"messageStop": {"stopReason": "end_turn"}},
            {"metadata": {"usage": {"inputTokens": 5, "outputTokens": 7}}},
        ],
        {
            "output": {
                "message": {"role": "assistant", "content": [{"text": "A cat."}, CONVERSE_IMAGE]}
            },
            "stopReason": "end_turn",
            "usage": {"inputTokens": 5, "outputTokens": 7},
        },
        "image",
        CONVERSE_IMAGE,
        lambda body: body["messages"][1]["content"],
    ),
    "mistral": Reader(
        "mistral",
        lambda: openai_chat,
        [
            _chat_chunk({"role": "assistant", "content": [{"type": "text", "text": "A cat."}]}),
            _chat_chunk({"content": [REFERENCE]}, finish="stop"),
        ],
        {
            "id": "c1",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": "A cat."}, REFERENCE],
                    },
                    "finish_reason": "stop",
                }
            ],
        },
        "reference",
        REFERENCE,
        lambda body: body["messages"][1]["content"],
        place="content",
    ),
    "ollama": Reader(
        "ollama",
        lambda: ollama,
        [
            _ollama_line({"content": "A cat."}),
            _ollama_line({"content": "", "images": [PNG[:4]]}),
            _ollama_line({"content": "", "images": [PNG[4:]]}),
            _ollama_line({"content": ""}, done=True),
        ],
        _ollama_line({"content": "A cat.", "images": [PNG[:4], PNG[4:]]}, done=True),
        "images",
        {"images": [PNG[:4], PNG[4:]]},
        lambda body: body["messages"][1],
    ),
}


def _read(reader: Reader, streamed: bool) -> tuple[list[Any], list[str]]:
    warned: list[str] = []
    builder = MessageBuilder(
        reader.provider, f"{reader.provider}:m", lambda k, *a, **kw: warned.append(k)
    )
    codec = reader.make()
    if streamed:
        parser = codec.stream_parser(builder)
        events = [event for chunk in reader.stream for event in parser.feed(chunk)]
        events += parser.end()
    else:
        events = list(codec.parse_body(reader.whole, builder))
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return list(final.final_content), warned


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("name", list(READERS))
def test_a_part_with_no_canonical_form_is_kept_with_its_provenance(
    name: str, streamed: bool
) -> None:
    reader = READERS[name]
    content, warned = _read(reader, streamed)
    assert warned == []
    text, kept = content
    assert text == TextBlock(text="A cat.")
    data: dict[str, Any] = {"item": reader.item}
    if reader.place:
        data["place"] = reader.place
    raw = ProviderRaw(provider=reader.provider, model=f"{reader.provider}:m", data=data)
    assert kept == OpaqueBlock(kind=reader.kind, provider_raw=raw)
    again = Message.model_validate(
        Message(role="assistant", content=content).model_dump(mode="json")
    )
    assert again.content == content  # a history survives JSON


def _history(content: list[Any]) -> CanonicalRequest:
    return CanonicalRequest(
        model="m",
        messages=[
            Message.user("Draw a cat."),
            Message(role="assistant", content=content),
            Message.user("Thanks."),
        ],
        max_output_tokens=64,
    )


@pytest.mark.parametrize("name", list(READERS))
def test_it_goes_back_as_it_came_to_the_provider_that_made_it(name: str) -> None:
    reader = READERS[name]
    content, _ = _read(reader, streamed=True)
    call = make_call(reader.provider, f"{reader.provider}:m")
    body = reader.make().encode(_history(content), call)
    sent = reader.sent(body)
    assert call.warnings == []
    if isinstance(sent, dict):  # Ollama: the message's own field
        assert sent == {"role": "assistant", "content": "A cat.", **reader.item}
    else:
        assert reader.item in sent
        assert len(sent) == 2  # the text, then the block as it came


@pytest.mark.parametrize("name", list(READERS))
def test_anywhere_else_it_is_left_out_with_one_warn(name: str) -> None:
    reader = READERS[name]
    content, _ = _read(reader, streamed=False)
    call = make_call("anthropic", "anthropic:claude-sonnet-4-6")
    body = anthropic.encode(_history(content), call)
    assert body["messages"][1]["content"] == [{"type": "text", "text": "A cat."}]
    assert [(w.block_type, w.provider) for w in call.warnings] == [(reader.kind, "anthropic")]
    assert "goes back only to the provider that made it" in call.warnings[0].reason


@pytest.mark.parametrize("codec_of", ["gemini", "bedrock", "mistral", "ollama"])
def test_each_codec_leaves_out_a_block_another_provider_made(codec_of: str) -> None:
    made_elsewhere = OpaqueBlock(
        kind="mcp_tool_use",
        provider_raw=ProviderRaw(
            provider="anthropic", data={"item": {"type": "mcp_tool_use", "id": "x"}}
        ),
    )
    reader = READERS[codec_of]
    call = make_call(reader.provider, f"{reader.provider}:m")
    body = reader.make().encode(_history([TextBlock(text="A cat."), made_elsewhere]), call)
    assert "mcp_tool_use" not in str(body)
    assert [w.block_type for w in call.warnings] == ["mcp_tool_use"]


def test_a_gemini_part_does_not_go_to_vertex() -> None:
    """Same wire, another platform: a part Gemini made goes back only to Gemini."""
    content, _ = _read(READERS["gemini"], streamed=False)
    call = make_call("vertex", "vertex:m")
    body = _gemini().encode(_history(content), call)
    assert body["contents"][1]["parts"] == [{"text": "A cat."}]
    assert [w.block_type for w in call.warnings] == ["inlineData"]


def test_an_openrouter_reasoning_entry_of_a_new_type_goes_back_in_reasoning_details() -> None:
    entry = {"type": "reasoning.future", "id": "r1", "format": "x", "index": 0}
    body = {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hi.", "reasoning_details": [entry]},
                "finish_reason": "stop",
            }
        ],
    }
    builder = MessageBuilder("openrouter", "openrouter:m")
    final = list(openai_chat.parse_body(body, builder))[-1]
    assert isinstance(final, MessageComplete)
    (kept,) = [b for b in final.final_content if isinstance(b, OpaqueBlock)]
    assert kept.kind == "reasoning.future"
    assert kept.provider_raw.data == {"item": entry, "place": "reasoning_details"}
    call = make_call("openrouter", "openrouter:m")
    sent = openai_chat.encode(_history(list(final.final_content)), call)["messages"][1]
    assert sent == {"role": "assistant", "content": "Hi.", "reasoning_details": [entry]}


def test_a_converse_stream_cut_off_keeps_what_arrived_of_the_block() -> None:
    builder = MessageBuilder("bedrock", "bedrock:m")
    parser = converse.stream_parser(builder)
    for event in READERS["bedrock"].stream[:5]:  # the image's start and first piece
        parser.feed(event)
    final = list(parser.interrupt(StopReason(kind=StopKind.ERROR)))[-1]
    assert isinstance(final, MessageComplete)
    kept = final.final_content[-1]
    assert isinstance(kept, OpaqueBlock)
    assert kept.provider_raw.data["item"] == {
        "image": {"format": "png", "source": {"bytes": PNG[:4]}}
    }


def test_a_converse_delta_of_a_new_kind_beside_text_keeps_the_text_whole() -> None:
    builder = MessageBuilder("bedrock", "bedrock:m")
    parser = converse.stream_parser(builder)
    delta = "contentBlockDelta"
    for event in (
        {"messageStart": {"role": "assistant"}},
        {delta: {"contentBlockIndex": 0, "delta": {"text": "A "}}},
        {delta: {"contentBlockIndex": 0, "delta": {"audio": {"chunk": "AA"}}}},
        {delta: {"contentBlockIndex": 0, "delta": {"text": "cat."}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "end_turn"}},
    ):
        parser.feed(event)
    final = list(parser.end())[-1]
    assert isinstance(final, MessageComplete)
    texts = [b.text for b in final.final_content if isinstance(b, TextBlock)]
    kept = [b for b in final.final_content if isinstance(b, OpaqueBlock)]
    assert "".join(texts) == "A cat."
    assert [k.provider_raw.data["item"] for k in kept] == [{"audio": {"chunk": "AA"}}]


def test_a_converse_delta_of_a_new_kind_inside_a_tool_call_leaves_the_call_whole() -> None:
    builder = MessageBuilder("bedrock", "bedrock:m")
    parser = converse.stream_parser(builder)
    start = {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather"}}
    delta = "contentBlockDelta"
    events = []
    for event in (
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": start}},
        {delta: {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"city": '}}}},
        {delta: {"contentBlockIndex": 0, "delta": {"note": {"text": "n"}}}},
        {delta: {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '"Oslo"}'}}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "tool_use"}},
    ):
        events += parser.feed(event)
    events += parser.end()
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    (call,) = [b for b in final.final_content if b.type == "tool_use"]
    assert call.input == {"city": "Oslo"}  # type: ignore[union-attr]
    assert any(isinstance(b, OpaqueBlock) and b.kind == "note" for b in final.final_content)
