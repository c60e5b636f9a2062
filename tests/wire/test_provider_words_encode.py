"""Every word a provider says that the canonical reply keeps (a message id found late, a stop
sequence, another model's name, an error's code and request id, an image's media type) is
kept with U+FFFD for a lone UTF-16 surrogate (a JSON ``"\\ud83d"`` escape alone, which no
UTF-8 can hold), so the events, the reply and the error always encode. Found by
tests/conformance/test_lone_surrogates.py."""

from __future__ import annotations

import json
from typing import Any

from metis.errors import InvalidRequestError
from metis.model import ImageBlock, StopKind, StopReason, TokenUsage
from metis.model.response import ModelUsage
from metis.wire.builder import MessageBuilder
from metis.wire.openai_responses.encode import assistant_items
from metis.wire.unicode_text import clean_model, clean_words

HIGH, LOW = chr(0xD83D), chr(0xDE00)


def encodes(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False).encode().decode()


def reply(builder: MessageBuilder) -> list[dict[str, Any]]:
    builder.finish()
    return [event.to_dict() for event in builder.take()]


def test_a_message_id_and_model_said_after_the_first_block_are_cleaned() -> None:
    """A block before the message's start (a reordered stream) starts it with no id; the id
    and model said later are kept, cleaned as they would have been at the start."""
    builder = MessageBuilder("openai_responses", "m")
    builder.text(0, "hi")
    builder.start("resp_" + HIGH, LOW + "gpt")
    final = reply(builder)[-1]
    assert (final["message_id"], final["model"]) == ("resp_\ufffd", "\ufffdgpt")
    encodes(final)


def test_every_word_of_a_stop_reason_is_cleaned() -> None:
    reason = StopReason(
        kind=StopKind.REFUSAL, raw="refusal", sequence=HIGH, category="c" + LOW, explanation=HIGH
    )
    for stop_then_finish in (True, False):
        builder = MessageBuilder("anthropic", "m")
        builder.text(0, "no")
        if stop_then_finish:
            builder.stop(reason)
        final = reply(builder) if stop_then_finish else _finished(builder, reason)
        said = final[-1]["stop_reason"]
        assert (said["sequence"], said["category"], said["explanation"]) == (
            "\ufffd",
            "c\ufffd",
            "\ufffd",
        )
        encodes(final)


def _finished(builder: MessageBuilder, reason: StopReason) -> list[dict[str, Any]]:
    builder.finish(reason)
    return [event.to_dict() for event in builder.take()]


def test_another_models_name_and_how_the_call_ran_are_cleaned() -> None:
    """Anthropic's ``usage.iterations[].model`` (an advisor's model), ``speed`` and
    ``inference_geo`` are the provider's own words."""
    builder = MessageBuilder("anthropic", "m")
    other = ModelUsage(model="claude-opus" + LOW, usage=TokenUsage(input_tokens=3, speed=HIGH))
    builder.usage(1, 2, other_models=(other,), speed="fast" + HIGH, inference_geo=LOW)
    usage = reply(builder)[-1]["usage"]
    assert usage["other_models"][0]["model"] == "claude-opus\ufffd"
    assert usage["other_models"][0]["usage"]["speed"] == "\ufffd"
    assert (usage["speed"], usage["inference_geo"]) == ("fast\ufffd", "\ufffd")
    encodes(usage)


def test_an_image_the_model_made_is_cleaned() -> None:
    builder = MessageBuilder("gemini", "m")
    image = ImageBlock.from_bytes(b"png", "image/png" + HIGH)
    builder.image(0, image, {"thoughtSignature": "s" + LOW})
    builder.finish()
    (final,) = builder.take()[-1:]
    dumped = final.to_dict()
    assert dumped["final_content"][0]["source"]["media_type"] == "image/png\ufffd"
    assert dumped["final_content"][0]["provider_raw"]["data"] == {"thoughtSignature": "s\ufffd"}
    encodes(dumped)


def test_an_errors_code_and_request_id_are_cleaned() -> None:
    error = InvalidRequestError(
        "bad", provider_code="invalid_request_error" + LOW, request_id="req_" + HIGH
    )
    assert (error.provider_code, error.request_id) == ("invalid_request_error\ufffd", "req_\ufffd")
    encodes(error.describe())
    assert InvalidRequestError("x", provider_code=None).provider_code is None


def test_the_cleaning_helpers_give_the_object_itself_when_nothing_needs_it() -> None:
    reason = StopReason(kind=StopKind.END_TURN, raw="stop", sequence="é")
    assert clean_words(reason) is reason
    usage = ModelUsage(model="é", usage=TokenUsage(input_tokens=1))
    assert clean_model(usage) is usage


def test_a_responses_item_kept_whole_without_its_type_goes_back_without_a_key_error() -> None:
    """An item whose ``type`` key came as a lone surrogate (so a key of its own) is kept whole;
    sending the reply back (the ``continuation`` stage does) must not fail on it."""
    from metis.model import ProviderRaw, ServerToolCallBlock, ThinkingBlock

    item = {"\ufffd": "mcp_call", "id": "mcp_1"}
    raw = ProviderRaw(provider="openai_responses", model="m", data={"item": item})
    content = [
        ThinkingBlock(
            thinking="t",
            signature="enc",
            provider_raw=ProviderRaw(provider="openai_responses", model="m", data={"id": "rs_1"}),
        ),
        ServerToolCallBlock(id="mcp_1", name="mcp", input={}, provider_raw=raw),
    ]
    dropped: list[Any] = []
    items = assistant_items(content, "openai_responses", "reply", lambda *a: dropped.append(a))
    assert [i.get("type") for i in items] == ["reasoning", None]
    assert not dropped


def test_a_compacted_conversation_is_cleaned() -> None:
    """``POST /responses/compact`` answers the conversation whole: its user text and the items
    kept whole are the provider's words too."""
    from metis.wire.compaction import responses_compacted

    answer = {
        "output": [
            {"role": "user", "type": "message", "content": [{"type": "input_text", "text": HIGH}]},
            {"type": "compaction", "id": "cmp_" + LOW, "encrypted_content": "x"},
        ]
    }
    messages = responses_compacted(answer, "openai_responses", "m")
    dumped = [m.model_dump(mode="json") for m in messages]
    assert dumped[0]["content"][0]["text"] == "\ufffd"
    assert dumped[1]["content"][0]["provider_raw"]["data"]["item"]["id"] == "cmp_\ufffd"
    encodes(dumped)


def test_a_batchs_id_and_its_results_ids_are_cleaned() -> None:
    """A batch's id and each result line's ``custom_id`` are the provider's words too."""
    import anyio
    import httpx

    from metis import build_adapter
    from metis.adapter.batches import Batches

    chat = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}}],
    }
    result = {"custom_id": "item-0\\udc00", "response": {"status_code": 200, "body": chat}}
    status = b'{"id": "batch_1\\ud83d", "status": "completed", "output_file_id": "file_out"}'

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/v1/batches/"):
            return httpx.Response(200, content=status)
        return httpx.Response(200, content=json.dumps(result).replace("\\\\", "\\").encode())

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    batches = Batches(build_adapter("openai", api_key="k", http_client=client))
    results = anyio.run(batches.results, "batch_1")
    assert results.status.id == "batch_1\ufffd"
    assert list(results.items) == ["item-0\ufffd"]
    assert results.items["item-0\ufffd"].custom_id == "item-0\ufffd"
