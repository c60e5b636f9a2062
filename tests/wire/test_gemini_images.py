"""An image a Gemini image model makes (an ``inlineData`` part with an ``image/...`` type in the
reply) is an image block, streamed and whole, at its place among the text; its thought signature
(Gemini 3 image models sign their pictures) is kept in ``provider_raw`` and goes back on the
part in the next turn, to the same model only. Other inline media (a speech model's audio) stay
opaque (tests/wire/test_opaque_readers.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from metis.errors import ProtocolError
from metis.model import CanonicalRequest, Message, MessageComplete, Role, TextBlock
from metis.model.content import Base64ImageSource, ImageBlock
from metis.wire.builder import MessageBuilder

from ..helpers import checked_final, make_call, stack_codec

MODEL = "gemini:gemini-3-pro-image-preview"
PICTURE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAE" + "hQGAhKmMIQ=="
SIGNATURE = "Q2F0UGljdHVyZVNpZ25hdHVyZQ=="
IMAGE_PART = {
    "inlineData": {"mimeType": "image/png", "data": PICTURE},
    "thoughtSignature": SIGNATURE,
}


def _chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    usage = {"promptTokenCount": 9, "candidatesTokenCount": 1290}
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "m"}


def _read(streamed: bool, *chunks: dict[str, Any]) -> MessageComplete:
    builder = MessageBuilder("gemini", MODEL)
    if streamed:
        parser = stack_codec("gemini").stream_parser(builder)
        events = [event for chunk in chunks for event in parser.feed(chunk)]
        events += parser.end()
    else:
        (body,) = chunks
        events = list(stack_codec("gemini").parse_body(body, builder))
    final = checked_final(events)
    return final


STREAM = [
    _chunk({"text": "Here is a cat "}),
    _chunk({"text": "in a hat."}),
    _chunk(IMAGE_PART),
    _chunk({"text": "Enjoy!"}, finish="STOP"),
]
WHOLE = _chunk({"text": "Here is a cat in a hat."}, IMAGE_PART, {"text": "Enjoy!"}, finish="STOP")


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_an_image_the_model_made_is_an_image_block_with_its_signature(
    streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    final = _read(streamed, *(STREAM if streamed else [WHOLE]))
    assert [b.type for b in final.final_content] == ["text", "image", "text"]
    image = final.final_content[1]
    assert isinstance(image, ImageBlock)
    assert image.source == Base64ImageSource(media_type="image/png", data=PICTURE)
    assert image.provider_raw is not None
    assert image.provider_raw.provider == "gemini" and image.provider_raw.model == MODEL
    assert image.provider_raw.data == {"thoughtSignature": SIGNATURE}
    assert final.stop_reason.raw == "STOP" and final.usage.output_tokens == 1290
    assert not caplog.records


def _sent_back(content: list[Any], model: str) -> list[dict[str, Any]]:
    request = CanonicalRequest(
        model=model,
        messages=[
            Message.user("Draw a cat in a hat."),
            Message(role=Role.ASSISTANT, content=content),
            Message.user("Make the hat red."),
        ],
        max_output_tokens=256,
    )
    body = stack_codec("gemini").encode(request, make_call(provider="gemini", model=model))
    parts: list[dict[str, Any]] = body["contents"][1]["parts"]
    return parts


def test_the_image_goes_back_to_the_same_model_as_it_came_signed() -> None:
    final = _read(False, WHOLE)
    assert _sent_back(list(final.final_content), MODEL) == [
        {"text": "Here is a cat in a hat."},
        IMAGE_PART,
        {"text": "Enjoy!"},
    ]


def test_another_model_gets_the_image_without_the_signature() -> None:
    final = _read(False, WHOLE)
    parts = _sent_back(list(final.final_content), "gemini:gemini-2.5-flash-image")
    assert parts[1] == {"inlineData": {"mimeType": "image/png", "data": PICTURE}}
    assert all("thoughtSignature" not in part for part in parts)


def test_an_unsigned_image_reads_with_no_provider_fields() -> None:
    final = _read(False, _chunk({"inlineData": {"mimeType": "image/jpeg", "data": PICTURE}}))
    (image,) = final.final_content
    assert isinstance(image, ImageBlock) and image.source.media_type == "image/jpeg"  # type: ignore[union-attr]
    assert image.provider_raw is not None and image.provider_raw.data == {}
    assert not [b for b in final.final_content if isinstance(b, TextBlock)]


def test_an_image_part_whose_data_is_not_text_is_a_protocol_error_naming_it() -> None:
    bad = _chunk({"inlineData": {"mimeType": "image/png", "data": 7}}, finish="STOP")
    with pytest.raises(ProtocolError, match="image data"):
        _read(False, bad)


@pytest.mark.parametrize(
    ("stack", "model"),
    [("anthropic", "claude-sonnet-4-5"), ("bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0")],
)
def test_a_picture_in_an_earlier_assistant_turn_is_dropped_where_only_users_send_images(
    stack: str, model: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Anthropic and Converse take images only in user messages: the picture a Gemini image
    model drew is left out of the history for them (said in the WARN), its text kept, rather
    than the whole conversation refused by the provider or the pre-send checks."""
    final = _read(False, WHOLE)
    codec = stack_codec(stack)
    request = CanonicalRequest(
        model=f"{stack}:{model}",
        max_output_tokens=100,
        messages=[
            Message.user("Draw a cat in a hat."),
            Message(role=Role.ASSISTANT, content=list(final.final_content)),
            Message.user("Describe it."),
        ],
    )
    with caplog.at_level(logging.WARNING, logger="metis"):
        body = codec.encode(request, make_call(provider=stack, model=model))
    said = body["messages"][1]["content"]
    assert "image" not in str(said) and "Enjoy!" in str(said)
    assert any("only in user messages" in r.getMessage() for r in caplog.records)
